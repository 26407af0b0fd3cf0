/**
 * Models already downloaded by Ollama, run in place: `--model ollama:NAME[:TAG]` finds the GGUF
 * file Ollama keeps for `ollama pull NAME[:TAG]`, so that an Ollama user does not download a model
 * twice. Nothing is written into Ollama's folder and nothing is fetched.
 *
 * Ollama's store (`OLLAMA_MODELS`, else `~/.ollama/models`, and `/usr/share/ollama/.ollama/models`
 * where Ollama runs as a system service) holds a manifest per name,
 * `manifests/HOST/NAMESPACE/MODEL/TAG` (a JSON object with a `layers` list), and each layer as a
 * file named for its digest, `blobs/sha256-HEX`. The layer whose `mediaType` is
 * `application/vnd.ollama.image.model` is the GGUF file; the others (template, parameters, license,
 * a vision projector) are not read. A name without a host is `registry.ollama.ai`'s, one without
 * a namespace is in `library`, one without a tag is `latest`, as `ollama run` reads them.
 *
 * Everything read there is checked before it is used: the name's parts (no `..`, no separators),
 * the manifest's size (at most {@link MAX_MANIFEST_BYTES}), its JSON shape, the digest's form and
 * the blob's size against the manifest's (a partial download is refused).
 *
 * ```ts ignore
 * import { findOllamaModel } from "./ollama_store.ts";
 * const { path } = await findOllamaModel("ollama:llama3.2:1b");
 * ```
 *
 * @module
 */

import { readEnv } from "../ffi/mod.ts";
import { absoluteDir, type EnvReader } from "./cache_paths.ts";

/** The prefix that names a model in Ollama's store. */
export const OLLAMA_PREFIX = "ollama:";

/** The largest manifest read (Ollama's are under 2 KB). */
export const MAX_MANIFEST_BYTES = 1 << 20;

/** The most layers a manifest may list. */
const MAX_LAYERS = 4096;

/** The media type of the layer that holds the GGUF file. */
const MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model";

/** Ollama's folder when it runs as a system service (its Linux installer's user). */
const SERVICE_STORE = "/usr/share/ollama/.ollama/models";

/**
 * An Ollama reference that is malformed, not in the store, or whose manifest or blob is not
 * usable; the message names the reference and the file.
 *
 * @example
 * ```ts
 * import { OllamaStoreError, parseOllamaName } from "./ollama_store.ts";
 * try {
 *   parseOllamaName("ollama:../x");
 * } catch (e) {
 *   console.log(e instanceof OllamaStoreError); // true
 * }
 * ```
 */
export class OllamaStoreError extends Error {
  /** Always `"OllamaStoreError"`. */
  override name = "OllamaStoreError";
}

/**
 * The parts of an Ollama model name, defaults filled in.
 *
 * @example
 * ```ts
 * import { type OllamaName, parseOllamaName } from "./ollama_store.ts";
 * const n: OllamaName = parseOllamaName("ollama:qwen2.5-coder:1.5b");
 * console.log(n.host, n.namespace, n.model, n.tag); // "registry.ollama.ai library qwen2.5-coder 1.5b"
 * ```
 */
export interface OllamaName {
  /** The registry's host (`registry.ollama.ai` unless named, e.g. `hf.co`). */
  host: string;
  /** The namespace (`library` unless named). */
  namespace: string;
  /** The model's name. */
  model: string;
  /** The tag (`latest` unless named). */
  tag: string;
}

/**
 * True for a reference to Ollama's store (`ollama:NAME[:TAG]`).
 *
 * @example
 * ```ts
 * import { isOllamaReference } from "./ollama_store.ts";
 * console.log(isOllamaReference("ollama:llama3.2"), isOllamaReference("llama3.2.gguf")); // true false
 * ```
 */
export function isOllamaReference(value: string): boolean {
  return value.startsWith(OLLAMA_PREFIX);
}

// A name part: letters, digits, '_', '-' and '.', starting with a letter, digit or '_', at most
// 128 bytes (Ollama's part limit); a namespace has no '.'. No part is "." or ".." by the first rule.
const PART = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const NAMESPACE = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$/;
const HOST = /^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/;

/**
 * The parts of `[HOST/][NAMESPACE/]MODEL[:TAG]`, with or without the `ollama:` prefix. Refuses,
 * with an {@link OllamaStoreError}, anything else: more than three `/`-separated parts, an empty
 * part, `..`, a build (`+Q4_0`) or digest (`@sha256-...`) suffix, characters outside
 * `[A-Za-z0-9_.-]`.
 *
 * @example
 * ```ts
 * import { parseOllamaName } from "./ollama_store.ts";
 * console.log(parseOllamaName("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0"));
 * // { host: "hf.co", namespace: "bartowski", model: "SmolLM2-135M-Instruct-GGUF", tag: "Q4_0" }
 * ```
 */
export function parseOllamaName(value: string): OllamaName {
  const name = isOllamaReference(value) ? value.slice(OLLAMA_PREFIX.length) : value;
  const bad = (why: string) =>
    new OllamaStoreError(
      `model store: ${JSON.stringify(value.slice(0, 300))} is not an Ollama model name ` +
        `(ollama:[HOST/][NAMESPACE/]MODEL[:TAG]): ${why}`,
    );
  if (name.length === 0) throw bad("the name is empty");
  if (name.length > 512) throw bad("longer than 512 characters");
  const slash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  const hasTag = colon > slash;
  const path = hasTag ? name.slice(0, colon) : name;
  const tag = hasTag ? name.slice(colon + 1) : "latest";
  const parts = path.split("/");
  if (parts.length > 3) throw bad("more than HOST/NAMESPACE/MODEL");
  const model = parts[parts.length - 1];
  const namespace = parts.length >= 2 ? parts[parts.length - 2] : "library";
  const host = parts.length === 3 ? parts[0] : "registry.ollama.ai";
  if (!PART.test(model) || model.includes("..")) throw bad(`model part ${JSON.stringify(model)}`);
  if (!PART.test(tag) || tag.includes("..")) throw bad(`tag ${JSON.stringify(tag)}`);
  if (!NAMESPACE.test(namespace)) throw bad(`namespace ${JSON.stringify(namespace)}`);
  if (!HOST.test(host) || host.includes("..")) throw bad(`host ${JSON.stringify(host)}`);
  return { host, namespace, model, tag };
}

/**
 * The folders searched for Ollama's store, in order: `OLLAMA_MODELS` alone when it is set (it
 * must be an absolute path), else `$HOME/.ollama/models` and then the system service's
 * `/usr/share/ollama/.ollama/models`.
 *
 * @param env Reads a variable (default: the process environment, where permitted).
 * @example
 * ```ts
 * import { ollamaStoreDirs } from "./ollama_store.ts";
 * console.log(ollamaStoreDirs((n) => (n === "HOME" ? "/home/ada" : undefined)));
 * // ["/home/ada/.ollama/models", "/usr/share/ollama/.ollama/models"]
 * ```
 */
export function ollamaStoreDirs(env: EnvReader = readEnv): string[] {
  const explicit = env("OLLAMA_MODELS");
  if (explicit) return [absoluteDir("OLLAMA_MODELS", explicit, (m) => new OllamaStoreError(m))];
  const home = env("HOME");
  const dirs = home?.startsWith("/") ? [`${home.replace(/\/+$/, "")}/.ollama/models`] : [];
  return [...dirs, SERVICE_STORE];
}

/**
 * Where {@link findOllamaModel} found a model.
 *
 * @example
 * ```ts
 * import type { OllamaModel } from "./ollama_store.ts";
 * const m: OllamaModel = {
 *   path: "/s/blobs/sha256-00",
 *   manifest: "/s/manifests/registry.ollama.ai/library/x/latest",
 *   name: "ollama-x-latest",
 *   reference: "ollama:x:latest",
 * };
 * ```
 */
export interface OllamaModel {
  /** The GGUF file (the model layer's blob). */
  path: string;
  /** The manifest it was found through. */
  manifest: string;
  /** A file-name-safe name for the model (`ollama-MODEL-TAG`, with a host and namespace other than the defaults). */
  name: string;
  /** The reference in full, defaults filled in except the host and namespace (`ollama:MODEL:TAG`). */
  reference: string;
}

/**
 * The GGUF file Ollama keeps for `value` (`ollama:NAME[:TAG]`), found through its manifest in the
 * first of `dirs` that has one. Throws an {@link OllamaStoreError} naming the reference and the
 * file when the name is malformed, no folder has it (saying to run `ollama pull`), or the manifest
 * or blob is not usable.
 *
 * @param dirs The store folders (default {@link ollamaStoreDirs}).
 * @example
 * ```ts ignore
 * import { findOllamaModel } from "./ollama_store.ts";
 * const m = await findOllamaModel("ollama:smollm2:135m");
 * console.log(m.path); // e.g. "/home/ada/.ollama/models/blobs/sha256-f535..."
 * ```
 */
export async function findOllamaModel(
  value: string,
  dirs: string[] = ollamaStoreDirs(),
): Promise<OllamaModel> {
  const n = parseOllamaName(value);
  const tried: string[] = [];
  // As named, then lowercased (some Ollama versions keep the path in lower case).
  const rel = [n.host, n.namespace, n.model, n.tag].join("/");
  const candidates = new Set([rel, rel.toLowerCase()]);
  for (const dir of dirs) {
    for (const candidate of candidates) {
      const manifest = `${dir}/manifests/${candidate}`;
      const bytes = await readManifest(manifest);
      if (typeof bytes === "string") {
        tried.push(bytes);
        continue;
      }
      const layer = modelLayer(bytes, manifest, value);
      const path = await blobPath(dir, layer, manifest);
      return { path, manifest, name: conversionName(n), reference: referenceOf(n) };
    }
  }
  const short = isOllamaReference(value) ? value.slice(OLLAMA_PREFIX.length) : value;
  throw new OllamaStoreError(
    `model store: ${value} is not in Ollama's store (${tried.join(", ")}): ` +
      `run 'ollama pull ${short}' first, or set OLLAMA_MODELS to Ollama's models folder`,
  );
}

function referenceOf(n: OllamaName): string {
  const host = n.host === "registry.ollama.ai" ? "" : `${n.host}/`;
  const namespace = host === "" && n.namespace === "library" ? "" : `${n.namespace}/`;
  return `${OLLAMA_PREFIX}${host}${namespace}${n.model}:${n.tag}`;
}

function conversionName(n: OllamaName): string {
  const parts = [
    n.host === "registry.ollama.ai" ? [] : [n.host],
    n.namespace === "library" ? [] : [n.namespace],
    [n.model, n.tag],
  ].flat();
  // At most 160 characters (a conversion's name is at most 200): the conversion's own key tells
  // apart two long names that share their first 160.
  return `ollama-${parts.join("-")}`.slice(0, 160);
}

/**
 * The manifest's bytes, or why there are none: "no PATH", or that it cannot be read (the system
 * service's store is often readable by its own user only; a process may not be granted it).
 */
async function readManifest(path: string): Promise<Uint8Array | string> {
  let file: Deno.FsFile;
  try {
    const info = await Deno.stat(path);
    if (!info.isFile) {
      throw new OllamaStoreError(`model store: Ollama manifest ${path} is not a file`);
    }
    file = await Deno.open(path, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return `no ${path}`;
    if (error instanceof Deno.errors.PermissionDenied) return `${path}: permission denied`;
    if (error instanceof Deno.errors.NotCapable) return `${path}: not granted to this process`;
    throw error;
  }
  try {
    const buf = new Uint8Array(MAX_MANIFEST_BYTES + 1);
    let n = 0;
    while (n < buf.length) {
      const got = await file.read(buf.subarray(n));
      if (got === null) break;
      n += got;
    }
    if (n > MAX_MANIFEST_BYTES) {
      throw new OllamaStoreError(
        `model store: Ollama manifest ${path} is larger than ${MAX_MANIFEST_BYTES} bytes`,
      );
    }
    return buf.slice(0, n);
  } finally {
    file.close();
  }
}

interface Layer {
  digest: string;
  size: number;
}

/** The manifest's one model layer. */
function modelLayer(bytes: Uint8Array, manifest: string, value: string): Layer {
  const bad = (why: string) =>
    new OllamaStoreError(`model store: Ollama manifest ${manifest} (for ${value}): ${why}`);
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw bad(`not UTF-8 JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw bad("not a JSON object");
  const layers = (doc as Record<string, unknown>).layers;
  if (!Array.isArray(layers)) throw bad('field "layers" is not a list');
  if (layers.length > MAX_LAYERS) throw bad(`more than ${MAX_LAYERS} layers`);
  const models: Layer[] = [];
  for (let i = 0; i < layers.length; i++) {
    const l = layers[i];
    if (typeof l !== "object" || l === null) throw bad(`layers[${i}] is not an object`);
    const { mediaType, digest, size } = l as Record<string, unknown>;
    if (mediaType !== MODEL_MEDIA_TYPE) continue;
    if (typeof digest !== "string" || !/^sha256[:-][0-9a-f]{64}$/.test(digest)) {
      throw bad(`layers[${i}].digest is not sha256:<64 hex digits>`);
    }
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
      throw bad(`layers[${i}].size is not a byte count`);
    }
    models.push({ digest: digest.slice(7), size });
  }
  if (models.length === 0) {
    throw bad(
      `no layer of type ${MODEL_MEDIA_TYPE} (a GGUF file); models stored as separate tensors are not read`,
    );
  }
  if (models.length > 1) throw bad(`${models.length} layers of type ${MODEL_MEDIA_TYPE}, not one`);
  return models[0];
}

/** The layer's blob: `blobs/sha256-HEX` (or the older `sha256:HEX`), of the manifest's size. */
async function blobPath(dir: string, layer: Layer, manifest: string): Promise<string> {
  for (const sep of ["-", ":"]) {
    const path = `${dir}/blobs/sha256${sep}${layer.digest}`;
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(path);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    if (!info.isFile) throw new OllamaStoreError(`model store: Ollama blob ${path} is not a file`);
    if (info.size !== layer.size) {
      throw new OllamaStoreError(
        `model store: Ollama blob ${path} has ${info.size} bytes where ${manifest} says ${layer.size} ` +
          `(a download Ollama did not finish?)`,
      );
    }
    return path;
  }
  throw new OllamaStoreError(
    `model store: Ollama blob ${dir}/blobs/sha256-${layer.digest}, named by ${manifest}, does not exist`,
  );
}
