// A stored session page as the conversation's turns: each turn's messages made into the timeline
// a streamed turn would have built (with the files the model was shown), and a paused turn's
// waiting calls. Pure functions, so the page and the tests share them.

import type { HistoryMessage, SessionView } from "./api";
import { addShown, shownFilesOf } from "./shown";
import { newTurn, summariseArguments, type ToolResult, type Turn } from "./turns";

/** Whether a tool's result text reports a failure: every tool starts its error results with `Error`. */
function isErrorResult(content: string): boolean {
  return content.startsWith("Error");
}

const UTF8 = new TextEncoder();

/** One stored turn's messages as a turn: the user's message, the calls with results, the answer. */
export function turnFromMessages(key: string, number: number | null, messages: HistoryMessage[]): Turn {
  const turn: Turn = { ...newTurn(key, number, "", 0), status: "stored", startedAt: null };
  const answers: string[] = [];
  const calls = new Map<string, number>();
  for (const message of messages) {
    if (message.role === "user") {
      turn.message = turn.message ? `${turn.message}\n\n${message.content}` : message.content;
      turn.files = shownFilesOf(message.files).reduce(addShown, turn.files);
    } else if (message.role === "assistant") {
      if (message.content.trim() !== "") answers.push(message.content);
      for (const call of message.tool_calls ?? []) {
        calls.set(call.id, turn.timeline.length);
        turn.timeline.push({
          kind: "tool",
          id: call.id,
          name: call.name,
          summary: summariseArguments(call.arguments),
          arguments: call.arguments,
          hasArguments: true,
          result: null,
        });
      }
    } else if (message.role === "tool") {
      const result: ToolResult = {
        ok: !isErrorResult(message.content),
        bytes: message.content_bytes ?? UTF8.encode(message.content).length,
        summary: message.content.split("\n", 1)[0] ?? "",
        content: message.content,
        truncated: message.content_bytes !== undefined,
      };
      const files = shownFilesOf(message.files);
      const index = calls.get(message.tool_call_id);
      const call = index === undefined ? undefined : turn.timeline[index];
      if (call && call.kind === "tool") {
        call.result = result;
        if (files.length > 0) call.files = files;
      } else {
        turn.timeline.push({
          kind: "tool",
          id: message.tool_call_id,
          name: message.name,
          summary: "",
          arguments: undefined,
          hasArguments: false,
          result,
          ...(files.length > 0 ? { files } : {}),
        });
      }
    }
  }
  turn.answer = answers.join("\n\n");
  return turn;
}

/** A page of a session's history as turns, oldest first. */
export function turnsFromHistory(view: SessionView, keyPrefix: string): Turn[] {
  const history = view.history ?? [];
  const numbered = view.turns ?? [];
  const turns =
    numbered.length === 0
      ? history.length === 0
        ? []
        : [turnFromMessages(`${keyPrefix}-all`, null, history)]
      : numbered
          .map((entry) =>
            turnFromMessages(
              `${keyPrefix}-${entry.turn}`,
              entry.turn,
              history.slice(entry.first_message, entry.first_message + entry.messages),
            ),
          )
          .sort((a, b) => (a.number ?? 0) - (b.number ?? 0));
  // A committed turn has a result for every call unless it paused for a person's decisions, so a
  // stored call without one marks a paused turn; only the last turn of a page cut short may just
  // miss results that are stored.
  turns.forEach((turn, index) => {
    const cut = view.truncated === true && index === turns.length - 1;
    turn.paused = !cut && turn.timeline.some((entry) => entry.kind === "tool" && entry.result === null);
  });
  // A paused turn's calls wait on the newest turn; their arguments are in its timeline.
  const waiting = view.pending_approval?.calls ?? [];
  const last = turns[turns.length - 1];
  if (last && waiting.length > 0) {
    last.paused = true;
    last.pending = waiting.map((call) => {
      const row = last.timeline.find((entry) => entry.kind === "tool" && entry.id === call.id);
      const args = call.arguments ?? (row && row.kind === "tool" ? row.arguments : undefined);
      const shown = { id: call.id, name: call.name, arguments: args, summary: summariseArguments(args) };
      return call.subagent ? { ...shown, subagent: call.subagent } : shown;
    });
  }
  return turns;
}
