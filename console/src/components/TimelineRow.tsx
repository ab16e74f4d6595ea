// One row of a turn's timeline; a tool call's row opens to show its arguments and result, and
// shows the files the call showed the model.

import { useState } from "preact/hooks";

import { callBadge, entryTitle, formatArguments, formatBytes, formatCount, type OpenWork } from "../format";
import type { TimelineEntry } from "../turns";
import { ShownList } from "./ShownFile";

export function TimelineRow({
  entry,
  id,
  open: openWork = "running",
}: {
  entry: TimelineEntry;
  id: string;
  /** How its turn's calls without a result stand: running, waiting for approval, or ended without one. */
  open?: OpenWork;
}) {
  const [open, setOpen] = useState(false);
  if (entry.kind !== "tool") {
    return (
      <li class={`row row-${entry.kind}`}>
        <span class="row-title">{entryTitle(entry)}</span>
        {entry.kind === "shown" && <ShownList files={[entry.file]} label="File shown to the model" />}
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
  const badge = callBadge(result, openWork);
  const detailsId = `details-${id}`;
  return (
    <li class={`row row-tool tool-${badge.tone}`}>
      <button
        type="button"
        class="disclosure"
        aria-expanded={open}
        aria-controls={detailsId}
        onClick={() => setOpen(!open)}
      >
        {entryTitle(entry)}
      </button>{" "}
      <span class={`badge badge-${badge.tone}`}>{badge.text}</span>
      {entry.files && entry.files.length > 0 && <ShownList files={entry.files} label="Files shown to the model" />}
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
