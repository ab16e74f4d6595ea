// The catalog's note on the tenant's base prompt: the file in use, or why the built-in one is used.

import type { ComponentChildren } from "preact";

import type { BasePrompt } from "../api";
import { formatBytes } from "../format";

export function BasePromptStatus({ base }: { base: BasePrompt | null | undefined }) {
  if (base === undefined) return null;
  let text: ComponentChildren;
  if (base === null) text = "none: the built-in base prompt is used.";
  else if (base.usable) text = `${base.file} (${formatBytes(base.size)}) is in use.`;
  else text = `${base.file} is not usable${base.problem ? `: ${base.problem}` : ""}; the built-in base prompt is used.`;
  return (
    <p class={`base-prompt ${base && !base.usable ? "warning" : ""}`} role="note" aria-label="Base prompt status">
      Base prompt: {text}
    </p>
  );
}
