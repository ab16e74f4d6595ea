// A subagent in the timeline of the agent whose `task` call started it: its type, its task, how it
// stands (running, or its ending and steps), the tokens it spent, and its own rows, open at first and closed like a tool
// call's row. A subagent it started is a row of its own timeline, and so on down.

import { useState } from "preact/hooks";

import { formatCount, subagentState, subagentTitle, type OpenWork } from "../format";
import { formatInputSplit } from "../usage";
import { entryKeys, type SubagentEntry } from "../turns";
import { TimelineRow } from "./TimelineRow";

/** The badge's colour: running (or not finished), answered, stopped at a bound, or failed. */
function stateClass(entry: SubagentEntry, openWork: OpenWork): string {
  if (entry.status === "running") return openWork === "ended" ? "stopped" : "running";
  if (entry.ok === false) return "error";
  return entry.ending === "answered" ? "ok" : "warning";
}

export function SubagentRow({
  entry,
  id,
  open: openWork = "running",
}: {
  entry: SubagentEntry;
  id: string;
  /** How the turn's calls without a result stand, passed down to its rows. */
  open?: OpenWork;
}) {
  const [open, setOpen] = useState(true);
  const state = stateClass(entry, openWork);
  const rowsId = `rows-${id}`;
  const taskId = `task-${id}`;
  const keys = entryKeys(entry.timeline);
  return (
    <li class={`row row-subagent subagent-${state}`}>
      <button
        type="button"
        class="disclosure"
        aria-expanded={open}
        aria-controls={rowsId}
        aria-describedby={entry.description ? taskId : undefined}
        onClick={() => setOpen(!open)}
      >
        {subagentTitle(entry)}
      </button>{" "}
      <span class={`badge badge-${state}`}>{subagentState(entry, openWork)}</span>
      {entry.description && (
        <p id={taskId} class="subagent-task">
          {entry.description}
        </p>
      )}
      {entry.status === "completed" && entry.usage && (
        <p class="row-detail muted subagent-usage" aria-label="Subagent tokens">
          {`${formatCount(entry.usage.input_tokens)} input (${formatInputSplit(entry.usage)}) / ${formatCount(entry.usage.output_tokens)} output tokens (in the turn's totals)`}
        </p>
      )}
      {entry.status === "completed" && entry.summary && (
        <p class="row-detail subagent-summary">
          <span class="visually-hidden">Its answer: </span>
          {`→ ${entry.summary}`}
        </p>
      )}
      <div id={rowsId} hidden={!open}>
        {entry.timeline.length > 0 ? (
          <ol class="timeline timeline-subagent" aria-label={`Timeline of subagent ${entry.id}`}>
            {entry.timeline.map((child, index) =>
              child.kind === "subagent" ? (
                <SubagentRow key={keys[index]} entry={child} id={`${id}-${keys[index]}`} open={openWork} />
              ) : (
                <TimelineRow key={keys[index]} entry={child} id={`${id}-${keys[index]}`} open={openWork} />
              ),
            )}
          </ol>
        ) : (
          <p class="muted">{entry.status === "running" && openWork !== "ended" ? "Starting…" : "No steps reported."}</p>
        )}
      </div>
    </li>
  );
}
