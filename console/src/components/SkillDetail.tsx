// One skill of the Skills tab: its versions (number, default, who uploaded it and when, size,
// warnings and needs), "Make default" on each (a promote or a rollback), two versions' SKILL.md
// compared, and its evals.

import { useEffect, useRef, useState } from "preact/hooks";

import { messageOf } from "../errors";
import { formatBytes, formatTime } from "../format";
import type { SkillRow, SkillVersionsApi, VersionDetail, VersionSummary } from "../skillVersions";
import { DiffDialog } from "./DiffDialog";
import { EvalPanel } from "./EvalPanel";

export function SkillDetail({
  versions,
  row,
  onDefault,
}: {
  versions: SkillVersionsApi;
  row: SkillRow;
  /** A version became the default: the row's versions are read again. */
  onDefault: () => Promise<void>;
}) {
  const list = row.versions;
  const [busy, setBusy] = useState<number | null>(null);
  const [status, setStatus] = useState("");
  const [error, setError] = useState<string | null>(null);

  const makeDefault = async (version: number) => {
    setBusy(version);
    setError(null);
    try {
      const set = await versions.setDefault(row.path, version);
      await onDefault();
      setStatus(
        set.previous === null || set.previous === set.version
          ? `${set.skill} serves version ${set.version}.`
          : `${set.skill} serves version ${set.version} now (it served version ${set.previous}).`,
      );
    } catch (err) {
      setError(`Version ${version} could not be made the default: ${messageOf(err)}`);
    } finally {
      setBusy(null);
    }
  };

  return (
    <section class="skill-detail" aria-labelledby="skill-detail-heading">
      <h3 id="skill-detail-heading">
        <code>{row.path}</code>
      </h3>
      {!list ? (
        <p class="muted">
          Not published: it is served from its folder in the bucket. Upload a zip or a folder above to publish it as
          version 1.
        </p>
      ) : (
        <>
          <p class="muted">
            Serves version {list.default ?? "–"} · {list.versions.length}{" "}
            {list.versions.length === 1 ? "version" : "versions"}, newest first
          </p>
          <ol class="version-list" aria-label={`Versions of ${row.path}`}>
            {list.versions.map((version) => (
              <VersionCard
                key={version.version}
                version={version}
                busy={busy !== null}
                onDefault={() => void makeDefault(version.version)}
              />
            ))}
          </ol>
          <p class="muted default-status" role="status">
            {busy !== null ? `Making version ${busy} the default…` : status}
          </p>
          {error && (
            <p role="alert" class="error">
              {error}
            </p>
          )}
          {list.versions.length >= 2 && <Compare versions={versions} skill={row.path} list={list.versions} />}
          <EvalPanel versions={versions} skill={row.path} list={list.versions} serving={list.default} />
        </>
      )}
    </section>
  );
}

function VersionCard({
  version,
  busy,
  onDefault,
}: {
  version: VersionSummary;
  busy: boolean;
  onDefault: () => void;
}) {
  const id = `version-${version.version}`;
  return (
    <li>
      <article class={`version${version.default ? " version-default" : ""}`} aria-labelledby={id}>
        <div class="version-head">
          <h4 id={id}>Version {version.version}</h4>
          {version.default && <span class="badge badge-ok">default</span>}
          {!version.default && (
            <button
              type="button"
              class="secondary version-promote"
              disabled={busy}
              aria-label={`Make version ${version.version} the default`}
              onClick={onDefault}
            >
              Make default
            </button>
          )}
        </div>
        <p class="muted version-meta">
          by {version.uploaded_by} · {formatTime(version.uploaded_at)} · {formatBytes(version.size)} · {version.files}{" "}
          {version.files === 1 ? "file" : "files"}
        </p>
        {version.warnings.length > 0 && (
          <ul class="warnings" aria-label={`Warnings for version ${version.version}`}>
            {version.warnings.map((warning, index) => (
              <li key={index}>{warning}</li>
            ))}
          </ul>
        )}
        {(version.needs.length > 0 || version.optional_needs.length > 0) && (
          <p class="muted version-needs">
            {version.needs.length > 0 && <>Needs: {version.needs.join(", ")}</>}
            {version.needs.length > 0 && version.optional_needs.length > 0 && " · "}
            {version.optional_needs.length > 0 && <>Uses if present: {version.optional_needs.join(", ")}</>}
          </p>
        )}
      </article>
    </li>
  );
}

/** Two versions picked, their SKILL.md read (a version never changes, so each is read once). */
function Compare({ versions, skill, list }: { versions: SkillVersionsApi; skill: string; list: VersionSummary[] }) {
  const newest = list[0]?.version ?? 1;
  const before = list[1]?.version ?? newest;
  const [from, setFrom] = useState(before);
  const [to, setTo] = useState(newest);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [shown, setShown] = useState<[VersionDetail, VersionDetail] | null>(null);
  const read = useRef(new Map<number, VersionDetail>());

  // A new version is compared with the one before it.
  useEffect(() => {
    setFrom(before);
    setTo(newest);
  }, [newest]);

  const detail = async (version: number) => {
    const known = read.current.get(version);
    if (known) return known;
    const got = await versions.version(skill, version);
    read.current.set(version, got);
    return got;
  };

  const show = async () => {
    setLoading(true);
    setError(null);
    try {
      setShown([await detail(from), await detail(to)]);
    } catch (err) {
      setError(`The versions could not be read: ${messageOf(err)}`);
    } finally {
      setLoading(false);
    }
  };

  return (
    <fieldset class="compare">
      <legend>Compare SKILL.md</legend>
      <div class="compare-fields">
        <label for="compare-from">From</label>
        <select id="compare-from" value={from} onChange={(event) => setFrom(Number(event.currentTarget.value))}>
          {list.map((version) => (
            <option key={version.version} value={version.version}>
              Version {version.version}
            </option>
          ))}
        </select>
        <label for="compare-to">to</label>
        <select id="compare-to" value={to} onChange={(event) => setTo(Number(event.currentTarget.value))}>
          {list.map((version) => (
            <option key={version.version} value={version.version}>
              Version {version.version}
            </option>
          ))}
        </select>
        <button type="button" disabled={loading} onClick={() => void show()}>
          {loading ? "Reading…" : "Show diff"}
        </button>
      </div>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {shown && <DiffDialog skill={skill} from={shown[0]} to={shown[1]} onClose={() => setShown(null)} />}
    </fieldset>
  );
}
