// The right column: the Workspace, Catalog and Skills tabs.

import { useRef, useState } from "preact/hooks";
import type { ComponentChildren, JSX } from "preact";

/** One tab: its id, its name, and its panel (told whether it is shown, so it may load only then). */
export interface SideTab {
  id: string;
  name: string;
  panel: (shown: boolean) => ComponentChildren;
}

/** Tabs with arrow-key movement between them, as the ARIA pattern has it; the first is shown first. */
export function SideTabs({ tabs }: { tabs: SideTab[] }) {
  const [selected, setSelected] = useState(tabs[0]?.id ?? "");
  const refs = useRef<Record<string, HTMLButtonElement | null>>({});
  const onKeyDown = (event: JSX.TargetedKeyboardEvent<HTMLDivElement>) => {
    const index = tabs.findIndex((tab) => tab.id === selected);
    let next: number | null = null;
    if (event.key === "ArrowRight") next = (index + 1) % tabs.length;
    else if (event.key === "ArrowLeft") next = (index - 1 + tabs.length) % tabs.length;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = tabs.length - 1;
    if (next === null) return;
    event.preventDefault();
    setSelected(tabs[next].id);
    refs.current[tabs[next].id]?.focus();
  };
  return (
    <aside class="side" aria-label="Workspace, catalog and skills">
      <div role="tablist" aria-label="Side panel" class="tabs" onKeyDown={onKeyDown}>
        {tabs.map((tab) => (
          <button
            key={tab.id}
            ref={(element) => {
              refs.current[tab.id] = element;
            }}
            type="button"
            role="tab"
            id={`tab-${tab.id}`}
            aria-selected={selected === tab.id}
            aria-controls={`panel-${tab.id}`}
            tabIndex={selected === tab.id ? 0 : -1}
            onClick={() => setSelected(tab.id)}
          >
            {tab.name}
          </button>
        ))}
      </div>
      {tabs.map((tab) => (
        <div
          key={tab.id}
          role="tabpanel"
          id={`panel-${tab.id}`}
          aria-labelledby={`tab-${tab.id}`}
          hidden={selected !== tab.id}
        >
          {tab.panel(selected === tab.id)}
        </div>
      ))}
    </aside>
  );
}
