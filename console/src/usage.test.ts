// The input split and the cost as the usage panel and a turn's summary show them.

import { describe, expect, it } from "vitest";

import { formatCost, formatInputSplit, formatUsd, inputSplit } from "./usage";

describe("inputSplit", () => {
  it("takes the provider's split, and reads an old server's input as uncached", () => {
    const split = { input_tokens: 5300, output_tokens: 10, uncached_input_tokens: 1000, cache_read_tokens: 4000, cache_write_tokens: 300 };
    expect(inputSplit(split)).toEqual({ uncached: 1000, cacheWrite: 300, cacheRead: 4000 });
    expect(inputSplit({ input_tokens: 300, output_tokens: 30 })).toEqual({ uncached: 300, cacheWrite: 0, cacheRead: 0 });
    expect(inputSplit({ input_tokens: 300, output_tokens: 30, cache_read_tokens: 200 })).toEqual({ uncached: 100, cacheWrite: 0, cacheRead: 200 });
    expect(formatInputSplit(split)).toBe("1,000 uncached · 300 cache write · 4,000 cache read");
  });
});

describe("formatUsd", () => {
  it("shows dollars, small sums to four digits, and no price for a model without one", () => {
    expect(formatUsd(12.3456)).toBe("$12.35");
    expect(formatUsd(0.012345)).toBe("$0.01235");
    expect(formatUsd(0)).toBe("$0.00");
    expect(formatUsd(null)).toBe("no price");
    expect(formatUsd(undefined)).toBe("no price");
  });

  it("says what a cost leaves out", () => {
    expect(formatCost(0.5, 2)).toBe("$0.5 (+2 calls with no price)");
    expect(formatCost(null, 3)).toBe("no price");
    expect(formatCost(0.25)).toBe("$0.25");
  });
});
