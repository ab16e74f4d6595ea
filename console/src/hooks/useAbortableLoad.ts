// One load at a time, abortable: a new load aborts the one before it, an aborted load reports
// nothing, and unmounting aborts the load in flight.

import { useEffect, useState } from "preact/hooks";

import { isAbort, messageOf } from "../errors";

/** A load's work: it reads with `signal` and sets its own results. */
export type Load = (signal: AbortSignal) => Promise<void>;

/** What a failed load does: returns the line to show, or null when it showed or handled it itself. */
export type OnError = (err: unknown) => string | null;

/** Where a load reports whether it is in flight and the error of the last one. */
export interface LoadReport {
  loading: (loading: boolean) => void;
  error: (error: string | null) => void;
}

/**
 * The controller of the load in flight, apart from preact so a test can drive it without a page.
 * Only the newest load may clear the loading state: an older one was aborted for it.
 */
export class LoadSlot {
  private current: AbortController | null = null;

  async run(load: Load, report: LoadReport, onError: OnError = messageOf): Promise<void> {
    this.current?.abort();
    const abort = new AbortController();
    this.current = abort;
    report.loading(true);
    report.error(null);
    try {
      await load(abort.signal);
    } catch (err) {
      if (!abort.signal.aborted && !isAbort(err)) report.error(onError(err));
    } finally {
      if (this.current === abort) {
        this.current = null;
        report.loading(false);
      }
    }
  }

  /** Aborts the load in flight, if any. */
  abort(): void {
    this.current?.abort();
    this.current = null;
  }
}

export interface AbortableLoad {
  loading: boolean;
  /** The last load's error as a line to show; null while a load runs and after one succeeds. */
  error: string | null;
  /** Starts `load`, aborting the one in flight; `onError` turns a failure into the line to show. */
  run: (load: Load, onError?: OnError) => Promise<void>;
  /** Aborts the load in flight and forgets its state, for a page that stops showing what it loads. */
  cancel: () => void;
}

export function useAbortableLoad(): AbortableLoad {
  const [slot] = useState(() => new LoadSlot());
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => () => slot.abort(), [slot]);
  return {
    loading,
    error,
    run: (load, onError) => slot.run(load, { loading: setLoading, error: setError }, onError),
    cancel: () => {
      slot.abort();
      setLoading(false);
      setError(null);
    },
  };
}
