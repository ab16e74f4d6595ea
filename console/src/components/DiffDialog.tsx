// Two versions' SKILL.md side by side over the page, as a modal dialog (Escape or Close closes it):
// each line numbered in its own version, removed lines on the left facing the lines that replace
// them on the right.

import { useEffect, useMemo, useRef } from "preact/hooks";

import { diffCounts, diffLines, sideBySide, type DiffCell } from "../diff";
import type { VersionDetail } from "../skillVersions";

export function DiffDialog({
  skill,
  from,
  to,
  onClose,
}: {
  skill: string;
  from: VersionDetail;
  to: VersionDetail;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (element && !element.open) element.showModal?.();
    return () => element?.close?.();
  }, []);
  const lines = useMemo(() => diffLines(from.skill_md, to.skill_md), [from, to]);
  const rows = useMemo(() => sideBySide(lines), [lines]);
  const { removed, added } = diffCounts(lines);
  const title = `SKILL.md of ${skill}: version ${from.version} → version ${to.version}`;
  return (
    <dialog ref={dialog} class="diff-dialog" aria-labelledby="diff-heading" onClose={onClose}>
      <div class="diff-head">
        <h3 id="diff-heading">{title}</h3>
        <p class="muted">
          {removed === 0 && added === 0
            ? "The two SKILL.md files are the same."
            : `${removed} ${removed === 1 ? "line" : "lines"} removed, ${added} ${added === 1 ? "line" : "lines"} added`}
        </p>
      </div>
      <div class="diff-scroll">
        <table class="diff">
          <caption class="visually-hidden">{title}</caption>
          <colgroup>
            <col class="diff-number-col" />
            <col />
            <col class="diff-number-col" />
            <col />
          </colgroup>
          <thead>
            <tr>
              <th scope="colgroup" colSpan={2}>
                Version {from.version}
              </th>
              <th scope="colgroup" colSpan={2}>
                Version {to.version}
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row, index) => (
              <tr key={index}>
                <Cell cell={row.left} />
                <Cell cell={row.right} />
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div class="diff-actions">
        <button type="button" onClick={() => dialog.current?.close()} autofocus>
          Close
        </button>
      </div>
    </dialog>
  );
}

/** One side of a row: its line number and text, marked removed or added; empty when the side has no line. */
function Cell({ cell }: { cell: DiffCell | null }) {
  if (!cell) {
    return (
      <>
        <td class="diff-number" />
        <td class="diff-text diff-empty" />
      </>
    );
  }
  return (
    <>
      <td class="diff-number">{cell.number}</td>
      <td class={`diff-text diff-${cell.kind}`}>
        {cell.kind === "removed" ? (
          <>
            <span class="visually-hidden">removed: </span>
            <del>{cell.text}</del>
          </>
        ) : cell.kind === "added" ? (
          <>
            <span class="visually-hidden">added: </span>
            <ins>{cell.text}</ins>
          </>
        ) : (
          cell.text
        )}
      </td>
    </>
  );
}
