// The right column: the Workspace and Catalog tabs.

import { useRef, useState } from "preact/hooks";
import type { ComponentChildren, JSX } from "preact";

/** Two tabs (Workspace, Catalog) with arrow-key movement between them, as the ARIA pattern has it. */
export function SideTabs({ workspace, catalog }: { workspace: ComponentChildren; catalog: ComponentChildren }) {
  const [selected, setSelected] = useState<"workspace" | "catalog">("workspace");
  const tabs = ["workspace", "catalog"] as const;
  const names = { workspace: "Workspace", catalog: "Catalog" };
  const refs = useRef<Record<string, HTMLButtonElement | null>>({});
  const onKeyDown = (event: JSX.TargetedKeyboardEvent<HTMLDivElement>) => {
    const index = tabs.indexOf(selected);
    let next: number | null = null;
    if (event.key === "ArrowRight") next = (index + 1) % tabs.length;
    else if (event.key === "ArrowLeft") next = (index - 1 + tabs.length) % tabs.length;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = tabs.length - 1;
    if (next === null) return;
    event.preventDefault();
    setSelected(tabs[next]);
    refs.current[tabs[next]]?.focus();
  };
  return (
    <aside class="side" aria-label="Workspace and catalog">
      <div role="tablist" aria-label="Side panel" class="tabs" onKeyDown={onKeyDown}>
        {tabs.map((tab) => (
          <button
            key={tab}
            ref={(element) => {
              refs.current[tab] = element;
            }}
            type="button"
            role="tab"
            id={`tab-${tab}`}
            aria-selected={selected === tab}
            aria-controls={`panel-${tab}`}
            tabIndex={selected === tab ? 0 : -1}
            onClick={() => setSelected(tab)}
          >
            {names[tab]}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="panel-workspace" aria-labelledby="tab-workspace" hidden={selected !== "workspace"}>
        {workspace}
      </div>
      <div role="tabpanel" id="panel-catalog" aria-labelledby="tab-catalog" hidden={selected !== "catalog"}>
        {catalog}
      </div>
    </aside>
  );
}
