// Tests of the load slot under useAbortableLoad: a newer load aborts the older, whose abort is
// not reported, and only the newest load ends the loading state.
import { describe, expect, it } from "vitest";

import { LoadSlot, type LoadReport } from "./useAbortableLoad";

/** A report that records what the slot said, in order. */
function recorder(): LoadReport & { said: string[] } {
  const said: string[] = [];
  return {
    said,
    loading: (loading) => said.push(`loading ${loading}`),
    error: (error) => said.push(`error ${error}`),
  };
}

/** A load that waits for its signal to abort, and rejects as fetch does then. */
function untilAborted(seen: AbortSignal[]) {
  return (signal: AbortSignal) =>
    new Promise<void>((_, reject) => {
      seen.push(signal);
      signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    });
}

describe("LoadSlot", () => {
  it("aborts the load in flight when a new one starts, and reports neither the abort nor its end", async () => {
    const slot = new LoadSlot();
    const report = recorder();
    const signals: AbortSignal[] = [];
    const first = slot.run(untilAborted(signals), report);
    const second = slot.run(async () => {}, report);
    await Promise.all([first, second]);
    expect(signals[0].aborted).toBe(true);
    expect(report.said).toEqual(["loading true", "error null", "loading true", "error null", "loading false"]);
  });

  it("shows a failure as its message, or as the line onError makes of it, or not at all", async () => {
    const slot = new LoadSlot();
    const said = async (load: () => Promise<void>, onError?: (err: unknown) => string | null) => {
      const report = recorder();
      await slot.run(load, report, onError);
      return report.said;
    };
    const failing = () => Promise.reject(new Error("503 Service Unavailable"));
    expect(await said(failing)).toEqual(["loading true", "error null", "error 503 Service Unavailable", "loading false"]);
    expect(await said(failing, (err) => `Could not load: ${String(err)}`)).toEqual([
      "loading true",
      "error null",
      "error Could not load: Error: 503 Service Unavailable",
      "loading false",
    ]);
    expect(await said(failing, () => null)).toEqual(["loading true", "error null", "error null", "loading false"]);
  });

  it("abort stops the load in flight without reporting it", async () => {
    const slot = new LoadSlot();
    const report = recorder();
    const signals: AbortSignal[] = [];
    const load = slot.run(untilAborted(signals), report);
    slot.abort();
    await load;
    expect(signals[0].aborted).toBe(true);
    expect(report.said).toEqual(["loading true", "error null"]);
  });
});
