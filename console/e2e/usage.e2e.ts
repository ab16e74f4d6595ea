// The usage panel and a turn's summary in a real browser against `cargo xtask console`: tokens with
// the input split into uncached, cache write and cache read, and a cost in dollars, or "no price"
// for the demo model (no price table names it), per day and per model.
import { expect, test } from "@playwright/test";

import { SHOTS, accessibilityViolations, lastTurn, makeShotsFolder, open, send } from "./support";

test.beforeAll(makeShotsFolder);

/** A cost as the console shows it: dollars, or "no price". */
const COST = /\$\d|no price/;
/** The input's three parts, as a turn's summary gives them. */
const SPLIT = /[\d,]+ uncached · [\d,]+ cache write · [\d,]+ cache read/;
/** The same parts as the usage panel lists them, one a row. */
const PARTS = /uncached\s*[\d,]+\s*cache write\s*[\d,]+\s*cache read\s*[\d,]+/;

test("a turn's summary and the usage panel give the input split and the cost per day and model", async ({ page }) => {
  await open(page);
  await send(page, "Hola, ¿qué tal?");
  // The panel reads `GET /usage` again once the turn has completed.
  const usageAnswer = page.waitForResponse((response) => response.url().includes("/api/usage") && response.ok());
  const turn = lastTurn(page);
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveAttribute("aria-busy", "false", { timeout: 30_000 });
  const summary = turn.getByRole("note", { name: "Turn summary" });
  await expect(summary).toContainText(SPLIT);
  await expect(summary).toContainText(COST);

  const panel = page.getByRole("region", { name: "Usage" });
  const totals = panel.getByLabel("Usage totals");
  await expect(totals).toContainText(PARTS);
  await expect(totals).toContainText("Output tokens");
  const days = panel.getByRole("list", { name: "Usage by day and model" });
  await expect(days).toBeVisible();
  // The latest day is open, its models inside; the demo model has no price.
  const today = new Date().toISOString().slice(0, 10);
  const day = days.getByRole("listitem").filter({ hasText: today });
  await expect(day).toBeVisible();
  const model = day.getByLabel(`${today} console-demo`);
  await expect(model).toContainText(PARTS);
  await expect(model).toContainText("Model calls");
  // A server that prices (GET /usage with `cost_usd`) shows the cost; this one's demo model has none.
  const report = (await (await usageAnswer).json()) as { totals?: { cost_usd?: number | null } };
  if (report.totals && "cost_usd" in report.totals) {
    await expect(totals).toContainText(COST);
    await expect(model).toContainText(COST);
  }
  await panel.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/usage.png`, fullPage: true });
  await panel.screenshot({ path: `${SHOTS}/usage-panel.png` });
  // The price table's sources open under its date.
  const sources = panel.getByText("Sources");
  if (await sources.count()) {
    await sources.click();
    await expect(panel.locator(".usage-prices li").first()).toBeVisible();
    await panel.screenshot({ path: `${SHOTS}/usage-sources.png` });
  }
  expect(await accessibilityViolations(page, ".usage")).toEqual([]);
});
