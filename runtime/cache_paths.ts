/**
 * Where cflow keeps what it downloads and what it converts: one user-level
 * cache folder, as Ollama (`~/.ollama`) and the Hugging Face hub
 * (`~/.cache/huggingface`) keep theirs, so that every checkout and the
 * compiled executable share one copy of each model.
 *
 * The folder is `CFLOW_CACHE` when set, else `$XDG_CACHE_HOME/cflow`, else
 * `$HOME/.cache/cflow`; each of these must be an absolute path (a relative
 * one is refused with a {@link CacheDirError}, never resolved against the
 * current folder). Inside it:
 *
 * - `models/`: downloaded models (`cflow pull`, `scripts/fetch-models.sh`);
 * - `converted/`: `.cflow` conversions of GGUF files and Hugging Face folders;
 * - `kernels/`: the kernel library of a registry package (`ffi/remote_kernels.ts`).
 *
 * ```ts
 * import { cacheRoot } from "./cache_paths.ts";
 * console.log(cacheRoot((n) => (n === "HOME" ? "/home/ada" : undefined))); // "/home/ada/.cache/cflow"
 * ```
 *
 * @module
 */

import { readEnv } from "../ffi/mod.ts";

/**
 * A cache folder that cannot be used: a relative or otherwise unusable
 * `CFLOW_CACHE`, `XDG_CACHE_HOME` or `HOME`, or none of them available.
 *
 * @example
 * ```ts
 * import { CacheDirError, cacheRoot } from "./cache_paths.ts";
 * try {
 *   cacheRoot((n) => (n === "CFLOW_CACHE" ? "models" : undefined));
 * } catch (e) {
 *   console.log(e instanceof CacheDirError); // true
 * }
 * ```
 */
export class CacheDirError extends Error {
  /** Always `"CacheDirError"`. */
  override name = "CacheDirError";
}

/**
 * Reads one environment variable; undefined when unset, empty or not permitted.
 *
 * @example
 * ```ts
 * import { cacheRoot, type EnvReader } from "./cache_paths.ts";
 * const env: EnvReader = (name) => (name === "HOME" ? "/home/ada" : undefined);
 * console.log(cacheRoot(env)); // "/home/ada/.cache/cflow"
 * ```
 */
export type EnvReader = (name: string) => string | undefined;

/**
 * `value` of the variable `name` as an absolute folder, trailing slashes dropped; a relative one,
 * or one with control characters, is refused with `refuse(message)` (default a
 * {@link CacheDirError}).
 *
 * @example
 * ```ts
 * import { absoluteDir } from "./cache_paths.ts";
 * console.log(absoluteDir("OLLAMA_MODELS", "/srv/ollama/")); // "/srv/ollama"
 * ```
 */
export function absoluteDir(
  name: string,
  value: string,
  refuse: (message: string) => Error = (m) => new CacheDirError(m),
): string {
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw refuse(`model store: ${name} must not contain control characters`);
  }
  if (!value.startsWith("/")) {
    throw refuse(
      `model store: ${name} must be an absolute path (starting with '/'), not "${value}"`,
    );
  }
  const trimmed = value.replace(/\/+$/, "");
  return trimmed === "" ? "/" : trimmed;
}

function join(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

/**
 * The cache folder: `CFLOW_CACHE`, else `$XDG_CACHE_HOME/cflow`, else
 * `$HOME/.cache/cflow`. An empty variable counts as unset (as the XDG base
 * directory specification says); a set one must be absolute. Trailing
 * slashes are dropped; nothing is created. Throws {@link CacheDirError}.
 *
 * @param env Reads a variable (default: the process environment, where
 *   permitted; a variable that is not granted counts as unset).
 * @example
 * ```ts
 * import { cacheRoot } from "./cache_paths.ts";
 * const env = { XDG_CACHE_HOME: "/var/cache/ada", HOME: "/home/ada" };
 * console.log(cacheRoot((n) => env[n as keyof typeof env])); // "/var/cache/ada/cflow"
 * ```
 */
export function cacheRoot(env: EnvReader = readEnv): string {
  const explicit = env("CFLOW_CACHE");
  if (explicit) return absoluteDir("CFLOW_CACHE", explicit);
  const xdg = env("XDG_CACHE_HOME");
  if (xdg) return join(absoluteDir("XDG_CACHE_HOME", xdg), "cflow");
  const home = env("HOME");
  if (home) return join(join(absoluteDir("HOME", home), ".cache"), "cflow");
  throw new CacheDirError(
    "model store: no cache folder: set CFLOW_CACHE (or XDG_CACHE_HOME or HOME) to an absolute path",
  );
}

/**
 * The folder downloaded models live in: `models/` of {@link cacheRoot}.
 *
 * @example
 * ```ts
 * import { modelsDir } from "./cache_paths.ts";
 * console.log(modelsDir((n) => (n === "CFLOW_CACHE" ? "/srv/cflow" : undefined)));
 * // "/srv/cflow/models"
 * ```
 */
export function modelsDir(env: EnvReader = readEnv): string {
  return join(cacheRoot(env), "models");
}

/**
 * The folder conversions live in: `converted/` of {@link cacheRoot}.
 *
 * @example
 * ```ts
 * import { convertedDir } from "./cache_paths.ts";
 * console.log(convertedDir((n) => (n === "CFLOW_CACHE" ? "/srv/cflow" : undefined)));
 * // "/srv/cflow/converted"
 * ```
 */
export function convertedDir(env: EnvReader = readEnv): string {
  return join(cacheRoot(env), "converted");
}
