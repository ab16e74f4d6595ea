// Approvals in a real browser: a call that waits for a person, its own and a subagent's, against
// `cargo xtask console` with its demo model.
import { readFile } from "node:fs/promises";

import { expect, test, type Locator } from "@playwright/test";

import {
  DELEGATED_RESCHEDULE,
  DELEGATED_RESCHEDULED,
  NOT_RESCHEDULED,
  RESCHEDULE,
  RESCHEDULE_TASK,
  RESCHEDULED,
  SUBAGENT_RESCHEDULED,
  SHOTS,
  makeShotsFolder,
  open,
  takeNote,
  pausedBy,
  lastTurn,
  turnNumber,
  turnBadge,
  reopen,
  openSessionId,
  accessibilityViolations,
  run,
} from "./support";

test.beforeAll(makeShotsFolder);

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
  expect(body.decisions[0].call_id).toMatch(new RegExp(`^${subagent}/call_[\\d_]+$`));
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
