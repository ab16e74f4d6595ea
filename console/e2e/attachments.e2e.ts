// Files into the conversation in a real browser, against `cargo xtask console` with its demo model:
// a PNG attached with the file picker, dropped or pasted, uploaded as it is added, sent with the
// message and seen by the model (its reply says so); the thumbnails of what the model was shown,
// from `/shown/`, live and from the stored session; a fake `.png` refused with the API's message.
import { expect, test, type Page } from "@playwright/test";

import { landscape } from "./png";
import {
  IMAGE_SEEN,
  IMAGES_SEEN,
  LOOK_AGAIN,
  SHOTS,
  TOOL_SEEN,
  accessibilityViolations,
  lastTurn,
  makeShotsFolder,
  open,
  openSessionId,
  reopen,
  send,
  turnNumber,
} from "./support";

test.beforeAll(makeShotsFolder);

const SELLO = landscape(160, 100);

/** The composer's chips, and the one of the file named `name`. */
function chips(page: Page) {
  return page.getByRole("list", { name: "Files to attach" });
}

function chip(page: Page, name: string | RegExp) {
  return chips(page).getByRole("listitem").filter({ has: page.getByText(name, { exact: true }) });
}

/** An attached image as the demo model describes it. */
const described = (path: string, width: number, height: number) => `${path}, de ${width}×${height} píxeles`;

/** Whether an <img> has loaded, and its natural width. */
const loadedWidth = (image: ReturnType<Page["getByAltText"]>) =>
  image.evaluate((element) => (element as HTMLImageElement).complete && (element as HTMLImageElement).naturalWidth);

test("a PNG attached with the file picker is uploaded, seen by the model, and shown from /shown/ live and stored", async ({
  page,
}) => {
  await page.setViewportSize({ width: 1280, height: 1000 });
  await open(page);
  const chooser = page.waitForEvent("filechooser");
  await page.getByRole("button", { name: "Attach files" }).click();
  await (await chooser).setFiles({ name: "sello.png", mimeType: "image/png", buffer: SELLO });
  const sello = chip(page, "sello.png");
  await expect(sello.getByAltText("Preview of sello.png")).toBeVisible();
  await expect(sello).toContainText("ready");
  // A ready file can be sent on its own.
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
  await page.getByRole("textbox", { name: "Message", exact: true }).fill("¿Qué ves en esta imagen?");
  await page.screenshot({ path: `${SHOTS}/attachment-chip.png` });

  const served = page.waitForResponse((response) => response.url().includes("/shown/") && response.status() === 200);
  await page.getByRole("textbox", { name: "Message", exact: true }).press("Enter");
  const turn = lastTurn(page);
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveText(IMAGE_SEEN.replace("{file}", described("/workspace/sello.png", 160, 100)), {
    timeout: 30_000,
  });
  await expect(chips(page)).toHaveCount(0);
  // The message's thumbnail is the image as the model was shown it, fetched with the user's token.
  expect((await served).headers()["content-type"]).toContain("image/png");
  const thumbnail = turn.getByRole("list", { name: "Attached files" }).getByAltText("/workspace/sello.png");
  await expect(thumbnail).toBeVisible();
  await expect.poll(() => loadedWidth(thumbnail)).toBe(160);

  // It opens full size, and Escape closes it.
  await turn.getByRole("button", { name: "Open /workspace/sello.png full size" }).click();
  const dialog = page.getByRole("dialog", { name: "/workspace/sello.png" });
  await expect(dialog.getByAltText("/workspace/sello.png")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/attachment-lightbox.png` });
  await page.keyboard.press("Escape");
  await expect(dialog).toBeHidden();

  // The model reads it again with read_file: the call's row shows what the tool showed it, live.
  await send(page, LOOK_AGAIN);
  const next = lastTurn(page);
  const said = TOOL_SEEN.replace("{file}", described("/workspace/sello.png", 160, 100)).replace("{kind}", "imagen");
  await expect(next.getByRole("group", { name: "Answer" })).toHaveText(said, { timeout: 30_000 });
  const readRow = next
    .getByRole("list", { name: /Timeline of/ })
    .getByRole("listitem")
    .filter({ has: page.getByRole("button", { name: /Tool read_file/ }) });
  await expect(readRow.getByRole("list", { name: "Files shown to the model" }).getByAltText("/workspace/sello.png")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/attachments-live.png`, fullPage: true });

  // The stored session shows the same: the message's file, the note the model read, the call's file.
  await reopen(page, await openSessionId(page));
  const first = turnNumber(page, 1);
  const stored = first.getByRole("list", { name: "Attached files" }).getByAltText("/workspace/sello.png");
  await expect(stored).toBeVisible();
  await expect.poll(() => loadedWidth(stored)).toBe(160);
  await first.getByText("What the model was told about the attachments").click();
  await expect(first.locator(".attached-note")).toContainText("/workspace/sello.png");
  const storedRead = turnNumber(page, 2)
    .getByRole("listitem")
    .filter({ has: page.getByRole("button", { name: /Tool read_file/ }) });
  await expect(storedRead.getByAltText("/workspace/sello.png")).toBeVisible();
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/attachments-stored.png`, fullPage: true });
});

test("files dropped and pasted join the message, Send waits for their uploads, and a fake .png shows the API's 400", async ({
  page,
}) => {
  await page.setViewportSize({ width: 1280, height: 1000 });
  await open(page);
  // Uploads held back a moment, so the page is seen while they are under way.
  await page.route("**/api/sessions/*/uploads/*", async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await route.continue();
  });
  const box = page.getByRole("textbox", { name: "Message", exact: true });
  await box.fill("Mira estas dos");

  // A drop anywhere on the conversation.
  const bytes = [...SELLO];
  const dropped = await page.evaluateHandle((data) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([new Uint8Array(data)], "soltado.png", { type: "image/png" }));
    return transfer;
  }, bytes);
  const conversation = page.getByRole("main");
  await conversation.dispatchEvent("dragover", { dataTransfer: dropped });
  await expect(page.locator(".drop-hint")).toBeVisible();
  await conversation.dispatchEvent("drop", { dataTransfer: dropped });
  await expect(page.locator(".drop-hint")).toBeHidden();
  await expect(chip(page, "soltado.png")).toContainText("uploading");
  await expect(page.getByRole("button", { name: "Send" })).toBeDisabled();
  await page.screenshot({ path: `${SHOTS}/attachment-uploading.png` });

  // A pasted image, named by the time it was pasted.
  await box.evaluate((field, data) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([new Uint8Array(data)], "image.png", { type: "image/png" }));
    field.dispatchEvent(new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true }));
  }, bytes);
  const pasted = chip(page, /^pasted-\d{8}-\d{6}\.png$/);
  await expect(pasted.getByRole("img")).toBeVisible();

  // Text bytes named .png: the API refuses them, and the chip says what it said.
  const refused = page.waitForResponse((response) => response.url().includes("/uploads/falso.png"));
  await page.getByRole("main").locator('input[type="file"]').setInputFiles({
    name: "falso.png",
    mimeType: "image/png",
    buffer: Buffer.from("esto no es una imagen\n"),
  });
  const answer = await refused;
  expect(answer.status()).toBe(400);
  const message = ((await answer.json()) as { error: { message: string } }).error.message;
  const falso = chip(page, "falso.png");
  await expect(falso.getByRole("alert")).toHaveText(message);
  await expect(falso).toContainText("failed");

  await expect(chip(page, "soltado.png")).toContainText("ready");
  await expect(pasted).toContainText("ready");
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
  await page.screenshot({ path: `${SHOTS}/attachment-refused.png` });

  // The turn carries the two ready images; the model names both.
  const pastedName = (await pasted.locator(".chip-name").innerText()).trim();
  await box.press("Enter");
  const turn = lastTurn(page);
  const files = [described("/workspace/soltado.png", 160, 100), described(`/workspace/${pastedName}`, 160, 100)];
  const both = IMAGES_SEEN.replace("{count}", "2").replace("{files}", files.join("; "));
  await expect(turn.getByRole("group", { name: "Answer" })).toHaveText(both, { timeout: 30_000 });
  await expect(chips(page)).toHaveCount(0);
  const attached = turn.getByRole("list", { name: "Attached files" });
  await expect(attached.getByAltText("/workspace/soltado.png")).toBeVisible();
  await expect(attached.getByAltText(`/workspace/${pastedName}`)).toBeVisible();
  await expect(attached).not.toContainText("falso.png");
  // The files are the session's workspace files too.
  await page.getByRole("tab", { name: /Workspace/ }).click();
  await expect(page.getByRole("link", { name: "Download soltado.png" })).toBeVisible();
  expect(await accessibilityViolations(page)).toEqual([]);
  await page.screenshot({ path: `${SHOTS}/attachments-dropped-pasted.png`, fullPage: true });
});
