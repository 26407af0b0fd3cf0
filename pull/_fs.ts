/**
 * File helpers: streaming sha256, stat-or-undefined, atomic rename with
 * fsync of the file and its folder.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { dirname } from "node:path";

/** The file's size, or undefined when it does not exist. */
export async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const st = await Deno.stat(path);
    return st.isFile ? st.size : undefined;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** The sha256 of a file in lowercase hex, read in 4 MiB chunks. */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  using file = await Deno.open(path, { read: true });
  const buf = new Uint8Array(4 << 20);
  for (;;) {
    const n = await file.read(buf);
    if (n === null) break;
    hash.update(buf.subarray(0, n));
  }
  return hash.digest("hex");
}

/** Removes a file, ignoring a missing one. */
export async function removeQuiet(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

/** fsyncs `tmp`, renames it over `dest` and fsyncs the folder. */
export async function commitFile(tmp: string, dest: string): Promise<void> {
  {
    using f = await Deno.open(tmp, { read: true, write: true });
    await f.sync();
  }
  await Deno.mkdir(dirname(dest), { recursive: true });
  await Deno.rename(tmp, dest);
  try {
    using d = await Deno.open(dirname(dest), { read: true });
    await d.sync();
  } catch {
    // some file systems cannot fsync a folder; the rename itself is atomic
  }
}

/** Writes a small file atomically (temp + fsync + rename). */
export async function writeFileAtomic(path: string, data: string): Promise<void> {
  await Deno.mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${crypto.randomUUID()}`;
  try {
    await Deno.writeTextFile(tmp, data);
    await commitFile(tmp, path);
  } catch (error) {
    await removeQuiet(tmp);
    throw error;
  }
}
