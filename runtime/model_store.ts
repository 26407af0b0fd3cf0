/**
 * Where models come from when a user names one: `.cflow`/`.vflow` files are
 * used as they are; GGUF files and Hugging Face folders are converted once
 * into a cache folder and the conversion is reused while the source is
 * unchanged.
 *
 * @module
 */

import { findOllamaModel, isOllamaReference } from "./ollama_store.ts";
import type { TargetQuant } from "../convert/mod.ts";
import type { Progress } from "../formats/cflow/mod.ts";
import { resolveBuiltin } from "./builtin.ts";
import { convertedDir } from "./cache_paths.ts";

/**
 * The folder conversions go into: `converted/` of the user-level cache
 * (`CFLOW_CACHE`, else `$XDG_CACHE_HOME/cflow`, else `$HOME/.cache/cflow`;
 * see `cache_paths.ts`). Throws a `CacheDirError` for a relative path.
 *
 * @example
 * ```ts ignore
 * import { cacheDir } from "./model_store.ts";
 * console.log(cacheDir()); // e.g. "/home/ada/.cache/cflow/converted"
 * ```
 */
export function cacheDir(): string {
  return convertedDir();
}

async function sniff(path: string): Promise<"tiled" | "gguf" | "hf"> {
  const info = await Deno.stat(path);
  if (info.isDirectory) return "hf";
  const file = await Deno.open(path, { read: true });
  try {
    const head = new Uint8Array(8);
    const n = (await file.read(head)) ?? 0;
    const text = new TextDecoder().decode(head.subarray(0, n));
    if (text.startsWith("CFLOW") || text.startsWith("VFLOW")) return "tiled";
    if (text.startsWith("GGUF")) return "gguf";
  } finally {
    file.close();
  }
  throw new RangeError(`${path}: not a .cflow, .vflow or GGUF file, nor a Hugging Face folder`);
}

async function shortHash(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest).subarray(0, 6), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

/**
 * Options of {@link resolveModel}.
 *
 * @example
 * ```ts
 * import type { ResolveOptions } from "./model_store.ts";
 * const o: ResolveOptions = { quant: "q4_0" };
 * ```
 */
export interface ResolveOptions {
  /** Weight type of conversions (default: auto for GGUF files, q4_0 for Hugging Face folders). */
  quant?: TargetQuant;
  /** Cache folder (default {@link cacheDir}). */
  cache?: string;
  /** Conversion progress. */
  progress?: Progress;
  /** Called once before a conversion starts. */
  onConvert?: (source: string, target: string) => void;
  /**
   * Name of the conversion in the cache (default: the file's name as `path` gives it): letters,
   * digits, `.`, `_` and `-`, not starting with `.`, at most 200 characters. A model in Ollama's
   * store passes its model name, since its file is named for its digest.
   */
  name?: string;
  /** What the conversion's metadata names as its source (`source.file`; default: the file's name). */
  sourceName?: string;
}

/**
 * The `.cflow`/`.vflow` file to run for `path`, converting a GGUF file or a
 * Hugging Face folder into the cache first when needed. `builtin:NAME` is a
 * committed pipeline-native model; `ollama:NAME[:TAG]` the GGUF file of a
 * model Ollama has pulled (`ollama_store.ts`), converted under its Ollama name.
 *
 * @example
 * ```ts ignore
 * import { resolveModel } from "./model_store.ts";
 * const path = await resolveModel("smollm2.gguf");
 * ```
 */
export async function resolveModel(path: string, options: ResolveOptions = {}): Promise<string> {
  if (options.name !== undefined && !/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/.test(options.name)) {
    throw new Error(
      `model store: conversion name ${JSON.stringify(options.name.slice(0, 300))} is not ` +
        `letters, digits, '.', '_' and '-' (at most 200, not starting with '.')`,
    );
  }
  if (path.startsWith("builtin:")) {
    return await resolveBuiltin(path, () => options.cache ?? cacheDir());
  }
  if (isOllamaReference(path)) {
    const found = await findOllamaModel(path);
    return await resolveModel(found.path, {
      ...options,
      name: found.name,
      sourceName: found.reference,
    });
  }
  const kind = await sniff(path);
  if (kind === "tiled") return path;
  // A GGUF keeps its own types (lossless); a Hugging Face checkpoint of
  // f32/f16/bf16 weights is quantized to Q4_0.
  const quant = options.quant ?? (kind === "gguf" ? "auto" : "q4_0");
  const real = await Deno.realPath(path);
  const info = await Deno.stat(real);
  // "out-auto": the output matrix follows BuildOptions.outputQuant "auto" (conversions made before
  // that policy are not reused).
  const key = await shortHash(
    `${real}\0${info.size}\0${info.mtime?.getTime()}\0${quant}\0cflow-5\0out-auto`,
  );
  const dir = options.cache ?? cacheDir();
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  // Named as the user named it: a model in the Hugging Face cache is a link named for the
  // model into blobs/, named for its hash. The key is the real file's, so a link and the
  // file it leads to share one conversion when their names agree.
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  const named = parts.includes("..") ? undefined : parts.pop();
  const base = options.name ?? named ?? real.split("/").filter((p) => p !== "").pop() ?? "model";
  const target = `${dir}/${base.replace(/\.gguf$/i, "")}-${key}.${quant}.cflow`;
  try {
    await Deno.stat(target);
    return target;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  options.onConvert?.(real, target);
  // The converter is loaded only to convert: a process that opens a cached
  // conversion (every run after the first) does not hold its code (importing
  // runtime/mod.ts measured 2-4 MB less RSS).
  const { convertFile } = await import("../convert/mod.ts");
  await convertFile(real, target, {
    format: "cflow",
    quant,
    rule: "ggml",
    outputQuant: "auto",
    measureError: false,
    progress: options.progress,
    sourceName: options.sourceName,
  });
  return target;
}
