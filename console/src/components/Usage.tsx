// The left column's usage panel: the user's tokens (the input split as the provider counted it),
// their cost, turns and sandbox time over the report's period, then each day by model.

import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";

import type { Api, ModelCounts, UsageDay, UsageReport } from "../api";
import { formatCount } from "../format";
import { useAbortableLoad } from "../hooks/useAbortableLoad";
import { formatCost, inputSplit } from "../usage";

export function Usage({ api, refresh }: { api: Api; refresh: number }) {
  const [usage, setUsage] = useState<UsageReport | null>(null);
  const { error, run } = useAbortableLoad();
  useEffect(() => {
    void run(async (signal) => setUsage(await api.usage(signal)));
  }, [api, refresh]);
  const totals = usage?.totals;
  const days = usage ? [...usage.days].sort((a, b) => b.date.localeCompare(a.date)) : [];
  return (
    <section class="usage" aria-labelledby="usage-heading">
      <h2 id="usage-heading">Usage</h2>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {usage && totals && (
        <>
          <p class="muted">
            {usage.from} to {usage.to} (UTC)
          </p>
          <dl class="usage-list" aria-label="Usage totals">
            <Spend counts={totals} />
            <dt>Turns</dt>
            <dd>
              {formatCount(totals.turns)}
              {totals.failed_turns > 0 && ` (${formatCount(totals.failed_turns)} failed)`}
            </dd>
            <dt>Model calls</dt>
            <dd>{formatCount(totals.model_calls)}</dd>
            {totals.executions > 0 && (
              <>
                <dt>Sandbox commands</dt>
                <dd>
                  {formatCount(totals.executions)} ({totals.sandbox_seconds.toFixed(1)} s)
                </dd>
              </>
            )}
          </dl>
          {days.length > 0 && (
            <ul class="usage-days" aria-label="Usage by day and model">
              {days.map((day, index) => (
                <Day key={day.date} day={day} open={index === 0} />
              ))}
            </ul>
          )}
          {usage.prices?.date && <Prices date={usage.prices.date} source={usage.prices.source} />}
        </>
      )}
    </section>
  );
}

/** Cost, input split and output of some calls, as `dt`/`dd` pairs; the cost only when the server gives one. */
function Spend({ counts }: { counts: ModelCounts }) {
  const { uncached, cacheWrite, cacheRead } = inputSplit(counts);
  const split: [string, number][] = [
    ["uncached", uncached],
    ["cache write", cacheWrite],
    ["cache read", cacheRead],
  ];
  return (
    <>
      {counts.cost_usd !== undefined && (
        <>
          <dt>Cost</dt>
          <dd>{formatCost(counts.cost_usd, counts.unpriced_calls)}</dd>
        </>
      )}
      <dt>Input tokens</dt>
      <dd>{formatCount(counts.input_tokens)}</dd>
      {split.map(([name, tokens]) => (
        <Fragment key={name}>
          <dt class="usage-part">{name}</dt>
          <dd class="usage-part">{formatCount(tokens)}</dd>
        </Fragment>
      ))}
      <dt>Output tokens</dt>
      <dd>{formatCount(counts.output_tokens)}</dd>
    </>
  );
}

/** One day: its cost in the summary line, each model's calls inside (the latest day open). */
function Day({ day, open }: { day: UsageDay; open: boolean }) {
  const cost = day.cost_usd === undefined ? `${formatCount(day.tokens)} tokens` : formatCost(day.cost_usd);
  return (
    <li>
      <details open={open}>
        <summary>
          {day.date} · {cost}
        </summary>
        {day.models.map((model) => (
          <div class="usage-model" key={model.model}>
            <h3 class="usage-model-name">{model.model}</h3>
            <dl class="usage-list" aria-label={`${day.date} ${model.model}`}>
              <Spend counts={model} />
              <dt>Model calls</dt>
              <dd>{formatCount(model.model_calls)}</dd>
            </dl>
          </div>
        ))}
      </details>
    </li>
  );
}

/** The price table's date, its sources folded away (they are long: pages and notes). */
function Prices({ date, source }: { date: string; source?: string | string[] }) {
  const sources = source === undefined ? [] : Array.isArray(source) ? source : [source];
  return (
    <div class="muted usage-prices">
      <p>Prices of {date}</p>
      {sources.length > 0 && (
        <details>
          <summary>Sources</summary>
          <ul>
            {sources.map((text) => (
              <li key={text}>{text}</li>
            ))}
          </ul>
        </details>
      )}
    </div>
  );
}
