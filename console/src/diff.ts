// A line diff of two texts (two versions' SKILL.md): the longest common subsequence of their lines,
// then the rows of a side-by-side view, where a run of removed lines faces the added lines after it.

/** One line of the diff: in both texts, only in the first (removed), or only in the second (added). */
export interface DiffLine {
  kind: "same" | "removed" | "added";
  text: string;
  /** Its number in the first text (same, removed) and in the second (same, added), from 1. */
  before?: number;
  after?: number;
}

/** One side of a side-by-side row. */
export interface DiffCell {
  number: number;
  text: string;
  kind: "same" | "removed" | "added";
}

/** A row of the side-by-side view: the first text's line on the left, the second's on the right. */
export interface DiffRow {
  left: DiffCell | null;
  right: DiffCell | null;
}

/** Past this many cells (lines × lines, after the common start and end), lines are not matched. */
const MAX_CELLS = 4_000_000;

/** A text's lines: `\r\n` read as `\n`, and a final line break ends the last line rather than starting one. */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** The lines of `before` and `after` in order, each same, removed or added. */
export function diffLines(before: string, after: string): DiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const lines: DiffLine[] = [];
  for (let i = 0; i < start; i++) lines.push({ kind: "same", text: a[i], before: i + 1, after: i + 1 });
  lines.push(...middle(a, b, start, endA, endB));
  for (let i = endA, j = endB; i < a.length; i++, j++) lines.push({ kind: "same", text: a[i], before: i + 1, after: j + 1 });
  return lines;
}

/** The diff of `a[start..endA]` and `b[start..endB]`, by their longest common subsequence. */
function middle(a: string[], b: string[], start: number, endA: number, endB: number): DiffLine[] {
  const n = endA - start;
  const m = endB - start;
  const out: DiffLine[] = [];
  const removed = (i: number) => out.push({ kind: "removed", text: a[i], before: i + 1 });
  const added = (j: number) => out.push({ kind: "added", text: b[j], after: j + 1 });
  if (n === 0 || m === 0 || n * m > MAX_CELLS) {
    for (let i = start; i < endA; i++) removed(i);
    for (let j = start; j < endB; j++) added(j);
    return out;
  }
  // lengths[i * (m + 1) + j]: the longest common subsequence of a's lines from i and b's from j.
  const width = m + 1;
  const lengths = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i * width + j] =
        a[start + i] === b[start + j]
          ? lengths[(i + 1) * width + j + 1] + 1
          : Math.max(lengths[(i + 1) * width + j], lengths[i * width + j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[start + i] === b[start + j]) {
      out.push({ kind: "same", text: a[start + i], before: start + i + 1, after: start + j + 1 });
      i++;
      j++;
    } else if (lengths[(i + 1) * width + j] >= lengths[i * width + j + 1]) {
      removed(start + i++);
    } else {
      added(start + j++);
    }
  }
  while (i < n) removed(start + i++);
  while (j < m) added(start + j++);
  return out;
}

/** The side-by-side rows of a diff: each run of removed lines faces the run of added lines after it. */
export function sideBySide(lines: DiffLine[]): DiffRow[] {
  const rows: DiffRow[] = [];
  let k = 0;
  while (k < lines.length) {
    const line = lines[k];
    if (line.kind === "same") {
      rows.push({
        left: { number: line.before ?? 0, text: line.text, kind: "same" },
        right: { number: line.after ?? 0, text: line.text, kind: "same" },
      });
      k++;
      continue;
    }
    const removed: DiffLine[] = [];
    const added: DiffLine[] = [];
    while (k < lines.length && lines[k].kind === "removed") removed.push(lines[k++]);
    while (k < lines.length && lines[k].kind === "added") added.push(lines[k++]);
    for (let r = 0; r < Math.max(removed.length, added.length); r++) {
      const left = removed[r];
      const right = added[r];
      rows.push({
        left: left ? { number: left.before ?? 0, text: left.text, kind: "removed" } : null,
        right: right ? { number: right.after ?? 0, text: right.text, kind: "added" } : null,
      });
    }
  }
  return rows;
}

/** How many lines a diff removes and adds. */
export function diffCounts(lines: DiffLine[]): { removed: number; added: number } {
  let removed = 0;
  let added = 0;
  for (const line of lines) {
    if (line.kind === "removed") removed++;
    else if (line.kind === "added") added++;
  }
  return { removed, added };
}
