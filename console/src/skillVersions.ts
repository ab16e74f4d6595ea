// Typed requests to the routes of published skills (issue 38): a skill's numbered versions
// uploaded as a zip, listed, read (with its SKILL.md), made the default (promote or roll back), and
// its evals run in the background and read back. Each request carries the user's bearer token.

import { ApiError, errorFromBody, query } from "./api";

/** A version as every answer shows it (`GET /skills/{path}/versions` and the others). */
export interface VersionSummary {
  skill: string;
  version: number;
  sha256: string;
  /** The files' bytes, in all. */
  size: number;
  /** How many files. */
  files: number;
  uploaded_by: string;
  /** RFC 3339, UTC. */
  uploaded_at: string | null;
  /** Whether the skill serves this version now. */
  default: boolean;
  warnings: string[];
  /** Python distributions its `requirements.txt` declares. */
  needs: string[];
  /** Modules its scripts import only if they can. */
  optional_needs: string[];
}

/** `PUT /skills/{path}/versions`: the version, and whether the upload made it (201) or it already was. */
export interface Published extends VersionSummary {
  created: boolean;
}

/** `GET /skills/{path}/versions`: newest first. */
export interface VersionList {
  skill: string;
  default: number | null;
  versions: VersionSummary[];
}

/** A skill of the catalog and its versions: `null` when it is not published (a folder's skill). */
export interface SkillRow {
  path: string;
  description: string;
  versions: VersionList | null;
}

export interface VersionFile {
  path: string;
  size: number;
  sha256: string;
}

/** `GET /skills/{path}/versions/{n}`. */
export interface VersionDetail extends VersionSummary {
  file_list: VersionFile[];
  skill_md: string;
}

/** `PUT /skills/{path}/default`. */
export interface DefaultSet {
  skill: string;
  version: number;
  previous: number | null;
  set_by: string;
  set_at: string | null;
}

/** One thing wrong with an upload: the file it is about (none for the zip as a whole). */
export interface Problem {
  file?: string;
  message: string;
}

/** `POST .../evals`: the run accepted, to poll. */
export interface EvalAccepted {
  run_id: string;
  status: string;
  poll: string;
}

/** One expectation as the grader judged it. */
export interface GradedExpectation {
  text: string;
  passed: boolean;
  evidence: string;
}

/** One run of one case (agent-core `CaseRun`). */
export interface CaseRun {
  run: number;
  loaded: boolean;
  forced: boolean;
  loaded_version?: number;
  steps: number;
  /** Tool calls by tool name. */
  tools: Record<string, number>;
  commands: string[];
  files: string[];
  input_tokens: number;
  output_tokens: number;
  reply: string;
  expectations?: GradedExpectation[];
  error?: string;
}

/** One case and its runs: `eval` (from evals/evals.json) or `trigger`. */
export interface CaseReport {
  kind: string;
  id: string;
  prompt: string;
  should_trigger?: boolean;
  runs: CaseRun[];
}

/** The rates of a run (agent-core `Summary`). */
export interface EvalSummary {
  trigger_rate: number | null;
  triggered_when_wanted: number;
  wanted: number;
  triggered_when_not_wanted: number;
  not_wanted: number;
  pass_rate: number | null;
  expectations_passed: number;
  expectations: number;
  eval_runs_loaded: number;
  eval_runs: number;
  failed_runs: number;
  input_tokens: number;
  output_tokens: number;
}

/** A whole eval run (agent-core `EvalReport`); the list of runs leaves `cases` out. */
export interface EvalReport {
  run_id: string;
  skill: string;
  version: number;
  /** `running`, then `completed` or `failed`. */
  status: string;
  error?: string;
  runs_per_case: number;
  model: string;
  /** Unix seconds. */
  started_at: number;
  finished_at?: number;
  summary: EvalSummary;
  cases?: CaseReport[];
}

/** `GET .../evals`: the version's runs, newest first, without their cases. */
export interface EvalRuns {
  skill: string;
  version: number;
  runs: EvalReport[];
}

/** A refused upload: the API's 400 `invalid_skill`, with every problem it found. */
export class InvalidSkillError extends ApiError {
  constructor(
    message: string,
    readonly problems: Problem[],
  ) {
    super(400, "invalid_skill", message);
    this.name = "InvalidSkillError";
  }
}

/** The error a refused answer's body carries; an invalid skill's keeps its `problems`. */
export function versionsError(status: number, body: unknown): ApiError {
  const error = errorFromBody(status, body);
  const problems = (body as { problems?: unknown } | null)?.problems;
  if (error.code === "invalid_skill" && Array.isArray(problems)) {
    const read = problems
      .filter((problem): problem is { file?: unknown; message: string } => typeof problem?.message === "string")
      .map((problem) => (typeof problem.file === "string" ? { file: problem.file, message: problem.message } : { message: problem.message }));
    return new InvalidSkillError(error.message, read);
  }
  return error;
}

/** A skill's path as the route's segments (`category/name` stays two segments, each encoded). */
export function skillRoute(skill: string, ...rest: (string | number)[]): string {
  const segments = skill.split("/").filter((segment) => segment !== "");
  return `/api/skills/${[...segments, ...rest.map(String)].map(encodeURIComponent).join("/")}`;
}

/** The requests of one user on published skills. */
export class SkillVersionsApi {
  constructor(private readonly token: string) {}

  /** The skill's versions, or `null` when it has none (a folder's skill, not published). */
  async versions(skill: string, signal?: AbortSignal): Promise<VersionList | null> {
    try {
      return await this.send<VersionList>("GET", skillRoute(skill, "versions"), { signal });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  version(skill: string, version: number, signal?: AbortSignal): Promise<VersionDetail> {
    return this.send("GET", skillRoute(skill, "versions", version), { signal });
  }

  /**
   * Uploads `zip` as a new version of `skill`. Without `promote` the first version becomes the
   * default and a later one does not; rejects with an InvalidSkillError listing the problems.
   */
  publish(skill: string, zip: Blob, promote: boolean | null, signal?: AbortSignal): Promise<Published> {
    const url = `${skillRoute(skill, "versions")}${query({ promote: promote === null ? null : String(promote) })}`;
    return this.send("PUT", url, { body: zip, type: "application/zip", signal });
  }

  /** Makes `version` the one the skill serves: a promote, or a rollback. */
  setDefault(skill: string, version: number, signal?: AbortSignal): Promise<DefaultSet> {
    return this.send("PUT", skillRoute(skill, "default"), { json: { version }, signal });
  }

  /** Starts an eval run of `version` in the background: `runs` runs of each case. */
  runEvals(skill: string, version: number, runs: number, signal?: AbortSignal): Promise<EvalAccepted> {
    return this.send("POST", skillRoute(skill, "versions", version, "evals"), { json: { runs }, signal });
  }

  evalRuns(skill: string, version: number, signal?: AbortSignal): Promise<EvalRuns> {
    return this.send("GET", skillRoute(skill, "versions", version, "evals"), { signal });
  }

  evalRun(skill: string, version: number, runId: string, signal?: AbortSignal): Promise<EvalReport> {
    return this.send("GET", skillRoute(skill, "versions", version, "evals", runId), { signal });
  }

  private async send<T>(
    method: string,
    url: string,
    options: { json?: unknown; body?: Blob; type?: string; signal?: AbortSignal },
  ): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json", Authorization: `Bearer ${this.token}` };
    let body: BodyInit | undefined;
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.json);
    } else if (options.body) {
      headers["Content-Type"] = options.type ?? "application/octet-stream";
      body = options.body;
    }
    let response: Response;
    try {
      response = await fetch(url, { method, headers, body, signal: options.signal });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new ApiError(0, "network", "the console server could not be reached");
    }
    const text = await response.text().catch(() => "");
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON (a proxy's page, say): the status is all there is to show.
    }
    if (!response.ok) throw versionsError(response.status, parsed);
    return parsed as T;
  }
}

/** A rate from 0 to 1 as a whole percentage; a dash when there is none. */
export function formatRate(rate: number | null | undefined): string {
  if (rate === null || rate === undefined || !Number.isFinite(rate)) return "–";
  return `${Math.round(rate * 100)}%`;
}

/** A run's tool calls on one line, e.g. `load_skill ×1, read_file ×2`; "none" without any. */
export function formatTools(tools: Record<string, number>): string {
  const named = Object.entries(tools).filter(([, count]) => count > 0);
  if (named.length === 0) return "none";
  return named.map(([name, count]) => `${name} ×${count}`).join(", ");
}

/** The skill path a folder or zip suggests: its name, without `.zip` and a `-v2` ending. */
export function suggestedPath(name: string): string {
  return name
    .replace(/\.zip$/i, "")
    .replace(/-v\d+$/i, "")
    .trim();
}
