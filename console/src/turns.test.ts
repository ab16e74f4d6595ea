// Tests of the turn model: a streamed turn's timeline, stored history as turns, the completion.
import { describe, expect, it } from "vitest";

import type { SessionView, Skill } from "./api";
import { insertSkill, matchSkills, slashQuery } from "./complete";
import { callBadge, entryTitle, openWork, subagentState, turnBadge } from "./format";
import { turnsFromHistory } from "./history";
import {
  applyEvent,
  entryKeys,
  failTurn,
  findSubagent,
  newTurn,
  timelineSize,
  type TimelineEntry,
  type Turn,
} from "./turns";

const event = (name: string, data: unknown) => ({ event: name, data: JSON.stringify(data) });

function play(events: { event: string; data: string }[]): Turn {
  return events.reduce((turn, next, index) => applyEvent(turn, next, 1000 + index * 100), newTurn("t", 1, "hola", 1000));
}

describe("a streamed turn", () => {
  it("builds its timeline, pairs results with their calls and ends with the reply", () => {
    const turn = play([
      event("turn.started", { session_id: "s-1" }),
      event("model.call", {
        step: 1,
        state: 1,
        skill: null,
        forced: false,
        listing: { total: 12, shown_in_full: 12, search: false, tier: 0 },
        tools: ["load_skill", "read_file"],
        prompt_tokens: 1234,
      }),
      event("skill.loaded", { skill: "escrituras/compraventa", forced: false }),
      event("tool.call", { id: "c1", name: "write_file", summary: "file_path=/workspace/a.md", arguments: { file_path: "/workspace/a.md" } }),
      event("message.delta", { text: "Lis" }),
      event("tool.result", { id: "c1", name: "write_file", ok: true, bytes: 20, summary: "Created", content: "Created /workspace/a.md", truncated: false }),
      event("file.written", { path: "/workspace/a.md", size: 5 }),
      event("model.call", { step: 2, state: 2, skill: "escrituras/compraventa", forced: false, tools: [], prompt_tokens: 900 }),
      event("message.delta", { text: "to." }),
      event("some.future.event", { x: 1 }),
      event("turn.completed", { session_id: "s-1", reply: "Listo.", steps: 2, usage: { input_tokens: 10, output_tokens: 3 }, ending: "answered" }),
    ]);
    expect(turn.answer).toBe("Listo.");
    expect(turn.status).toBe("completed");
    expect(turn.durationMs).toBe(1000);
    expect(turn.timeline.map(entryTitle)).toEqual([
      "Model call 1 — state 1: listing 12 of 12 skills (tier 0)",
      "Skill escrituras/compraventa loaded",
      "Tool write_file: file_path=/workspace/a.md",
      "Wrote /workspace/a.md (5 B)",
      "Model call 2 — state 2: escrituras/compraventa",
    ]);
    const call = turn.timeline[2];
    expect(call.kind === "tool" && call.result?.content).toBe("Created /workspace/a.md");
    expect(call.kind === "tool" && call.arguments).toEqual({ file_path: "/workspace/a.md" });
  });

  it("names the version a published skill loaded", () => {
    const turn = play([
      event("turn.started", { session_id: "s-1" }),
      event("skill.loaded", { skill: "pruebas/horario-oficina", forced: false, version: 2 }),
      event("skill.loaded", { skill: "pruebas/horario-oficina", forced: true, version: 1 }),
    ]);
    expect(turn.timeline.map(entryTitle)).toEqual([
      "Skill pruebas/horario-oficina (version 2) loaded",
      "Skill pruebas/horario-oficina (version 1) forced by a slash command",
    ]);
  });

  it("fails with the error body, and a stream that just ends fails the turn", () => {
    const failed = play([event("turn.failed", { error: { code: "model_provider_failed", message: "down" } })]);
    expect(failed.status).toBe("failed");
    expect(failed.error).toEqual({ status: 0, code: "model_provider_failed", message: "down" });
    const cut = failTurn(play([event("message.delta", { text: "a" })]), { status: 0, code: "stream_ended", message: "x" }, 5000);
    expect(cut.status).toBe("failed");
    expect(failTurn(failed, { status: 0, code: "other", message: "y" }, 9000)).toBe(failed);
  });
});

/** A timeline as indented titles, subagents' rows under them, to compare whole. */
function outline(timeline: TimelineEntry[], indent = ""): string[] {
  return timeline.flatMap((entry) => {
    const title = `${indent}${entryTitle(entry)}`;
    if (entry.kind !== "subagent") return [title];
    return [`${title} [${subagentState(entry)}]`, ...outline(entry.timeline, `${indent}  `)];
  });
}

const task = (id: string, description: string) =>
  event("tool.call", { id, name: "task", summary: `description=${description}`, arguments: { description, subagent_type: "general-purpose" } });
const started = (subagent: string, callId: string, description: string, parent: string | null = null, depth = 1) =>
  event("subagent.started", { subagent, parent, call_id: callId, agent_type: "general-purpose", description, depth });
const completed = (subagent: string, steps: number, summary: string, ending = "answered", ok = true) =>
  event("subagent.completed", { subagent, ending, steps, ok, summary });

describe("a streamed turn with subagents", () => {
  it("keeps the tokens a subagent spent, as subagent.completed gives them, and none from an older server", () => {
    const usage = { input_tokens: 200, output_tokens: 20, uncached_input_tokens: 120, cache_read_tokens: 80, cache_write_tokens: 0 };
    const spent = event("subagent.completed", { subagent: "sa-1", ending: "answered", steps: 2, ok: true, summary: "s", usage });
    const turn = play([task("c1", "A"), started("sa-1", "c1", "A"), spent]);
    const sub = turn.timeline.find((entry) => entry.kind === "subagent");
    expect(sub?.kind === "subagent" && sub.usage).toEqual(usage);
    const old = play([task("c1", "A"), started("sa-1", "c1", "A"), completed("sa-1", 2, "s")]);
    const oldSub = old.timeline.find((entry) => entry.kind === "subagent");
    expect(oldSub?.kind === "subagent" && oldSub.usage).toBeNull();
  });

  it("nests interleaved siblings' events under each, after the task call that started it", () => {
    const turn = play([
      event("model.call", { step: 1, state: 1, tools: ["task", "write_file"] }),
      task("c1", "A"),
      task("c2", "B"),
      started("sa-1", "c1", "A"),
      started("sa-2", "c2", "B"),
      event("model.call", { step: 1, state: 1, tools: ["write_file"], subagent: "sa-2" }),
      event("model.call", { step: 1, state: 1, tools: ["write_file"], subagent: "sa-1" }),
      event("tool.call", { id: "c3", name: "write_file", summary: "file_path=/workspace/b.md", subagent: "sa-2" }),
      event("tool.call", { id: "c4", name: "write_file", summary: "file_path=/workspace/a.md", subagent: "sa-1" }),
      event("tool.result", { id: "c4", name: "write_file", ok: true, content: "Updated a", subagent: "sa-1" }),
      event("file.written", { path: "/workspace/a.md", size: 3, subagent: "sa-1" }),
      event("tool.result", { id: "c3", name: "write_file", ok: false, content: "Error: no", subagent: "sa-2" }),
      event("skill.loaded", { skill: "escrituras/hipoteca", forced: false, subagent: "sa-2" }),
      // A subagent's text is never the turn's answer.
      event("message.delta", { text: "no", subagent: "sa-1" }),
      event("model.call", { step: 2, state: 1, tools: ["write_file"], subagent: "sa-1" }),
      completed("sa-1", 2, "Hecho A"),
      event("tool.result", { id: "c1", name: "task", ok: true, content: "Hecho A\nmás" }),
      event("message.delta", { text: "Listo." }),
    ]);
    expect(turn.answer).toBe("Listo.");
    expect(outline(turn.timeline)).toEqual([
      "Model call 1 — state 1",
      "Tool task: description=A",
      "Subagent sa-1 (general-purpose): A [answered · 2 steps]",
      "  Model call 1 — state 1",
      "  Tool write_file: file_path=/workspace/a.md",
      "  Wrote /workspace/a.md (3 B)",
      "  Model call 2 — state 1",
      "Tool task: description=B",
      "Subagent sa-2 (general-purpose): B [running]",
      "  Model call 1 — state 1",
      "  Tool write_file: file_path=/workspace/b.md",
      "  Skill escrituras/hipoteca loaded",
    ]);
    expect(timelineSize(turn.timeline)).toBe(12);
    const first = findSubagent(turn.timeline, "sa-1");
    expect(first).toMatchObject({ status: "completed", ending: "answered", steps: 2, ok: true, summary: "Hecho A", callId: "c1", parent: null });
    expect(first?.timeline[1]).toMatchObject({ kind: "tool", result: { ok: true, content: "Updated a" } });
    expect(findSubagent(turn.timeline, "sa-2")?.timeline[1]).toMatchObject({ kind: "tool", result: { ok: false } });
    // The task call's own result is the turn's, on its call.
    expect(turn.timeline[1]).toMatchObject({ kind: "tool", id: "c1", result: { content: "Hecho A\nmás" } });
    expect(turn.timeline[3]).toMatchObject({ kind: "tool", id: "c2", result: null });
  });

  it("places a subagent's own subagent (level 2) in its timeline, and ends each", () => {
    const turn = play([
      task("c1", "A"),
      started("sa-1", "c1", "A"),
      event("tool.call", { id: "c2", name: "task", summary: "description=A.1", subagent: "sa-1" }),
      started("sa-2", "c2", "A.1", "sa-1", 2),
      event("tool.call", { id: "c3", name: "ls", summary: "path=/workspace", subagent: "sa-2" }),
      event("tool.result", { id: "c3", name: "ls", ok: true, content: "a.md", subagent: "sa-2" }),
      completed("sa-2", 3, "", "step_limit", true),
      event("tool.result", { id: "c2", name: "task", ok: true, content: "[The subagent stopped…]", subagent: "sa-1" }),
      completed("sa-1", 1, "Error: the subagent stopped", "failed", false),
      event("tool.result", { id: "c1", name: "task", ok: false, content: "Error: the subagent stopped" }),
    ]);
    expect(outline(turn.timeline)).toEqual([
      "Tool task: description=A",
      "Subagent sa-1 (general-purpose): A [failed · 1 step]",
      "  Tool task: description=A.1",
      "  Subagent sa-2 (general-purpose): A.1 [step limit · 3 steps]",
      "    Tool ls: path=/workspace",
    ]);
    const inner = findSubagent(turn.timeline, "sa-2");
    expect(inner).toMatchObject({ parent: "sa-1", depth: 2, ending: "step_limit" });
    expect(inner?.timeline[0]).toMatchObject({ kind: "tool", result: { content: "a.md" } });
    expect(findSubagent(turn.timeline, "sa-1")).toMatchObject({ ok: false, status: "completed" });
  });

  it("gives events of an unknown subagent an orphan row, and appends a subagent whose call it has not seen", () => {
    const turn = play([
      event("model.call", { step: 1, state: 1, subagent: "sa-9" }),
      completed("sa-9", 1, "x"),
      completed("sa-8", 2, "y"),
      started("sa-3", "c-unseen", "C", "sa-7", 2),
      event("subagent.started", { parent: null }),
      event("subagent.completed", "not json"),
      { event: "tool.call", data: "{broken" },
    ]);
    expect(outline(turn.timeline)).toEqual([
      "Subagent sa-9 (its start was not seen) [answered · 1 step]",
      "  Model call 1 — state 1",
      "Subagent sa-8 (its start was not seen) [answered · 2 steps]",
      "Subagent sa-3 (general-purpose): C [running]",
      "Tool ",
    ]);
    // Its start arriving late fills the orphan in where it stands.
    const late = applyEvent(turn, started("sa-9", "c1", "Nueve"), 9000);
    expect(outline(late.timeline)[0]).toBe("Subagent sa-9 (general-purpose): Nueve [answered · 1 step]");
    expect(findSubagent(late.timeline, "sa-9")?.timeline.length).toBe(1);
  });

  it("keys rows so that a subagent placed before later rows does not take their keys", () => {
    const before = play([task("c1", "A"), task("c2", "B"), started("sa-1", "c1", "A")]).timeline;
    expect(entryKeys(before)).toEqual(["tool-0", "subagent-sa-1", "tool-1"]);
    const entries: TimelineEntry[] = [...before, ...before.filter((entry) => entry.kind === "subagent")];
    expect(entryKeys(entries)).toEqual(["tool-0", "subagent-sa-1", "tool-1", "subagent-sa-1-1"]);
  });
});

describe("stored history", () => {
  it("groups a page's messages by turn, oldest first, with tool results on their calls", () => {
    const view: SessionView = {
      session_id: "s-1",
      version: 2,
      workspace: [],
      history: [
        { role: "user", content: "segunda" },
        { role: "assistant", content: "", tool_calls: [{ id: "c9", name: "ls", arguments: { path: "/workspace" } }] },
        { role: "tool", tool_call_id: "c9", name: "ls", content: "Error: nothing" },
        { role: "assistant", content: "nada" },
        { role: "user", content: "primera" },
        { role: "assistant", content: "hola" },
      ],
      turns: [
        { turn: 2, first_message: 0, messages: 4 },
        { turn: 1, first_message: 4, messages: 2 },
      ],
      next_cursor: null,
    };
    const turns = turnsFromHistory(view, "h");
    expect(turns.map((turn) => [turn.number, turn.message, turn.answer])).toEqual([
      [1, "primera", "hola"],
      [2, "segunda", "nada"],
    ]);
    const call = turns[1].timeline[0];
    expect(call.kind === "tool" && call.result?.ok).toBe(false);
    expect(entryTitle(call)).toBe("Tool ls: path=/workspace");
  });
});

describe("slash completion", () => {
  const skill = (path: string): Skill => ({
    path,
    name: path.split("/").pop() ?? path,
    description: "",
    category: null,
    tools: null,
    declared_tools: null,
    warnings: [],
  });
  const skills = [skill("escrituras/compraventa"), skill("borradores/nota-rapida"), skill("compra")];

  it("reads the command being typed and ranks prefix matches first", () => {
    expect(slashQuery("/comp", 5)).toBe("comp");
    expect(slashQuery("/comp rest", 10)).toBeNull();
    expect(slashQuery("hola /comp", 10)).toBeNull();
    expect(matchSkills(skills, "comp").map((s) => s.path)).toEqual(["compra", "escrituras/compraventa"]);
    expect(matchSkills(skills, "").length).toBe(3);
  });

  it("replaces the command with the picked skill's path and a space", () => {
    expect(insertSkill("/comp", "escrituras/compraventa")).toEqual({ value: "/escrituras/compraventa ", caret: 24 });
    expect(insertSkill("/c texto", "compra")).toEqual({ value: "/compra texto", caret: 8 });
  });
});

describe("a turn that waits for approval", () => {
  const call = { id: "c1", name: "edit_file", arguments: { file_path: "/workspace/nota.md" }, summary: "file_path=/workspace/nota.md" };

  it("lists the calls of approval.requested, and the reply's when it ends awaiting approval", () => {
    const requested = play([event("turn.started", {}), event("approval.requested", { calls: [call, { name: "no id" }] })]);
    expect(requested.pending).toEqual([call]);
    const reply = { session_id: "s", reply: "", ending: "awaiting_approval", pending_approval: [call], steps: 1 };
    const ended = play([event("turn.started", {}), event("turn.completed", reply)]);
    expect(ended.status).toBe("completed");
    expect(ended.pending).toEqual([call]);
    const answered = play([event("turn.completed", { ...reply, ending: "answered", pending_approval: undefined })]);
    expect(answered.pending).toEqual([]);
  });

  it("reads as awaiting approval, not completed, and so do its calls without a result, a paused subagent's task among them", () => {
    const reply = { session_id: "s", reply: "", ending: "awaiting_approval", pending_approval: [call], steps: 1 };
    const task = event("tool.call", { id: "t1", name: "task", summary: "description=d", arguments: { description: "d" } });
    const started = event("subagent.started", { subagent: "sa-1", call_id: "t1", agent_type: "general-purpose", description: "d" });
    const stopped = event("subagent.completed", { subagent: "sa-1", ending: "awaiting_approval", steps: 1, ok: true });
    const running = play([event("turn.started", {}), task, started]);
    expect(running.paused).toBe(false);
    expect(turnBadge(running)).toEqual({ text: "running", tone: "running" });
    const paused = play([event("turn.started", {}), task, started, stopped, event("turn.completed", reply)]);
    expect(paused.status).toBe("completed");
    expect(paused.paused).toBe(true);
    expect(turnBadge(paused)).toEqual({ text: "awaiting approval", tone: "warning" });
    const taskRow = paused.timeline[0];
    expect(taskRow.kind === "tool" && taskRow.result).toBeNull();
    expect(callBadge(null, openWork(paused))).toEqual({ text: "awaiting approval", tone: "warning" });
    // The same call while the turn runs, and calls with a result, keep their own state.
    expect(callBadge(null, openWork(running))).toEqual({ text: "running", tone: "running" });
    const result = { ok: false, bytes: 1, summary: "", content: "Error", truncated: false };
    expect(callBadge(result, "awaiting")).toEqual({ text: "error", tone: "error" });
    expect(callBadge({ ...result, ok: true }, "ended")).toEqual({ text: "ok", tone: "ok" });
    // A turn that answers, or fails, did not pause.
    const answered = play([event("turn.completed", { ...reply, ending: "answered", pending_approval: undefined })]);
    expect([answered.paused, turnBadge(answered).text]).toEqual([false, "completed"]);
    const failed = play([event("turn.failed", { error: { code: "x", message: "y" } })]);
    expect([failed.paused, turnBadge(failed).text]).toEqual([false, "failed"]);
  });

  it("reads a call and a subagent that never ended as not finished once their turn failed or its stream broke", () => {
    const task = event("tool.call", { id: "t1", name: "task", summary: "description=d", arguments: { description: "d" } });
    const started = event("subagent.started", { subagent: "sa-1", call_id: "t1", agent_type: "general-purpose", description: "d" });
    const running = play([event("turn.started", {}), task, started]);
    const subagent = running.timeline.find((entry) => entry.kind === "subagent");
    expect(subagent && subagentState(subagent, openWork(running))).toBe("running");
    const failed = play([event("turn.started", {}), task, started, event("turn.failed", { error: { code: "x", message: "y" } })]);
    const broken = failTurn(running, { status: 0, code: "stream_ended", message: "the stream ended" }, 5000);
    for (const turn of [failed, broken]) {
      expect(openWork(turn)).toBe("ended");
      expect(callBadge(null, openWork(turn))).toEqual({ text: "not finished", tone: "stopped" });
      const sub = turn.timeline.find((entry) => entry.kind === "subagent");
      expect(sub && subagentState(sub, openWork(turn))).toBe("not finished");
    }
    // A subagent that did end keeps its ending in a failed turn.
    const ended = play([event("turn.started", {}), task, started, completed("sa-1", 2, "hecho"), event("turn.failed", {})]);
    const sub = ended.timeline.find((entry) => entry.kind === "subagent");
    expect(sub && subagentState(sub, openWork(ended))).toBe("answered · 2 steps");
  });

  it("puts a stored session's waiting calls on its newest turn, with their arguments from its history", () => {
    const view: SessionView = {
      session_id: "s",
      version: 1,
      workspace: [],
      history: [
        { role: "user", content: "Cambia la hora" },
        { role: "assistant", content: "", tool_calls: [{ id: "c1", name: "edit_file", arguments: call.arguments }] },
      ],
      turns: [{ turn: 1, first_message: 0, messages: 2 }],
      next_cursor: null,
      pending_approval: { calls: [{ id: "c1", name: "edit_file" }] },
    };
    const [turn] = turnsFromHistory(view, "h");
    expect(turn.pending).toEqual([call]);
    expect(turn.paused).toBe(true);
    expect(turnBadge(turn).text).toBe("awaiting approval");
    expect(turnsFromHistory({ ...view, pending_approval: null }, "h")[0].pending).toEqual([]);
  });

  it("marks a stored turn paused when a call of it has no result, also once a later turn went on with it", () => {
    const view: SessionView = {
      session_id: "s",
      version: 3,
      workspace: [],
      history: [
        { role: "user", content: "Toma nota" },
        { role: "assistant", content: "Hecho." },
        { role: "user", content: "Encarga mover la reunión" },
        { role: "assistant", content: "", tool_calls: [{ id: "t1", name: "task", arguments: { description: "d" } }] },
        // The resumed turn starts with the task's result, its subagent's answer.
        { role: "tool", tool_call_id: "t1", name: "task", content: "Movida a las 12:00." },
        { role: "assistant", content: "Listo." },
      ],
      turns: [
        { turn: 1, first_message: 0, messages: 2 },
        { turn: 2, first_message: 2, messages: 2 },
        { turn: 3, first_message: 4, messages: 2 },
      ],
      next_cursor: null,
      pending_approval: null,
    };
    const turns = turnsFromHistory(view, "h");
    expect(turns.map((turn) => [turn.number, turn.paused, turnBadge(turn).text])).toEqual([
      [1, false, "saved"],
      [2, true, "awaiting approval"],
      [3, false, "saved"],
    ]);
    // A page cut short may end before its last turn's results: that turn is not taken as paused.
    const cutView = { ...view, history: view.history.slice(0, 4), turns: view.turns.slice(0, 2), truncated: true };
    expect(turnsFromHistory(cutView, "h").map((turn) => turn.paused)).toEqual([false, false]);
    // Unless the session says calls wait: the page puts them, and the pause, on its newest turn.
    const waiting = { calls: [{ id: "sa-1/c7", name: "edit_file", subagent: "sa-1", arguments: {} }] };
    const cutWaiting = turnsFromHistory({ ...cutView, pending_approval: waiting }, "h");
    expect(cutWaiting.map((turn) => turn.paused)).toEqual([false, true]);
  });

  it("says which subagent asks, live and from a stored session whose view carries the call's arguments", () => {
    const asked = { ...call, id: "sa-1/c7", subagent: "sa-1" };
    expect(play([event("approval.requested", { calls: [asked] })]).pending).toEqual([asked]);
    const view: SessionView = {
      session_id: "s",
      version: 1,
      workspace: [],
      history: [
        { role: "user", content: "Prepara la carta" },
        { role: "assistant", content: "", tool_calls: [{ id: "t1", name: "task", arguments: { description: "d" } }] },
      ],
      turns: [{ turn: 1, first_message: 0, messages: 2 }],
      next_cursor: null,
      pending_approval: { calls: [{ id: "sa-1/c7", name: "edit_file", subagent: "sa-1", arguments: call.arguments }] },
    };
    expect(turnsFromHistory(view, "h")[0].pending).toEqual([asked]);
  });
});
