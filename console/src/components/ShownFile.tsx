// A file the model was shown, in the conversation: an image's thumbnail (its bytes as shown,
// fetched from `/shown/{sha256}`) that opens full size, or a PDF's chip that opens it in a new tab.

import { useContext, useEffect, useState } from "preact/hooks";

import type { ShownFile } from "../api";
import type { SentFile } from "../attachments";
import { fileKind } from "../attachments";
import { messageOf } from "../errors";
import { basename, formatBytes, shownDetails } from "../format";
import { ShownLoaderContext } from "../hooks/useShownFiles";
import { isImage, isPdf } from "../shown";
import { Lightbox } from "./Lightbox";

/** The object URL of a shown file's bytes once loaded, or why they could not be. */
function useShownUrl(sha256: string, wanted = true): { url: string | null; error: string | null } {
  const load = useContext(ShownLoaderContext);
  const [state, setState] = useState<{ url: string | null; error: string | null }>({ url: null, error: null });
  useEffect(() => {
    if (!load || !wanted) return;
    let live = true;
    setState({ url: null, error: null });
    load(sha256).then(
      (url) => live && setState({ url, error: null }),
      (err) => live && setState({ url: null, error: messageOf(err) }),
    );
    return () => {
      live = false;
    };
  }, [load, sha256, wanted]);
  return state;
}

function ShownImage({ file }: { file: ShownFile }) {
  const { url, error } = useShownUrl(file.sha256);
  const [open, setOpen] = useState(false);
  return (
    <figure class="shown shown-image">
      <button
        type="button"
        class="thumb"
        aria-label={`Open ${file.path} full size`}
        aria-disabled={url ? undefined : "true"}
        onClick={() => url && setOpen(true)}
      >
        {url ? (
          <img src={url} alt={file.path} />
        ) : (
          <span class="thumb-placeholder" aria-hidden="true">
            {error ? "!" : "…"}
          </span>
        )}
      </button>
      <figcaption>
        <span class="shown-name">{basename(file.path)}</span> <span class="muted">{shownDetails(file)}</span>
        {error && <span class="error"> · not loaded: {error}</span>}
      </figcaption>
      {open && url && <Lightbox file={file} url={url} onClose={() => setOpen(false)} />}
    </figure>
  );
}

/** A PDF opens in a new tab: the tab is opened on the click, then sent to the bytes once fetched. */
function ShownDocument({ file }: { file: ShownFile }) {
  const load = useContext(ShownLoaderContext);
  const [error, setError] = useState<string | null>(null);
  const openIt = async () => {
    if (!load) return;
    setError(null);
    const tab = window.open("", "_blank");
    try {
      const url = await load(file.sha256);
      if (tab) tab.location.href = url;
      else window.open(url, "_blank", "noopener");
    } catch (err) {
      tab?.close();
      setError(messageOf(err));
    }
  };
  return (
    <span class="shown shown-document">
      <button type="button" class="file-chip" aria-label={`Open ${file.path} in a new tab`} onClick={() => void openIt()}>
        <FileIcon kind={isPdf(file) ? "pdf" : "other"} />
        <span class="shown-name">{basename(file.path)}</span> <span class="muted">{shownDetails(file)}</span>
      </button>
      {error && <span class="error"> not opened: {error}</span>}
    </span>
  );
}

export function FileIcon({ kind }: { kind: "image" | "pdf" | "other" }) {
  return (
    <span class={`file-icon file-icon-${kind}`} aria-hidden="true">
      {kind === "pdf" ? "PDF" : kind === "image" ? "IMG" : "FILE"}
    </span>
  );
}

/** One shown file: a thumbnail for an image, a chip for a document. */
export function ShownFileView({ file }: { file: ShownFile }) {
  return isImage(file) ? <ShownImage file={file} /> : <ShownDocument file={file} />;
}

/** A file a message attached that the model has not been shown (yet, or at all: a text file). */
export function SentFileChip({ file }: { file: SentFile }) {
  return (
    <span class="file-chip file-chip-sent">
      <FileIcon kind={fileKind(file.type, file.name)} />
      <span class="shown-name">{file.name}</span> <span class="muted">{formatBytes(file.size)}</span>
    </span>
  );
}

/** The files a tool call showed the model, under its row. */
export function ShownList({ files, label }: { files: ShownFile[]; label: string }) {
  return (
    <ul class="shown-files" aria-label={label}>
      {files.map((file, index) => (
        <li key={`${file.sha256}-${index}`}>
          <ShownFileView file={file} />
        </li>
      ))}
    </ul>
  );
}
