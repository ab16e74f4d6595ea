// The conversation in a real browser (Debian's Chromium, headless), against `cargo xtask console`
// with its demo model: streamed answers, tool calls, slash commands, subagents, a broken stream.
import { readFile } from "node:fs/promises";

import { expect, test } from "@playwright/test";

import {
  DELEGATED,
  DELEGATION,
  GREETING,
  NOTE_TEXT,
  SUBTASKS,
  WORD_FAILED,
  WORD_FILE,
  SHOTS,
  makeShotsFolder,
  open,
  send,
  takeNote,
  lastTurn,
  turnBadge,
  accessibilityViolations,
  run,
} from "./support";

test.beforeAll(makeShotsFolder);

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
    await expect(row).toContainText(`→ ${task.answer}`);
    // Its two model calls' tokens, attributed to it, the input split as the provider counted it.
    await expect(row.getByLabel("Subagent tokens")).toContainText(/^200 input \([\d,]+ uncached · [\d,]+ cache write · [\d,]+ cache read\) \/ 20 output tokens/);
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
    await expect(taskRow.getByRole("group", { name: "Result" })).toHaveText(task.answer);
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
  // The cut call is the last one: a subagent that answered fast may have ended its own call before the other started.
  await expect(subagentCall.last().locator(":scope > .badge")).toHaveText("not finished");
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/stream-broken.png`, fullPage: true });
});
