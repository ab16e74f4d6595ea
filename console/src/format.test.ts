// The arguments of a tool call as the timeline shows them.

import { describe, expect, it } from "vitest";
import { formatArguments } from "./format";

describe("formatArguments", () => {
  it("shows a string's line breaks as line breaks, under its key", () => {
    const shown = formatArguments({ file_path: "/workspace/nota.md", content: "# Nota\n\n- uno\n- dos\n" });
    expect(shown).toBe('file_path: "/workspace/nota.md"\ncontent: |\n  # Nota\n  \n  - uno\n  - dos');
    expect(shown).not.toContain("\\n");
  });

  it("keeps one-line values as JSON and nests objects", () => {
    expect(formatArguments({ command: "ls -la", timeout: 30, env: { A: "1" } })).toBe(
      'command: "ls -la"\ntimeout: 30\nenv: {\n    "A": "1"\n  }',
    );
  });

  it("reads arguments sent as a JSON string, and keeps a string that is not JSON", () => {
    expect(formatArguments('{"path": "/workspace"}')).toBe('path: "/workspace"');
    expect(formatArguments("not json {")).toBe("not json {");
    expect(formatArguments([1, 2])).toBe("[\n  1,\n  2\n]");
    expect(formatArguments(undefined)).toBe("");
  });
});
