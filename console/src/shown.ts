// The files the model was shown, as the conversation shows them: read from `file.shown` events and
// from a stored session's messages, put on the user's message or on the tool call that showed
// them, and matched with the files a message attached. Pure functions, so the page and the tests
// share them.

import type { ShownFile } from "./api";
import type { SentFile } from "./attachments";
import type { TimelineEntry } from "./timeline";

type Json = Record<string, unknown>;

const SHA256 = /^[0-9a-f]{64}$/i;

/** A shown file as an event or a stored message describes it; `null` when it lacks its path or hash. */
export function shownFileOf(value: unknown): ShownFile | null {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const data = value as Json;
  const { path, sha256, media_type: mediaType, size } = data;
  if (typeof path !== "string" || path === "" || typeof sha256 !== "string" || !SHA256.test(sha256)) return null;
  const file: ShownFile = {
    path,
    sha256: sha256.toLowerCase(),
    media_type: typeof mediaType === "string" ? mediaType : "application/octet-stream",
    size: typeof size === "number" && Number.isFinite(size) ? size : 0,
  };
  for (const key of ["width", "height", "pages"] as const) {
    const number = data[key];
    if (typeof number === "number" && Number.isFinite(number)) file[key] = number;
  }
  return file;
}

/** The shown files of a stored message's `files`, those that can be read. */
export function shownFilesOf(value: unknown): ShownFile[] {
  if (!Array.isArray(value)) return [];
  return value.map(shownFileOf).filter((file): file is ShownFile => file !== null);
}

/** `files` with `file` added, unless the same bytes were already shown from the same path. */
export function addShown(files: ShownFile[], file: ShownFile): ShownFile[] {
  return files.some((known) => known.sha256 === file.sha256 && known.path === file.path) ? files : [...files, file];
}

export const isImage = (file: { media_type: string }) => file.media_type.startsWith("image/");
export const isPdf = (file: { media_type: string }) => file.media_type === "application/pdf";

/** The path a tool call's arguments read, when they name one (`read_file`'s `file_path`). */
function calledPath(args: unknown): string | null {
  const value = args && typeof args === "object" ? (args as Json).file_path : undefined;
  return typeof value === "string" ? value.trim() : null;
}

/**
 * The timeline after a tool showed `file` to the model: it goes on the call that showed it (the
 * runtime sends the event right after that call's result): the latest call whose `file_path` is
 * the file's path, else the latest `read_file` call, else the latest call. Without any call it
 * gets a row of its own.
 */
export function withShownFile(timeline: TimelineEntry[], file: ShownFile): TimelineEntry[] {
  let index = timeline.findLastIndex((entry) => entry.kind === "tool" && calledPath(entry.arguments) === file.path);
  if (index === -1) index = timeline.findLastIndex((entry) => entry.kind === "tool" && entry.name === "read_file");
  if (index === -1) index = timeline.findLastIndex((entry) => entry.kind === "tool");
  if (index === -1) return [...timeline, { kind: "shown", file }];
  const next = timeline.slice();
  const call = next[index];
  if (call.kind === "tool") next[index] = { ...call, files: addShown(call.files ?? [], file) };
  return next;
}

/** What opens the runtime's note naming a message's attachments, after the person's own text. */
const ATTACHED_NOTE = "Attached files:\n";

/**
 * A stored user message split into the person's text and the runtime's note naming what was
 * attached (`Attached files:` and a line per file), which the model read after it.
 */
export function splitAttachedNote(content: string): { text: string; note: string | null } {
  if (content.startsWith(ATTACHED_NOTE)) return { text: "", note: content };
  const at = content.lastIndexOf(`\n\n${ATTACHED_NOTE}`);
  if (at === -1) return { text: content, note: null };
  return { text: content.slice(0, at), note: content.slice(at + 2) };
}

/** One file of a user's message as the conversation shows it: what was attached and what the model saw of it. */
export interface MessageFile {
  /** Its path in `/workspace`. */
  path: string;
  /** The file as sent (a live turn), when known. */
  sent: SentFile | null;
  /** What the model was shown of it, once known. */
  shown: ShownFile | null;
}

/**
 * The files of a user's message: each attached file (a live turn) with what the model was shown
 * of it, then the shown files no attachment names (a stored turn knows only those).
 */
export function messageFiles(sent: SentFile[], shown: ShownFile[]): MessageFile[] {
  const byPath = new Map(shown.map((file) => [file.path, file]));
  const files: MessageFile[] = sent.map((file) => {
    const path = `/workspace/${file.name}`;
    return { path, sent: file, shown: byPath.get(path) ?? null };
  });
  const named = new Set(files.map((file) => file.path));
  for (const file of shown) {
    if (!named.has(file.path)) files.push({ path: file.path, sent: null, shown: file });
  }
  return files;
}
