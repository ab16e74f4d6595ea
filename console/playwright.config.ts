// The console's browser tests: Debian's Chromium, headless, driven by Playwright against the real
// `cargo xtask console` (compiled functions, moto) as a user starts it, so with its demo model
// (scripted, speaking OpenAI's API), whose texts (`demo-model/texts.json`) the tests read.
import { defineConfig } from "@playwright/test";

const consolePort = Number(process.env.CONSOLE_TEST_PORT ?? 18765);
/** The xtask binary `cargo xtask test` built (it also built the functions and the page). */
const xtask = process.env.XTASK_BIN ?? "../target/debug/xtask";

export default defineConfig({
  testDir: "e2e",
  // Named apart from the unit tests (`*.test.ts`, run by Vitest).
  testMatch: "**/*.e2e.ts",
  // One console serves every test; they run one after another.
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
  webServer: {
    command: `${xtask} console --no-build --port ${consolePort}`,
    url: `http://127.0.0.1:${consolePort}/console/config`,
    env: {
      // No model of the developer's: the console starts its demo model, as for a new user.
      LLM_PROVIDER: "",
      // Slow enough that the page shows text before the turn ends (the greeting's 98 words take about
      // 4 s), and no slower: the turns' words are most of these tests' time.
      MODEL_WORD_DELAY_MS: "40",
      // The demo's note edit waits for a person, as a deployment's policy would make it.
      APPROVAL_REQUIRED: "edit_file",
    },
    reuseExistingServer: false,
    // moto starts and the functions are started in two instances each.
    timeout: 120_000,
    stdout: "pipe",
    stderr: "pipe",
  },
});
