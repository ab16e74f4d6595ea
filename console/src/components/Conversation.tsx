// The conversation column: the open session's turns, the "Older turns" pager and the composer,
// whose attachments files dropped anywhere on the column join.

import { useEffect, useRef, useState } from "preact/hooks";
import type { JSX } from "preact";

import type { Api, AttachmentRef, Decision, Skill } from "../api";
import type { SentFile } from "../attachments";
import { useAttachments } from "../hooks/useAttachments";
import { timelineSize, type Turn } from "../turns";
import { Composer } from "./Composer";
import { TurnView } from "./TurnView";

export interface ConversationProps {
  api: Api;
  sessionId: string | null;
  /** The open session's id, starting a new session when none is open (an upload needs one). */
  ensureSession: () => string;
  turns: Turn[];
  olderCursor: string | null;
  loading: boolean;
  error: string | null;
  /** The last page read was too large to show whole: some of its messages were left out. */
  cut: boolean;
  running: boolean;
  skills: Skill[];
  onOlder: () => void;
  onSend: (message: string, attachments: AttachmentRef[], sent: SentFile[]) => void;
  /** Sends a person's decisions on the calls the newest turn waits on. */
  onDecide: (decisions: Decision[]) => void;
}

export function Conversation(props: ConversationProps) {
  const { sessionId, turns } = props;
  const end = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLDivElement>(null);
  const pagingByKeyboard = useRef(false);
  const last = turns[turns.length - 1];
  const attachments = useAttachments(props.api, sessionId, props.ensureSession);
  const [dragging, setDragging] = useState(false);
  const carriesFiles = (event: JSX.TargetedDragEvent<HTMLElement>) => event.dataTransfer?.types.includes("Files") ?? false;
  // The "Older turns" button goes away on the first page: its focus moves to the oldest turn.
  useEffect(() => {
    if (props.olderCursor === null && pagingByKeyboard.current) {
      pagingByKeyboard.current = false;
      list.current?.querySelector<HTMLElement>("article h3")?.focus();
    }
  }, [props.olderCursor]);
  // Keep the newest turn in view as it grows (its subagents' rows too), unless older turns were just added above it.
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "end" });
  }, [last?.key, last?.answer.length, last && timelineSize(last.timeline), last?.status]);
  return (
    <main
      class={dragging ? "conversation dragging" : "conversation"}
      aria-labelledby="conversation-heading"
      onDragOver={(event) => {
        if (!carriesFiles(event)) return;
        event.preventDefault();
        if (event.dataTransfer) event.dataTransfer.dropEffect = "copy";
        setDragging(true);
      }}
      onDragLeave={(event) => {
        // Leaving for one of its own children is not leaving the column.
        const to = event.relatedTarget;
        if (!(to instanceof Node) || !event.currentTarget.contains(to)) setDragging(false);
      }}
      onDrop={(event) => {
        setDragging(false);
        const files = [...(event.dataTransfer?.files ?? [])];
        if (files.length === 0) return;
        event.preventDefault();
        attachments.add(files, "drop");
      }}
    >
      {dragging && (
        <p class="drop-hint" aria-hidden="true">
          Drop files to attach them to your next message
        </p>
      )}
      <div class="panel-head">
        <h2 id="conversation-heading">Conversation</h2>
        <p class="muted session-line">
          {sessionId ? (
            <>
              Session <code>{sessionId}</code>
            </>
          ) : (
            "No session open: sending a message starts a new one."
          )}
        </p>
      </div>
      <div class="turns" ref={list}>
        {props.olderCursor && (
          <button
            type="button"
            class="secondary older"
            // Not disabled while loading: a disabled button would drop the keyboard focus.
            aria-busy={props.loading}
            onClick={(event) => {
              if (props.loading) return;
              pagingByKeyboard.current = document.activeElement === event.currentTarget;
              props.onOlder();
            }}
          >
            Older turns
          </button>
        )}
        {props.loading && <p class="muted">Loading…</p>}
        {props.cut && <p class="muted">Some messages of the last page read were too large to show and were left out.</p>}
        {props.error && (
          <p role="alert" class="error">
            {props.error}
          </p>
        )}
        {sessionId && turns.length === 0 && !props.loading && !props.error && (
          <p class="muted">No turns yet. Write a message below; start it with / to force a skill.</p>
        )}
        {turns.map((turn) => (
          <TurnView
            key={turn.key}
            turn={turn}
            onDecide={turn === last && turn.pending.length > 0 ? props.onDecide : null}
            running={props.running}
          />
        ))}
        <div ref={end} />
      </div>
      <Composer running={props.running} skills={props.skills} attachments={attachments} onSend={props.onSend} />
    </main>
  );
}
