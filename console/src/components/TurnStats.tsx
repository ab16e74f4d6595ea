// A finished turn's one-line summary: tokens (the input split as the provider counted it), cost,
// steps, ending, skill and duration.

import { formatCount, formatDuration } from "../format";
import type { Turn } from "../turns";
import { formatInputSplit, formatUsd } from "../usage";

export function TurnStats({ turn }: { turn: Turn }) {
  const reply = turn.reply;
  const parts: string[] = [];
  if (reply) {
    const usage = reply.usage ?? { input_tokens: 0, output_tokens: 0 };
    parts.push(
      `${formatCount(usage.input_tokens)} input (${formatInputSplit(usage)}) / ${formatCount(usage.output_tokens)} output tokens (as the model reported them, all calls)`,
    );
    if (reply.cost) parts.push(reply.cost.usd === null ? "no price" : formatUsd(reply.cost.usd));
    parts.push(`${reply.steps} ${reply.steps === 1 ? "step" : "steps"}`);
    parts.push(`ending ${reply.ending}`);
    if (reply.current_skill) parts.push(`skill ${reply.current_skill}`);
    if (reply.refused_tool_calls > 0) parts.push(`${reply.refused_tool_calls} refused tool ${reply.refused_tool_calls === 1 ? "call" : "calls"}`);
    if (reply.executions) parts.push(`${reply.executions} sandbox ${reply.executions === 1 ? "command" : "commands"}`);
  }
  if (turn.durationMs !== null) parts.push(formatDuration(turn.durationMs));
  return (
    <p class="turn-stats" role="note" aria-label="Turn summary">
      {parts.join(" · ")}
    </p>
  );
}
