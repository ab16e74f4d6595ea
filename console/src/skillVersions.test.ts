// Tests of the requests and texts of published skills: routes, an invalid upload's problems,
// rates, tools and the path a zip's name suggests.
import { describe, expect, it } from "vitest";

import { formatRate, formatTools, InvalidSkillError, skillRoute, suggestedPath, versionsError } from "./skillVersions";

describe("published skills' requests", () => {
  it("makes each segment of a skill path one segment of the route", () => {
    expect(skillRoute("pruebas/horario-oficina", "versions")).toBe("/api/skills/pruebas/horario-oficina/versions");
    expect(skillRoute("pdf", "versions", 2, "evals", "17-ab")).toBe("/api/skills/pdf/versions/2/evals/17-ab");
    expect(skillRoute("g/p/skills/n", "default")).toBe("/api/skills/g/p/skills/n/default");
  });

  it("keeps an invalid upload's problems, each with its file when it has one", () => {
    const body = {
      error: { code: "invalid_skill", message: "the upload is not a valid skill: SKILL.md: no name" },
      problems: [{ file: "SKILL.md", message: "no name" }, { message: "not a zip" }, { nothing: 1 }],
    };
    const error = versionsError(400, body);
    expect(error).toBeInstanceOf(InvalidSkillError);
    expect((error as InvalidSkillError).problems).toEqual([{ file: "SKILL.md", message: "no name" }, { message: "not a zip" }]);
    const other = versionsError(404, { error: { code: "not_found", message: "no such version" } });
    expect(other).not.toBeInstanceOf(InvalidSkillError);
    expect([other.status, other.message]).toEqual([404, "no such version"]);
  });

  it("shows rates, tools and a suggested path", () => {
    expect([formatRate(1), formatRate(0.666), formatRate(null)]).toEqual(["100%", "67%", "–"]);
    expect(formatTools({ load_skill: 1, read_file: 2 })).toBe("load_skill ×1, read_file ×2");
    expect(formatTools({})).toBe("none");
    expect([suggestedPath("horario-oficina.zip"), suggestedPath("pdf-v3.ZIP"), suggestedPath("notas")]).toEqual([
      "horario-oficina",
      "pdf",
      "notas",
    ]);
  });
});
