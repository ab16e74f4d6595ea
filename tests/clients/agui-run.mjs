// Runs AG-UI runs against an agent with @ag-ui/client's HttpAgent and prints what happened, as one
// JSON document on stdout, for tests/it/agui.rs to assert on.
//
// Usage: node agui-run.mjs '<plan JSON>', where the plan is
//   {"url": "...", "token": "...", "threadId": "...", "runs": [run, ...]}
// and each run is one of
//   {"runId": "r1", "message": "text"}   a new user message, then a run
//   {"runId": "r2", "resume": "approve"}  a run answering every pending interrupt with an approval
//   {"runId": "r1", "retry": true}        the same run again from a fresh agent (a client retrying)
// with an optional "token" (null: none) replacing the plan's for that run.
//
// Every event the agent sends is checked twice: against @ag-ui/core's event schema as it arrives,
// and by the client's own pipeline (its enforcement, which warns about and strips anything the
// protocol does not describe, and its verifier, which rejects events out of order). A warning or
// a rejection is reported, never hidden.

import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { tap } from "rxjs";

const plan = JSON.parse(process.argv[2] ?? "");
const warnings = [];
const warn = console.warn;
// The client reports what it stripped or could not use through console.warn: kept for the test.
console.warn = (...args) => {
  warnings.push(args.map(String).join(" "));
  warn(...args);
};

// What the current run has seen: its events as the agent sent them (before the client's
// enforcement), the types its subscribers were given (after verification), schema failures.
let current = null;

function newAgent(token, initialMessages) {
  const headers = token === null ? {} : { Authorization: `Bearer ${token}` };
  const agent = new HttpAgent({ url: plan.url, headers, threadId: plan.threadId, initialMessages });
  agent.use((input, next) =>
    next.run(input).pipe(
      tap((event) => {
        current.wire.push(event);
        const checked = EventSchema.safeParse(event);
        if (!checked.success) current.schemaErrors.push({ type: event.type, issues: checked.error.issues });
      }),
    ),
  );
  agent.subscribe({ onEvent: ({ event }) => void current.seen.push(event.type) });
  return agent;
}

async function run(agent, parameters) {
  current = { wire: [], seen: [], schemaErrors: [] };
  let error = null;
  try {
    await agent.runAgent(parameters);
  } catch (err) {
    error = { message: String(err?.message ?? err), status: err?.status ?? null, payload: err?.payload ?? null };
  }
  return {
    runId: parameters.runId,
    events: current.wire,
    verified: current.seen,
    schemaErrors: current.schemaErrors,
    error,
    // Copies: the agent goes on changing its own after this run.
    pendingInterrupts: structuredClone(agent.pendingInterrupts),
    state: structuredClone(agent.state ?? null),
    messages: structuredClone(agent.messages),
  };
}

const results = [];
let agent = newAgent(plan.token, []);
// What each run was sent: its messages and parameters, for a retry to send again.
const sent = {};
for (const step of plan.runs) {
  const token = Object.hasOwn(step, "token") ? step.token : plan.token;
  let parameters = { runId: step.runId };
  if (step.retry) {
    // A client that lost a run's stream sends it again: same thread, messages, resume and run id.
    const earlier = sent[step.runId];
    agent = newAgent(token, structuredClone(earlier.messages));
    parameters = structuredClone(earlier.parameters);
  } else {
    if (Object.hasOwn(step, "token")) agent = newAgent(token, structuredClone(agent.messages));
    if (step.message !== undefined) {
      agent.addMessage({ id: `user-${step.runId}`, role: "user", content: step.message });
    }
    if (step.resume === "approve") {
      const answers = Object.fromEntries(
        agent.pendingInterrupts.map((interrupt) => [interrupt.id, { status: "resolved", payload: { decision: "approve" } }]),
      );
      parameters.resume = buildResumeArray(agent.pendingInterrupts, answers);
    }
    sent[step.runId] = { messages: structuredClone(agent.messages), parameters: structuredClone(parameters) };
  }
  results.push(await run(agent, parameters));
}

process.stdout.write(JSON.stringify({ runs: results, warnings }));
