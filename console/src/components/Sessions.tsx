// The left column's list of the user's sessions, with "New session" and "Load more sessions".

import { useEffect, useState } from "preact/hooks";

import type { Api, SessionSummary } from "../api";
import { formatTime } from "../format";
import { useAbortableLoad } from "../hooks/useAbortableLoad";

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
  const { loading, error, run } = useAbortableLoad();

  const load = (from: string | null) =>
    run(async (signal) => {
      const page = await api.sessions(from, signal);
      setSessions((shown) => {
        if (from === null) return page.sessions;
        const seen = new Set(shown.map((session) => session.session_id));
        return [...shown, ...page.sessions.filter((session) => !seen.has(session.session_id))];
      });
      setCursor(page.next_cursor ?? null);
    });

  useEffect(() => {
    void load(null);
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
