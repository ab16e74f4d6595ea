// The composer's attachments: files added by the picker, a drop or a paste, each uploaded to the
// session as soon as it is added (with its progress, and the API's message when refused), an
// image's thumbnail from an object URL, all let go when sent, removed or the session changes.

import { useEffect, useRef, useState } from "preact/hooks";

import type { Api, AttachmentRef } from "../api";
import {
  addFiles,
  failed,
  fileKind,
  MAX_ATTACHMENTS,
  pastedName,
  progressed,
  readyRefs,
  removeAttachment,
  sentFiles,
  uploaded,
  uploading,
  type PendingAttachment,
  type SentFile,
} from "../attachments";
import { isAbort, messageOf } from "../errors";

export interface Attachments {
  items: PendingAttachment[];
  /** A line about files that could not be added (over the ten a message takes). */
  notice: string | null;
  /** Whether an upload is under way: the message waits for it. */
  uploading: boolean;
  /** What the turn's body attaches, and how the conversation shows it. */
  refs: AttachmentRef[];
  sent: SentFile[];
  /** Adds files; a pasted image is named by the time it was pasted. */
  add: (files: File[], how?: "pick" | "drop" | "paste") => void;
  remove: (id: string) => void;
  /** Forgets every attachment, once the message carrying them was sent. */
  clear: () => void;
}

export function useAttachments(api: Api, sessionId: string | null, ensureSession: () => string): Attachments {
  const [items, setItems] = useState<PendingAttachment[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  // The list as the latest change left it: uploads end after renders, and read it then.
  const current = useRef<PendingAttachment[]>([]);
  const uploads = useRef(new Map<string, AbortController>());
  const made = useRef(0);

  const change = (next: (list: PendingAttachment[]) => PendingAttachment[]) => {
    current.current = next(current.current);
    setItems(current.current);
  };

  /** Stops the uploads of these attachments and lets their thumbnails go. */
  const release = (gone: PendingAttachment[]) => {
    for (const item of gone) {
      uploads.current.get(item.id)?.abort();
      uploads.current.delete(item.id);
      if (item.preview) URL.revokeObjectURL(item.preview);
    }
  };

  // An upload belongs to its session: opening another session (or none) drops the others'.
  useEffect(() => {
    const gone = current.current.filter((item) => item.sessionId !== sessionId);
    if (gone.length === 0) return;
    release(gone);
    change((list) => list.filter((item) => item.sessionId === sessionId));
  }, [sessionId]);

  useEffect(() => () => release(current.current), []);

  const add = (files: File[], how: "pick" | "drop" | "paste" = "pick") => {
    if (files.length === 0) return;
    const session = ensureSession();
    const incoming = files.map((file) => ({
      name: how === "paste" && fileKind(file.type, file.name) === "image" ? pastedName(new Date(), file.type) : file.name,
      size: file.size,
      type: file.type,
    }));
    const { list, added, refused } = addFiles(current.current, incoming, session, () => `attachment-${++made.current}`);
    setNotice(refused > 0 ? `A message takes at most ${MAX_ATTACHMENTS} files: ${refused} not added.` : null);
    const previews = new Map(
      added.flatMap((item, index) => (item.kind === "image" ? [[item.id, URL.createObjectURL(files[index])] as const] : [])),
    );
    change(() => list.map((item) => (previews.has(item.id) ? { ...item, preview: previews.get(item.id) ?? null } : item)));
    added.forEach((item, index) => {
      const controller = new AbortController();
      uploads.current.set(item.id, controller);
      api
        .upload(session, item.name, files[index], (sent) => change((now) => progressed(now, item.id, sent)), controller.signal)
        .then((result) => change((now) => uploaded(now, item.id, result)))
        .catch((err) => {
          if (!isAbort(err)) change((now) => failed(now, item.id, messageOf(err)));
        })
        .finally(() => uploads.current.delete(item.id));
    });
  };

  const remove = (id: string) => {
    release(current.current.filter((item) => item.id === id));
    change((list) => removeAttachment(list, id));
    setNotice(null);
  };

  const clear = () => {
    release(current.current);
    change(() => []);
    setNotice(null);
  };

  return {
    items,
    notice,
    uploading: uploading(items),
    refs: readyRefs(items),
    sent: sentFiles(items),
    add,
    remove,
    clear,
  };
}
