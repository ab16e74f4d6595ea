// The conversation's model: a turn with its timeline, built from a turn's streamed events
// (`applyEvent`); `history.ts` builds the same from a stored session page. Pure functions, so the
// page and the tests share them.

import type { PendingCall, ReplyFile, ShownFile, Tokens, TurnReply } from "./api";
import type { SentFile } from "./attachments";
import { addShown, shownFileOf, withShownFile } from "./shown";
import type { SseEvent } from "./sse";
import type { Listing, SubagentEntry, TimelineEntry, ToolResult } from "./timeline";

export type { Listing, SubagentEntry, SubagentStatus, TimelineEntry, ToolResult } from "./timeline";

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
  /** The files the message attached, as sent (a live turn). */
  attachments: SentFile[];
  /** The files the model was shown with the message (`file.shown` with `attached`, or the stored message's). */
  files: ShownFile[];
  answer: string;
  status: TurnStatus;
  timeline: TimelineEntry[];
  reply: TurnReply | null;
  error: TurnError | null;
  startedAt: number | null;
  durationMs: number | null;
  /** The tool calls this turn waits on for a person's decision; empty once decided. */
  pending: PendingCall[];
  /**
   * Whether the turn ended paused for a person's decisions (ending `awaiting_approval`): its calls
   * without a result wait on them rather than run, and go on in a later turn.
   */
  paused: boolean;
}

export function newTurn(key: string, number: number | null, message: string, startedAt: number): Turn {
  return {
    key,
    number,
    message,
    attachments: [],
    files: [],
    answer: "",
    status: "running",
    timeline: [],
    reply: null,
    error: null,
    startedAt,
    durationMs: null,
    pending: [],
    paused: false,
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

/** The events that add to a timeline, the turn's own or, tagged with `subagent`, a subagent's. */
const TIMELINE_EVENTS = new Set(["model.call", "skill.loaded", "tool.call", "tool.result", "file.written", "file.shown"]);

/** A timeline after one of the events that add to it. */
function applyToTimeline(timeline: TimelineEntry[], name: string, data: Json | null): TimelineEntry[] {
  switch (name) {
    case "skill.loaded":
      return [
        ...timeline,
        {
          kind: "skill",
          skill: text(data?.skill),
          forced: data?.forced === true,
          // A published skill's version (the default, or the one the turn pinned).
          ...(typeof data?.version === "number" ? { version: data.version } : {}),
        },
      ];
    case "model.call":
      return [
        ...timeline,
        {
          kind: "model",
          step: count(data?.step) ?? timeline.filter((entry) => entry.kind === "model").length + 1,
          state: count(data?.state) ?? 0,
          skill: text(data?.skill) || null,
          forced: data?.forced === true,
          listing: listingOf(data?.listing),
          tools: toolNames(data?.tools),
          toolCount: Array.isArray(data?.tools) ? null : count(data?.tools),
          promptTokens: count(data?.prompt_tokens),
        },
      ];
    case "tool.call":
      return [
        ...timeline,
        {
          kind: "tool",
          id: text(data?.id),
          name: text(data?.name),
          summary: text(data?.summary),
          arguments: data?.arguments,
          hasArguments: data !== null && "arguments" in data,
          result: null,
        },
      ];
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
      const index = timeline.findLastIndex((entry) => entry.kind === "tool" && entry.id === id && !entry.result);
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
        return [...timeline, orphan];
      }
      const next = timeline.slice();
      const call = next[index];
      if (call.kind === "tool") next[index] = { ...call, result };
      return next;
    }
    case "file.written":
      return [...timeline, { kind: "file", path: text(data?.path), size: count(data?.size) ?? 0 }];
    case "file.shown": {
      const file = shownFileOf(data);
      return file ? withShownFile(timeline, file) : timeline;
    }
    default:
      return timeline;
  }
}

/**
 * `timeline` with subagent `id`, wherever it is nested, replaced by `update(it)`; `null` when no
 * subagent of the timeline has that id.
 */
function updateSubagent(
  timeline: TimelineEntry[],
  id: string,
  update: (subagent: SubagentEntry) => SubagentEntry,
): TimelineEntry[] | null {
  for (let index = 0; index < timeline.length; index++) {
    const entry = timeline[index];
    if (entry.kind !== "subagent") continue;
    const replaced = entry.id === id ? update(entry) : withTimeline(entry, updateSubagent(entry.timeline, id, update));
    if (replaced !== entry) {
      const next = timeline.slice();
      next[index] = replaced;
      return next;
    }
  }
  return null;
}

const withTimeline = (entry: SubagentEntry, timeline: TimelineEntry[] | null): SubagentEntry =>
  timeline === null ? entry : { ...entry, timeline };

/** Subagent `id`, wherever it is nested in `timeline`. */
export function findSubagent(timeline: TimelineEntry[], id: string): SubagentEntry | null {
  for (const entry of timeline) {
    if (entry.kind !== "subagent") continue;
    if (entry.id === id) return entry;
    const inner = findSubagent(entry.timeline, id);
    if (inner) return inner;
  }
  return null;
}

/**
 * `timeline` with a new subagent right after the `task` call that started it (and its siblings
 * of that call, if any), or at the end when the call is not in this timeline.
 */
function placeSubagent(timeline: TimelineEntry[], subagent: SubagentEntry): TimelineEntry[] {
  const call = timeline.findLastIndex((entry) => entry.kind === "tool" && entry.id === subagent.callId);
  if (call === -1 || subagent.callId === "") return [...timeline, subagent];
  let at = call + 1;
  while (at < timeline.length) {
    const next = timeline[at];
    if (next.kind !== "subagent" || next.callId !== subagent.callId) break;
    at++;
  }
  return [...timeline.slice(0, at), subagent, ...timeline.slice(at)];
}

function newSubagent(id: string, data: Json | null, orphan: boolean): SubagentEntry {
  return {
    kind: "subagent",
    id,
    parent: text(data?.parent) || null,
    callId: text(data?.call_id),
    agentType: text(data?.agent_type),
    description: text(data?.description),
    depth: count(data?.depth) ?? 1,
    status: "running",
    ending: null,
    steps: null,
    ok: null,
    summary: "",
    orphan,
    timeline: [],
  };
}

/**
 * The turn's timeline after a subagent's event: `subagent.started` places it under its parent
 * (the turn, or the subagent that called `task`), `subagent.completed` ends it, and its own
 * events go into its timeline. An id the page has not seen started gets an orphan row.
 */
function applySubagentEvent(timeline: TimelineEntry[], name: string, id: string, data: Json | null): TimelineEntry[] {
  if (name === "subagent.started") {
    const started = newSubagent(id, data, false);
    // Its events came first (never so from the runtime): the orphan row gets what it lacked.
    const known = updateSubagent(timeline, id, (entry) => ({
      ...entry,
      ...started,
      ...{ status: entry.status, ending: entry.ending, steps: entry.steps, ok: entry.ok, summary: entry.summary },
      timeline: entry.timeline,
    }));
    if (known) return known;
    if (started.parent !== null) {
      const nested = updateSubagent(timeline, started.parent, (parent) => ({
        ...parent,
        timeline: placeSubagent(parent.timeline, started),
      }));
      if (nested) return nested;
    }
    return placeSubagent(timeline, started);
  }
  const update = (entry: SubagentEntry): SubagentEntry =>
    name === "subagent.completed"
      ? {
          ...entry,
          status: "completed",
          ending: text(data?.ending) || null,
          steps: count(data?.steps),
          ok: typeof data?.ok === "boolean" ? data.ok : null,
          summary: text(data?.summary),
          usage: tokensOf(data?.usage),
        }
      : { ...entry, timeline: applyToTimeline(entry.timeline, name, data) };
  return updateSubagent(timeline, id, update) ?? [...timeline, update(newSubagent(id, null, true))];
}

/** A subagent's `usage` as `subagent.completed` gives it; `null` from a server that gives none. */
function tokensOf(value: unknown): Tokens | null {
  if (typeof value !== "object" || value === null) return null;
  const usage = value as Record<string, unknown>;
  const number = (key: string) => (typeof usage[key] === "number" ? (usage[key] as number) : undefined);
  const input = number("input_tokens");
  const output = number("output_tokens");
  if (input === undefined || output === undefined) return null;
  return {
    input_tokens: input,
    output_tokens: output,
    uncached_input_tokens: number("uncached_input_tokens"),
    cache_read_tokens: number("cache_read_tokens"),
    cache_write_tokens: number("cache_write_tokens"),
  };
}

/** The turn after one of its events; `now` (ms) measures the duration in the page. */
export function applyEvent(turn: Turn, event: SseEvent, now: number): Turn {
  const data = parseData(event);
  const subagent = text(data?.subagent);
  if (event.event === "subagent.started" || event.event === "subagent.completed") {
    return subagent === "" ? turn : { ...turn, timeline: applySubagentEvent(turn.timeline, event.event, subagent, data) };
  }
  if (subagent !== "") {
    // A subagent's events go to its own timeline; its text (never sent now) is not the turn's answer.
    return TIMELINE_EVENTS.has(event.event)
      ? { ...turn, timeline: applySubagentEvent(turn.timeline, event.event, subagent, data) }
      : turn;
  }
  if (event.event === "file.shown" && data?.attached === true) {
    // A file attached to the message: the model was shown it with the user's text.
    const file = shownFileOf(data);
    return file ? { ...turn, files: addShown(turn.files, file) } : turn;
  }
  if (TIMELINE_EVENTS.has(event.event)) {
    return { ...turn, timeline: applyToTimeline(turn.timeline, event.event, data) };
  }
  switch (event.event) {
    case "turn.started":
      return turn;
    case "approval.requested":
      return { ...turn, pending: pendingCalls(data?.calls) };
    case "message.delta":
      return { ...turn, answer: turn.answer + text(data?.text) };
    case "turn.completed": {
      const reply = data as TurnReply | null;
      if (!reply) {
        return finish(turn, now, { error: { status: 0, code: "bad_reply", message: "the turn's reply could not be read" } });
      }
      // A reply without streamed text (a JSON answer, a replayed turn) still shows its text.
      const answer = turn.answer.trim() === "" ? text(reply.reply) : turn.answer;
      const pending = reply.ending === "awaiting_approval" ? pendingCalls(reply.pending_approval) : [];
      return finish({ ...turn, answer, pending: pending.length > 0 ? pending : turn.pending }, now, { reply });
    }
    case "turn.failed":
      return finish(turn, now, { error: errorOf(data) });
    default:
      // Events this page does not know yet are ignored, as a newer server may send more.
      return turn;
  }
}

/** The pending calls an event or a reply lists; entries without an id are dropped. */
function pendingCalls(value: unknown): PendingCall[] {
  if (!Array.isArray(value)) return [];
  return value
    .filter((call): call is Json => !!call && typeof call === "object")
    .map((call) => ({
      id: text(call.id),
      name: text(call.name),
      arguments: call.arguments,
      summary: text(call.summary) || summariseArguments(call.arguments),
      ...(text(call.subagent) !== "" ? { subagent: text(call.subagent) } : {}),
    }))
    .filter((call) => call.id !== "");
}

/** How many rows a timeline has, its subagents' rows included. */
export function timelineSize(timeline: TimelineEntry[]): number {
  return timeline.reduce((size, entry) => size + 1 + (entry.kind === "subagent" ? timelineSize(entry.timeline) : 0), 0);
}

/**
 * A key for each of a timeline's entries that stays with the entry as the timeline grows: rows
 * other than subagents are only ever appended, so their place among their kind is stable, and a
 * subagent (placed after its `task` call, so maybe before others) has its id.
 */
export function entryKeys(timeline: TimelineEntry[]): string[] {
  const seen = new Map<string, number>();
  return timeline.map((entry) => {
    const base = entry.kind === "subagent" ? `subagent-${entry.id.replace(/[^\w-]/g, "_")}` : entry.kind;
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return entry.kind === "subagent" && n === 0 ? base : `${base}-${n}`;
  });
}

function finish(turn: Turn, now: number, end: { reply?: TurnReply; error?: TurnError }): Turn {
  return {
    ...turn,
    status: end.error ? "failed" : "completed",
    paused: !end.error && end.reply?.ending === "awaiting_approval",
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

/** The session's files after a turn wrote `written`: updated in place, new ones added, sorted. */
export function mergeFiles<F extends ReplyFile>(files: F[], written: F[]): F[] {
  const byPath = new Map(files.map((file) => [file.path, file]));
  for (const file of written) byPath.set(file.path, file);
  return [...byPath.values()].sort((a, b) => a.path.localeCompare(b.path));
}
