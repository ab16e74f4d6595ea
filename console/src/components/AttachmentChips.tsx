// The composer's pending attachments, one chip each: a thumbnail for an image (or an icon), the
// name and size, how its upload stands (progress, ready, or the API's message) and a remove button.

import { useState } from "preact/hooks";

import { attachmentStatus, type PendingAttachment } from "../attachments";
import { formatBytes } from "../format";
import { FileIcon } from "./ShownFile";

/** An image's thumbnail from its own bytes; an icon for other files, and for bytes no image decodes from. */
function ChipPreview({ item }: { item: PendingAttachment }) {
  const [broken, setBroken] = useState(false);
  return (
    <span class="chip-preview">
      {item.preview && !broken ? (
        <img src={item.preview} alt={`Preview of ${item.name}`} onError={() => setBroken(true)} />
      ) : (
        <FileIcon kind={item.kind === "image" && broken ? "other" : item.kind} />
      )}
    </span>
  );
}

export function AttachmentChips({ items, onRemove }: { items: PendingAttachment[]; onRemove: (id: string) => void }) {
  if (items.length === 0) return null;
  return (
    <ul class="attachment-chips" aria-label="Files to attach">
      {items.map((item) => (
        <li key={item.id} class={`chip chip-${item.state}`}>
          <ChipPreview item={item} />
          <span class="chip-body">
            <span class="chip-name">{item.name}</span>
            <span class="chip-meta">
              {formatBytes(item.size)} · <span class="chip-state">{item.state === "failed" ? "failed" : attachmentStatus(item)}</span>
            </span>
            {item.state === "uploading" && (
              <progress max={1} value={item.progress} aria-label={`Uploading ${item.name}`} />
            )}
            {item.state === "failed" && (
              <span class="chip-error" role="alert">
                {item.error}
              </span>
            )}
          </span>
          <button type="button" class="chip-remove" aria-label={`Remove ${item.name}`} onClick={() => onRemove(item.id)}>
            ×
          </button>
        </li>
      ))}
    </ul>
  );
}
