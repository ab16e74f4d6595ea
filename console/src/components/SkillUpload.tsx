// "Upload a version": a skill's zip, or a folder zipped here in the browser, sent as a new version
// of the skill at the path typed (or the folder's or zip's name); a refused upload lists its
// problems by file.

import { useRef, useState } from "preact/hooks";

import { messageOf } from "../errors";
import { formatBytes } from "../format";
import { folderName, zipFolder } from "../skillZip";
import { InvalidSkillError, suggestedPath, type Problem, type SkillVersionsApi } from "../skillVersions";

/** What will be uploaded: a zip as it is, or a folder's files to zip first. */
type Source = { kind: "zip"; file: File } | { kind: "folder"; name: string; files: File[] };

/** Problems grouped by their file; the zip's own (no file) first. */
function byFile(problems: Problem[]): [string | null, string[]][] {
  const groups = new Map<string | null, string[]>();
  for (const problem of problems) {
    const file = problem.file ?? null;
    groups.set(file, [...(groups.get(file) ?? []), problem.message]);
  }
  return [...groups].sort(([a], [b]) => (a === null ? -1 : b === null ? 1 : a.localeCompare(b)));
}

export function SkillUpload({
  versions,
  path,
  onPath,
  onPublished,
}: {
  versions: SkillVersionsApi;
  path: string;
  onPath: (path: string) => void;
  onPublished: (path: string) => void;
}) {
  const [source, setSource] = useState<Source | null>(null);
  const [promote, setPromote] = useState(false);
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [problems, setProblems] = useState<Problem[]>([]);
  const zipInput = useRef<HTMLInputElement>(null);
  const folderInput = useRef<HTMLInputElement>(null);

  const choose = (next: Source | null, suggested: string | null) => {
    setSource(next);
    setError(null);
    setProblems([]);
    setStatus("");
    if (next && suggested && path.trim() === "") onPath(suggested);
  };

  const pickZip = (input: HTMLInputElement) => {
    const file = input.files?.[0] ?? null;
    if (folderInput.current) folderInput.current.value = "";
    choose(file ? { kind: "zip", file } : null, file ? suggestedPath(file.name) : null);
  };

  const pickFolder = (input: HTMLInputElement) => {
    const files = Array.from(input.files ?? []);
    if (zipInput.current) zipInput.current.value = "";
    const name = folderName(files);
    choose(files.length > 0 ? { kind: "folder", name: name ?? "folder", files } : null, name);
  };

  const upload = async (event: Event) => {
    event.preventDefault();
    const skill = path.trim().replace(/^\/+|\/+$/g, "");
    if (!source || !skill || busy) return;
    setBusy(true);
    setError(null);
    setProblems([]);
    try {
      let zip: Blob;
      if (source.kind === "folder") {
        setStatus(`Zipping ${source.files.length} ${source.files.length === 1 ? "file" : "files"} of ${source.name}…`);
        zip = new Blob([(await zipFolder(source.files)) as Uint8Array<ArrayBuffer>], { type: "application/zip" });
      } else {
        zip = source.file;
      }
      setStatus(`Uploading ${formatBytes(zip.size)} to ${skill}…`);
      const published = await versions.publish(skill, zip, promote ? true : null);
      const serving = published.default ? "it is the default" : "the default stays as it was";
      setStatus(
        published.created
          ? `Version ${published.version} of ${published.skill} uploaded; ${serving}.`
          : `That content already is version ${published.version} of ${published.skill}: nothing new was stored.`,
      );
      setSource(null);
      if (zipInput.current) zipInput.current.value = "";
      if (folderInput.current) folderInput.current.value = "";
      onPublished(published.skill);
    } catch (err) {
      setStatus("");
      // The problems are listed below; the message would only repeat the first.
      const listed = err instanceof InvalidSkillError && err.problems.length > 0;
      setError(listed ? "The upload was refused: it is not a valid skill." : `The upload was refused: ${messageOf(err)}`);
      if (err instanceof InvalidSkillError) setProblems(err.problems);
    } finally {
      setBusy(false);
    }
  };

  const chosen =
    source?.kind === "zip"
      ? `${source.file.name} (${formatBytes(source.file.size)})`
      : source?.kind === "folder"
        ? `Folder ${source.name}: ${source.files.length} ${source.files.length === 1 ? "file" : "files"} (${formatBytes(source.files.reduce((sum, file) => sum + file.size, 0))}), zipped before it is sent`
        : "Choose a zip, or a folder with SKILL.md at its top.";
  return (
    <section class="skill-upload" aria-labelledby="upload-heading">
      <h3 id="upload-heading">Upload a version</h3>
      <form onSubmit={(event) => void upload(event)}>
        <div class="field">
          <label for="upload-path">Skill path</label>
          <input
            id="upload-path"
            type="text"
            placeholder="category/name"
            autocomplete="off"
            spellcheck={false}
            value={path}
            onInput={(event) => onPath(event.currentTarget.value)}
          />
        </div>
        <div class="upload-sources">
          <input
            ref={zipInput}
            id="upload-zip"
            class="file-input"
            type="file"
            accept=".zip,application/zip"
            onChange={(event) => pickZip(event.currentTarget)}
          />
          <label for="upload-zip" class="file-button">
            Zip file…
          </label>
          <input
            ref={folderInput}
            id="upload-folder"
            class="file-input"
            type="file"
            multiple
            {...{ webkitdirectory: true }}
            onChange={(event) => pickFolder(event.currentTarget)}
          />
          <label for="upload-folder" class="file-button">
            Folder…
          </label>
        </div>
        <p class="muted upload-chosen">{chosen}</p>
        <label class="check">
          <input type="checkbox" checked={promote} onChange={(event) => setPromote(event.currentTarget.checked)} />
          Make it the default (a first version always is)
        </label>
        <button type="submit" disabled={!source || path.trim() === "" || busy}>
          {busy ? "Uploading…" : "Upload"}
        </button>
        <p class="muted upload-status" role="status">
          {status}
        </p>
        {error && (
          <div role="alert" class="upload-error">
            <p class="error">{error}</p>
            {problems.length > 0 && (
              <ul class="problems" aria-label="Problems by file">
                {byFile(problems).map(([file, messages]) => (
                  <li key={file ?? ""}>
                    {file ? <code>{file}</code> : <span>The zip as a whole</span>}
                    <ul>
                      {messages.map((message, index) => (
                        <li key={index}>{message}</li>
                      ))}
                    </ul>
                  </li>
                ))}
              </ul>
            )}
          </div>
        )}
      </form>
    </section>
  );
}
