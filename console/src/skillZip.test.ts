// Tests of a chosen folder zipped in the browser: each file's path kept relative to the folder.
import { unzipSync, strFromU8, strToU8 } from "fflate";
import { describe, expect, it } from "vitest";

import { folderName, pathInFolder, zipFolder, type PickedFile } from "./skillZip";

function picked(relative: string, text: string): PickedFile {
  const bytes = strToU8(text);
  return {
    name: relative.split("/").pop() ?? relative,
    webkitRelativePath: relative,
    arrayBuffer: async () => bytes.slice().buffer,
  };
}

describe("a chosen folder as a skill's zip", () => {
  it("keeps each file's path relative to the chosen folder", async () => {
    const files = [
      picked("horario-oficina/SKILL.md", "---\nname: horario-oficina\n---\n"),
      picked("horario-oficina/evals/evals.json", "{}"),
      picked("horario-oficina/scripts/a/b.py", "print(1)"),
    ];
    expect(folderName(files)).toBe("horario-oficina");
    const zip = unzipSync(await zipFolder(files));
    expect(Object.keys(zip).sort()).toEqual(["SKILL.md", "evals/evals.json", "scripts/a/b.py"]);
    expect(strFromU8(zip["scripts/a/b.py"])).toBe("print(1)");
  });

  it("names no folder for files picked one by one, and keeps their names", () => {
    const lone = { name: "SKILL.md", webkitRelativePath: "", arrayBuffer: async () => new ArrayBuffer(0) };
    expect(folderName([lone])).toBeNull();
    expect(pathInFolder(lone)).toBe("SKILL.md");
    expect(folderName([])).toBeNull();
  });
});
