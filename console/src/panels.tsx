// The side panels: the user's sessions and usage (left), and the workspace and catalog tabs
// (right). Each panel that loads data is mounted per user, so switching users starts it afresh.

import { useEffect, useRef, useState } from "preact/hooks";
import type { ComponentChildren, JSX } from "preact";

import { fileRoute, type Api, type BasePrompt, type SessionSummary, type Skill, type SkippedFile, type UsageReport } from "./api";
import { isAbort, messageOf } from "./errors";
import { basename, formatBytes, formatCount, formatTime, workspaceRelative } from "./format";

export interface SessionsProps {
  api: Api;
  /** Changes after each turn, so the list shows the sessions' new turns. */
  refresh: number;
  activeId: string | null;
  onOpen: (id: string) => void;
  onNew: () => void;
}

export function Sessions({ api, refresh, activeId, onOpen, onNew }: SessionsProps) {
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const controller = useRef<AbortController | null>(null);

  const load = async (from: string | null) => {
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setLoading(true);
    setError(null);
    try {
      const page = await api.sessions(from, abort.signal);
      setSessions((shown) => {
        if (from === null) return page.sessions;
        const seen = new Set(shown.map((session) => session.session_id));
        return [...shown, ...page.sessions.filter((session) => !seen.has(session.session_id))];
      });
      setCursor(page.next_cursor ?? null);
    } catch (err) {
      if (!isAbort(err)) setError(messageOf(err));
    } finally {
      if (controller.current === abort) setLoading(false);
    }
  };

  useEffect(() => {
    void load(null);
    return () => controller.current?.abort();
  }, [api, refresh]);

  const unsaved = activeId !== null && !sessions.some((session) => session.session_id === activeId);
  return (
    <nav class="sessions" aria-labelledby="sessions-heading">
      <div class="panel-head">
        <h2 id="sessions-heading">Sessions</h2>
        <button type="button" onClick={onNew}>
          New session
        </button>
      </div>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <ul class="session-list" aria-label="Sessions of this user">
        {unsaved && (
          <li>
            <button type="button" class="session" aria-current="true" onClick={() => onOpen(activeId)}>
              <span class="session-id">{activeId}</span>
              <span class="muted">open, not listed yet</span>
            </button>
          </li>
        )}
        {sessions.map((session) => (
          <li key={session.session_id}>
            <button
              type="button"
              class="session"
              aria-current={session.session_id === activeId ? "true" : undefined}
              onClick={() => onOpen(session.session_id)}
            >
              <span class="session-title">{session.title || "Untitled session"}</span>
              <span class="session-id">{session.session_id}</span>
              <span class="muted">
                {session.turns !== null && session.turns !== undefined && `${session.turns} ${session.turns === 1 ? "turn" : "turns"}`}
                {session.updated_at ? ` · ${formatTime(session.updated_at)}` : ""}
              </span>
            </button>
          </li>
        ))}
      </ul>
      {!loading && !error && sessions.length === 0 && !unsaved && <p class="muted">No sessions yet.</p>}
      {loading && <p class="muted">Loading sessions…</p>}
      {cursor && (
        <button type="button" class="secondary" disabled={loading} onClick={() => void load(cursor)}>
          Load more sessions
        </button>
      )}
    </nav>
  );
}

export function Usage({ api, refresh }: { api: Api; refresh: number }) {
  const [usage, setUsage] = useState<UsageReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    api.usage(abort.signal).then(
      (report) => {
        setUsage(report);
        setError(null);
      },
      (err) => {
        if (!isAbort(err)) setError(messageOf(err));
      },
    );
    return () => abort.abort();
  }, [api, refresh]);
  const totals = usage?.totals;
  return (
    <section class="usage" aria-labelledby="usage-heading">
      <h2 id="usage-heading">Usage</h2>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {usage && totals && (
        <>
          <p class="muted">
            {usage.from} to {usage.to} (UTC)
          </p>
          <dl class="usage-list">
            <dt>Input tokens</dt>
            <dd>{formatCount(totals.input_tokens)}</dd>
            <dt>Output tokens</dt>
            <dd>{formatCount(totals.output_tokens)}</dd>
            <dt>Turns</dt>
            <dd>
              {formatCount(totals.turns)}
              {totals.failed_turns > 0 && ` (${formatCount(totals.failed_turns)} failed)`}
            </dd>
            <dt>Model calls</dt>
            <dd>{formatCount(totals.model_calls)}</dd>
            {totals.executions > 0 && (
              <>
                <dt>Sandbox commands</dt>
                <dd>
                  {formatCount(totals.executions)} ({totals.sandbox_seconds.toFixed(1)} s)
                </dd>
              </>
            )}
          </dl>
        </>
      )}
    </section>
  );
}

/** A workspace file as the page shows it; `pending` until its turn is committed. */
export interface WorkspaceFile {
  path: string;
  size: number;
  pending?: boolean;
}

export function Workspace({
  api,
  sessionId,
  files,
}: {
  api: Api;
  sessionId: string | null;
  files: WorkspaceFile[];
}) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);

  // The file route needs the bearer token, so the link's own navigation cannot fetch it: fetch
  // the bytes, then save them through an object URL under the file's name.
  const download = async (event: JSX.TargetedMouseEvent<HTMLAnchorElement>, file: WorkspaceFile) => {
    event.preventDefault();
    if (!sessionId || file.pending) return;
    setError(null);
    setBusy(file.path);
    try {
      const blob = await api.file(sessionId, file.path);
      const url = URL.createObjectURL(blob);
      const link = document.createElement("a");
      link.href = url;
      link.download = basename(file.path);
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      setError(`${workspaceRelative(file.path)}: ${messageOf(err)}`);
    } finally {
      setBusy(null);
    }
  };

  return (
    <div class="workspace">
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {!sessionId && <p class="muted">Open a session to see its files.</p>}
      {sessionId && files.length === 0 && <p class="muted">No files in this session's workspace.</p>}
      {files.length > 0 && (
        <ul class="file-list" aria-label="Workspace files">
          {files.map((file) => {
            const relative = workspaceRelative(file.path);
            return (
              <li key={file.path}>
                <a
                  href={sessionId ? fileRoute(sessionId, file.path) : "#"}
                  download={basename(file.path)}
                  aria-label={`Download ${relative}`}
                  aria-disabled={file.pending ? "true" : undefined}
                  onClick={(event) => void download(event, file)}
                >
                  {relative}
                </a>
                <span class="muted">
                  {" "}
                  {formatBytes(file.size)}
                  {file.pending && " · available when the turn ends"}
                  {busy === file.path && " · downloading…"}
                </span>
              </li>
            );
          })}
        </ul>
      )}
    </div>
  );
}

/** `refresh` changes after every turn: a turn may find skills synced meanwhile. */
export function Catalog({ api, refresh }: { api: Api; refresh: number }) {
  const [skills, setSkills] = useState<Skill[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [count, setCount] = useState<number | null>(null);
  const [skipped, setSkipped] = useState<SkippedFile[]>([]);
  const [skippedCount, setSkippedCount] = useState(0);
  const [basePrompt, setBasePrompt] = useState<BasePrompt | null | undefined>(undefined);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState("");
  const controller = useRef<AbortController | null>(null);

  const load = async (q: string, from: string | null) => {
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setLoading(true);
    setError(null);
    try {
      const page = await api.skills(from, q || null, abort.signal);
      setSkills((shown) => (from === null ? page.skills : [...shown, ...page.skills]));
      setCursor(page.next_cursor ?? null);
      setCount(page.count ?? null);
      setSkipped(page.skipped ?? []);
      setSkippedCount(page.skipped_count ?? (page.skipped ?? []).length);
      setBasePrompt(page.base_prompt ?? null);
    } catch (err) {
      if (!isAbort(err)) setError(messageOf(err));
    } finally {
      if (controller.current === abort) setLoading(false);
    }
  };

  // Searches as the author types, a moment after the last key.
  useEffect(() => {
    const wanted = search.trim();
    const timer = setTimeout(() => setQuery(wanted), wanted === query ? 0 : 250);
    return () => clearTimeout(timer);
  }, [search]);

  // Reloaded by hand too, for skills synced (`cargo xtask skills sync … --console`) meanwhile.
  const [reloads, setReloads] = useState(0);
  useEffect(() => {
    void load(query, null);
    return () => controller.current?.abort();
  }, [api, query, refresh, reloads]);

  return (
    <div class="catalog">
      <form
        role="search"
        aria-label="Skills"
        class="search"
        onSubmit={(event) => {
          event.preventDefault();
          setQuery(search.trim());
        }}
      >
        <label for="skill-search">Search skills</label>
        <input
          id="skill-search"
          type="search"
          value={search}
          onInput={(event) => setSearch(event.currentTarget.value)}
        />
      </form>
      <button type="button" class="secondary" disabled={loading} onClick={() => setReloads((count) => count + 1)}>
        Reload catalog
      </button>
      <p class="muted" role="status">
        {loading
          ? "Loading skills…"
          : query
            ? `${skills.length} ${skills.length === 1 ? "match" : "matches"} for “${query}”`
            : count !== null
              ? `${formatCount(count)} ${count === 1 ? "skill" : "skills"}`
              : ""}
      </p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <BasePromptStatus base={basePrompt} />
      <ul class="skill-list" aria-label={query ? "Matching skills" : "Skills"}>
        {skills.map((skill) => (
          <SkillItem key={skill.path} skill={skill} />
        ))}
      </ul>
      {cursor && (
        <button type="button" class="secondary" disabled={loading} onClick={() => void load(query, cursor)}>
          Load more skills
        </button>
      )}
      <section aria-labelledby="skipped-heading">
        <h3 id="skipped-heading">Skipped</h3>
        {skippedCount === 0 ? (
          <p class="muted">No SKILL.md was skipped.</p>
        ) : (
          <>
            {skippedCount > skipped.length && (
              <p class="muted">
                Showing {skipped.length} of {skippedCount}.
              </p>
            )}
            <ul class="skipped-list" aria-label="Skipped files">
              {skipped.map((file) => (
                <li key={file.file}>
                  <code>{file.file}</code>: {file.reason}
                </li>
              ))}
            </ul>
          </>
        )}
      </section>
    </div>
  );
}

function BasePromptStatus({ base }: { base: BasePrompt | null | undefined }) {
  if (base === undefined) return null;
  let text: ComponentChildren;
  if (base === null) text = "none: the built-in base prompt is used.";
  else if (base.usable) text = `${base.file} (${formatBytes(base.size)}) is in use.`;
  else text = `${base.file} is not usable${base.problem ? `: ${base.problem}` : ""}; the built-in base prompt is used.`;
  return (
    <p class={`base-prompt ${base && !base.usable ? "warning" : ""}`} role="note" aria-label="Base prompt status">
      Base prompt: {text}
    </p>
  );
}

function SkillItem({ skill }: { skill: Skill }) {
  const id = `skill-${skill.path.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  return (
    <li>
      <article class="skill" aria-labelledby={id}>
        <h3 id={id}>
          <code>{skill.path}</code>
        </h3>
        {skill.name && skill.name !== skill.path.split("/").pop() && <p class="muted">{skill.name}</p>}
        <p>{skill.description}</p>
        <p class="muted">
          Tools: {skill.tools === null ? "all" : skill.tools.length === 0 ? "none" : skill.tools.join(", ")}
          {skill.declared_tools && skill.declared_tools.length > 0 && ` (declared: ${skill.declared_tools.join(", ")})`}
        </p>
        {skill.warnings.length > 0 && (
          <ul class="warnings" aria-label={`Warnings for ${skill.path}`}>
            {skill.warnings.map((warning, index) => (
              <li key={index}>{warning}</li>
            ))}
          </ul>
        )}
      </article>
    </li>
  );
}

/** Two tabs (Workspace, Catalog) with arrow-key movement between them, as the ARIA pattern has it. */
export function SideTabs({ workspace, catalog }: { workspace: ComponentChildren; catalog: ComponentChildren }) {
  const [selected, setSelected] = useState<"workspace" | "catalog">("workspace");
  const tabs = ["workspace", "catalog"] as const;
  const names = { workspace: "Workspace", catalog: "Catalog" };
  const refs = useRef<Record<string, HTMLButtonElement | null>>({});
  const onKeyDown = (event: JSX.TargetedKeyboardEvent<HTMLDivElement>) => {
    const index = tabs.indexOf(selected);
    let next: number | null = null;
    if (event.key === "ArrowRight") next = (index + 1) % tabs.length;
    else if (event.key === "ArrowLeft") next = (index - 1 + tabs.length) % tabs.length;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = tabs.length - 1;
    if (next === null) return;
    event.preventDefault();
    setSelected(tabs[next]);
    refs.current[tabs[next]]?.focus();
  };
  return (
    <aside class="side" aria-label="Workspace and catalog">
      <div role="tablist" aria-label="Side panel" class="tabs" onKeyDown={onKeyDown}>
        {tabs.map((tab) => (
          <button
            key={tab}
            ref={(element) => {
              refs.current[tab] = element;
            }}
            type="button"
            role="tab"
            id={`tab-${tab}`}
            aria-selected={selected === tab}
            aria-controls={`panel-${tab}`}
            tabIndex={selected === tab ? 0 : -1}
            onClick={() => setSelected(tab)}
          >
            {names[tab]}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="panel-workspace" aria-labelledby="tab-workspace" hidden={selected !== "workspace"}>
        {workspace}
      </div>
      <div role="tabpanel" id="panel-catalog" aria-labelledby="tab-catalog" hidden={selected !== "catalog"}>
        {catalog}
      </div>
    </aside>
  );
}
