// Tests of the files the model was shown: `file.shown` events on the message or on the call that
// showed them, the same from a stored session, and the runtime's note on attachments.
import { describe, expect, it } from "vitest";

import type { SessionView } from "./api";
import { entryTitle } from "./format";
import { turnsFromHistory } from "./history";
import { messageFiles, shownFileOf, splitAttachedNote } from "./shown";
import { applyEvent, newTurn, type Turn } from "./turns";

const event = (name: string, data: unknown) => ({ event: name, data: JSON.stringify(data) });
const SHA = "0123456789abcdef".repeat(4);
const OTHER = "f".repeat(64);

function play(events: { event: string; data: string }[]): Turn {
  return events.reduce((turn, next, index) => applyEvent(turn, next, 1000 + index), newTurn("t", 1, "mira", 1000));
}

describe("file.shown", () => {
  it("reads a shown file, and nothing without a path or a SHA-256", () => {
    const data = { path: "/workspace/sello.png", media_type: "image/png", size: 2048, sha256: SHA.toUpperCase(), attached: true };
    expect(shownFileOf(data)).toEqual({ path: "/workspace/sello.png", media_type: "image/png", size: 2048, sha256: SHA });
    expect(shownFileOf({ ...data, sha256: "nope" })).toBeNull();
    expect(shownFileOf({ ...data, path: "" })).toBeNull();
    expect(shownFileOf("text")).toBeNull();
  });

  it("puts an attached file on the user's message, once", () => {
    const shown = event("file.shown", { path: "/workspace/sello.png", media_type: "image/png", size: 2048, sha256: SHA, attached: true });
    const turn = play([event("turn.started", {}), shown, shown]);
    expect(turn.files.map((file) => file.path)).toEqual(["/workspace/sello.png"]);
    expect(turn.timeline).toEqual([]);
  });

  it("puts a file a tool showed on the call that read it, the event coming after its result", () => {
    const result = (id: string, path: string) =>
      event("tool.result", { id, name: "read_file", ok: true, bytes: 60, summary: "Showing the image", content: `Showing the image ${path}`, truncated: false });
    const turn = play([
      event("tool.call", { id: "c1", name: "read_file", summary: "", arguments: { file_path: "/workspace/a.png" } }),
      event("tool.call", { id: "c2", name: "read_file", summary: "", arguments: { file_path: "/workspace/b.png" } }),
      result("c1", "/workspace/a.png"),
      event("file.shown", { path: "/workspace/a.png", media_type: "image/png", size: 9, sha256: SHA, attached: false }),
      result("c2", "/workspace/b.png"),
      event("file.shown", { path: "/workspace/b.png", media_type: "image/png", size: 9, sha256: OTHER, attached: false }),
      event("tool.call", { id: "c3", name: "execute", summary: "", arguments: { command: "ls" } }),
      // A path no call named goes on the latest read_file call.
      event("file.shown", { path: "/skills/x/out.png", media_type: "image/png", size: 9, sha256: OTHER, attached: false }),
    ]);
    const [first, second] = turn.timeline;
    expect(first.kind === "tool" && first.files?.map((file) => file.sha256)).toEqual([SHA]);
    expect(first.kind === "tool" && first.result?.ok).toBe(true);
    expect(second.kind === "tool" && second.files?.map((file) => file.path)).toEqual(["/workspace/b.png", "/skills/x/out.png"]);
    expect(turn.timeline[2].kind === "tool" && turn.timeline[2].files).toBeUndefined();
    expect(turn.files).toEqual([]);
  });

  it("gives a file shown with no call a row of its own, and a subagent's goes in its timeline", () => {
    const alone = play([event("file.shown", { path: "/skills/x/out.png", media_type: "image/png", size: 10, sha256: SHA, attached: false })]);
    expect(alone.timeline.map(entryTitle)).toEqual(["Showed /skills/x/out.png to the model (10 B)"]);
    const nested = play([
      event("tool.call", { id: "t1", name: "task", summary: "", arguments: {} }),
      event("subagent.started", { subagent: "sa-1", call_id: "t1", agent_type: "general-purpose", description: "mira", depth: 1 }),
      event("tool.call", { subagent: "sa-1", id: "c1", name: "read_file", summary: "", arguments: { file_path: "/workspace/a.png" } }),
      event("file.shown", { subagent: "sa-1", path: "/workspace/a.png", media_type: "image/png", size: 9, sha256: SHA, attached: false }),
    ]);
    const subagent = nested.timeline[1];
    const call = subagent.kind === "subagent" ? subagent.timeline[0] : null;
    expect(call?.kind === "tool" && call.files?.length).toBe(1);
  });
});

describe("a stored session's shown files", () => {
  it("puts a user message's files on its turn and a tool message's on its call", () => {
    const file = { path: "/workspace/sello.png", sha256: SHA, media_type: "image/png", size: 2048, width: 120, height: 80 };
    const view: SessionView = {
      session_id: "s-1",
      version: 2,
      workspace: [],
      next_cursor: null,
      turns: [{ turn: 1, first_message: 0, messages: 4 }],
      history: [
        { role: "user", content: "¿Qué ves?\n\nAttached files:\n- Showing the image /workspace/sello.png.", files: [file] },
        { role: "assistant", content: "", tool_calls: [{ id: "c1", name: "read_file", arguments: { file_path: "/workspace/sello.png" } }] },
        { role: "tool", tool_call_id: "c1", name: "read_file", content: "Showing the image /workspace/sello.png.", files: [file] },
        { role: "assistant", content: "Veo la imagen." },
      ],
    };
    const [turn] = turnsFromHistory(view, "h");
    expect(turn.files).toEqual([file]);
    const call = turn.timeline[0];
    expect(call.kind === "tool" && call.files).toEqual([file]);
    expect(turn.answer).toBe("Veo la imagen.");
  });
});

describe("a message's attachments", () => {
  it("splits the person's text from the runtime's note naming the attachments", () => {
    expect(splitAttachedNote("¿Qué ves?\n\nAttached files:\n- a")).toEqual({ text: "¿Qué ves?", note: "Attached files:\n- a" });
    expect(splitAttachedNote("Attached files:\n- a")).toEqual({ text: "", note: "Attached files:\n- a" });
    expect(splitAttachedNote("Hola")).toEqual({ text: "Hola", note: null });
  });

  it("matches what was sent with what the model was shown, and keeps shown files no attachment names", () => {
    const shown = { path: "/workspace/sello.png", sha256: SHA, media_type: "image/png", size: 1 };
    const stray = { ...shown, path: "/workspace/otra.png", sha256: OTHER };
    const sent = [
      { name: "sello.png", size: 5, type: "image/png" },
      { name: "notas.txt", size: 3, type: "text/plain" },
    ];
    expect(messageFiles(sent, [shown, stray]).map((file) => [file.path, file.sent?.name ?? null, file.shown?.sha256 ?? null])).toEqual([
      ["/workspace/sello.png", "sello.png", SHA],
      ["/workspace/notas.txt", "notas.txt", null],
      ["/workspace/otra.png", null, OTHER],
    ]);
  });
});
