// One turn of the conversation: the user's message (with its files), its timeline (subagents nested in it), the
// answer and its summary.

import type { Decision } from "../api";
import { openWork, turnBadge } from "../format";
import { entryKeys, type Turn } from "../turns";
import { ApprovalPanel } from "./ApprovalPanel";
import { SubagentRow } from "./SubagentRow";
import { TimelineRow } from "./TimelineRow";
import { TurnStats } from "./TurnStats";
import { UserMessage } from "./UserMessage";

export function TurnView({
  turn,
  onDecide = null,
  running: sending = false,
}: {
  turn: Turn;
  /** Given to the newest turn while calls of it wait for a decision. */
  onDecide?: ((decisions: Decision[]) => void) | null;
  /** Whether a turn of the session is running, so decisions cannot be sent twice. */
  running?: boolean;
}) {
  const label = turn.number === null ? "Turn" : `Turn ${turn.number}`;
  const headingId = `heading-${turn.key}`;
  const running = turn.status === "running";
  const keys = entryKeys(turn.timeline);
  const badge = turnBadge(turn);
  const open = openWork(turn);
  return (
    <article class={`turn turn-${turn.status}`} aria-labelledby={headingId}>
      <header class="turn-head">
        <h3 id={headingId} tabIndex={-1}>
          {label}
        </h3>
        <span class={`badge badge-${badge.tone}`}>{badge.text}</span>
      </header>
      <UserMessage turn={turn} />
      {turn.timeline.length > 0 && (
        <ol class="timeline" aria-label={`Timeline of ${label.toLowerCase()}`}>
          {turn.timeline.map((entry, index) =>
            entry.kind === "subagent" ? (
              <SubagentRow key={keys[index]} entry={entry} id={`${turn.key}-${keys[index]}`} open={open} />
            ) : (
              <TimelineRow key={keys[index]} entry={entry} id={`${turn.key}-${keys[index]}`} open={open} />
            ),
          )}
        </ol>
      )}
      {/* A failed turn that said nothing shows only its error. */}
      <div class="assistant-message" hidden={!running && turn.answer === ""}>
        <span class="who">Assistant</span>
        <div class="text answer" role="group" aria-label="Answer" aria-live="polite" aria-busy={running}>
          {turn.answer}
          {running && turn.answer === "" && <span class="muted">Working…</span>}
        </div>
      </div>
      {onDecide && turn.pending.length > 0 && (
        <ApprovalPanel
          key={turn.pending.map((call) => call.id).join(" ")}
          calls={turn.pending}
          id={turn.key}
          disabled={sending}
          onDecide={onDecide}
        />
      )}
      {turn.error && (
        <p role="alert" class="error">
          Error {turn.error.code}
          {turn.error.status ? ` (${turn.error.status})` : ""}: {turn.error.message}
        </p>
      )}
      {(turn.reply || turn.durationMs !== null) && <TurnStats turn={turn} />}
    </article>
  );
}
