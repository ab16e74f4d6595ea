// A subagent in the timeline of the agent whose `task` call started it: its type, its task, how it
// stands (running, or its ending and steps) and its own rows, open at first and closed like a tool
// call's row. A subagent it started is a row of its own timeline, and so on down.

import { useState } from "preact/hooks";

import { subagentState, subagentTitle } from "../format";
import { entryKeys, type SubagentEntry } from "../turns";
import { TimelineRow } from "./TimelineRow";

/** The badge's colour: running, answered, stopped at a bound, or failed. */
function stateClass(entry: SubagentEntry): string {
  if (entry.status === "running") return "running";
  if (entry.ok === false) return "error";
  return entry.ending === "answered" ? "ok" : "warning";
}

export function SubagentRow({
  entry,
  id,
  paused = false,
}: {
  entry: SubagentEntry;
  id: string;
  /** Whether the turn paused for approval: passed down so its calls without a result wait. */
  paused?: boolean;
}) {
  const [open, setOpen] = useState(true);
  const state = stateClass(entry);
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
      <span class={`badge badge-${state}`}>{subagentState(entry)}</span>
      {entry.description && (
        <p id={taskId} class="subagent-task">
          {entry.description}
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
                <SubagentRow key={keys[index]} entry={child} id={`${id}-${keys[index]}`} paused={paused} />
              ) : (
                <TimelineRow key={keys[index]} entry={child} id={`${id}-${keys[index]}`} paused={paused} />
              ),
            )}
          </ol>
        ) : (
          <p class="muted">{entry.status === "running" ? "Starting…" : "No steps reported."}</p>
        )}
      </div>
    </li>
  );
}
