/**
 * Where the command line keeps models: the `models/` folder of the user-level cache
 * (`CFLOW_CACHE`, else `$XDG_CACHE_HOME/cflow`, else `$HOME/.cache/cflow`; see
 * `runtime/cache_paths.ts`), the same for every checkout (the `cflow` launcher) and for the
 * single executable (`deno task compile`), so that a model is downloaded and converted once.
 *
 * @module
 */

import { modelsDir as cacheModelsDir } from "../runtime/cache_paths.ts";
import { ALIASES, parseSpec, type PypiSpec } from "../pull/parse_spec.ts";
import { pypiDestination } from "../pull/pull_pypi.ts";

/** File name of the default model (SmolLM2-135M-Instruct, GGUF Q4_1; `cflow pull smollm2`). */
const DEFAULT_MODEL_FILE = "smollm2-135m-instruct.Q4_1.gguf";

/**
 * The folder models are pulled into and the default model is read from. Throws a
 * `CacheDirError` when the cache variables are relative or missing.
 *
 * @example
 * ```ts ignore
 * import { modelsDir } from "./paths.ts";
 * console.log(modelsDir()); // e.g. "/home/ada/.cache/cflow/models"
 * ```
 */
export function modelsDir(): string {
  return cacheModelsDir();
}

/**
 * The model used when `--model` is not given.
 *
 * @example
 * ```ts ignore
 * import { defaultModel } from "./paths.ts";
 * console.log(defaultModel().endsWith(".gguf")); // true
 * ```
 */
export function defaultModel(): string {
  return `${modelsDir()}/${DEFAULT_MODEL_FILE}`;
}

/**
 * Where a pull alias (`smollm2`, `qwen2.5-coder-1.5b`, ...) lands in the models folder
 * `dir`, or undefined when `name` is not an alias (case-insensitive, as `cflow pull`
 * takes them).
 *
 * @example
 * ```ts
 * import { aliasPath } from "./paths.ts";
 * console.log(aliasPath("qwen2.5-coder-1.5b", "/c/models"));
 * // "/c/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
 * console.log(aliasPath("model.gguf", "/c/models")); // undefined
 * ```
 */
export function aliasPath(name: string, dir: string): string | undefined {
  const key = name.toLowerCase();
  if (!Object.hasOwn(ALIASES, key)) return undefined;
  return pypiDestination(parseSpec(key) as PypiSpec, dir);
}

/**
 * The path a `--model` value names: a pull alias is the model it pulled into the cache
 * (an error saying to pull it when it is not there); anything else is a path, as given
 * (write `./smollm2` for a file that has an alias's name).
 *
 * @param exists Whether a path exists (default: `Deno.statSync`).
 * @example
 * ```ts
 * import { modelArgument } from "./paths.ts";
 * console.log(modelArgument("some/model.gguf")); // "some/model.gguf"
 * console.log(modelArgument("smollm2", "/c/models", () => true));
 * // "/c/models/smollm2-135m-instruct.Q4_1.gguf"
 * ```
 */
export function modelArgument(
  value: string,
  dir?: string,
  exists: (path: string) => boolean = pathExists,
): string {
  const key = value.toLowerCase();
  if (!Object.hasOwn(ALIASES, key)) return value;
  const path = aliasPath(key, dir ?? modelsDir())!;
  if (!exists(path)) {
    throw new Error(
      `model store: ${value} is not in the cache (no ${path}): run 'cflow pull ${key}' first`,
    );
  }
  return path;
}

function pathExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
