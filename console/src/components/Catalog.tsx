// The Catalog tab: the user's skills, searched as the author types, with the files that were skipped.

import { useEffect, useState } from "preact/hooks";

import type { Api, BasePrompt, Skill, SkippedFile } from "../api";
import { formatCount } from "../format";
import { useAbortableLoad } from "../hooks/useAbortableLoad";
import { BasePromptStatus } from "./BasePromptStatus";
import { SkillItem } from "./SkillItem";

/** `refresh` changes after every turn: a turn may find skills synced meanwhile. */
export function Catalog({ api, refresh }: { api: Api; refresh: number }) {
  const [skills, setSkills] = useState<Skill[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [count, setCount] = useState<number | null>(null);
  const [skipped, setSkipped] = useState<SkippedFile[]>([]);
  const [skippedCount, setSkippedCount] = useState(0);
  const [basePrompt, setBasePrompt] = useState<BasePrompt | null | undefined>(undefined);
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState("");
  const { loading, error, run } = useAbortableLoad();

  const load = (q: string, from: string | null) =>
    run(async (signal) => {
      const page = await api.skills(from, q || null, signal);
      setSkills((shown) => (from === null ? page.skills : [...shown, ...page.skills]));
      setCursor(page.next_cursor ?? null);
      setCount(page.count ?? null);
      setSkipped(page.skipped ?? []);
      setSkippedCount(page.skipped_count ?? (page.skipped ?? []).length);
      setBasePrompt(page.base_prompt ?? null);
    });

  // Searches as the author types, a moment after the last key.
  useEffect(() => {
    const wanted = search.trim();
    const timer = setTimeout(() => setQuery(wanted), wanted === query ? 0 : 250);
    return () => clearTimeout(timer);
  }, [search]);

  // Reloaded by hand too, for skills synced (`cargo xtask skills sync … --console`) meanwhile.
  const [reloads, setReloads] = useState(0);
  useEffect(() => {
    void load(query, null);
  }, [api, query, refresh, reloads]);

  return (
    <div class="catalog">
      <form
        role="search"
        aria-label="Skills"
        class="search"
        onSubmit={(event) => {
          event.preventDefault();
          setQuery(search.trim());
        }}
      >
        <label for="skill-search">Search skills</label>
        <input
          id="skill-search"
          type="search"
          value={search}
          onInput={(event) => setSearch(event.currentTarget.value)}
        />
      </form>
      <button type="button" class="secondary" disabled={loading} onClick={() => setReloads((count) => count + 1)}>
        Reload catalog
      </button>
      <p class="muted" role="status">
        {loading
          ? "Loading skills…"
          : query
            ? `${skills.length} ${skills.length === 1 ? "match" : "matches"} for “${query}”`
            : count !== null
              ? `${formatCount(count)} ${count === 1 ? "skill" : "skills"}`
              : ""}
      </p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <BasePromptStatus base={basePrompt} />
      <ul class="skill-list" aria-label={query ? "Matching skills" : "Skills"}>
        {skills.map((skill) => (
          <SkillItem key={skill.path} skill={skill} />
        ))}
      </ul>
      {cursor && (
        <button type="button" class="secondary" disabled={loading} onClick={() => void load(query, cursor)}>
          Load more skills
        </button>
      )}
      <section aria-labelledby="skipped-heading">
        <h3 id="skipped-heading">Skipped</h3>
        {skippedCount === 0 ? (
          <p class="muted">No SKILL.md was skipped.</p>
        ) : (
          <>
            {skippedCount > skipped.length && (
              <p class="muted">
                Showing {skipped.length} of {skippedCount}.
              </p>
            )}
            <ul class="skipped-list" aria-label="Skipped files">
              {skipped.map((file) => (
                <li key={file.file}>
                  <code>{file.file}</code>: {file.reason}
                </li>
              ))}
            </ul>
          </>
        )}
      </section>
    </div>
  );
}
