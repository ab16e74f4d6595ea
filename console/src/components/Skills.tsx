// The Skills tab: the user's skills with, for each published one, its versions; an upload of a
// new version (a zip or a folder); and the chosen skill's versions side by side, its evals, and
// "Make default" (a promote or a rollback).

import { useEffect, useRef, useState } from "preact/hooks";

import type { Api } from "../api";
import { useAbortableLoad } from "../hooks/useAbortableLoad";
import type { SkillRow, SkillVersionsApi } from "../skillVersions";
import { SkillDetail } from "./SkillDetail";
import { SkillUpload } from "./SkillUpload";

/** Skills whose versions are looked up; past them the list says that it stops. */
const MAX_LOOKED_UP = 200;
/** Lookups of versions at once. */
const LOOKUPS_AT_ONCE = 4;

/** `work` for each item, at most `limit` at a time, the results in the items' order. */
async function eachLimited<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** `shown` is whether the tab is open: the list loads the first time it is. */
export function Skills({
  api,
  versions,
  shown,
  onChanged,
}: {
  api: Api;
  versions: SkillVersionsApi;
  shown: boolean;
  /** A version was published or made the default: the catalog and the completion reload. */
  onChanged: () => void;
}) {
  const [rows, setRows] = useState<SkillRow[] | null>(null);
  const [total, setTotal] = useState(0);
  const [selected, setSelected] = useState<string | null>(null);
  const [uploadPath, setUploadPath] = useState("");
  const [opened, setOpened] = useState(false);
  const [reloads, setReloads] = useState(0);
  const { loading, error, run } = useAbortableLoad();
  // The chosen skill's section is scrolled into view once it shows after a click or an upload.
  const detail = useRef<HTMLDivElement>(null);
  const [reveal, setReveal] = useState(0);

  useEffect(() => {
    if (shown) setOpened(true);
  }, [shown]);

  useEffect(() => {
    if (!opened) return;
    void run(async (signal) => {
      const skills = await api.allSkills(signal);
      const looked = skills.slice(0, MAX_LOOKED_UP);
      const lists = await eachLimited(looked, LOOKUPS_AT_ONCE, (skill) => versions.versions(skill.path, signal));
      setRows(looked.map((skill, index) => ({ path: skill.path, description: skill.description, versions: lists[index] })));
      setTotal(skills.length);
    });
  }, [opened, reloads, api, versions]);

  /** Reads one skill's versions again, after an upload or a new default. */
  const refreshSkill = async (path: string) => {
    const list = await versions.versions(path);
    setRows((current) => {
      if (!current) return current;
      if (!current.some((row) => row.path === path)) return current;
      return current.map((row) => (row.path === path ? { ...row, versions: list } : row));
    });
  };

  const select = (path: string) => {
    setSelected(path);
    setUploadPath(path);
    setReveal((n) => n + 1);
  };

  const chosen = rows?.find((row) => row.path === selected) ?? null;
  useEffect(() => {
    if (reveal > 0 && chosen) detail.current?.scrollIntoView({ block: "start" });
  }, [reveal, chosen !== null]);

  const published = rows?.filter((row) => row.versions !== null).length ?? 0;
  return (
    <div class="skills">
      <SkillUpload
        versions={versions}
        path={uploadPath}
        onPath={setUploadPath}
        onPublished={(path) => {
          setSelected(path);
          setReveal((n) => n + 1);
          onChanged();
          // A new skill joins the list; a known one gets its new version.
          if (rows?.some((row) => row.path === path)) void refreshSkill(path).catch(() => setReloads((n) => n + 1));
          else setReloads((n) => n + 1);
        }}
      />
      <div class="panel-head skills-head">
        <h3 id="skills-heading">Your skills</h3>
        <button type="button" class="secondary" disabled={loading} onClick={() => setReloads((n) => n + 1)}>
          Reload skills
        </button>
      </div>
      <p class="muted skills-count" role="status">
        {loading && rows === null
          ? "Loading skills…"
          : rows
            ? `${rows.length} ${rows.length === 1 ? "skill" : "skills"}, ${published} published${total > rows.length ? ` (versions looked up for the first ${rows.length} of ${total})` : ""}`
            : ""}
      </p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {rows && (
        <ul class="skill-rows" aria-labelledby="skills-heading">
          {rows.map((row) => (
            <li key={row.path}>
              <button
                type="button"
                class="skill-row"
                aria-current={row.path === selected ? "true" : undefined}
                onClick={() => select(row.path)}
              >
                <code class="skill-row-path">{row.path}</code>
                <span class="muted skill-row-state">
                  {row.versions
                    ? `default v${row.versions.default ?? "–"} · ${row.versions.versions.length} ${row.versions.versions.length === 1 ? "version" : "versions"}`
                    : "folder, not published"}
                </span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <div ref={detail} class="skill-detail-anchor">
        {chosen && (
          <SkillDetail
            key={chosen.path}
            versions={versions}
            row={chosen}
            onDefault={() => {
              onChanged();
              return refreshSkill(chosen.path);
            }}
          />
        )}
      </div>
    </div>
  );
}
