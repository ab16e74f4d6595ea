// A folder chosen in the browser (an input with `webkitdirectory`) zipped for upload as a skill:
// each file under its path inside the chosen folder, so the skill's SKILL.md is at the zip's root.

import { zipSync, type Zippable } from "fflate";

/** A file to zip: its path inside the chosen folder and its bytes. */
export interface FolderFile {
  path: string;
  bytes: Uint8Array;
}

/** Files of a folder as the browser lists them: `webkitRelativePath` starts with the folder's name. */
export interface PickedFile {
  name: string;
  webkitRelativePath?: string;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/** The chosen folder's name (the first segment of the files' relative paths), or null. */
export function folderName(files: ArrayLike<PickedFile>): string | null {
  const first = files.length > 0 ? files[0].webkitRelativePath ?? "" : "";
  const name = first.split("/")[0];
  return first.includes("/") && name ? name : null;
}

/** A file's path inside the chosen folder: its relative path without the folder's own name. */
export function pathInFolder(file: PickedFile): string {
  const relative = file.webkitRelativePath || file.name;
  const segments = relative.split("/").filter((segment) => segment !== "");
  return (segments.length > 1 ? segments.slice(1) : segments).join("/");
}

/** The zip of `files`, each under its path (sorted, so the same folder zips the same way). */
export function zipFiles(files: FolderFile[]): Uint8Array {
  const entries: Zippable = {};
  for (const file of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    entries[file.path] = [file.bytes, { level: 6 }];
  }
  return zipSync(entries);
}

/** Reads the files of a chosen folder and zips them, each under its path inside the folder. */
export async function zipFolder(files: ArrayLike<PickedFile>): Promise<Uint8Array> {
  const read: FolderFile[] = [];
  for (const file of Array.from(files)) {
    read.push({ path: pathInFolder(file), bytes: new Uint8Array(await file.arrayBuffer()) });
  }
  return zipFiles(read);
}
