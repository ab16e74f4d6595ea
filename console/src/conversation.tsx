// The conversation column: the open session's turns with their timelines, the "Older turns"
// pager, and the composer with its slash-command completion.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { JSX } from "preact";

import type { Skill } from "./api";
import { insertSkill, matchSkills, slashQuery } from "./complete";
import { entryTitle, formatArguments, formatBytes, formatCount, formatDuration } from "./format";
import type { TimelineEntry, Turn } from "./turns";

export interface ConversationProps {
  sessionId: string | null;
  turns: Turn[];
  olderCursor: string | null;
  loading: boolean;
  error: string | null;
  /** The last page read was too large to show whole: some of its messages were left out. */
  cut: boolean;
  running: boolean;
  skills: Skill[];
  onOlder: () => void;
  onSend: (message: string) => void;
}

export function Conversation(props: ConversationProps) {
  const { sessionId, turns } = props;
  const end = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLDivElement>(null);
  const pagingByKeyboard = useRef(false);
  const last = turns[turns.length - 1];
  // The "Older turns" button goes away on the first page: its focus moves to the oldest turn.
  useEffect(() => {
    if (props.olderCursor === null && pagingByKeyboard.current) {
      pagingByKeyboard.current = false;
      list.current?.querySelector<HTMLElement>("article h3")?.focus();
    }
  }, [props.olderCursor]);
  // Keep the newest turn in view as it grows, unless older turns were just added above it.
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "end" });
  }, [last?.key, last?.answer.length, last?.timeline.length, last?.status]);
  return (
    <main class="conversation" aria-labelledby="conversation-heading">
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
          <TurnView key={turn.key} turn={turn} />
        ))}
        <div ref={end} />
      </div>
      <Composer running={props.running} skills={props.skills} onSend={props.onSend} />
    </main>
  );
}

function TurnView({ turn }: { turn: Turn }) {
  const label = turn.number === null ? "Turn" : `Turn ${turn.number}`;
  const headingId = `heading-${turn.key}`;
  const running = turn.status === "running";
  return (
    <article class={`turn turn-${turn.status}`} aria-labelledby={headingId}>
      <header class="turn-head">
        <h3 id={headingId} tabIndex={-1}>
          {label}
        </h3>
        <span class={`badge badge-${turn.status}`}>
          {turn.status === "stored" ? "saved" : turn.status}
        </span>
      </header>
      <div class="user-message">
        <span class="who">You</span>
        <p class="text">{turn.message}</p>
      </div>
      {turn.timeline.length > 0 && (
        <ol class="timeline" aria-label={`Timeline of ${label.toLowerCase()}`}>
          {turn.timeline.map((entry, index) => (
            <TimelineRow key={index} entry={entry} id={`${turn.key}-${index}`} />
          ))}
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

function TurnStats({ turn }: { turn: Turn }) {
  const reply = turn.reply;
  const parts: string[] = [];
  if (reply) {
    parts.push(
      `${formatCount(reply.usage?.input_tokens ?? 0)} input / ${formatCount(reply.usage?.output_tokens ?? 0)} output tokens (as the model reported them, all calls)`,
    );
    parts.push(`${reply.steps} ${reply.steps === 1 ? "step" : "steps"}`);
    parts.push(`ending ${reply.ending}`);
    if (reply.current_skill) parts.push(`skill ${reply.current_skill}`);
    if (reply.refused_tool_calls > 0) parts.push(`${reply.refused_tool_calls} refused tool ${reply.refused_tool_calls === 1 ? "call" : "calls"}`);
    if (reply.executions) parts.push(`${reply.executions} sandbox ${reply.executions === 1 ? "command" : "commands"}`);
  }
  if (turn.durationMs !== null) parts.push(formatDuration(turn.durationMs));
  return (
    <p class="turn-stats" role="note" aria-label="Turn summary">
      {parts.join(" · ")}
    </p>
  );
}

function TimelineRow({ entry, id }: { entry: TimelineEntry; id: string }) {
  const [open, setOpen] = useState(false);
  if (entry.kind !== "tool") {
    return (
      <li class={`row row-${entry.kind}`}>
        <span class="row-title">{entryTitle(entry)}</span>
        {entry.kind === "model" && (
          <span class="row-detail">
            {entry.promptTokens !== null && (
              <span title="The runtime's own estimate of this request, made before sending it to keep it inside the model's context window; the turn's summary shows the tokens the model reported.">
                {`≈${formatCount(entry.promptTokens)} prompt tokens (estimated before sending)`}
              </span>
            )}
            {entry.promptTokens !== null && (entry.tools.length > 0 || entry.toolCount !== null) && " · "}
            {entry.tools.length > 0 && `tools: ${entry.tools.join(", ")}`}
            {entry.toolCount !== null && `${entry.toolCount} ${entry.toolCount === 1 ? "tool" : "tools"}`}
          </span>
        )}
      </li>
    );
  }
  const result = entry.result;
  const state = result === null ? "running" : result.ok ? "ok" : "error";
  const detailsId = `details-${id}`;
  return (
    <li class={`row row-tool tool-${state}`}>
      <button
        type="button"
        class="disclosure"
        aria-expanded={open}
        aria-controls={detailsId}
        onClick={() => setOpen(!open)}
      >
        {entryTitle(entry)}
      </button>{" "}
      <span class={`badge badge-${state}`}>{state === "running" ? "running" : state}</span>
      <div id={detailsId} class="tool-details" hidden={!open}>
        <h4>Arguments</h4>
        <pre role="group" aria-label="Arguments" tabIndex={0}>{entry.hasArguments ? formatArguments(entry.arguments) : "(not sent by the server)"}</pre>
        <h4>Result</h4>
        {result === null ? (
          <p class="muted">No result yet.</p>
        ) : (
          <>
            <p class="muted">
              {result.ok ? "ok" : "error"}
              {result.bytes !== null && ` · ${formatBytes(result.bytes)}`}
              {result.truncated && " · truncated"}
            </p>
            <pre role="group" aria-label="Result" tabIndex={0}>{result.content ?? result.summary}</pre>
          </>
        )}
      </div>
    </li>
  );
}

interface ComposerProps {
  running: boolean;
  skills: Skill[];
  onSend: (message: string) => void;
}

function Composer({ running, skills, onSend }: ComposerProps) {
  const [value, setValue] = useState("");
  const [caret, setCaret] = useState(0);
  const [active, setActive] = useState(0);
  const [dismissed, setDismissed] = useState<string | null>(null);
  const input = useRef<HTMLTextAreaElement>(null);

  const query = slashQuery(value, caret);
  const matches = useMemo(() => (query === null ? [] : matchSkills(skills, query)), [skills, query]);
  const open = query !== null && query !== dismissed && matches.length > 0;
  const activeIndex = Math.min(active, Math.max(0, matches.length - 1));

  // A new query starts at the first match.
  useEffect(() => setActive(0), [query]);

  const track = (event: JSX.TargetedEvent<HTMLTextAreaElement>) => {
    setCaret(event.currentTarget.selectionStart ?? 0);
  };

  const pick = (skill: Skill) => {
    const next = insertSkill(value, skill.path);
    setValue(next.value);
    setCaret(next.caret);
    setDismissed(null);
    requestAnimationFrame(() => {
      const field = input.current;
      if (!field) return;
      field.focus();
      field.setSelectionRange(next.caret, next.caret);
    });
  };

  const send = () => {
    if (running || value.trim() === "") return;
    onSend(value);
    setValue("");
    setCaret(0);
    setDismissed(null);
  };

  const onKeyDown = (event: JSX.TargetedKeyboardEvent<HTMLTextAreaElement>) => {
    if (event.isComposing) return;
    if (open) {
      if (event.key === "ArrowDown") {
        event.preventDefault();
        setActive((activeIndex + 1) % matches.length);
        return;
      }
      if (event.key === "ArrowUp") {
        event.preventDefault();
        setActive((activeIndex - 1 + matches.length) % matches.length);
        return;
      }
      if ((event.key === "Enter" && !event.shiftKey) || (event.key === "Tab" && !event.shiftKey)) {
        event.preventDefault();
        pick(matches[activeIndex]);
        return;
      }
      if (event.key === "Escape") {
        event.preventDefault();
        setDismissed(query);
        return;
      }
    }
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      send();
    }
  };

  const optionId = (index: number) => `skill-option-${index}`;
  return (
    <form
      class="composer"
      aria-label="Send a message"
      onSubmit={(event) => {
        event.preventDefault();
        send();
      }}
    >
      <label for="message">Message</label>
      <div class="composer-field">
        {open && (
          <ul id="skill-suggestions" class="suggestions" role="listbox" aria-label="Skill suggestions">
            {matches.map((skill, index) => (
              <li
                key={skill.path}
                id={optionId(index)}
                role="option"
                aria-selected={index === activeIndex}
                class={index === activeIndex ? "active" : ""}
                // The field keeps the focus: a click picks without blurring it.
                onMouseDown={(event) => event.preventDefault()}
                onClick={() => pick(skill)}
              >
                <span class="option-path">/{skill.path}</span>
                {skill.description && <span class="option-description">{skill.description}</span>}
              </li>
            ))}
          </ul>
        )}
        <textarea
          id="message"
          ref={input}
          rows={3}
          value={value}
          aria-describedby="message-hint"
          aria-autocomplete="list"
          aria-controls={open ? "skill-suggestions" : undefined}
          aria-activedescendant={open ? optionId(activeIndex) : undefined}
          onInput={(event) => {
            setValue(event.currentTarget.value);
            track(event);
          }}
          onKeyDown={onKeyDown}
          onKeyUp={track}
          onClick={track}
          onSelect={track}
        />
      </div>
      <div class="composer-actions">
        <p id="message-hint" class="muted">
          Enter sends, Shift+Enter adds a line. Start with / to pick a skill (arrow keys, then Enter or Tab).
        </p>
        <button type="submit" disabled={running || value.trim() === ""}>
          Send
        </button>
      </div>
    </form>
  );
}
