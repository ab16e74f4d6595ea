// Tests of the line diff: the longest common subsequence, line numbers on both sides, and the
// side-by-side rows where removed lines face the added ones that replace them.
import { describe, expect, it } from "vitest";

import { diffCounts, diffLines, sideBySide, splitLines } from "./diff";

const kinds = (before: string, after: string) => diffLines(before, after).map((line) => `${line.kind[0]} ${line.text}`);

describe("line diff", () => {
  it("splits lines without an empty last one, reading CRLF as LF", () => {
    expect(splitLines("")).toEqual([]);
    expect(splitLines("a\nb\n")).toEqual(["a", "b"]);
    expect(splitLines("a\r\nb")).toEqual(["a", "b"]);
    expect(splitLines("a\n\n")).toEqual(["a", ""]);
  });

  it("keeps the common lines and marks what was removed and added", () => {
    expect(kinds("a\nb\nc\n", "a\nb\nc\n")).toEqual(["s a", "s b", "s c"]);
    expect(kinds("a\nb\nc\nd\n", "a\nc\nd\ne\n")).toEqual(["s a", "r b", "s c", "s d", "a e"]);
    expect(kinds("", "x\ny")).toEqual(["a x", "a y"]);
    expect(kinds("x\ny", "")).toEqual(["r x", "r y"]);
    // The longest common subsequence, not the first match: b c d stay.
    expect(kinds("a\nb\nc\nd\nz", "b\nc\nd\na\nz")).toEqual(["r a", "s b", "s c", "s d", "a a", "s z"]);
  });

  it("numbers each line in the text it is in", () => {
    const lines = diffLines("uno\ndos\ntres\n", "uno\nDOS\ntres\ncuatro\n");
    expect(lines).toEqual([
      { kind: "same", text: "uno", before: 1, after: 1 },
      { kind: "removed", text: "dos", before: 2 },
      { kind: "added", text: "DOS", after: 2 },
      { kind: "same", text: "tres", before: 3, after: 3 },
      { kind: "added", text: "cuatro", after: 4 },
    ]);
    expect(diffCounts(lines)).toEqual({ removed: 1, added: 2 });
  });

  it("sets removed lines beside the added lines that follow them, side by side", () => {
    const rows = sideBySide(diffLines("a\nb\nc\nd\n", "a\nB\nC\nX\nd\n"));
    const shown = rows.map((row) => `${row.left ? `${row.left.number}${row.left.kind[0]} ${row.left.text}` : "-"} | ${row.right ? `${row.right.number}${row.right.kind[0]} ${row.right.text}` : "-"}`);
    expect(shown).toEqual(["1s a | 1s a", "2r b | 2a B", "3r c | 3a C", "- | 4a X", "4s d | 5s d"]);
  });

  it("does not match lines of very long texts, but still shows every line", () => {
    const many = (prefix: string) => Array.from({ length: 2500 }, (_, i) => `${prefix}${i}`).join("\n");
    const lines = diffLines(many("a"), many("b"));
    expect(diffCounts(lines)).toEqual({ removed: 2500, added: 2500 });
  });
});
