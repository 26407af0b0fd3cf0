/**
 * How `cflow list` and `cflow rm` read the cache's folders: file names, sizes and `lstat`s, the
 * walk that lists a link to a file but never descends into a link to a folder, and where a link
 * leads. Private to cli/.
 *
 * @module
 */

export function basename(path: string): string {
  return path.split("/").filter((p) => p !== "").pop() ?? path;
}

export async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** Files under `dir` (relative paths), never descending into links to folders. */
export async function walk(dir: string, rel = ""): Promise<{ rel: string; size: number }[]> {
  const out: { rel: string; size: number }[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return out;
    throw error;
  }
  for (const e of entries.sort((a, b) => a.name < b.name ? -1 : 1)) {
    if (e.name.startsWith(".")) continue; // .pull/ (pull's records, partial downloads), temp files
    const r = rel === "" ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory) out.push(...await walk(`${dir}/${e.name}`, r));
    else if (e.isFile) out.push({ rel: r, size: (await Deno.lstat(`${dir}/${e.name}`)).size });
    else if (e.isSymlink) {
      // A link to a file is listed (its target's size); a link to a folder is not followed.
      try {
        const info = await Deno.stat(`${dir}/${e.name}`);
        if (info.isFile) out.push({ rel: r, size: info.size });
      } catch {
        out.push({ rel: r, size: 0 }); // dangling or not readable: listed so that rm can remove it
      }
    }
  }
  return out;
}

export async function realBase(path: string): Promise<string> {
  try {
    return basename(await Deno.realPath(path));
  } catch {
    return basename(path);
  }
}
