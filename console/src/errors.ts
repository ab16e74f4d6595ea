// Caught errors as the page treats them: a line to show, or an aborted request to ignore.

/** A caught error as a line to show. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Whether a request failed because its signal aborted it: a newer request or an unmount took its place. */
export function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}
