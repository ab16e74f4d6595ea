// The console page: the header with the user switch, and the state of the open session (its
// turns, the running turn's stream, its workspace files) shared by the three columns.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import {
  Api,
  ApiError,
  getConfig,
  newSessionId,
  type ConsoleConfig,
  type Decision,
  type Skill,
  type TurnBody,
} from "../api";
import type { SentFile } from "../attachments";
import { messageOf } from "../errors";
import { SkillVersionsApi } from "../skillVersions";
import { useAbortableLoad } from "../hooks/useAbortableLoad";
import { ShownLoaderContext, useShownLoader } from "../hooks/useShownFiles";
import { turnsFromHistory } from "../history";
import { applyEvent, failTurn, mergeFiles, newTurn, type Turn, type TurnError } from "../turns";
import { Catalog } from "./Catalog";
import { Conversation } from "./Conversation";
import { Sessions } from "./Sessions";
import { SideTabs } from "./SideTabs";
import { Skills } from "./Skills";
import { Usage } from "./Usage";
import { Workspace, type WorkspaceFile } from "./Workspace";

/** The number the next turn of a session gets: one past the newest shown. */
function nextNumber(turns: Turn[]): number {
  return turns.reduce((max, turn) => Math.max(max, turn.number ?? 0), 0) + 1;
}

function turnError(err: unknown): TurnError {
  if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
  return { status: 0, code: "network", message: messageOf(err) };
}

export function App() {
  const [config, setConfig] = useState<ConsoleConfig | null>(null);
  const configLoad = useAbortableLoad();
  const [userId, setUserId] = useState("");
  const user = config?.users.find((candidate) => candidate.id === userId) ?? null;
  const token = user?.token ?? null;
  const api = useMemo(() => (token ? new Api(token) : null), [token]);
  const versions = useMemo(() => (token ? new SkillVersionsApi(token) : null), [token]);

  const [sessionId, setSessionId] = useState<string | null>(null);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [olderCursor, setOlderCursor] = useState<string | null>(null);
  const history = useAbortableLoad();
  const [historyCut, setHistoryCut] = useState(false);
  const [files, setFiles] = useState<WorkspaceFile[]>([]);
  const [running, setRunning] = useState(false);
  const [refresh, setRefresh] = useState(0);
  const [skills, setSkills] = useState<Skill[]>([]);
  const completion = useAbortableLoad();
  const [announcement, setAnnouncement] = useState("");
  const shownLoader = useShownLoader(api, sessionId);

  // The streamed turn keeps its own controller rather than useAbortableLoad: the controller is
  // also `send`'s guard against a second turn, a failure goes into the turn rather than an error
  // line, and only a turn that was not aborted refreshes the panels and the workspace after it.
  const stream = useRef<AbortController | null>(null);
  const liveTurns = useRef(0);
  // The session the page shows: answers that arrive late for another one are dropped.
  const shown = useRef<string | null>(null);

  useEffect(() => {
    void configLoad.run(
      async (signal) => {
        const loaded = await getConfig(signal);
        setConfig(loaded);
        setUserId(loaded.users[0]?.id ?? "");
      },
      (err) => `The console's configuration could not be loaded: ${messageOf(err)}`,
    );
  }, []);

  // Every skill of the catalog, for the slash-command completion.
  useEffect(() => {
    setSkills([]);
    if (!api) {
      completion.cancel();
      return;
    }
    // The catalog panel shows the error; the completion stays empty.
    void completion.run(async (signal) => setSkills(await api.allSkills(signal)), () => null);
  }, [api, refresh]);

  /** Closes the open session: its stream stops being read and nothing of it stays on the page. */
  const closeConversation = () => {
    stream.current?.abort();
    stream.current = null;
    history.cancel();
    shown.current = null;
    setSessionId(null);
    setTurns([]);
    setOlderCursor(null);
    setHistoryCut(false);
    setFiles([]);
    setRunning(false);
  };

  const selectUser = (id: string) => {
    if (id === userId) return;
    closeConversation();
    setUserId(id);
    const name = config?.users.find((candidate) => candidate.id === id)?.name ?? id;
    setAnnouncement(`Now acting as ${name}.`);
  };

  const loadHistory = async (id: string, cursor: string | null) => {
    if (!api) return;
    await history.run(
      async (signal) => {
        const view = await api.session(id, cursor, signal);
        if (shown.current !== id) return;
        const page = turnsFromHistory(view, "h");
        setTurns((current) => {
          const kept = cursor === null ? current.filter((turn) => turn.status !== "stored") : current;
          const seen = new Set(kept.map((turn) => turn.key));
          return [...page.filter((turn) => !seen.has(turn.key)), ...kept];
        });
        setOlderCursor(view.next_cursor ?? null);
        setHistoryCut(view.truncated === true);
        if (cursor === null) setFiles(view.workspace ?? []);
      },
      (err) => {
        if (shown.current !== id) return null;
        // A session id nobody has sent a turn to yet is a new, empty session.
        if (err instanceof ApiError && err.status === 404 && cursor === null) {
          setOlderCursor(null);
          setFiles([]);
          return null;
        }
        return `The session could not be loaded: ${messageOf(err)}`;
      },
    );
  };

  const openSession = (id: string) => {
    closeConversation();
    shown.current = id;
    setSessionId(id);
    void loadHistory(id, null);
  };

  const newSession = () => {
    closeConversation();
    const id = newSessionId();
    shown.current = id;
    setSessionId(id);
    setAnnouncement(`New session ${id}.`);
    document.getElementById("message")?.focus();
  };

  /** The workspace as committed: files a failed turn wrote are gone, a finished one's are ready. */
  const refreshWorkspace = async (id: string) => {
    if (!api) return;
    try {
      const view = await api.session(id, null, undefined, 1);
      if (shown.current === id) setFiles(view.workspace ?? []);
    } catch (err) {
      if (shown.current === id && err instanceof ApiError && err.status === 404) setFiles([]);
    }
  };

  /** Decisions on the calls the newest turn waits on: the turn goes on as a new one of the page. */
  const decide = (decisions: Decision[]) => {
    if (!api || stream.current) return;
    const counts = new Map<string, number>();
    for (const decision of decisions) counts.set(decision.decision, (counts.get(decision.decision) ?? 0) + 1);
    const said = [...counts].map(([decision, count]) => `${decision}${count > 1 ? ` ×${count}` : ""}`).join(", ");
    // The calls are answered: the paused turn stops offering them, unless the decisions fail.
    const paused = turns.find((turn) => turn.pending.length > 0);
    const offer = (pending: Turn["pending"]) =>
      setTurns((current) => current.map((turn) => (turn.key === paused?.key ? { ...turn, pending } : turn)));
    offer([]);
    void send({ decisions }, `Decisions: ${said}`).then((ok) => {
      if (!ok && paused) offer(paused.pending);
    });
  };

  /** The open session's id; with none open, a new session is started (its first upload or turn names it). */
  const ensureSession = (): string => {
    if (shown.current) return shown.current;
    const id = newSessionId();
    shown.current = id;
    setSessionId(id);
    return id;
  };

  /** Runs one turn on the page, showing the files it attached as sent; resolves to whether it completed. */
  const send = async (body: TurnBody, message: string, attached: SentFile[] = []): Promise<boolean> => {
    if (!api || stream.current) return false;
    const id = ensureSession();
    const key = `live-${++liveTurns.current}`;
    const startedAt = performance.now();
    setTurns((current) => [
      ...current,
      { ...newTurn(key, nextNumber(current), message, startedAt), attachments: attached },
    ]);
    const update = (change: (turn: Turn) => Turn) =>
      setTurns((current) => current.map((turn) => (turn.key === key ? change(turn) : turn)));
    const abort = new AbortController();
    stream.current = abort;
    setRunning(true);
    setAnnouncement("");
    let ended = false;
    let completed = false;
    try {
      await api.sendTurn(
        id,
        body,
        (event) => {
          if (abort.signal.aborted) return;
          const now = performance.now();
          update((turn) => applyEvent(turn, event, now));
          if (event.event === "file.written") {
            try {
              const data = JSON.parse(event.data) as { path?: unknown; size?: unknown };
              if (typeof data.path === "string") {
                const size = typeof data.size === "number" ? data.size : 0;
                setFiles((current) => mergeFiles(current, [{ path: data.path as string, size, pending: true }]));
              }
            } catch {
              // A malformed event only misses its workspace row; the timeline shows what it could read.
            }
          } else if (event.event === "turn.completed") {
            ended = true;
            completed = true;
            setAnnouncement("The turn completed.");
          } else if (event.event === "turn.failed") {
            ended = true;
            setAnnouncement("The turn failed.");
          }
        },
        abort.signal,
      );
      if (!ended && !abort.signal.aborted) {
        update((turn) =>
          failTurn(
            turn,
            { status: 0, code: "stream_ended", message: "the stream ended before the turn finished" },
            performance.now(),
          ),
        );
      }
    } catch (err) {
      if (!abort.signal.aborted) update((turn) => failTurn(turn, turnError(err), performance.now()));
    } finally {
      if (stream.current === abort) {
        stream.current = null;
        setRunning(false);
      }
      if (!abort.signal.aborted) {
        setRefresh((count) => count + 1);
        void refreshWorkspace(id);
      }
    }
    return completed;
  };

  if (configLoad.error) {
    return (
      <main class="fatal">
        <h1>Skill console</h1>
        <p role="alert" class="error">
          {configLoad.error}
        </p>
      </main>
    );
  }
  if (!config || !api || !versions) {
    return (
      <main class="fatal">
        <h1>Skill console</h1>
        <p role="status">Loading…</p>
      </main>
    );
  }

  return (
    <div class="app">
      <header class="top">
        <h1>Skill console</h1>
        <p class="model">
          <span class="muted">Model:</span> <span class="model-name">{config.model}</span>
        </p>
        <p class="sandbox">
          <span class="muted">Sandbox:</span> {config.sandbox ? "on" : "off"}
        </p>
        <div class="user-switch">
          <label for="user">User</label>
          <select id="user" value={userId} onChange={(event) => selectUser(event.currentTarget.value)}>
            {config.users.map((candidate) => (
              <option key={candidate.id} value={candidate.id}>
                {candidate.name}
              </option>
            ))}
          </select>
        </div>
      </header>
      {/* Each panel that loads data is keyed by the user, so switching users starts it afresh. */}
      <div class="layout">
        <div class="left">
          <Sessions
            key={userId}
            api={api}
            refresh={refresh}
            activeId={sessionId}
            onOpen={openSession}
            onNew={newSession}
          />
          <Usage key={userId} api={api} refresh={refresh} />
        </div>
        <ShownLoaderContext.Provider value={shownLoader}>
          <Conversation
            key={userId}
            api={api}
            sessionId={sessionId}
            ensureSession={ensureSession}
            turns={turns}
            olderCursor={olderCursor}
            loading={history.loading}
            error={history.error}
            cut={historyCut}
            running={running}
            skills={skills}
            onOlder={() => sessionId && void loadHistory(sessionId, olderCursor)}
            onSend={(message, attachments, sent) =>
              void send(attachments.length > 0 ? { message, attachments } : { message }, message, sent)
            }
            onDecide={decide}
          />
        </ShownLoaderContext.Provider>
        <SideTabs
          tabs={[
            {
              id: "workspace",
              name: "Workspace",
              panel: () => <Workspace key={userId} api={api} sessionId={sessionId} files={files} />,
            },
            { id: "catalog", name: "Catalog", panel: () => <Catalog key={userId} api={api} refresh={refresh} /> },
            {
              id: "skills",
              name: "Skills",
              panel: (shown) => (
                <Skills
                  key={userId}
                  api={api}
                  versions={versions}
                  shown={shown}
                  onChanged={() => setRefresh((count) => count + 1)}
                />
              ),
            },
          ]}
        />
      </div>
      <div role="status" class="visually-hidden">
        {announcement}
      </div>
    </div>
  );
}
