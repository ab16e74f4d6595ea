// Short texts the page shows: sizes, counts, durations, times and the timeline's row titles.

import type { SubagentEntry, TimelineEntry, ToolResult, Turn } from "./turns";

const numbers = new Intl.NumberFormat("en");

export function formatCount(value: number): string {
  return numbers.format(value);
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A server time (RFC 3339 text or Unix seconds) as `YYYY-MM-DD HH:MM UTC`. */
export function formatTime(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === "") return "";
  const ms = typeof value === "number" ? (value < 1e12 ? value * 1000 : value) : Date.parse(value);
  if (!Number.isFinite(ms)) return String(value);
  return `${new Date(ms).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/** A file's name without its folders: what a download is saved as. */
export function basename(path: string): string {
  const parts = path.split("/").filter((part) => part !== "");
  return parts[parts.length - 1] ?? "file";
}

/** A workspace path without its `/workspace/` prefix. */
export function workspaceRelative(path: string): string {
  return path.replace(/^\/?workspace\//, "");
}

/** The one-line title of a timeline row. */
export function entryTitle(entry: TimelineEntry): string {
  switch (entry.kind) {
    case "model": {
      const head = `Model call ${entry.step}`;
      if (entry.state === 2) return `${head} — state 2: ${entry.skill ?? "a skill"}${entry.forced ? " (forced)" : ""}`;
      if (entry.state === 1 && entry.listing) {
        const { shown_in_full, total, tier, search } = entry.listing;
        const noun = total === 1 ? "skill" : "skills";
        return `${head} — state 1: listing ${shown_in_full} of ${total} ${noun} (tier ${tier})${search ? ", find_skills offered" : ""}`;
      }
      return `${head} — state ${entry.state}`;
    }
    case "skill": {
      const skill = entry.version === undefined ? entry.skill : `${entry.skill} (version ${entry.version})`;
      return entry.forced ? `Skill ${skill} forced by a slash command` : `Skill ${skill} loaded`;
    }
    case "tool":
      return entry.summary ? `Tool ${entry.name}: ${entry.summary}` : `Tool ${entry.name}`;
    case "file":
      return `Wrote ${entry.path} (${formatBytes(entry.size)})`;
    case "shown":
      return `Showed ${entry.file.path} to the model (${formatBytes(entry.file.size)})`;
    case "subagent":
      return entry.description ? `${subagentTitle(entry)}: ${entry.description}` : subagentTitle(entry);
  }
}

/** A subagent's name in its row: its id and type, or that its start was not seen. */
export function subagentTitle(entry: SubagentEntry): string {
  if (entry.orphan) return `Subagent ${entry.id} (its start was not seen)`;
  return `Subagent ${entry.id} (${entry.agentType || "unknown type"})`;
}

/**
 * How a subagent stands: running, or how it ended and in how many steps; one whose end was never
 * reported in a turn that is over did not finish.
 */
export function subagentState(entry: SubagentEntry, open: OpenWork = "running"): string {
  if (entry.status === "running") return open === "ended" ? NOT_FINISHED.text : "running";
  const ending = (entry.ending ?? "completed").replace(/_/g, " ");
  if (entry.steps === null) return ending;
  return `${ending} · ${entry.steps} ${entry.steps === 1 ? "step" : "steps"}`;
}

/** A badge's text and its colour, the class `badge-{tone}`. */
export interface Badge {
  text: string;
  tone: string;
}

/** A paused turn and its waiting calls read as a subagent that paused does, in the attention colour. */
const AWAITING_APPROVAL: Badge = { text: "awaiting approval", tone: "warning" };
/** A call or subagent without an end in a turn that is over (it failed, its stream broke), muted. */
const NOT_FINISHED: Badge = { text: "not finished", tone: "stopped" };

/**
 * How the calls and subagents of a turn that have no result yet stand: still running, waiting on a
 * person's decisions (the turn paused), or ended without one (the turn failed or its stream broke,
 * or a stored page was cut before their results).
 */
export type OpenWork = "running" | "awaiting" | "ended";

export function openWork(turn: Turn): OpenWork {
  if (turn.paused) return "awaiting";
  return turn.status === "running" ? "running" : "ended";
}

/** How a turn stands: running, completed, failed or saved, or waiting for a person when it paused. */
export function turnBadge(turn: Turn): Badge {
  if (turn.paused) return AWAITING_APPROVAL;
  return { text: turn.status === "stored" ? "saved" : turn.status, tone: turn.status };
}

/** How a tool call stands: its result's outcome or, without one, as its turn's open work does. */
export function callBadge(result: ToolResult | null, open: OpenWork): Badge {
  if (result) return result.ok ? { text: "ok", tone: "ok" } : { text: "error", tone: "error" };
  switch (open) {
    case "running":
      return { text: "running", tone: "running" };
    case "awaiting":
      return AWAITING_APPROVAL;
    case "ended":
      return NOT_FINISHED;
  }
}

/**
 * A tool call's arguments as a person reads them: one `key: value` line per argument, and a string
 * that spans lines (a file's content, a script) shown with its line breaks under its key rather
 * than as `\n` escapes. Anything else is indented JSON.
 */
export function formatArguments(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") {
    // Arguments the model sent as a string that does not parse are kept as that string.
    try {
      return formatArguments(JSON.parse(value));
    } catch {
      return value;
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return JSON.stringify(value, null, 2);
  }
  return Object.entries(value as Record<string, unknown>)
    .map(([key, item]) => {
      if (typeof item === "string" && item.includes("\n")) {
        const lines = item.replace(/\n$/, "").split("\n");
        return `${key}: |\n${lines.map((line) => `  ${line}`).join("\n")}`;
      }
      return `${key}: ${JSON.stringify(item, null, 2).replace(/\n/g, "\n  ")}`;
    })
    .join("\n");
}

/** What a shown file is, briefly: an image's pixels or a PDF's pages, and its size as sent. */
export function shownDetails(file: { size: number; width?: number; height?: number; pages?: number }): string {
  const parts: string[] = [];
  if (file.width && file.height) parts.push(`${file.width}×${file.height}`);
  if (file.pages) parts.push(`${file.pages} ${file.pages === 1 ? "page" : "pages"}`);
  parts.push(formatBytes(file.size));
  return parts.join(" · ");
}
