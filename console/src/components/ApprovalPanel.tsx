// The tool calls a paused turn waits on, each with Approve / Edit / Reject, and the button that
// sends the decisions so the turn goes on.

import { useState } from "preact/hooks";

import type { Decision, PendingCall } from "../api";

type Choice = "approve" | "edit" | "reject";

interface Draft {
  choice: Choice | null;
  /** The arguments as JSON text, for an edit. */
  edited: string;
  /** The reason given to the model, for a rejection. */
  message: string;
}

const pretty = (value: unknown): string => JSON.stringify(value ?? {}, null, 2);

/** The decision a draft makes, or the reason it cannot be sent yet. */
function decisionOf(call: PendingCall, draft: Draft): Decision | string {
  switch (draft.choice) {
    case null:
      return `Choose what to do with ${call.name}.`;
    case "approve":
      return { call_id: call.id, decision: "approve" };
    case "reject":
      return draft.message.trim() === ""
        ? { call_id: call.id, decision: "reject" }
        : { call_id: call.id, decision: "reject", message: draft.message.trim() };
    case "edit": {
      let parsed: unknown;
      try {
        parsed = JSON.parse(draft.edited);
      } catch {
        return `The edited arguments of ${call.name} are not valid JSON.`;
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
        return `The edited arguments of ${call.name} must be a JSON object.`;
      }
      return { call_id: call.id, decision: "edit", arguments: parsed as Record<string, unknown> };
    }
  }
}

export function ApprovalPanel({
  calls,
  id,
  disabled,
  onDecide,
}: {
  calls: PendingCall[];
  id: string;
  disabled: boolean;
  onDecide: (decisions: Decision[]) => void;
}) {
  const [drafts, setDrafts] = useState<Draft[]>(() =>
    calls.map((call) => ({ choice: null, edited: pretty(call.arguments), message: "" })),
  );
  const set = (index: number, change: Partial<Draft>) =>
    setDrafts((current) => current.map((draft, at) => (at === index ? { ...draft, ...change } : draft)));
  const decided = calls.map((call, index) => decisionOf(call, drafts[index]));
  const problem = decided.find((decision): decision is string => typeof decision === "string") ?? null;
  const headingId = `${id}-approval`;
  return (
    <section class="approval" aria-labelledby={headingId}>
      <h4 id={headingId}>Waiting for your approval</h4>
      <ol class="approval-calls">
        {calls.map((call, index) => {
          const draft = drafts[index];
          const label = `${call.name} ${call.summary}`.trim();
          return (
            <li key={call.id} class="approval-call" aria-label={`Call ${call.name}`}>
              <p class="approval-summary">
                <code>{call.name}</code> <span class="muted">{call.summary}</span>
                {/* The space keeps the badge apart from the last argument, on screen and when read out. */}
                {call.subagent && (
                  <>
                    {" "}
                    <span class="badge approval-subagent">asked by subagent {call.subagent}</span>
                  </>
                )}
              </p>
              <div class="approval-choices" role="group" aria-label={`Decision for ${label}`}>
                {(["approve", "edit", "reject"] as const).map((choice) => (
                  <button
                    key={choice}
                    type="button"
                    aria-pressed={draft.choice === choice}
                    disabled={disabled}
                    onClick={() => set(index, { choice })}
                  >
                    {choice === "approve" ? "Approve" : choice === "edit" ? "Edit" : "Reject"}
                  </button>
                ))}
              </div>
              {draft.choice === "edit" && (
                <label class="approval-field">
                  Arguments of {call.name} (JSON)
                  <textarea
                    rows={6}
                    value={draft.edited}
                    disabled={disabled}
                    onInput={(event) => set(index, { edited: event.currentTarget.value })}
                  />
                </label>
              )}
              {draft.choice === "reject" && (
                <label class="approval-field">
                  Reason for the model (optional)
                  <input
                    type="text"
                    value={draft.message}
                    maxLength={4096}
                    disabled={disabled}
                    onInput={(event) => set(index, { message: event.currentTarget.value })}
                  />
                </label>
              )}
            </li>
          );
        })}
      </ol>
      <button
        type="button"
        class="primary"
        disabled={disabled || problem !== null}
        onClick={() => onDecide(decided.filter((decision): decision is Decision => typeof decision !== "string"))}
      >
        Send decisions
      </button>
      {problem && <p class="muted approval-hint">{problem}</p>}
    </section>
  );
}
