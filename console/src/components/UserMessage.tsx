// The user's message of a turn: the person's text, the files it attached (thumbnails of what the
// model was shown), and, for a stored turn, the runtime's note naming them as the model read it.

import { messageFiles, splitAttachedNote } from "../shown";
import type { Turn } from "../turns";
import { SentFileChip, ShownFileView } from "./ShownFile";

export function UserMessage({ turn }: { turn: Turn }) {
  const { text, note } = splitAttachedNote(turn.message);
  const files = messageFiles(turn.attachments, turn.files);
  return (
    <div class="user-message">
      <span class="who">You</span>
      {(text !== "" || files.length === 0) && <p class="text">{text}</p>}
      {files.length > 0 && (
        <ul class="shown-files" aria-label="Attached files">
          {files.map((file, index) => (
            <li key={`${file.path}-${index}`}>
              {file.shown ? <ShownFileView file={file.shown} /> : file.sent && <SentFileChip file={file.sent} />}
            </li>
          ))}
        </ul>
      )}
      {note && (
        <details class="attached-note">
          <summary>What the model was told about the attachments</summary>
          <p class="text">{note}</p>
        </details>
      )}
    </div>
  );
}
