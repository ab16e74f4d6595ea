// The Workspace tab: the open session's files, each downloaded with the user's token.

import { useState } from "preact/hooks";
import type { JSX } from "preact";

import { fileRoute, type Api } from "../api";
import { messageOf } from "../errors";
import { basename, formatBytes, workspaceRelative } from "../format";

/** A workspace file as the page shows it; `pending` until its turn is committed. */
export interface WorkspaceFile {
  path: string;
  size: number;
  pending?: boolean;
}

export function Workspace({
  api,
  sessionId,
  files,
}: {
  api: Api;
  sessionId: string | null;
  files: WorkspaceFile[];
}) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);

  // The file route needs the bearer token, so the link's own navigation cannot fetch it: fetch
  // the bytes, then save them through an object URL under the file's name.
  const download = async (event: JSX.TargetedMouseEvent<HTMLAnchorElement>, file: WorkspaceFile) => {
    event.preventDefault();
    if (!sessionId || file.pending) return;
    setError(null);
    setBusy(file.path);
    try {
      const blob = await api.file(sessionId, file.path);
      const url = URL.createObjectURL(blob);
      const link = document.createElement("a");
      link.href = url;
      link.download = basename(file.path);
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (err) {
      setError(`${workspaceRelative(file.path)}: ${messageOf(err)}`);
    } finally {
      setBusy(null);
    }
  };

  return (
    <div class="workspace">
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {!sessionId && <p class="muted">Open a session to see its files.</p>}
      {sessionId && files.length === 0 && <p class="muted">No files in this session's workspace.</p>}
      {files.length > 0 && (
        <ul class="file-list" aria-label="Workspace files">
          {files.map((file) => {
            const relative = workspaceRelative(file.path);
            return (
              <li key={file.path}>
                <a
                  href={sessionId ? fileRoute(sessionId, file.path) : "#"}
                  download={basename(file.path)}
                  aria-label={`Download ${relative}`}
                  aria-disabled={file.pending ? "true" : undefined}
                  onClick={(event) => void download(event, file)}
                >
                  {relative}
                </a>
                <span class="muted">
                  {" "}
                  {formatBytes(file.size)}
                  {file.pending && " · available when the turn ends"}
                  {busy === file.path && " · downloading…"}
                </span>
              </li>
            );
          })}
        </ul>
      )}
    </div>
  );
}
