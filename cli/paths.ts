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
import { pullHf } from "../pull/pull_hf.ts";
import { NotCachedError, SpecError } from "../pull/errors.ts";
import type { HfSpec } from "../pull/parse_spec.ts";

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

/**
 * True for a Hugging Face reference (`hf:`, `hf://`, `huggingface:`), as `cflow pull` takes them.
 *
 * @example
 * ```ts
 * import { isHfReference } from "./paths.ts";
 * console.log(isHfReference("hf:org/repo:Q4_0"), isHfReference("model.gguf")); // true false
 * ```
 */
export function isHfReference(value: string): boolean {
  return /^(hf:|huggingface:)/.test(value);
}

/**
 * The file (or folder) an `hf:ORG/REPO[:QUANT|:FILE]` reference was pulled into under the
 * models folder `dir`, found from what `cflow pull` recorded there, without the network.
 * Throws an error saying to run `cflow pull REF` first when it is not there, and one naming
 * the reference when it is malformed.
 *
 * @example
 * ```ts ignore
 * import { hfModelPath } from "./paths.ts";
 * console.log(await hfModelPath("hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0", "/c/models"));
 * // "/c/models/hf/bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_0.gguf"
 * ```
 */
export async function hfModelPath(value: string, dir?: string): Promise<string> {
  let spec: HfSpec;
  try {
    spec = parseSpec(value) as HfSpec;
  } catch (error) {
    if (error instanceof SpecError) {
      throw new Error(`model store: ${error.message.replace(/^pull: /, "")}`);
    }
    throw error;
  }
  try {
    return (await pullHf(spec, value, { cacheDir: dir ?? modelsDir(), offline: true })).path;
  } catch (error) {
    if (error instanceof NotCachedError || error instanceof SpecError) {
      throw new Error(
        `model store: ${value} is not in the cache (${
          dir ?? modelsDir()
        }): run 'cflow pull ${value}' first`,
      );
    }
    throw error;
  }
}

/**
 * {@link modelArgument}, and an `hf:` reference as {@link hfModelPath} finds it (an
 * `ollama:NAME` reference passes through: `resolveModel` finds it in Ollama's store).
 *
 * @example
 * ```ts
 * import { resolveModelArgument } from "./paths.ts";
 * console.log(await resolveModelArgument("some/model.gguf")); // "some/model.gguf"
 * ```
 */
export async function resolveModelArgument(value: string, dir?: string): Promise<string> {
  return isHfReference(value) ? await hfModelPath(value, dir) : modelArgument(value, dir);
}
