// The timeline of a turn as the conversation shows it: the types `turns.ts` and `shown.ts` share.

import type { ShownFile, Tokens } from "./api";

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
  | { kind: "skill"; skill: string; forced: boolean; version?: number }
  | {
      kind: "tool";
      id: string;
      name: string;
      summary: string;
      arguments: unknown;
      hasArguments: boolean;
      result: ToolResult | null;
      /** The files the call showed the model (`read_file` of an image). */
      files?: ShownFile[];
    }
  | { kind: "file"; path: string; size: number }
  /** A file a tool showed the model whose call the page has not seen. */
  | { kind: "shown"; file: ShownFile }
  | SubagentEntry;

export type SubagentStatus = "running" | "completed";

/**
 * A subagent a `task` call started (`subagent.started`), with its own loop's rows as it reports
 * them (events tagged with its id), and how it ended (`subagent.completed`).
 */
export interface SubagentEntry {
  kind: "subagent";
  /** Its id within the turn: `sa-1`, `sa-2`... */
  id: string;
  /** The subagent whose `task` call started it; `null` for the turn's own agent. */
  parent: string | null;
  /** The id of the `task` call that started it. */
  callId: string;
  agentType: string;
  description: string;
  /** 1 for the turn's own agent's subagents, 2 for theirs... */
  depth: number;
  status: SubagentStatus;
  /** How its loop ended (`answered`, `step_limit`...), once completed. */
  ending: string | null;
  steps: number | null;
  ok: boolean | null;
  /** The first line of its answer, once completed. */
  summary: string;
  /** The tokens of its model calls (its own subagents' included), once completed; the turn's include them. */
  usage?: Tokens | null;
  /** Events of an id whose `subagent.started` the page has not seen: a row of their own. */
  orphan: boolean;
  timeline: TimelineEntry[];
}
