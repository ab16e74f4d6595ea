// The message box under the conversation, with its slash-command completion of skill names and
// its attachments (the file picker, a paste; a drop lands on the conversation around it).

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { JSX } from "preact";

import type { AttachmentRef, Skill } from "../api";
import type { SentFile } from "../attachments";
import { insertSkill, matchSkills, slashQuery } from "../complete";
import type { Attachments } from "../hooks/useAttachments";
import { AttachmentChips } from "./AttachmentChips";

export interface ComposerProps {
  running: boolean;
  skills: Skill[];
  attachments: Attachments;
  onSend: (message: string, attachments: AttachmentRef[], sent: SentFile[]) => void;
}

/** The files a paste carries, when it carries any. */
function pastedFiles(data: DataTransfer | null): File[] {
  if (!data) return [];
  const files = [...data.files];
  if (files.length > 0) return files;
  return [...data.items].flatMap((item) => {
    const file = item.kind === "file" ? item.getAsFile() : null;
    return file ? [file] : [];
  });
}

export function Composer({ running, skills, attachments, onSend }: ComposerProps) {
  const [value, setValue] = useState("");
  const [caret, setCaret] = useState(0);
  const [active, setActive] = useState(0);
  const [dismissed, setDismissed] = useState<string | null>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  const picker = useRef<HTMLInputElement>(null);

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

  // A message needs its text or a file, and waits for its uploads: what it attaches must be stored
  // first.
  const blocked = running || attachments.uploading || (value.trim() === "" && attachments.refs.length === 0);

  const send = () => {
    if (blocked) return;
    onSend(value, attachments.refs, attachments.sent);
    attachments.clear();
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
          onPaste={(event) => {
            const files = pastedFiles(event.clipboardData);
            if (files.length === 0) return;
            // An image copied with text (from a page) pastes its text too; a lone image only attaches.
            if (!event.clipboardData?.types.includes("text/plain")) event.preventDefault();
            attachments.add(files, "paste");
          }}
          onKeyUp={track}
          onClick={track}
          onSelect={track}
        />
      </div>
      <AttachmentChips items={attachments.items} onRemove={attachments.remove} />
      {attachments.notice && (
        <p role="alert" class="error">
          {attachments.notice}
        </p>
      )}
      <div class="composer-actions">
        <p id="message-hint" class="muted">
          Enter sends, Shift+Enter adds a line. Start with / to pick a skill (arrow keys, then Enter or Tab). Attach
          files with the button, by dropping them on the conversation or by pasting an image.
        </p>
        <input
          ref={picker}
          type="file"
          multiple
          hidden
          onChange={(event) => {
            const files = [...(event.currentTarget.files ?? [])];
            // The same file can be picked again after it was removed.
            event.currentTarget.value = "";
            attachments.add(files, "pick");
          }}
        />
        <button type="button" class="secondary" onClick={() => picker.current?.click()}>
          Attach files
        </button>
        <button type="submit" disabled={blocked} aria-describedby={attachments.uploading ? "upload-wait" : undefined}>
          Send
        </button>
        {attachments.uploading && (
          <span id="upload-wait" class="visually-hidden">
            Waiting for the uploads to finish.
          </span>
        )}
      </div>
    </form>
  );
}
