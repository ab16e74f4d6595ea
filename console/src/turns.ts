// The conversation's model: a turn with its timeline, built from a turn's streamed events
// (`applyEvent`) or from a stored session page (`turnsFromHistory`). Pure functions, so the
// page and the tests share them.

import type { HistoryMessage, ReplyFile, SessionView, TurnReply } from "./api";
import type { SseEvent } from "./sse";

export interface Listing {
  total: number;
  shown_in_full: number;
  search: boolean;
  tier: number;
}

export interface ToolResult {
  ok: boolean;
  bytes: number | null;
  summary: string;
  content: string | null;
  truncated: boolean;
}

export type TimelineEntry =
  | {
      kind: "model";
      step: number;
      state: number;
      skill: string | null;
      forced: boolean;
      listing: Listing | null;
      tools: string[];
      /** How many tools were offered, when the event gives a count rather than the names. */
      toolCount: number | null;
      promptTokens: number | null;
    }
  | { kind: "skill"; skill: string; forced: boolean }
  | { kind: "tool"; id: string; name: string; summary: string; arguments: unknown; hasArguments: boolean; result: ToolResult | null }
  | { kind: "file"; path: string; size: number };

export type TurnStatus = "running" | "completed" | "failed" | "stored";

export interface TurnError {
  status: number;
  code: string;
  message: string;
}

export interface Turn {
  /** Unique within the page, stable across re-renders. */
  key: string;
  /** The turn's number in its session, when known. */
  number: number | null;
  message: string;
  answer: string;
  status: TurnStatus;
  timeline: TimelineEntry[];
  reply: TurnReply | null;
  error: TurnError | null;
  startedAt: number | null;
  durationMs: number | null;
}

export function newTurn(key: string, number: number | null, message: string, startedAt: number): Turn {
  return {
    key,
    number,
    message,
    answer: "",
    status: "running",
    timeline: [],
    reply: null,
    error: null,
    startedAt,
    durationMs: null,
  };
}

type Json = Record<string, unknown>;

const text = (value: unknown): string => (typeof value === "string" ? value : "");
const count = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);

function parseData(event: SseEvent): Json | null {
  try {
    const value: unknown = JSON.parse(event.data);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Json) : null;
  } catch {
    return null;
  }
}

/** The error a failed turn's body (`{"error": {...}}`) carries. */
export function errorOf(data: Json | null, status = 0): TurnError {
  const error = data?.error as Json | undefined;
  return {
    status: count(error?.status) ?? status,
    code: text(error?.code) || "turn_failed",
    message: text(error?.message) || "the turn failed",
  };
}

function toolNames(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value
    .map((tool) => (typeof tool === "string" ? tool : text((tool as Json | null)?.name)))
    .filter((name) => name !== "");
}

function listingOf(value: unknown): Listing | null {
  if (!value || typeof value !== "object") return null;
  const listing = value as Json;
  return {
    total: count(listing.total) ?? 0,
    shown_in_full: count(listing.shown_in_full) ?? 0,
    search: listing.search === true,
    tier: count(listing.tier) ?? 0,
  };
}

/** The turn after one of its events; `now` (ms) measures the duration in the page. */
export function applyEvent(turn: Turn, event: SseEvent, now: number): Turn {
  const data = parseData(event);
  switch (event.event) {
    case "turn.started":
      return turn;
    case "message.delta":
      return { ...turn, answer: turn.answer + text(data?.text) };
    case "skill.loaded":
      return {
        ...turn,
        timeline: [...turn.timeline, { kind: "skill", skill: text(data?.skill), forced: data?.forced === true }],
      };
    case "model.call":
      return {
        ...turn,
        timeline: [
          ...turn.timeline,
          {
            kind: "model",
            step: count(data?.step) ?? turn.timeline.filter((entry) => entry.kind === "model").length + 1,
            state: count(data?.state) ?? 0,
            skill: text(data?.skill) || null,
            forced: data?.forced === true,
            listing: listingOf(data?.listing),
            tools: toolNames(data?.tools),
            toolCount: Array.isArray(data?.tools) ? null : count(data?.tools),
            promptTokens: count(data?.prompt_tokens),
          },
        ],
      };
    case "tool.call":
      return {
        ...turn,
        timeline: [
          ...turn.timeline,
          {
            kind: "tool",
            id: text(data?.id),
            name: text(data?.name),
            summary: text(data?.summary),
            arguments: data?.arguments,
            hasArguments: data !== null && "arguments" in data,
            result: null,
          },
        ],
      };
    case "tool.result": {
      const id = text(data?.id);
      const result: ToolResult = {
        ok: data?.ok !== false,
        bytes: count(data?.bytes),
        summary: text(data?.summary),
        content: typeof data?.content === "string" ? data.content : null,
        truncated: data?.truncated === true,
      };
      // The result belongs to the latest call with its id; a result without a call gets a row of its own.
      const index = turn.timeline.findLastIndex((entry) => entry.kind === "tool" && entry.id === id && !entry.result);
      if (index === -1) {
        const orphan: TimelineEntry = {
          kind: "tool",
          id,
          name: text(data?.name),
          summary: "",
          arguments: undefined,
          hasArguments: false,
          result,
        };
        return { ...turn, timeline: [...turn.timeline, orphan] };
      }
      const timeline = turn.timeline.slice();
      const call = timeline[index];
      if (call.kind === "tool") timeline[index] = { ...call, result };
      return { ...turn, timeline };
    }
    case "file.written":
      return {
        ...turn,
        timeline: [...turn.timeline, { kind: "file", path: text(data?.path), size: count(data?.size) ?? 0 }],
      };
    case "turn.completed": {
      const reply = data as TurnReply | null;
      if (!reply) {
        return finish(turn, now, { error: { status: 0, code: "bad_reply", message: "the turn's reply could not be read" } });
      }
      // A reply without streamed text (a JSON answer, a replayed turn) still shows its text.
      const answer = turn.answer.trim() === "" ? text(reply.reply) : turn.answer;
      return finish({ ...turn, answer }, now, { reply });
    }
    case "turn.failed":
      return finish(turn, now, { error: errorOf(data) });
    default:
      // Events this page does not know yet are ignored, as a newer server may send more.
      return turn;
  }
}

function finish(turn: Turn, now: number, end: { reply?: TurnReply; error?: TurnError }): Turn {
  return {
    ...turn,
    status: end.error ? "failed" : "completed",
    reply: end.reply ?? null,
    error: end.error ?? null,
    durationMs: turn.startedAt === null ? null : Math.max(0, now - turn.startedAt),
  };
}

/** A turn that ended without its last event (the stream broke, the request failed). */
export function failTurn(turn: Turn, error: TurnError, now: number): Turn {
  if (turn.status !== "running") return turn;
  return finish(turn, now, { error });
}

/** Whether a tool's result text reports a failure: every tool starts its error results with `Error`. */
function isErrorResult(content: string): boolean {
  return content.startsWith("Error");
}

const UTF8 = new TextEncoder();

/** A one-line rendering of stored arguments (`key=value ...`, values cut), as `tool.call` events carry. */
export function summariseArguments(value: unknown): string {
  const cut = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);
  const oneLine = (text: string) => text.replace(/[\r\n]/g, " ");
  let summary: string;
  if (value && typeof value === "object" && !Array.isArray(value)) {
    summary = Object.entries(value as Json)
      .map(([key, field]) => `${cut(key, 60)}=${oneLine(cut(typeof field === "string" ? field : JSON.stringify(field), 60))}`)
      .join(" ");
  } else {
    summary = oneLine(cut(JSON.stringify(value) ?? "", 60));
  }
  return cut(summary, 200);
}

/** One stored turn's messages as a turn: the user's message, the calls with results, the answer. */
export function turnFromMessages(key: string, number: number | null, messages: HistoryMessage[]): Turn {
  const turn: Turn = { ...newTurn(key, number, "", 0), status: "stored", startedAt: null };
  const answers: string[] = [];
  const calls = new Map<string, number>();
  for (const message of messages) {
    if (message.role === "user") {
      turn.message = turn.message ? `${turn.message}\n\n${message.content}` : message.content;
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
      const index = calls.get(message.tool_call_id);
      const call = index === undefined ? undefined : turn.timeline[index];
      if (call && call.kind === "tool") {
        call.result = result;
      } else {
        turn.timeline.push({
          kind: "tool",
          id: message.tool_call_id,
          name: message.name,
          summary: "",
          arguments: undefined,
          hasArguments: false,
          result,
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
  if (numbered.length === 0) {
    return history.length === 0 ? [] : [turnFromMessages(`${keyPrefix}-all`, null, history)];
  }
  return numbered
    .map((entry) =>
      turnFromMessages(
        `${keyPrefix}-${entry.turn}`,
        entry.turn,
        history.slice(entry.first_message, entry.first_message + entry.messages),
      ),
    )
    .sort((a, b) => (a.number ?? 0) - (b.number ?? 0));
}

/** The session's files after a turn wrote `written`: updated in place, new ones added, sorted. */
export function mergeFiles<F extends ReplyFile>(files: F[], written: F[]): F[] {
  const byPath = new Map(files.map((file) => [file.path, file]));
  for (const file of written) byPath.set(file.path, file);
  return [...byPath.values()].sort((a, b) => a.path.localeCompare(b.path));
}
