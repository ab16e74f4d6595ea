// One row of a turn's timeline; a tool call's row opens to show its arguments and result.

import { useState } from "preact/hooks";

import { callBadge, entryTitle, formatArguments, formatBytes, formatCount, type OpenWork } from "../format";
import type { TimelineEntry } from "../turns";

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
