// The message box under the conversation, with its slash-command completion of skill names.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { JSX } from "preact";

import type { Skill } from "../api";
import { insertSkill, matchSkills, slashQuery } from "../complete";

export interface ComposerProps {
  running: boolean;
  skills: Skill[];
  onSend: (message: string) => void;
}

export function Composer({ running, skills, onSend }: ComposerProps) {
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
