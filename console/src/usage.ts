// What the usage panel and a turn's summary say of tokens and money: the input split into uncached,
// cache write and cache read (as the provider counted it), and a cost in dollars or "no price".

import type { Tokens } from "./api";
import { formatCount } from "./format";


/** The input's three parts. A server without the split counts every input token as uncached. */
export function inputSplit(tokens: Tokens): { uncached: number; cacheWrite: number; cacheRead: number } {
  const cacheRead = tokens.cache_read_tokens ?? 0;
  const cacheWrite = tokens.cache_write_tokens ?? 0;
  const uncached = tokens.uncached_input_tokens ?? Math.max(0, tokens.input_tokens - cacheRead - cacheWrite);
  return { uncached, cacheWrite, cacheRead };
}

/** `1,200 uncached · 300 cache write · 4,000 cache read`. */
export function formatInputSplit(tokens: Tokens): string {
  const { uncached, cacheWrite, cacheRead } = inputSplit(tokens);
  return `${formatCount(uncached)} uncached · ${formatCount(cacheWrite)} cache write · ${formatCount(cacheRead)} cache read`;
}

/**
 * Dollars with enough digits to tell a cheap turn from nothing: cents from a dollar up, four
 * significant digits below it. Null is "no price": the model has none in the price table.
 * `undefined` (a server that does not price) is null too; callers that must tell them apart check.
 */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return "no price";
  if (usd === 0) return "$0.00";
  if (usd >= 1) return `$${usd.toFixed(2)}`;
  return `$${Number(usd.toPrecision(4)).toString()}`;
}

/** A cost with what it leaves out: `$0.0123 (+2 calls with no price)`. */
export function formatCost(usd: number | null | undefined, unpricedCalls = 0): string {
  const cost = formatUsd(usd);
  if (usd === null || usd === undefined || unpricedCalls <= 0) return cost;
  return `${cost} (+${formatCount(unpricedCalls)} ${unpricedCalls === 1 ? "call" : "calls"} with no price)`;
}
