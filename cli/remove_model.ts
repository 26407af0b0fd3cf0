/**
 * `cflow rm`: removing a model from the user-level cache's `models/` with the conversions made
 * from it in `converted/`, links removed and never followed out of the cache.
 *
 * @module
 */

import { parseSpec } from "../pull/parse_spec.ts";
import { SpecError } from "../pull/errors.ts";
import { cacheRoot } from "../runtime/cache_paths.ts";
import { UsageError } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";
import { aliasPath, hfModelPath, isHfReference } from "./paths.ts";
import { basename, lstatOrUndefined } from "./_cache_files.ts";
import { humanSize, listCache } from "./models.ts";

/**
 * A cache entry that cannot be listed or removed: an unknown or ambiguous name, or a path
 * that leads out of the cache. `path` names the file or folder concerned.
 *
 * @example
 * ```ts
 * import { CacheEntryError } from "./remove_model.ts";
 * const e = new CacheEntryError("/c/models/x.gguf", "rm: x.gguf leads out of the cache");
 * console.log(e.path, e instanceof Error); // "/c/models/x.gguf" true
 * ```
 */
export class CacheEntryError extends Error {
  /** Always `"CacheEntryError"`. */
  override name = "CacheEntryError";
  /** The file or folder concerned. */
  readonly path: string;
  /** Builds the error. */
  constructor(path: string, message: string) {
    super(message);
    this.path = path;
  }
}

/**
 * One file or folder {@link removeModel} removed.
 *
 * @example
 * ```ts
 * import type { Removed } from "./remove_model.ts";
 * const r: Removed = { kind: "model", name: "smollm2", path: "/c/models/s.gguf", size: 1 };
 * ```
 */
export interface Removed {
  /** A model or one of its conversions. */
  kind: "model" | "conversion";
  /** Its name as `cflow list` shows it. */
  name: string;
  /** Where it was. */
  path: string;
  /** Bytes freed. */
  size: number;
}

/**
 * Throws a {@link UsageError} unless `name` can name something in the cache: an `hf:`
 * reference, or a name without `/`, `\`, a leading `.`, control characters or `..`.
 *
 * @example
 * ```ts
 * import { checkModelName } from "./remove_model.ts";
 * checkModelName("smollm2");
 * try {
 *   checkModelName("../etc/passwd");
 * } catch (e) {
 *   console.log((e as Error).name); // "UsageError"
 * }
 * ```
 */
export function checkModelName(name: string): void {
  if (isHfReference(name)) {
    try {
      parseSpec(name);
      return;
    } catch (error) {
      if (error instanceof SpecError) {
        throw new UsageError(`rm: ${error.message.replace(/^pull: /, "")}`);
      }
      throw error;
    }
  }
  // deno-lint-ignore no-control-regex
  if (name === "" || /[\/\\\u0000-\u001f\u007f]/.test(name) || name.startsWith(".")) {
    // deno-lint-ignore no-control-regex
    const shown = name.replace(/[\u0000-\u001f\u007f]/g, "?");
    throw new UsageError(
      `rm: "${shown}" is not a model name: give an alias, an hf: reference or a file name in the cache's models/ (see 'cflow list')`,
    );
  }
}

/** Throws unless the folder holding `path` is inside `dir` once links are resolved. */
async function checkInside(path: string, dir: string): Promise<void> {
  const parent = path.slice(0, path.lastIndexOf("/"));
  const [realDir, realParent] = [await Deno.realPath(dir), await Deno.realPath(parent)];
  if (realParent !== realDir && !realParent.startsWith(`${realDir}/`)) {
    throw new CacheEntryError(path, `rm: ${path} leads out of the cache (to ${realParent})`);
  }
}

/**
 * Removes the model `name` (an alias, an `hf:` reference or a file name in `models/`) and
 * every conversion made from it. A link is removed, never what it points to; only finished
 * `.cflow` files are removed from `converted/` (a conversion being written is left alone).
 * Throws a {@link UsageError} for a name that could lead outside the cache, a
 * {@link CacheEntryError} for an unknown or ambiguous one.
 *
 * @param root The cache folder (default: {@link cacheRoot}).
 * @example
 * ```ts ignore
 * import { removeModel } from "./remove_model.ts";
 * for (const r of await removeModel("smollm2")) console.log(r.path, r.size);
 * ```
 */
export async function removeModel(name: string, root: string = cacheRoot()): Promise<Removed[]> {
  checkModelName(name);
  const models = `${root}/models`;
  const converted = `${root}/converted`;
  const listing = await listCache(root);
  let wanted: string | undefined;
  if (isHfReference(name)) {
    try {
      wanted = await hfModelPath(name, models);
    } catch {
      wanted = undefined; // not pulled: unknown below
    }
  } else wanted = aliasPath(name, models);
  const matches = listing.models.filter((m) =>
    wanted !== undefined ? m.path === wanted : m.name === name || basename(m.path) === name
  );
  if (matches.length === 0) {
    throw new CacheEntryError(
      wanted ?? `${models}/${name}`,
      `rm: no model "${name}" in the cache (${models}); run 'cflow list' to see its models`,
    );
  }
  if (matches.length > 1) {
    throw new CacheEntryError(
      `${models}/${name}`,
      `rm: "${name}" names ${matches.length} models: ${
        matches.map((m) => m.name).join(", ")
      }; give one of those names (see 'cflow list')`,
    );
  }
  const model = matches[0];
  const removed: Removed[] = [];
  await checkInside(model.path, models);
  const info = await lstatOrUndefined(model.path);
  if (info !== undefined) {
    await Deno.remove(model.path, { recursive: info.isDirectory });
    removed.push({ kind: "model", name: model.name, path: model.path, size: model.size });
  }
  for (const c of listing.conversions.filter((c) => c.model === model.name)) {
    await checkInside(c.path, converted);
    if ((await lstatOrUndefined(c.path)) === undefined) continue; // removed meanwhile
    await Deno.remove(c.path);
    removed.push({ kind: "conversion", name: c.name, path: c.path, size: c.size });
  }
  return removed;
}

/**
 * `cflow rm NAME [--json]`: removes a model and its conversions and prints what was
 * removed; returns the exit status (1 for an unknown name).
 *
 * @example
 * ```ts ignore
 * import { runRm } from "./remove_model.ts";
 * Deno.exit(await runRm(["smollm2"], { json: false }));
 * ```
 */
export async function runRm(args: string[], options: { json: boolean }): Promise<number> {
  if (args.length !== 1) throw new UsageError("rm takes one model NAME (see 'cflow list')");
  let removed: Removed[];
  try {
    removed = await removeModel(args[0]);
  } catch (error) {
    if (error instanceof CacheEntryError) {
      console.error(`cflow: ${error.message}`);
      return EXIT.ERROR;
    }
    throw error;
  }
  if (options.json) {
    console.log(JSON.stringify({ removed }, null, 2));
  } else {
    for (const r of removed) console.log(`removed ${r.kind} ${r.name} (${humanSize(r.size)})`);
    const total = removed.reduce((a, r) => a + r.size, 0);
    console.error(`freed ${humanSize(total)}`);
  }
  return EXIT.OK;
}
