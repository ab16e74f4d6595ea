// Published skills in a real browser against `cargo xtask console`: a skill uploaded as a zip, a
// changed version uploaded as a folder, both versions listed and their SKILL.md diffed, the evals
// run on the turn queue and read, version 2 promoted (the next turn loads it), then rolled back; a
// refused upload's problems; and a background turn, which the same queue runs.
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";

import { expect, test, type Page } from "@playwright/test";
import { strToU8, zipSync } from "fflate";

import { GREETING, SHOTS, accessibilityViolations, lastTurn, makeShotsFolder, open, send } from "./support";

test.beforeAll(makeShotsFolder);
// Tall enough that the screenshots show a whole section of the Skills tab.
test.use({ viewport: { width: 1400, height: 1000 } });

const SKILL = "pruebas/horario-oficina";
const FIXTURES = new URL("./fixtures/horario-oficina/", import.meta.url).pathname;
/** Each version's folder: the skill's own folder, named as the skill. */
const folder = (version: 1 | 2) => join(FIXTURES, `v${version}`, "horario-oficina");
const MORNING = "La oficina atiende de lunes a viernes de 9:00 a 14:00.";
const ALL_DAY = "La oficina atiende de lunes a viernes de 9:00 a 14:00 y de 16:00 a 19:00.";
/** What the eval case asks, and what the demo model answers once it loads the skill. */
const ASKED = "¿Cuándo abre la oficina? Mira horario-oficina.";

/** The files of `dir`, each under its path inside it. */
async function filesOf(dir: string): Promise<Record<string, Uint8Array>> {
  const files: Record<string, Uint8Array> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = new Uint8Array(await readFile(path));
  }
  return files;
}

/** The Skills tab, open. */
async function skillsTab(page: Page) {
  await page.getByRole("tab", { name: "Skills" }).click();
  return page.getByRole("tabpanel", { name: "Skills" });
}

test("upload a skill, see its versions and their diff, run its evals, promote and roll back", async ({ page }) => {
  test.setTimeout(180_000);
  await open(page);
  const panel = await skillsTab(page);
  const skills = panel.getByRole("list", { name: "Your skills" });
  await expect(skills.getByRole("button", { name: /borradores\/nota-rapida/ })).toContainText("folder, not published");

  // Version 1: a zip made here from the fixture's folder.
  await panel.getByLabel("Skill path").fill(SKILL);
  await panel.getByLabel("Zip file").setInputFiles({
    name: "horario-oficina.zip",
    mimeType: "application/zip",
    buffer: Buffer.from(zipSync(await filesOf(folder(1)))),
  });
  await expect(panel.getByText("horario-oficina.zip (")).toBeVisible();
  await panel.getByRole("button", { name: "Upload", exact: true }).click();
  const uploaded = panel.locator(".upload-status");
  await expect(uploaded).toHaveText(`Version 1 of ${SKILL} uploaded; it is the default.`);

  // Version 2: the changed folder, zipped in the browser with its paths inside the folder.
  await panel.getByLabel("Folder").setInputFiles(folder(2));
  await expect(panel.getByText("Folder horario-oficina: 3 files")).toBeVisible();
  await panel.getByRole("button", { name: "Upload", exact: true }).click();
  await expect(uploaded).toHaveText(`Version 2 of ${SKILL} uploaded; the default stays as it was.`);

  // Both versions, newest first, version 1 the default.
  await expect(skills.getByRole("button", { name: new RegExp(SKILL) })).toContainText("default v1 · 2 versions");
  const versions = panel.getByRole("list", { name: `Versions of ${SKILL}` });
  await expect(versions.getByRole("article")).toHaveCount(2);
  const v1 = versions.getByRole("article", { name: "Version 1" });
  const v2 = versions.getByRole("article", { name: "Version 2" });
  const isDefault = (version: typeof v1) => version.getByText("default", { exact: true });
  await expect(isDefault(v1)).toBeVisible();
  await expect(isDefault(v2)).toHaveCount(0);
  await expect(v2).toContainText("by ana");
  await expect(v2).toContainText("3 files");
  await page.screenshot({ path: `${SHOTS}/skill-versions.png`, fullPage: true });

  // Their SKILL.md side by side: the morning-only line removed, the all-day line added.
  await expect(panel.getByLabel("From", { exact: true })).toHaveValue("1");
  await expect(panel.getByLabel("to", { exact: true })).toHaveValue("2");
  await panel.getByRole("button", { name: "Show diff" }).click();
  const diff = page.getByRole("dialog", { name: `SKILL.md of ${SKILL}: version 1 → version 2` });
  await expect(diff).toBeVisible();
  await expect(diff.getByRole("deletion").filter({ hasText: MORNING })).toHaveCount(1);
  await expect(diff.getByRole("insertion").filter({ hasText: ALL_DAY })).toHaveCount(1);
  await expect(diff.getByRole("insertion").filter({ hasText: "Los sábados la oficina está cerrada." })).toHaveCount(1);
  await expect(diff).toContainText("2 lines removed, 3 lines added");
  await page.screenshot({ path: `${SHOTS}/skill-diff.png` });
  expect(await accessibilityViolations(page)).toEqual([]);
  await diff.getByRole("button", { name: "Close" }).click();
  await expect(diff).toBeHidden();

  // Version 2's evals, run by queue-turn from the turn queue, graded by the demo model.
  await panel.getByLabel("Version", { exact: true }).selectOption("2");
  await expect(panel.getByText("No eval run of version 2 yet.")).toBeVisible();
  await panel.getByLabel("Runs per case").fill("2");
  await panel.getByRole("button", { name: "Run evals" }).click();
  const report = panel.getByRole("article", { name: /^Eval run / });
  await expect(panel.locator(".eval-status")).toContainText("completed", { timeout: 120_000 });
  await expect(report).toHaveAttribute("aria-busy", "false");
  const rates = report.getByRole("definition");
  await expect(rates.nth(0)).toContainText("100%");
  await expect(rates.nth(0)).toContainText("loaded 2 of 2 times when wanted, 0 of 2 when not");
  await expect(rates.nth(1)).toContainText("100%");
  await expect(rates.nth(1)).toContainText("4 of 4 expectations passed");
  const cases = report.getByRole("list", { name: "Cases" });
  await expect(cases.getByRole("listitem").filter({ has: page.getByRole("heading", { name: /^Eval 1/ }) })).toContainText(ASKED);
  await expect(cases.getByRole("heading", { name: /Trigger 2: should not load it/ })).toContainText("2 of 2 right");
  const expectations = report.getByRole("list", { name: "Expectations of run 1" }).first();
  const afternoon = expectations.getByRole("listitem").filter({ hasText: "La respuesta dice «16:00 a 19:00»" });
  await expect(afternoon).toContainText("passed");
  await expect(afternoon.locator(".evidence")).toContainText("La respuesta dice «16:00 a 19:00».");
  await expect(report.getByRole("table").first()).toContainText("load_skill ×1");
  await panel.getByRole("heading", { name: "Evals" }).evaluate((heading) => heading.scrollIntoView({ block: "start" }));
  await page.screenshot({ path: `${SHOTS}/skill-evals.png`, fullPage: true });
  expect(await accessibilityViolations(page)).toEqual([]);

  // Promote version 2: the skill serves it, and the next turn loads it.
  await panel.getByRole("button", { name: "Make version 2 the default" }).click();
  await expect(panel.locator(".default-status")).toHaveText(`${SKILL} serves version 2 now (it served version 1).`);
  await expect(isDefault(v2)).toBeVisible();
  await expect(isDefault(v1)).toHaveCount(0);
  await expect(skills.getByRole("button", { name: new RegExp(SKILL) })).toContainText("default v2 · 2 versions");
  await send(page, ASKED);
  const answer = lastTurn(page).getByRole("group", { name: "Answer" });
  await expect(answer).toContainText(ALL_DAY, { timeout: 30_000 });
  await expect(answer).toHaveAttribute("aria-busy", "false");
  await expect(lastTurn(page)).toContainText(`Skill ${SKILL} (version 2) loaded`);
  await page.screenshot({ path: `${SHOTS}/skill-promoted.png`, fullPage: true });

  // Roll back to version 1: the next turn says the morning hours only.
  await panel.getByRole("button", { name: "Make version 1 the default" }).click();
  await expect(panel.locator(".default-status")).toHaveText(`${SKILL} serves version 1 now (it served version 2).`);
  await expect(isDefault(v1)).toBeVisible();
  await expect(isDefault(v2)).toHaveCount(0);
  await send(page, ASKED);
  const again = lastTurn(page).getByRole("group", { name: "Answer" });
  await expect(again).toContainText(MORNING, { timeout: 30_000 });
  await expect(again).not.toContainText("16:00");
  await expect(lastTurn(page)).toContainText(`Skill ${SKILL} (version 1) loaded`);
});

test("a refused upload lists its problems by file", async ({ page }) => {
  await open(page);
  const panel = await skillsTab(page);
  await panel.getByLabel("Skill path").fill("pruebas/sin-frontmatter");
  await panel.getByLabel("Zip file").setInputFiles({
    name: "sin-frontmatter.zip",
    mimeType: "application/zip",
    buffer: Buffer.from(zipSync({ "SKILL.md": strToU8("# Sin cabecera\n\nNada más.\n") })),
  });
  await panel.getByRole("button", { name: "Upload", exact: true }).click();
  const refused = panel.getByRole("alert");
  await expect(refused).toContainText("The upload was refused: it is not a valid skill.");
  const problems = refused.getByRole("list", { name: "Problems by file" });
  const skillMd = problems.getByRole("listitem").filter({ has: page.getByText("SKILL.md", { exact: true }) });
  await expect(skillMd).toContainText("does not start with a `---` frontmatter line");
  await page.screenshot({ path: `${SHOTS}/skill-refused.png`, fullPage: true });
  // Nothing was published.
  await expect(panel.getByRole("list", { name: "Your skills" })).not.toContainText("pruebas/sin-frontmatter");
});

test("a background turn runs from the console's turn queue", async ({ request }) => {
  const config = await (await request.get("/console/config")).json();
  const ana = config.users.find((user: { id: string }) => user.id === "ana");
  const headers = { authorization: `Bearer ${ana.token}` };
  const session = `s-background-${Date.now()}`;
  const accepted = await request.post(`/api/sessions/${session}/turns`, {
    headers: { ...headers, prefer: "respond-async" },
    data: { message: "Hola, ¿qué tal?" },
  });
  expect(accepted.status()).toBe(202);
  const { poll } = await accepted.json();
  // queue-turn runs it; the owner polls it until it completes.
  await expect
    .poll(async () => (await (await request.get(`/api/${poll.replace(/^\//, "")}`, { headers })).json()).status, {
      timeout: 30_000,
    })
    .toBe("completed");
  const done = await (await request.get(`/api/${poll.replace(/^\//, "")}`, { headers })).json();
  expect(done.reply).toBe(GREETING);
});
