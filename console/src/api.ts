// Typed requests to the console server: its config (`/console/config`) and the deployed API's
// routes under `/api`, each sent with the selected user's bearer token.

import { readSse, type SseEvent } from "./sse";

export interface ConsoleUser {
  id: string;
  name: string;
  token: string;
}

export interface ConsoleConfig {
  users: ConsoleUser[];
  /** What answers the turns, e.g. `replay of examples/local/replay.jsonl`. */
  model: string;
  sandbox: boolean;
}

/** Tokens as `GET /usage`, a turn's reply or `turn.completed` give them; the split may be absent. */
export interface Tokens {
  input_tokens: number;
  output_tokens: number;
  uncached_input_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
}

export interface TokenUsage {
  /** Every input token, cached or not; the cache reads and writes are parts of it. */
  input_tokens: number;
  output_tokens: number;
  uncached_input_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  [other: string]: unknown;
}

/** What a turn's model calls cost: `usd` is null when no model it called has a price. */
export interface TurnCost {
  usd: number | null;
  unpriced_models?: string[];
}

export interface ReplyFile {
  path: string;
  size: number;
}

/**
 * Why a turn ended (agent-core `Ending`). `context_full`: the turn's own work no longer fit the
 * model's context even with its older steps condensed; its work is committed and the reply says so.
 */
export type Ending =
  | "answered"
  | "step_limit"
  | "deadline"
  | "aborted"
  | "plan_continues"
  | "awaiting_choice"
  | "awaiting_clarification"
  | "plan_failed"
  | "context_full"
  | "awaiting_approval";

/** A tool call a paused turn waits on (agent-core `ApprovalCall`): its arguments, whole or by size. */
export interface PendingCall {
  /** What a decision names: a subagent's call is `{subagent}/{call id}`. */
  id: string;
  name: string;
  arguments: unknown;
  summary: string;
  /** The subagent (`sa-1`...) that made the call; absent for the turn's own agent. */
  subagent?: string;
}

/** A person's decision on one pending call, as `POST /sessions/{id}/turns` takes it. */
export type Decision =
  | { call_id: string; decision: "approve" }
  | { call_id: string; decision: "edit"; arguments: Record<string, unknown> }
  | { call_id: string; decision: "reject"; message?: string };

/** A file uploaded to the session, attached to a turn's message: the upload's id and its `/workspace` name. */
export interface AttachmentRef {
  upload: string;
  name: string;
}

/**
 * What a turn is asked: a message (with the uploads it attaches, at most 10), or the decisions
 * that let a paused turn go on.
 */
export type TurnBody = { message: string; attachments?: AttachmentRef[] } | { decisions: Decision[] };

/** `PUT /sessions/{id}/uploads/{name}`: what the upload stored. */
export interface UploadResult {
  /** The upload's id, the hex SHA-256 of its bytes. */
  upload: string;
  name: string;
  size: number;
  /** The type its bytes show (`image/png`, `text/plain`...). */
  media_type: string;
}

/**
 * A file the model was shown (agent-ports `FileRef`): attached to a user's message, or shown by a
 * tool (`read_file` of an image). `GET /sessions/{id}/shown/{sha256}` serves its bytes.
 */
export interface ShownFile {
  path: string;
  sha256: string;
  media_type: string;
  size: number;
  width?: number;
  height?: number;
  pages?: number;
}

/** The 200 body of a turn, and the data of `turn.completed` (agent-core `TurnReply`). */
export interface TurnReply {
  session_id: string;
  reply: string;
  current_skill: string | null;
  forced_skill: string | null;
  refused_tool_calls: number;
  steps: number;
  usage: TokenUsage;
  /** Absent from servers that do not price turns. */
  cost?: TurnCost;
  ending: Ending;
  version: number;
  files?: ReplyFile[];
  executions?: number;
  /** With ending `awaiting_approval`: the calls that wait. */
  pending_approval?: PendingCall[];
}

export interface SessionSummary {
  session_id: string;
  /** The first message on one line, at most 80 characters; null for a session begun before titles. */
  title?: string | null;
  created_at?: string | null;
  updated_at?: string | null;
  turns?: number | null;
}

export interface SessionList {
  sessions: SessionSummary[];
  next_cursor: string | null;
}

export interface HistoryToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** A stored message as `GET /sessions/{id}` shows it (long texts cut, with `content_bytes`). */
export type HistoryMessage =
  | { role: "user"; content: string; content_bytes?: number; files?: ShownFile[] }
  | { role: "assistant"; content: string; tool_calls?: HistoryToolCall[]; content_bytes?: number }
  | { role: "tool"; tool_call_id: string; name: string; content: string; content_bytes?: number; files?: ShownFile[] };

export interface HistoryTurn {
  turn: number;
  first_message: number;
  messages: number;
}

/** `GET /sessions/{id}`: the session's state and one page of history, newest turns first. */
export interface SessionView {
  session_id: string;
  version: number;
  updated_at?: string | null;
  current_skill?: string | null;
  loaded_skills?: string[];
  workspace: ReplyFile[];
  history: HistoryMessage[];
  turns: HistoryTurn[];
  next_cursor: string | null;
  truncated?: boolean;
  /** The calls the session's paused turn waits on (their arguments are in its last assistant message). */
  /** The calls a paused turn waits on; a subagent's carry their arguments and the subagent's id. */
  pending_approval?: { calls: { id: string; name: string; subagent?: string; arguments?: unknown }[] } | null;
}

export interface Skill {
  path: string;
  name: string;
  description: string;
  category: string | null;
  /** The tools the skill may use; `null` when it does not restrict them. */
  tools: string[] | null;
  declared_tools: string[] | null;
  warnings: string[];
}

export interface SkippedFile {
  file: string;
  reason: string;
}

export interface BasePrompt {
  file: string;
  size: number;
  usable: boolean;
  problem: string | null;
}

/** `GET /skills`: one page of the catalog, or with `q` the search's matches. */
export interface SkillsPage {
  count?: number;
  skills: Skill[];
  next_cursor: string | null;
  skipped: SkippedFile[];
  skipped_count?: number;
  base_prompt: BasePrompt | null;
  query?: string;
}

/**
 * Tokens and their cost. The cache split and the cost are absent from servers that predate them;
 * `cost_usd` is null when none of the calls counted had a price, and `unpriced_calls` counts the
 * calls left out of it.
 */
export interface ModelCounts {
  input_tokens: number;
  output_tokens: number;
  model_calls: number;
  uncached_input_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  cost_usd?: number | null;
  unpriced_calls?: number;
}

export interface UsageCounts extends ModelCounts {
  tokens: number;
  executions: number;
  sandbox_seconds: number;
  turns: number;
  failed_turns: number;
}

export interface UsageDay extends UsageCounts {
  date: string;
  models: (ModelCounts & { model: string })[];
}

/** `GET /usage`: the caller's usage by UTC day (the last 30 days by default). */
export interface UsageReport {
  from: string;
  to: string;
  days: UsageDay[];
  totals: UsageCounts;
  /** The price table the costs were computed with. */
  prices?: { date?: string; currency?: string; source?: string | string[] };
}

/** A refused request: the API's `{"error": {"code", "message"}}` body with its status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** The error an answer carries: its JSON error body when it has one, else its status. */
export function errorFromBody(status: number, body: unknown): ApiError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (error && typeof error === "object") {
    const code = typeof error.code === "string" ? error.code : "error";
    const message = typeof error.message === "string" ? error.message : `request failed (${status})`;
    return new ApiError(status, code, message);
  }
  // The gateway in front of the functions answers some refusals itself, as `{"message": "..."}`.
  const message = (body as { message?: unknown } | null)?.message;
  if (typeof message === "string" && message !== "") return new ApiError(status, "http_error", `${message} (${status})`);
  return new ApiError(status, "http_error", `request failed with status ${status}`);
}

/** The error of a refused answer, read from its body. */
export async function failure(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page, say): the status is all there is to show.
  }
  return errorFromBody(response.status, body);
}

export async function getJson<T>(url: string, token: string | null, signal?: AbortSignal): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response: Response;
  try {
    response = await fetch(url, { headers, signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new ApiError(0, "network", "the console server could not be reached");
  }
  if (!response.ok) throw await failure(response);
  return (await response.json()) as T;
}

export function query(params: Record<string, string | number | null | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function getConfig(signal?: AbortSignal): Promise<ConsoleConfig> {
  return getJson<ConsoleConfig>("/console/config", null, signal);
}

/** Characters a session id may have (agent-core `SessionId`: at most 128 of them). */
const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/** A fresh id: `s-` and 20 random characters of the session id alphabet. */
export function newSessionId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  let id = "s-";
  for (const byte of bytes) id += ID_ALPHABET[byte % ID_ALPHABET.length];
  return id;
}

/** A workspace path (`/workspace/a/b.md`) as the file route's path: each segment encoded. */
export function fileRoute(sessionId: string, path: string): string {
  const relative = path.replace(/^\/?workspace\//, "");
  const segments = relative.split("/").filter((segment) => segment !== "").map(encodeURIComponent);
  return `/api/sessions/${encodeURIComponent(sessionId)}/files/${segments.join("/")}`;
}

/** The route serving the bytes of a file the session showed the model. */
export function shownRoute(sessionId: string, sha256: string): string {
  return `/api/sessions/${encodeURIComponent(sessionId)}/shown/${encodeURIComponent(sha256)}`;
}

/** The route a file is uploaded to, under the name it gets in `/workspace`. */
export function uploadRoute(sessionId: string, name: string): string {
  return `/api/sessions/${encodeURIComponent(sessionId)}/uploads/${encodeURIComponent(name)}`;
}

/** The requests of one user: every call carries that user's token. */
export class Api {
  constructor(private readonly token: string) {}

  sessions(cursor: string | null, signal?: AbortSignal): Promise<SessionList> {
    return getJson(`/api/sessions${query({ limit: 50, cursor })}`, this.token, signal);
  }

  session(id: string, cursor: string | null, signal?: AbortSignal, limit = 10): Promise<SessionView> {
    return getJson(`/api/sessions/${encodeURIComponent(id)}${query({ limit, cursor })}`, this.token, signal);
  }

  skills(cursor: string | null, q: string | null, signal?: AbortSignal): Promise<SkillsPage> {
    return getJson(`/api/skills${query({ q, cursor })}`, this.token, signal);
  }

  /** Every skill of the catalog, page after page (bounded, in case a server repeats a cursor). */
  async allSkills(signal?: AbortSignal): Promise<Skill[]> {
    const skills: Skill[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 100; page++) {
      const answer: SkillsPage = await getJson(`/api/skills${query({ limit: 1000, cursor })}`, this.token, signal);
      skills.push(...answer.skills);
      if (!answer.next_cursor || answer.next_cursor === cursor) break;
      cursor = answer.next_cursor;
    }
    return skills;
  }

  usage(signal?: AbortSignal): Promise<UsageReport> {
    return getJson("/api/usage", this.token, signal);
  }

  /** A workspace file's bytes (the route needs the token, so a plain link cannot fetch it). */
  file(sessionId: string, path: string, signal?: AbortSignal): Promise<Blob> {
    return this.blob(fileRoute(sessionId, path), signal);
  }

  /** The bytes of a file the session showed the model, as it was shown. */
  shown(sessionId: string, sha256: string, signal?: AbortSignal): Promise<Blob> {
    return this.blob(shownRoute(sessionId, sha256), signal);
  }

  private async blob(url: string, signal?: AbortSignal): Promise<Blob> {
    let response: Response;
    try {
      response = await fetch(url, { headers: { Authorization: `Bearer ${this.token}` }, signal });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ApiError(0, "network", "the file could not be fetched");
    }
    if (!response.ok) throw await failure(response);
    return response.blob();
  }

  /**
   * Uploads `file` to the session as `name` (the raw bytes as the body), reporting the share sent
   * (0 to 1) as it goes: XMLHttpRequest, since fetch reports no upload progress. Rejects with the
   * API's error (400 for a bad name or bytes that are not what the name says, 413 over the limit).
   */
  upload(
    sessionId: string,
    name: string,
    file: Blob,
    onProgress: (sent: number) => void,
    signal?: AbortSignal,
  ): Promise<UploadResult> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new DOMException("The upload was cancelled.", "AbortError"));
        return;
      }
      const request = new XMLHttpRequest();
      request.open("PUT", uploadRoute(sessionId, name));
      request.setRequestHeader("Authorization", `Bearer ${this.token}`);
      request.setRequestHeader("Content-Type", file.type || "application/octet-stream");
      request.setRequestHeader("Accept", "application/json");
      request.upload.onprogress = (event) => {
        if (event.lengthComputable && event.total > 0) onProgress(event.loaded / event.total);
      };
      request.onload = () => {
        let body: unknown = null;
        try {
          body = JSON.parse(request.responseText);
        } catch {
          // Not JSON: the status is all there is to show.
        }
        if (request.status >= 200 && request.status < 300 && body && typeof body === "object") {
          resolve(body as UploadResult);
        } else {
          reject(errorFromBody(request.status, body));
        }
      };
      request.onerror = () => reject(new ApiError(0, "network", "the upload could not reach the console server"));
      request.onabort = () => reject(new DOMException("The upload was cancelled.", "AbortError"));
      signal?.addEventListener("abort", () => request.abort(), { once: true });
      request.send(file);
    });
  }

  /**
   * Sends a message (or decisions) and reads the turn's events as they arrive. Resolves when the stream ends;
   * a refused request rejects with its ApiError before any event. A server that answers JSON
   * instead of a stream is taken as the turn's reply (`turn.completed`).
   */
  async sendTurn(
    sessionId: string,
    body: TurnBody,
    onEvent: (event: SseEvent) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    let response: Response;
    try {
      response = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/turns`, {
        method: "POST",
        headers: {
          Accept: "text/event-stream",
          "Content-Type": "application/json",
          Authorization: `Bearer ${this.token}`,
          // A retried delivery of the same request replays the committed turn instead of running it twice.
          "Idempotency-Key": idempotencyKey(),
        },
        body: JSON.stringify(body),
        signal,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ApiError(0, "network", "the console server could not be reached");
    }
    if (!response.ok) throw await failure(response);
    const type = response.headers.get("content-type") ?? "";
    if (!type.includes("text/event-stream") || !response.body) {
      const text = await response.text();
      onEvent({ event: "turn.completed", data: text });
      return;
    }
    await readSse(response.body, onEvent);
  }
}

function idempotencyKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  return newSessionId().slice(2);
}
