// The console in a real browser (Debian's Chromium, headless), against `cargo xtask console`
// running the compiled functions over moto, with the demo model of `demo-model/script.mjs`.
import { spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Locator, type Page } from "@playwright/test";

import {
  DELEGATED,
  DELEGATED_RESCHEDULE,
  DELEGATED_RESCHEDULED,
  DELEGATION,
  GREETING,
  NOT_RESCHEDULED,
  NOTE_TEXT,
  RESCHEDULE,
  RESCHEDULE_TASK,
  RESCHEDULED,
  SUBAGENT_RESCHEDULED,
  SUBTASKS,
  WORD_FAILED,
  WORD_FILE,
  subtaskAnswer,
} from "../demo-model/script.mjs";

/** Screenshots of the main views, kept as the run's artifacts. */
const SHOTS = "../target/console-screenshots";

test.beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
});

async function open(page: Page, user: "ana" | "ben" = "ana") {
  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Skill console" })).toBeVisible();
  await page.getByLabel("User", { exact: true }).selectOption(user);
  await page.getByRole("button", { name: "New session" }).click();
}

async function send(page: Page, message: string) {
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill(message);
  await box.press("Enter");
}

/** Sends "Toma nota de la reunión del martes" and waits until its turn has completed, so the composer takes the next message. */
async function takeNote(page: Page) {
  await send(page, "Toma nota de la reunión del martes");
  const answer = lastTurn(page).getByRole("group", { name: "Answer" });
  await expect(answer).toContainText("He guardado la nota", { timeout: 30_000 });
  await expect(answer).toHaveAttribute("aria-busy", "false");
}

/** Sends `message`, whose turn pauses for approval, and gives that turn and its approval panel once shown. */
async function pausedBy(page: Page, message: string) {
  await send(page, message);
  const turn = lastTurn(page);
  const panel = turn.getByRole("region", { name: "Waiting for your approval" });
  await expect(panel).toBeVisible({ timeout: 30_000 });
  return { turn, panel };
}

/** The newest turn of the conversation. */
function lastTurn(page: Page) {
  return page.getByRole("main").getByRole("article").last();
}

/** Turn `number` of the conversation, found by its heading. */
function turnNumber(page: Page, number: number) {
  return page.getByRole("main").getByRole("article", { name: `Turn ${number}`, exact: true });
}

/** The badge beside a turn's heading: how the turn stands. */
function turnBadge(turn: Locator) {
  return turn.locator(".turn-head .badge");
}

/** The page loaded afresh with session `id` opened from the list, its turns read from its history. */
async function reopen(page: Page, id: string) {
  await page.reload();
  await page.getByRole("list", { name: "Sessions of this user" }).getByRole("button").filter({ hasText: id }).click();
  await expect(page.getByRole("main").getByRole("article").first()).toBeVisible();
}

/** The id of the session open now (the current entry of the session list). */
async function openSessionId(page: Page): Promise<string> {
  const current = page.getByRole("list", { name: "Sessions of this user" }).locator('[aria-current="true"] .session-id');
  return (await current.innerText()).trim();
}

test("the answer appears while the turn is still running", async ({ page }) => {
  await open(page);
  await send(page, "Hola, ¿qué tal?");
  const answer = lastTurn(page).getByRole("group", { name: "Answer" });
  await expect(answer).toContainText("Hola. Soy el modelo");
  // Seen mid-stream: part of the text is there and the turn has not completed.
  const partial = await answer.innerText();
  await expect(answer).toHaveAttribute("aria-busy", "true");
  expect(partial.length).toBeLessThan(GREETING.length);
  await expect(answer).toHaveText(GREETING);
  await expect(answer).toHaveAttribute("aria-busy", "false");
  await expect(lastTurn(page).getByRole("note", { name: "Turn summary" })).toContainText("ending");
});

test("a tool call opens to its arguments and result, and the prompt goes from state 1 to state 2", async ({ page }) => {
  await open(page);
  await send(page, "Toma nota de la reunión del martes");
  const turn = lastTurn(page);
  const timeline = turn.getByRole("list", { name: /Timeline of/ });
  await expect(turn.getByRole("group", { name: "Answer" })).toContainText("He guardado la nota", { timeout: 30_000 });
  const rows = await timeline.getByRole("listitem").allInnerTexts();
  const first = rows.findIndex((row) => /Model call 1 — state 1: listing \d+ of \d+ skills \(tier 0\)/.test(row));
  const loaded = rows.findIndex((row) => row.includes("Skill borradores/nota-rapida loaded"));
  const second = rows.findIndex((row) => row.includes("Model call 2 — state 2: borradores/nota-rapida"));
  expect(first, rows.join("\n")).toBeGreaterThanOrEqual(0);
  expect(loaded, rows.join("\n")).toBeGreaterThan(first);
  expect(second, rows.join("\n")).toBeGreaterThan(loaded);

  const call = timeline.getByRole("button", { name: /Tool write_file/ });
  await expect(call).toHaveAttribute("aria-expanded", "false");
  await call.click();
  await expect(call).toHaveAttribute("aria-expanded", "true");
  const row = timeline.getByRole("listitem").filter({ has: page.getByRole("button", { name: /Tool write_file/ }) });
  await expect(row.getByRole("group", { name: "Arguments" })).toContainText("/workspace/nota.md");
  await expect(row.getByRole("group", { name: "Arguments" })).toContainText("Reunión con la notaría");
  // The note's lines show as lines, not as `\n` escapes.
  const shown = await row.getByRole("group", { name: "Arguments" }).innerText();
  expect(shown).toContain("content: |\n  # Nota\n");
  expect(shown).not.toContain("\\n");
  await expect(row.getByRole("group", { name: "Result" })).toContainText("nota.md");
  await page.screenshot({ path: `${SHOTS}/conversation.png`, fullPage: true });

  // The file the skill wrote downloads with the bytes the model sent.
  await page.getByRole("tab", { name: /Workspace/ }).click();
  const link = page.getByRole("link", { name: "Download nota.md" });
  await expect(link).toBeVisible();
  await expect(link).not.toHaveAttribute("aria-disabled", "true");
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  expect(download.suggestedFilename()).toBe("nota.md");
  const bytes = await readFile(await download.path());
  expect(bytes.equals(Buffer.from(NOTE_TEXT, "utf8"))).toBe(true);

  // A skill's own script (run by `execute` in the sandbox) writes a file that downloads too.
  await send(page, "Pásala a Word");
  const next = lastTurn(page);
  await expect(next.getByRole("group", { name: "Answer" })).toContainText("La minuta está en", { timeout: 30_000 });
  await expect(next.getByRole("list", { name: /Timeline of/ })).toContainText(`Wrote /workspace/${WORD_FILE}`);
  const word = page.getByRole("link", { name: `Download ${WORD_FILE}` });
  await expect(word).not.toHaveAttribute("aria-disabled", "true");
  const [document] = await Promise.all([page.waitForEvent("download"), word.click()]);
  const docx = await readFile(await document.path());
  // A .docx is a zip whose first entry is the package's content types.
  expect(docx.subarray(0, 2).toString("latin1")).toBe("PK");
  expect(docx.includes(Buffer.from("word/document.xml"))).toBe(true);
  expect(docx.includes(Buffer.from("[Content_Types].xml"))).toBe(true);
  await page.screenshot({ path: `${SHOTS}/workspace.png`, fullPage: true });
});

test("a slash command picked from the completion list forces the skill", async ({ page }) => {
  await open(page);
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill("");
  await box.pressSequentially("/nota");
  const suggestions = page.getByRole("listbox", { name: "Skill suggestions" });
  const option = suggestions.getByRole("option", { name: /borradores\/nota-rapida/ });
  await expect(option).toBeVisible();
  await option.click();
  await expect(box).toHaveValue("/borradores/nota-rapida ");
  await box.pressSequentially("resume lo que hablamos");
  await box.press("Enter");
  const turn = lastTurn(page);
  const timeline = turn.getByRole("list", { name: /Timeline of/ });
  await expect(timeline).toContainText("Skill borradores/nota-rapida forced by a slash command");
  await expect(timeline).toContainText("Model call 1 — state 2: borradores/nota-rapida (forced)");
  await expect(turn.getByRole("group", { name: "Answer" })).toContainText("He guardado la nota", { timeout: 30_000 });
});

test("with no model set the demo model answers, and a forced Word turn runs the skill's script", async ({ page }) => {
  await open(page);
  await expect(page.getByRole("banner")).toContainText("the console's demo model");
  // Forced before any note exists: the script fails, and the answer says so rather than claiming a file.
  await send(page, "/documentos/minuta-word Pásame el borrador en Word");
  const first = lastTurn(page);
  const timeline = first.getByRole("list", { name: /Timeline of/ });
  await expect(first.getByRole("group", { name: "Answer" })).toHaveText(WORD_FAILED, { timeout: 30_000 });
  await expect(timeline).toContainText("Skill documentos/minuta-word forced by a slash command");
  await expect(timeline).not.toContainText("Tool load_skill");
  // With the note written, the same forced request makes the document.
  await expect(first.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false");
  // The composer takes a message once the turn has completed.
  await takeNote(page);
  await send(page, "/documentos/minuta-word Pásame el borrador en Word");
  const second = lastTurn(page);
  await expect(second.getByRole("group", { name: "Answer" })).toContainText("La minuta está en", { timeout: 30_000 });
  await expect(second.getByRole("list", { name: /Timeline of/ })).toContainText(`Wrote /workspace/${WORD_FILE}`);
  await expect(second.getByRole("list", { name: /Timeline of/ })).not.toContainText("Tool load_skill");
  await expect(page.getByRole("link", { name: `Download ${WORD_FILE}` })).toBeVisible();
});

test("a turn that delegates shows each subagent nested in its timeline, with its own rows and how it ended", async ({ page }) => {
  // Tall enough that the whole turn shows in the screenshot.
  await page.setViewportSize({ width: 1280, height: 1700 });
  await open(page);
  await send(page, DELEGATION);
  const turn = lastTurn(page);
  const timeline = turn.getByRole("list", { name: /Timeline of turn/ });
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveText(DELEGATED, { timeout: 30_000 });
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false");
  const shown = await timeline.innerText();
  for (const task of SUBTASKS) {
    // The subagent's row, found by its task, follows the task call that started it.
    const row = timeline.getByRole("listitem").filter({ has: page.getByText(task.description, { exact: true }) });
    await expect(row).toHaveCount(1);
    const toggle = row.getByRole("button", { name: /Subagent sa-\d+ \(general-purpose\)$/ });
    await expect(toggle).toHaveAttribute("aria-expanded", "true");
    const title = (await toggle.innerText()).replace(/^\W+/, "").trim();
    const started = shown.indexOf(`Tool task: description=${task.description.slice(0, 40)}`);
    expect(started, shown).toBeGreaterThanOrEqual(0);
    expect(shown.indexOf(title), shown).toBeGreaterThan(started);
    await expect(row.getByText(/^answered · 2 steps$/)).toBeVisible();
    await expect(row).toContainText(`→ ${subtaskAnswer(task)}`);
    // Its own rows: two model calls and the file it wrote, whose call opens to its arguments.
    const rows = row.getByRole("list", { name: /Timeline of subagent sa-\d+/ });
    await expect(rows.getByRole("listitem")).toContainText(["Model call 1", "Tool write_file:", `Wrote ${task.file}`, "Model call 2"]);
    const writeName = new RegExp(`Tool write_file: .*file_path=${task.file}`);
    await rows.getByRole("button", { name: writeName }).click();
    const call = rows.getByRole("listitem").filter({ has: page.getByRole("button", { name: writeName }) });
    await expect(call.getByRole("group", { name: "Arguments" })).toContainText(task.content.split("\n")[0]);
    await expect(call.getByRole("group", { name: "Result" })).toContainText(task.file);
    await rows.getByRole("button", { name: writeName }).click();
    // The task call's own result is the subagent's answer.
    const taskName = new RegExp(`Tool task: description=${task.description.slice(0, 40)}`);
    const taskCall = timeline.getByRole("button", { name: taskName });
    await taskCall.click();
    const taskRow = timeline.getByRole("listitem").filter({ has: page.getByRole("button", { name: taskName }) });
    await expect(taskRow.getByRole("group", { name: "Result" })).toHaveText(
      subtaskAnswer(task),
    );
    await taskCall.click();
    // A subagent's rows close and open again with its button.
    await toggle.click();
    await expect(toggle).toHaveAttribute("aria-expanded", "false");
    await expect(rows).toBeHidden();
    await toggle.click();
    await expect(rows).toBeVisible();
  }
  // Both files the subagents wrote are the session's.
  await expect(page.getByRole("link", { name: "Download compraventa.md" })).toBeVisible();
  await expect(page.getByRole("link", { name: "Download hipoteca.md" })).toBeVisible();
  expect(await accessibilityViolations(page)).toEqual([]);
  await turn.evaluate((element) => element.scrollIntoView({ block: "start" }));
  await page.screenshot({ path: `${SHOTS}/subagents.png`, fullPage: true });
});

test("a turn whose stream breaks mid-call reads as failed, its open calls and subagents as not finished", async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 1200 });
  // The runtime's real stream, cut after a subagent's call once both subagents started: the
  // connection drops there, before that call's result, the subagents' ends and the turn's last event.
  await page.route("**/api/sessions/*/turns", async (route) => {
    const response = await route.fetch();
    const events = (await response.text()).split("\n\n");
    const starts = events.flatMap((block, index) => (block.startsWith("event: subagent.started") ? [index] : []));
    expect(starts.length, events.join("\n\n")).toBe(2);
    const isSubagentCall = (block: string) => block.startsWith("event: tool.call") && block.includes('"subagent"');
    const cut = events.findIndex((block, index) => index > starts[1] && isSubagentCall(block));
    expect(cut, events.join("\n\n")).toBeGreaterThan(0);
    await route.fulfill({ response, body: events.slice(0, cut + 1).join("\n\n") + "\n\n" });
  });
  await open(page);
  await send(page, DELEGATION);
  const turn = lastTurn(page);
  await expect(turnBadge(turn)).toHaveText("failed", { timeout: 30_000 });
  await expect(turn.getByRole("alert")).toContainText("stream_ended");
  const timeline = turn.getByRole("list", { name: /Timeline of turn/ });
  // Nothing the cut left open still says it runs: the task calls, the subagents and the call one made.
  await expect(timeline).not.toContainText("running");
  const taskRows = timeline.getByRole("listitem").filter({ has: page.getByRole("button", { name: /Tool task:/ }) });
  await expect(taskRows).toHaveCount(2);
  for (const row of await taskRows.all()) {
    await expect(row.locator(":scope > .badge")).toHaveText("not finished");
  }
  const subagents = timeline.locator(".row-subagent > .badge");
  await expect(subagents).toHaveCount(2);
  await expect(subagents).toHaveText(["not finished", "not finished"]);
  const subagentCall = timeline.getByRole("list", { name: /Timeline of subagent/ }).getByRole("listitem").filter({
    has: page.getByRole("button", { name: /Tool write_file:/ }),
  });
  await expect(subagentCall.first().locator(":scope > .badge")).toHaveText("not finished");
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/stream-broken.png`, fullPage: true });
});

test("a call that needs approval waits for Approve, Edit or Reject, and the turn goes on as decided", async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 1500 });
  await open(page);
  await takeNote(page);

  // The edit waits: the turn shows the call with the three choices, and nothing has run.
  const { turn: paused, panel } = await pausedBy(page, RESCHEDULE);
  const call = panel.getByRole("listitem", { name: "Call edit_file" });
  await expect(call).toContainText("old_string=10:00");
  const send_ = panel.getByRole("button", { name: "Send decisions" });
  await expect(send_).toBeDisabled();
  const choices = call.getByRole("group", { name: /Decision for edit_file/ });
  await expect(choices.getByRole("button")).toHaveText(["Approve", "Edit", "Reject"]);
  // The turn reads as waiting for the person, not as completed.
  await expect(turnBadge(paused)).toHaveText("awaiting approval");
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/approval.png`, fullPage: true });

  // Edited to another hour, then sent: the edit runs, the answer comes, the panel is gone.
  await choices.getByRole("button", { name: "Edit" }).click();
  await expect(choices.getByRole("button", { name: "Edit" })).toHaveAttribute("aria-pressed", "true");
  const editor = call.getByRole("textbox", { name: "Arguments of edit_file (JSON)" });
  const edited = JSON.parse(await editor.inputValue());
  expect(edited).toEqual({ file_path: "/workspace/nota.md", old_string: "10:00", new_string: "11:00" });
  await editor.fill("{ not json");
  await expect(send_).toBeDisabled();
  await editor.fill(JSON.stringify({ ...edited, new_string: "11:30" }));
  await send_.click();
  await expect(panel).toBeHidden();
  const resumed = lastTurn(page);
  await expect(resumed.getByRole("group", { name: "Answer" })).toHaveText(RESCHEDULED, { timeout: 30_000 });
  await expect(resumed.getByRole("list", { name: /Timeline of turn/ })).toContainText("Tool edit_file:");
  const link = page.getByRole("link", { name: "Download nota.md" });
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const saved = await readFile(await download.path(), "utf8");
  expect(saved).toContain("11:30");
  expect(saved).not.toContain("10:00");
  await expect(resumed.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false");

  // Asked again and rejected with a reason: nothing changes and the model hears why.
  const { panel: again } = await pausedBy(page, RESCHEDULE);
  await again.getByRole("button", { name: "Reject" }).click();
  await again.getByRole("textbox", { name: "Reason for the model (optional)" }).fill("Ya está bien así.");
  await again.getByRole("button", { name: "Send decisions" }).click();
  await expect(lastTurn(page).getByRole("group", { name: "Answer" })).toHaveText(NOT_RESCHEDULED, {
    timeout: 30_000,
  });
  await lastTurn(page).getByRole("button", { name: /Tool edit_file:/ }).click();
  await expect(lastTurn(page).getByRole("group", { name: "Result" })).toContainText("Their message: Ya está bien así.");
  // The paused turns still read as how they ended, and the turns that went on as completed.
  await expect(turnBadge(turnNumber(page, 2))).toHaveText("awaiting approval");
  await expect(turnBadge(turnNumber(page, 3))).toHaveText("completed");

  // Read back from the stored history, a paused turn's call has no result there: it waits, not runs.
  await reopen(page, await openSessionId(page));
  const stored = turnNumber(page, 2);
  await expect(turnBadge(stored)).toHaveText("awaiting approval");
  const storedCall = stored.getByRole("listitem").filter({ has: page.getByRole("button", { name: /Tool edit_file:/ }) });
  await expect(storedCall.locator(".badge")).toHaveText("awaiting approval");
  await expect(turnBadge(turnNumber(page, 3))).toHaveText("saved");
});

test("a subagent's call that needs approval shows which subagent asks, and once approved the subagent and the turn finish", async ({
  page,
}) => {
  await page.setViewportSize({ width: 1280, height: 1500 });
  await open(page);
  await takeNote(page);

  // The subagent's edit waits: the panel shows the call with the subagent that asks for it.
  const { turn: paused, panel } = await pausedBy(page, DELEGATED_RESCHEDULE);
  const call = panel.getByRole("listitem", { name: "Call edit_file" });
  await expect(call).toHaveCount(1);
  await expect(call).toContainText("new_string=12:00");
  const badge = call.getByText(/^asked by subagent sa-\d+$/);
  await expect(badge).toBeVisible();
  const subagent = (await badge.innerText()).replace("asked by subagent ", "").trim();
  // The badge reads apart from the call's last argument.
  await expect(call).toContainText(`old_string=10:00 asked by subagent ${subagent}`);
  // The subagent named is the one the turn's task call started, which waits with its call.
  const row = paused
    .getByRole("list", { name: /Timeline of turn/ })
    .getByRole("listitem")
    .filter({ has: page.getByText(RESCHEDULE_TASK, { exact: true }) });
  await expect(row.getByRole("button", { name: `Subagent ${subagent} (general-purpose)` })).toBeVisible();
  // The turn waits for the person, and so does the task call whose subagent paused: neither has completed or runs.
  await expect(turnBadge(paused)).toHaveText("awaiting approval");
  const taskName = /Tool task: description=Cambia en/;
  const taskRowOf = (turn: Locator) =>
    turn
      .getByRole("list", { name: /Timeline of turn/ })
      .getByRole("listitem")
      .filter({ has: page.getByRole("button", { name: taskName }) });
  await expect(taskRowOf(paused).locator(".badge")).toHaveText("awaiting approval");
  expect(await accessibilityViolations(page)).toEqual([]);
  await paused.evaluate((element) => element.scrollIntoView({ block: "start" }));
  await page.screenshot({ path: `${SHOTS}/subagent-approval.png`, fullPage: true });

  // Approved: the decision names the call inside its subagent, and the edit runs there.
  const decided = page.waitForRequest((request) => request.method() === "POST" && request.url().endsWith("/turns"));
  await call.getByRole("button", { name: "Approve" }).click();
  await panel.getByRole("button", { name: "Send decisions" }).click();
  const body = (await decided).postDataJSON();
  expect(body.decisions).toHaveLength(1);
  expect(body.decisions[0].decision).toBe("approve");
  expect(body.decisions[0].call_id).toMatch(new RegExp(`^${subagent}/call_\\d+$`));
  await expect(panel).toBeHidden();

  // The subagent answers, its answer is the task's result, and the parent answers after it.
  const resumed = lastTurn(page);
  await expect(resumed.getByRole("group", { name: "Answer" })).toHaveText(DELEGATED_RESCHEDULED, { timeout: 30_000 });
  await expect(resumed.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false");
  const timeline = resumed.getByRole("list", { name: /Timeline of turn/ });
  const finished = timeline.getByRole("listitem").filter({ has: page.getByText(RESCHEDULE_TASK, { exact: true }) });
  await expect(finished.getByRole("button", { name: `Subagent ${subagent} (general-purpose)` })).toBeVisible();
  await expect(finished.getByText(/^answered · 2 steps$/)).toBeVisible();
  await expect(finished).toContainText(`→ ${SUBAGENT_RESCHEDULED}`);
  await expect(finished.getByRole("list", { name: `Timeline of subagent ${subagent}` })).toContainText("Tool edit_file:");
  await timeline.getByRole("button", { name: taskName }).click();
  const taskRow = taskRowOf(resumed);
  await expect(taskRow.locator(".badge")).toHaveText("ok");
  await expect(taskRow.getByRole("group", { name: "Result" })).toHaveText(SUBAGENT_RESCHEDULED);
  await expect(turnBadge(resumed)).toHaveText("completed");
  // The paused turn above keeps how it ended: its task call waited, it never reads as running.
  await expect(turnBadge(turnNumber(page, 2))).toHaveText("awaiting approval");
  await expect(taskRowOf(turnNumber(page, 2)).locator(".badge")).toHaveText("awaiting approval");
  const link = page.getByRole("link", { name: "Download nota.md" });
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const saved = await readFile(await download.path(), "utf8");
  expect(saved).toContain("12:00");
  expect(saved).not.toContain("10:00");

  // Read back from the stored history: the paused turn's task call has no result there, and waits.
  await reopen(page, await openSessionId(page));
  await expect(turnBadge(turnNumber(page, 2))).toHaveText("awaiting approval");
  await expect(taskRowOf(turnNumber(page, 2)).locator(".badge")).toHaveText("awaiting approval");
  await expect(turnBadge(turnNumber(page, 3))).toHaveText("saved");
});

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
async function accessibilityViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  return results.violations.map(
    (violation) => `${violation.id} (${violation.impact}): ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`,
  );
}

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

/** Runs a command to its end: its exit code and everything it printed. */
function run(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}
