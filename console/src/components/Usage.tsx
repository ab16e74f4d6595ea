// The left column's usage panel: the user's tokens, turns and sandbox time over the report's period.

import { useEffect, useState } from "preact/hooks";

import type { Api, UsageReport } from "../api";
import { formatCount } from "../format";
import { useAbortableLoad } from "../hooks/useAbortableLoad";

export function Usage({ api, refresh }: { api: Api; refresh: number }) {
  const [usage, setUsage] = useState<UsageReport | null>(null);
  const { error, run } = useAbortableLoad();
  useEffect(() => {
    void run(async (signal) => setUsage(await api.usage(signal)));
  }, [api, refresh]);
  const totals = usage?.totals;
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
          <dl class="usage-list">
            <dt>Input tokens</dt>
            <dd>{formatCount(totals.input_tokens)}</dd>
            <dt>Output tokens</dt>
            <dd>{formatCount(totals.output_tokens)}</dd>
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
        </>
      )}
    </section>
  );
}
