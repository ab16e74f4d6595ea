// Tests of the turn model: a streamed turn's timeline, stored history as turns, the completion.
import { describe, expect, it } from "vitest";

import type { SessionView, Skill } from "./api";
import { insertSkill, matchSkills, slashQuery } from "./complete";
import { entryTitle } from "./format";
import { applyEvent, failTurn, newTurn, turnsFromHistory, type Turn } from "./turns";

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

  it("fails with the error body, and a stream that just ends fails the turn", () => {
    const failed = play([event("turn.failed", { error: { code: "model_provider_failed", message: "down" } })]);
    expect(failed.status).toBe("failed");
    expect(failed.error).toEqual({ status: 0, code: "model_provider_failed", message: "down" });
    const cut = failTurn(play([event("message.delta", { text: "a" })]), { status: 0, code: "stream_ended", message: "x" }, 5000);
    expect(cut.status).toBe("failed");
    expect(failTurn(failed, { status: 0, code: "other", message: "y" }, 9000)).toBe(failed);
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
