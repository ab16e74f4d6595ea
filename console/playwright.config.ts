// The console's browser tests: Debian's Chromium, headless, driven by Playwright against the real
// `cargo xtask console` (compiled functions, moto) with a scripted model speaking OpenAI's API.
import { defineConfig } from "@playwright/test";

const consolePort = Number(process.env.CONSOLE_TEST_PORT ?? 18765);
const modelPort = Number(process.env.MODEL_PORT ?? 18766);
/** The xtask binary `cargo xtask test` built (it also built the functions and the page). */
const xtask = process.env.XTASK_BIN ?? "../target/debug/xtask";

export default defineConfig({
  testDir: "e2e",
  // Named apart from the unit tests (`*.test.ts`, run by Vitest).
  testMatch: "**/*.e2e.ts",
  // One console and one scripted model serve every test; they run one after another.
  workers: 1,
  fullyParallel: false,
  timeout: 60_000,
  expect: { timeout: 15_000 },
  outputDir: "../target/console-test-results",
  reporter: [["list"]],
  use: {
    baseURL: `http://127.0.0.1:${consolePort}`,
    headless: true,
    acceptDownloads: true,
    screenshot: "only-on-failure",
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
      // This machine's network is closed: Chromium's own background connections are turned off.
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  webServer: [
    {
      command: "node e2e/model-server.mjs",
      url: `http://127.0.0.1:${modelPort}/health`,
      env: { MODEL_PORT: String(modelPort) },
      reuseExistingServer: false,
      timeout: 20_000,
    },
    {
      command: `${xtask} console --no-build --port ${consolePort}`,
      url: `http://127.0.0.1:${consolePort}/console/config`,
      env: {
        LLM_PROVIDER: "openai",
        LLM_BASE_URL: `http://127.0.0.1:${modelPort}/v1`,
        LLM_MODEL: "scripted",
        LLM_API_KEY: "test-key",
      },
      reuseExistingServer: false,
      // moto starts and the functions are started in two instances each.
      timeout: 120_000,
      stdout: "pipe",
      stderr: "pipe",
    },
  ],
});
