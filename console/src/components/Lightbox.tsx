// A shown image at full size, over the page: a modal dialog (Escape, the Close button or a click
// beside the image closes it), with a link that opens the image in a new tab.

import { useEffect, useRef } from "preact/hooks";

import type { ShownFile } from "../api";
import { shownDetails } from "../format";

export function Lightbox({ file, url, onClose }: { file: ShownFile; url: string; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (element && !element.open) element.showModal?.();
    return () => element?.close?.();
  }, []);
  const close = () => dialog.current?.close();
  return (
    <dialog
      ref={dialog}
      class="lightbox"
      aria-label={file.path}
      onClose={onClose}
      onClick={(event) => {
        if (event.target === event.currentTarget) close();
      }}
    >
      <figure>
        <img src={url} alt={file.path} />
        <figcaption>
          <code>{file.path}</code> <span class="muted">{shownDetails(file)}</span>
        </figcaption>
      </figure>
      <div class="lightbox-actions">
        <a href={url} target="_blank" rel="noopener">
          Open in a new tab
        </a>
        <button type="button" onClick={close} autofocus>
          Close
        </button>
      </div>
    </dialog>
  );
}
