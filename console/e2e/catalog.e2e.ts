// The catalog, the walls between the console's users, accessibility, and skills synced into the
// console's stack, in a real browser against `cargo xtask console`.
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect, test } from "@playwright/test";

import {
  GREETING,
  SHOTS,
  makeShotsFolder,
  open,
  send,
  lastTurn,
  openSessionId,
  accessibilityViolations,
  run,
} from "./support";

test.beforeAll(makeShotsFolder);

test("the catalog shows warnings, skipped files with their reason, and searches", async ({ page }) => {
  await open(page);
  await page.getByRole("tab", { name: /Catalog/ }).click();
  const skipped = page.getByRole("list", { name: "Skipped files" });
  await expect(skipped).toContainText("borradores/sin-cabecera/SKILL.md");
  await expect(skipped).toContainText("does not start with a `---` frontmatter line");
  await expect(page.getByRole("list", { name: "Warnings for borradores/nota-rapida" })).toContainText(
    "differs from its folder",
  );
  // `skills sync` found no wheel for this skill's requirement and left a marker beside it.
  await expect(page.getByRole("list", { name: "Warnings for borradores/calculo-plazos" })).toContainText(
    "its scripts need `notarial-dates`, which the sandbox image lacks and no bundle provides",
  );
  await page.screenshot({ path: `${SHOTS}/catalog.png`, fullPage: true });
  await page.getByLabel("Search skills").fill("hipoteca");
  await page.getByLabel("Search skills").press("Enter");
  const matches = page.getByRole("list", { name: "Matching skills" });
  await expect(matches).toContainText("escrituras/hipoteca");
  await expect(matches).not.toContainText("contratos/arrendamiento");
});

test("each user sees only their own sessions and skills", async ({ page, request }) => {
  await open(page, "ana");
  await send(page, "Una pregunta de Ana");
  await expect(lastTurn(page).getByRole("group", { name: "Answer" })).toHaveText(GREETING);
  const anasSession = await openSessionId(page);
  expect(anasSession).not.toBe("");
  const sessions = page.getByRole("list", { name: "Sessions of this user" });
  await page.reload();
  await expect(sessions).toContainText(anasSession);
  // Listed by its title, the first message, with its id beneath.
  const listed = sessions.getByRole("button").filter({ hasText: anasSession });
  await expect(listed.locator(".session-title")).toHaveText("Una pregunta de Ana");

  await page.getByLabel("User", { exact: true }).selectOption("ben");
  await expect(page.getByRole("main")).not.toContainText("Una pregunta de Ana");
  await expect(sessions).not.toContainText(anasSession);
  await page.getByRole("tab", { name: /Catalog/ }).click();
  await expect(page.getByRole("list", { name: "Skills" })).toContainText("escrituras/compraventa");
  await expect(page.getByRole("list", { name: "Skills" })).not.toContainText("borradores/nota-rapida");

  // Ben's token cannot read Ana's session through the API either.
  const config = await (await request.get("/console/config")).json();
  const ben = config.users.find((user: { id: string }) => user.id === "ben");
  const answer = await request.get(`/api/sessions/${anasSession}`, { headers: { authorization: `Bearer ${ben.token}` } });
  expect(answer.status()).toBe(404);
  await page.screenshot({ path: `${SHOTS}/other-user.png`, fullPage: true });
});

/** The WCAG 2.1 A and AA rules axe-core checks in the page as it is now. */
test("the main views pass axe's WCAG 2.1 AA checks and the completion list works from the keyboard", async ({ page }) => {
  await open(page);
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  // Keyboard only: type the command, move through the list with the arrows, take one with Enter.
  await box.focus();
  await page.keyboard.type("/nota");
  const suggestions = page.getByRole("listbox", { name: "Skill suggestions" });
  await expect(suggestions.getByRole("option", { name: /borradores\/nota-rapida/ })).toBeVisible();
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowUp");
  await expect(suggestions.getByRole("option", { selected: true })).toContainText("borradores/nota-rapida");
  await page.keyboard.press("Enter");
  await expect(box).toHaveValue("/borradores/nota-rapida ");
  await expect(suggestions).toBeHidden();
  await page.keyboard.type("resume la reunión");
  await page.keyboard.press("Enter");
  const turn = lastTurn(page);
  await expect(turn.getByRole("group", { name: "Answer" })).toContainText("He guardado la nota", { timeout: 30_000 });
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false");
  await turn.getByRole("button", { name: /Tool write_file/ }).click();
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.getByRole("tab", { name: /Workspace/ }).press("ArrowRight");
  await expect(page.getByRole("tab", { name: /Catalog/ })).toBeFocused();
  await expect(page.getByRole("tab", { name: /Catalog/ })).toHaveAttribute("aria-selected", "true");
  await expect(page.getByRole("list", { name: "Skipped files" })).toBeVisible();
  expect(await accessibilityViolations(page)).toEqual([]);
});

test("skills synced into the console's stack show in the catalog and the completion", async ({ page }) => {
  // Ben's catalog becomes the example skills plus one of an author's own.
  const folder = await mkdtemp(join(tmpdir(), "console-sync-"));
  await cp("../examples/skills", folder, { recursive: true });
  await mkdir(join(folder, "nuevas/recien-llegada"), { recursive: true });
  await writeFile(
    join(folder, "nuevas/recien-llegada/SKILL.md"),
    "---\nname: recien-llegada\ndescription: Una habilidad que el autor acaba de sincronizar.\n---\n# Recién llegada\n",
  );
  await open(page, "ben");
  await page.getByRole("tab", { name: /Catalog/ }).click();
  const skills = page.getByRole("list", { name: "Skills" });
  await expect(skills).toContainText("escrituras/compraventa");
  await expect(skills).not.toContainText("nuevas/recien-llegada");

  const xtask = process.env.XTASK_BIN ?? "../target/debug/xtask";
  const synced = await run(xtask, ["skills", "sync", folder, "--user", "ben", "--console"]);
  expect(synced.code, synced.output).toBe(0);
  expect(synced.output).toContain("4 skills");
  await page.getByRole("button", { name: "Reload catalog" }).click();
  await expect(skills).toContainText("nuevas/recien-llegada");
  await expect(skills).toContainText("Una habilidad que el autor acaba de sincronizar.");

  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await page.getByRole("button", { name: "New session" }).click();
  await send(page, "Hola");
  await expect(lastTurn(page).getByRole("group", { name: "Answer" })).toHaveText(GREETING);
  await box.pressSequentially("/recien");
  await expect(page.getByRole("listbox", { name: "Skill suggestions" })).toContainText("/nuevas/recien-llegada");
  await rm(folder, { recursive: true, force: true });
});
