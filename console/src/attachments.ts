// The composer's pending attachments: the names they get in `/workspace` (cleaned, a pasted image
// named by the time, duplicates with a suffix) and how each stands as its upload goes (uploading,
// ready, failed). Pure functions, so the page and the tests share them.

import type { AttachmentRef, UploadResult } from "./api";

/** Most files one turn may attach (agent-core `MAX_ATTACHMENTS`). */
export const MAX_ATTACHMENTS = 10;
/** Longest name a workspace path may have, in UTF-8 bytes (agent-core `MAX_WORKSPACE_PATH_BYTES`). */
export const MAX_NAME_BYTES = 256;

export type AttachmentState = "uploading" | "ready" | "failed";

/** How the page shows a file: a thumbnail for an image, an icon for a PDF or anything else. */
export type FileKind = "image" | "pdf" | "other";

/** A file added to the composer, uploaded to the session as soon as it was added. */
export interface PendingAttachment {
  /** Unique within the composer. */
  id: string;
  /** The session the file was uploaded to: it can be attached to that session's turns only. */
  sessionId: string;
  /** Its name in `/workspace`. */
  name: string;
  size: number;
  /** The type the browser gave the file (may be empty). */
  type: string;
  kind: FileKind;
  state: AttachmentState;
  /** The share of the bytes sent, 0 to 1. */
  progress: number;
  /** The upload's id once stored. */
  upload: string | null;
  /** Why it failed: the API's message. */
  error: string | null;
  /** An object URL of an image's bytes for its thumbnail; the page makes and revokes it. */
  preview: string | null;
}

/** A file a turn's message attached, as the conversation shows it before the model has seen it. */
export interface SentFile {
  name: string;
  size: number;
  type: string;
}

const IMAGE_EXTENSIONS = new Set(["png", "jpg", "jpeg", "gif", "webp"]);

function extension(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

/** What kind of file a type (or, without one, a name) says it is. */
export function fileKind(type: string, name: string): FileKind {
  if (type.startsWith("image/")) return "image";
  if (type === "application/pdf") return "pdf";
  const ext = extension(name);
  if (IMAGE_EXTENSIONS.has(ext)) return "image";
  return ext === "pdf" ? "pdf" : "other";
}

const UTF8 = new TextEncoder();
const bytes = (text: string) => UTF8.encode(text).length;

/** `text` cut to at most `max` UTF-8 bytes, never inside a character. */
function cutBytes(text: string, max: number): string {
  let cut = "";
  for (const char of text) {
    if (bytes(cut + char) > max) break;
    cut += char;
  }
  return cut;
}

/** `stem` and `ext` (with its dot) joined within the name's bound, the stem cut when needed. */
function withinBound(stem: string, ext: string): string {
  if (bytes(stem + ext) <= MAX_NAME_BYTES) return stem + ext;
  return cutBytes(stem, Math.max(1, MAX_NAME_BYTES - bytes(ext))) + ext;
}

function split(name: string): { stem: string; ext: string } {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? { stem: name.slice(0, dot), ext: name.slice(dot) } : { stem: name, ext: "" };
}

/**
 * A file's name as a workspace name the API takes: its last segment, without control characters
 * or percent escapes (`%41` becomes `_41`), trimmed, within 256 bytes; `file` when nothing is left.
 */
export function cleanName(raw: string): string {
  const last = raw.split(/[/\\]/).pop() ?? "";
  const name = last
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, "")
    .replace(/%(?=[0-9a-fA-F]{2})/g, "_")
    .trim();
  if (name === "" || name === "." || name === "..") return "file";
  const { stem, ext } = split(name);
  return withinBound(stem, ext);
}

/** `wanted`, or with `-2`, `-3`... before its extension when the composer already has that name. */
export function uniqueName(wanted: string, taken: Iterable<string>): string {
  const names = new Set(taken);
  if (!names.has(wanted)) return wanted;
  const { stem, ext } = split(wanted);
  for (let n = 2; ; n++) {
    const candidate = withinBound(stem, `-${n}${ext}`);
    if (!names.has(candidate)) return candidate;
  }
}

const pad = (value: number) => String(value).padStart(2, "0");

/** The extension of an image type, `png` when unknown. */
function imageExtension(type: string): string {
  const ext = { "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp" }[type];
  return ext ?? "png";
}

/** The name of an image pasted at `at` (local time): `pasted-20260125-101503.png`. */
export function pastedName(at: Date, type = "image/png"): string {
  const date = `${at.getFullYear()}${pad(at.getMonth() + 1)}${pad(at.getDate())}`;
  const time = `${pad(at.getHours())}${pad(at.getMinutes())}${pad(at.getSeconds())}`;
  return `pasted-${date}-${time}.${imageExtension(type)}`;
}

/** A file as the composer receives it: its name, size and type. */
export interface IncomingFile {
  name: string;
  size: number;
  type: string;
}

/**
 * The composer's attachments after files were added to it: each named apart from the others and
 * uploading, up to ten in all. `added` are the new ones, in order; `refused` how many did not fit.
 */
export function addFiles(
  list: PendingAttachment[],
  files: IncomingFile[],
  sessionId: string,
  newId: () => string,
): { list: PendingAttachment[]; added: PendingAttachment[]; refused: number } {
  const room = Math.max(0, MAX_ATTACHMENTS - list.length);
  const taken = list.map((item) => item.name);
  const added: PendingAttachment[] = [];
  for (const file of files.slice(0, room)) {
    const name = uniqueName(cleanName(file.name), taken);
    taken.push(name);
    added.push({
      id: newId(),
      sessionId,
      name,
      size: file.size,
      type: file.type,
      kind: fileKind(file.type, name),
      state: "uploading",
      progress: 0,
      upload: null,
      error: null,
      preview: null,
    });
  }
  return { list: [...list, ...added], added, refused: files.length - added.length };
}

function update(list: PendingAttachment[], id: string, change: Partial<PendingAttachment>): PendingAttachment[] {
  return list.map((item) => (item.id === id ? { ...item, ...change } : item));
}

/** An upload's progress, while it is still uploading. */
export function progressed(list: PendingAttachment[], id: string, sent: number): PendingAttachment[] {
  const item = list.find((candidate) => candidate.id === id);
  if (!item || item.state !== "uploading") return list;
  return update(list, id, { progress: Math.min(1, Math.max(0, sent)) });
}

/** A stored upload: ready to attach, under the name the API gave it. */
export function uploaded(list: PendingAttachment[], id: string, result: UploadResult): PendingAttachment[] {
  return list.map((item) =>
    item.id === id
      ? { ...item, state: "ready", progress: 1, upload: result.upload, name: result.name || item.name, error: null }
      : item,
  );
}

/** A refused or broken upload, with the API's message. */
export function failed(list: PendingAttachment[], id: string, message: string): PendingAttachment[] {
  return update(list, id, { state: "failed", error: message });
}

export function removeAttachment(list: PendingAttachment[], id: string): PendingAttachment[] {
  return list.filter((item) => item.id !== id);
}

/** Whether an upload is still under way: the message waits for it. */
export function uploading(list: PendingAttachment[]): boolean {
  return list.some((item) => item.state === "uploading");
}

/** What a turn's body attaches: the ready uploads. */
export function readyRefs(list: PendingAttachment[]): AttachmentRef[] {
  return list.flatMap((item) => (item.state === "ready" && item.upload ? [{ upload: item.upload, name: item.name }] : []));
}

/** The ready uploads as the conversation shows them on the turn that sends them. */
export function sentFiles(list: PendingAttachment[]): SentFile[] {
  return list.flatMap((item) => (item.state === "ready" && item.upload ? [{ name: item.name, size: item.size, type: item.type }] : []));
}

/** How an attachment stands, in words. */
export function attachmentStatus(item: PendingAttachment): string {
  switch (item.state) {
    case "uploading":
      return `uploading ${Math.round(item.progress * 100)}%`;
    case "ready":
      return "ready";
    case "failed":
      return `failed: ${item.error ?? "the upload failed"}`;
  }
}
