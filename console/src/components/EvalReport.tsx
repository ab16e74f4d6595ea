// One eval run's report: its rates, then a row per case with its runs (loaded or not, steps, tools,
// tokens) and each expectation as the grader judged it, with its evidence.

import { formatCount, formatDuration, formatTime } from "../format";
import { formatRate, formatTools, type CaseReport, type CaseRun, type EvalReport } from "../skillVersions";

/** A case's title: an eval case by its id, a trigger query by whether it should load the skill. */
function caseTitle(item: CaseReport): string {
  if (item.kind === "trigger") return `Trigger ${item.id}: ${item.should_trigger ? "should load the skill" : "should not load it"}`;
  return `Eval ${item.id}`;
}

/** Whether a run loaded the skill as its case wanted: an eval case and a "should" query want it loaded. */
function asWanted(item: CaseReport, run: CaseRun): boolean {
  return run.loaded === (item.should_trigger ?? true);
}

export function EvalReportView({ report }: { report: EvalReport }) {
  const summary = report.summary;
  const seconds = report.finished_at === undefined ? null : report.finished_at - report.started_at;
  const took = seconds === null ? "" : seconds < 1 ? " · took under a second" : ` · took ${formatDuration(seconds * 1000)}`;
  return (
    <article class="eval-report" aria-label={`Eval run ${report.run_id}`} aria-busy={report.status === "running"}>
      <h4>
        Run <code>{report.run_id}</code> of version {report.version}
      </h4>
      <p class="muted">
        {report.runs_per_case} {report.runs_per_case === 1 ? "run" : "runs"} of each case
        {report.model ? ` · model ${report.model}` : ""} · started {formatTime(report.started_at)}
        {took}
      </p>
      {report.status === "running" && <p class="muted">Running: the report shows when every case has run.</p>}
      {report.error && <p class="error">{report.error}</p>}
      {report.status === "completed" && (
        <dl class="eval-rates" aria-label="Rates">
          <div>
            <dt>Trigger rate</dt>
            <dd>
              <strong>{formatRate(summary.trigger_rate)}</strong>
              {summary.wanted + summary.not_wanted > 0 && (
                <span class="muted">
                  {" "}
                  · loaded {summary.triggered_when_wanted} of {summary.wanted} times when wanted,{" "}
                  {summary.triggered_when_not_wanted} of {summary.not_wanted} when not
                </span>
              )}
            </dd>
          </div>
          <div>
            <dt>Pass rate</dt>
            <dd>
              <strong>{formatRate(summary.pass_rate)}</strong>
              {summary.expectations > 0 && (
                <span class="muted">
                  {" "}
                  · {summary.expectations_passed} of {summary.expectations} expectations passed
                </span>
              )}
            </dd>
          </div>
          <div>
            <dt>Eval runs that loaded it</dt>
            <dd>
              {summary.eval_runs_loaded} of {summary.eval_runs}
            </dd>
          </div>
          <div>
            <dt>Failed runs</dt>
            <dd class={summary.failed_runs > 0 ? "error" : undefined}>{summary.failed_runs}</dd>
          </div>
          <div>
            <dt>Tokens</dt>
            <dd>
              {formatCount(summary.input_tokens)} in · {formatCount(summary.output_tokens)} out
            </dd>
          </div>
        </dl>
      )}
      {report.cases && report.cases.length > 0 && (
        <ol class="eval-cases" aria-label="Cases">
          {report.cases.map((item, index) => (
            <CaseView key={`${item.kind}-${item.id}`} item={item} index={index} />
          ))}
        </ol>
      )}
    </article>
  );
}

function CaseView({ item, index }: { item: CaseReport; index: number }) {
  const id = `eval-case-${index}`;
  const right = item.runs.filter((run) => asWanted(item, run)).length;
  return (
    <li>
      <section class="eval-case" aria-labelledby={id}>
        <h5 id={id}>
          {caseTitle(item)}{" "}
          <span class={`badge ${right === item.runs.length ? "badge-ok" : "badge-error"}`}>
            {item.kind === "trigger" ? `${right} of ${item.runs.length} right` : `loaded in ${right} of ${item.runs.length}`}
          </span>
        </h5>
        <p class="eval-prompt">“{item.prompt}”</p>
        <table class="eval-run-table">
          <caption class="visually-hidden">Runs of {caseTitle(item)}</caption>
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Loaded</th>
              <th scope="col">Steps</th>
              <th scope="col">Tools</th>
              <th scope="col">Tokens</th>
            </tr>
          </thead>
          <tbody>
            {item.runs.map((run) => (
              <tr key={run.run}>
                <td>{run.run}</td>
                <td class={asWanted(item, run) ? "as-wanted" : "not-as-wanted"}>
                  <span aria-hidden="true">{run.loaded ? "✓" : "✗"}</span>
                  <span class="visually-hidden">{run.loaded ? "loaded" : "not loaded"}</span>
                  {run.loaded && run.loaded_version !== undefined && <span class="muted"> v{run.loaded_version}</span>}
                </td>
                <td>{run.steps}</td>
                <td class="eval-tools">{formatTools(run.tools)}</td>
                <td>{formatCount(run.input_tokens + run.output_tokens)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {item.runs.map((run) => (
          <RunDetails key={run.run} run={run} />
        ))}
      </section>
    </li>
  );
}

/** A run's error, and its expectations with the grader's evidence. */
function RunDetails({ run }: { run: CaseRun }) {
  const expectations = run.expectations ?? [];
  if (!run.error && expectations.length === 0) return null;
  return (
    <div class="eval-run-details">
      {run.error && (
        <p class="error">
          Run {run.run}: {run.error}
        </p>
      )}
      {expectations.length > 0 && (
        <ul class="expectations" aria-label={`Expectations of run ${run.run}`}>
          {expectations.map((expectation, index) => (
            <li key={index} class={expectation.passed ? "expectation-passed" : "expectation-failed"}>
              <span class={`badge ${expectation.passed ? "badge-ok" : "badge-error"}`}>
                {expectation.passed ? "passed" : "failed"}
              </span>{" "}
              <span class="expectation-text">{expectation.text}</span>
              <p class="evidence">
                <span class="muted">Evidence (run {run.run}):</span> {expectation.evidence}
              </p>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
