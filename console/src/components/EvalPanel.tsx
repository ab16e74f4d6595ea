// A published skill's evals: a version's runs, newest first, "Run evals" (the run goes to the turn
// queue and is polled until it completes or fails), and the report of the run picked.

import { useEffect, useState } from "preact/hooks";

import { isAbort, messageOf } from "../errors";
import { formatTime } from "../format";
import { useAbortableLoad } from "../hooks/useAbortableLoad";
import { formatRate, type EvalReport, type SkillVersionsApi, type VersionSummary } from "../skillVersions";
import { EvalReportView } from "./EvalReport";

/** How often a running eval run is read again. */
const POLL_MS = 1000;
/** Runs of each case unless the author says otherwise (the API's own default). */
const DEFAULT_RUNS = 3;

/** A run's line in the list, after its status: when it started and, once completed, its rates. */
function runLine(run: EvalReport): string {
  const rates =
    run.status === "completed"
      ? ` · trigger ${formatRate(run.summary.trigger_rate)} · pass ${formatRate(run.summary.pass_rate)}`
      : "";
  return `${formatTime(run.started_at)}${rates}`;
}

export function EvalPanel({
  versions,
  skill,
  list,
  serving,
}: {
  versions: SkillVersionsApi;
  skill: string;
  list: VersionSummary[];
  /** The version the skill serves: the one whose evals show first. */
  serving: number | null;
}) {
  const [version, setVersion] = useState(serving ?? list[0]?.version ?? 1);
  const [runs, setRuns] = useState<EvalReport[]>([]);
  const [runsPerCase, setRunsPerCase] = useState(DEFAULT_RUNS);
  const [open, setOpen] = useState<EvalReport | null>(null);
  const [starting, setStarting] = useState(false);
  const [status, setStatus] = useState("");
  const [error, setError] = useState<string | null>(null);
  const listing = useAbortableLoad();
  const reading = useAbortableLoad();

  /** Opens a run: its whole report, read again until it is no longer running. */
  const openRun = (runId: string, at: number) =>
    reading.run(async (signal) => {
      for (;;) {
        const report = await versions.evalRun(skill, at, runId, signal);
        setOpen(report);
        setRuns((current) => current.map((run) => (run.run_id === runId ? { ...report, cases: undefined } : run)));
        if (report.status !== "running") {
          if (report.status === "completed") {
            setStatus(
              `Eval run ${runId} of version ${at} completed: trigger rate ${formatRate(report.summary.trigger_rate)}, pass rate ${formatRate(report.summary.pass_rate)}.`,
            );
          } else {
            setStatus(`Eval run ${runId} of version ${at} failed${report.error ? `: ${report.error}` : "."}`);
          }
          return;
        }
        setStatus(`Eval run ${runId} of version ${at} is running…`);
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, POLL_MS);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(new DOMException("aborted", "AbortError"));
          });
        });
      }
    });

  // The version's runs; the newest opens.
  useEffect(() => {
    setRuns([]);
    setOpen(null);
    setStatus("");
    reading.cancel();
    void listing.run(async (signal) => {
      const listed = await versions.evalRuns(skill, version, signal);
      setRuns(listed.runs);
      const newest = listed.runs[0];
      if (newest) void openRun(newest.run_id, version);
    });
  }, [skill, version]);

  const start = async () => {
    setStarting(true);
    setError(null);
    try {
      const accepted = await versions.runEvals(skill, version, runsPerCase);
      const started = Math.floor(Date.now() / 1000);
      const placeholder: EvalReport = {
        run_id: accepted.run_id,
        skill,
        version,
        status: accepted.status,
        runs_per_case: runsPerCase,
        model: "",
        started_at: started,
        summary: {
          trigger_rate: null,
          triggered_when_wanted: 0,
          wanted: 0,
          triggered_when_not_wanted: 0,
          not_wanted: 0,
          pass_rate: null,
          expectations_passed: 0,
          expectations: 0,
          eval_runs_loaded: 0,
          eval_runs: 0,
          failed_runs: 0,
          input_tokens: 0,
          output_tokens: 0,
        },
      };
      setRuns((current) => [placeholder, ...current.filter((run) => run.run_id !== accepted.run_id)]);
      setStatus(`Eval run ${accepted.run_id} of version ${version} is running…`);
      void openRun(accepted.run_id, version);
    } catch (err) {
      if (!isAbort(err)) setError(`The evals could not be started: ${messageOf(err)}`);
    } finally {
      setStarting(false);
    }
  };

  const running = open?.status === "running";
  return (
    <section class="evals" aria-labelledby="evals-heading">
      <h3 id="evals-heading">Evals</h3>
      <p class="muted">
        Runs the version's <code>evals/evals.json</code> cases and trigger queries as turns in the background, with the
        version pinned; a model grades each expectation.
      </p>
      <div class="eval-controls">
        <div class="field">
          <label for="eval-version">Version</label>
          <select id="eval-version" value={version} onChange={(event) => setVersion(Number(event.currentTarget.value))}>
            {list.map((item) => (
              <option key={item.version} value={item.version}>
                Version {item.version}
                {item.default ? " (default)" : ""}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="eval-runs">Runs per case</label>
          <input
            id="eval-runs"
            type="number"
            min={1}
            max={10}
            value={runsPerCase}
            onInput={(event) => {
              const value = Number(event.currentTarget.value);
              if (Number.isInteger(value) && value >= 1 && value <= 10) setRunsPerCase(value);
            }}
          />
        </div>
        <button type="button" disabled={starting || running} onClick={() => void start()}>
          {running ? "Running…" : "Run evals"}
        </button>
      </div>
      <p class="muted eval-status" role="status">
        {status}
      </p>
      {(error ?? listing.error ?? reading.error) && (
        <p role="alert" class="error">
          {error ?? listing.error ?? reading.error}
        </p>
      )}
      {!listing.loading && runs.length === 0 && !listing.error && (
        <p class="muted">No eval run of version {version} yet.</p>
      )}
      {runs.length > 0 && (
        <ul class="eval-run-list" aria-label={`Eval runs of version ${version}`}>
          {runs.map((run) => (
            <li key={run.run_id}>
              <button
                type="button"
                class="eval-run"
                aria-current={open?.run_id === run.run_id ? "true" : undefined}
                onClick={() => void openRun(run.run_id, version)}
              >
                <span class={`badge badge-${run.status === "completed" ? "ok" : run.status === "failed" ? "error" : "running"}`}>
                  {run.status}
                </span>{" "}
                {runLine(run)}
              </button>
            </li>
          ))}
        </ul>
      )}
      {open && <EvalReportView report={open} />}
    </section>
  );
}
