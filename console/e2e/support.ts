// What the console's browser tests share: the demo model's texts, the screenshots' folder, and
// the steps a user takes (open the console, send a message, wait for a turn or its approval panel).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";

import AxeBuilder from "@axe-core/playwright";
import { expect, type Locator, type Page } from "@playwright/test";

/** What the demo model says and writes, as `cargo xtask console`'s demo model reads it. */
export const {
  DELEGATED,
  DELEGATED_RESCHEDULE,
  DELEGATED_RESCHEDULED,
  DELEGATION,
  GREETING,
  IMAGE_SEEN,
  IMAGES_SEEN,
  LOOK_AGAIN,
  NOT_RESCHEDULED,
  NOTE_TEXT,
  RESCHEDULE,
  RESCHEDULE_TASK,
  RESCHEDULED,
  SUBAGENT_RESCHEDULED,
  SUBTASKS,
  TOOL_SEEN,
  WORD_FAILED,
  WORD_FILE,
} = JSON.parse(readFileSync(new URL("../demo-model/texts.json", import.meta.url), "utf8")) as DemoTexts;

/** The texts of `demo-model/texts.json` the tests read. */
type DemoTexts = Record<
  | "DELEGATED"
  | "DELEGATED_RESCHEDULE"
  | "DELEGATED_RESCHEDULED"
  | "DELEGATION"
  | "GREETING"
  | "IMAGE_SEEN"
  | "IMAGES_SEEN"
  | "LOOK_AGAIN"
  | "NOT_RESCHEDULED"
  | "NOTE_TEXT"
  | "RESCHEDULE"
  | "RESCHEDULE_TASK"
  | "RESCHEDULED"
  | "SUBAGENT_RESCHEDULED"
  | "TOOL_SEEN"
  | "WORD_FAILED"
  | "WORD_FILE",
  string
> & { SUBTASKS: { topic: string; description: string; file: string; content: string; answer: string }[] };

/** Screenshots of the main views, kept as the run's artifacts. */
export const SHOTS = "../target/console-screenshots";

/** Makes the screenshots' folder; each test file runs it before its tests. */
export async function makeShotsFolder() {
  await mkdir(SHOTS, { recursive: true });
}

/** Opens the console as `user` with a new session. */
export async function open(page: Page, user: "ana" | "ben" = "ana") {
  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Skill console" })).toBeVisible();
  await page.getByLabel("User", { exact: true }).selectOption(user);
  await page.getByRole("button", { name: "New session" }).click();
}

/** Types `message` into the composer and sends it. */
export async function send(page: Page, message: string) {
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill(message);
  await box.press("Enter");
}

/** Sends "Toma nota de la reunión del martes" and waits until its turn has completed, so the composer takes the next message. */
export async function takeNote(page: Page) {
  await send(page, "Toma nota de la reunión del martes");
  const answer = lastTurn(page).getByRole("group", { name: "Answer" });
  await expect(answer).toContainText("He guardado la nota", { timeout: 30_000 });
  await expect(answer).toHaveAttribute("aria-busy", "false");
}

/** Sends `message`, whose turn pauses for approval, and gives that turn and its approval panel once shown. */
export async function pausedBy(page: Page, message: string) {
  await send(page, message);
  const turn = lastTurn(page);
  const panel = turn.getByRole("region", { name: "Waiting for your approval" });
  await expect(panel).toBeVisible({ timeout: 30_000 });
  return { turn, panel };
}

/** The newest turn of the conversation. */
export function lastTurn(page: Page) {
  return page.getByRole("main").getByRole("article").last();
}

/** Turn `number` of the conversation, found by its heading. */
export function turnNumber(page: Page, number: number) {
  return page.getByRole("main").getByRole("article", { name: `Turn ${number}`, exact: true });
}

/** The badge beside a turn's heading: how the turn stands. */
export function turnBadge(turn: Locator) {
  return turn.locator(".turn-head .badge");
}

/** The page loaded afresh with session `id` opened from the list, its turns read from its history. */
export async function reopen(page: Page, id: string) {
  await page.reload();
  await page.getByRole("list", { name: "Sessions of this user" }).getByRole("button").filter({ hasText: id }).click();
  await expect(page.getByRole("main").getByRole("article").first()).toBeVisible();
}

/** The id of the session open now (the current entry of the session list). */
export async function openSessionId(page: Page): Promise<string> {
  const current = page.getByRole("list", { name: "Sessions of this user" }).locator('[aria-current="true"] .session-id');
  return (await current.innerText()).trim();
}

/** Axe's WCAG 2.1 AA violations of the page, or of the part `within` selects. */
export async function accessibilityViolations(page: Page, within?: string): Promise<string[]> {
  const builder = new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]);
  const results = await (within ? builder.include(within) : builder).analyze();
  return results.violations.map(
    (violation) => `${violation.id} (${violation.impact}): ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`,
  );
}

/** Runs a command to its end: its exit code and everything it printed. */
export function run(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}
