/**
 * Where the command line keeps models. Run from a checkout (through the `cflow` launcher) that is
 * `cache/models/` of the checkout; as a single executable (`deno task compile`), whose own files
 * are read-only and embedded, it is `$HOME/.cache/cflow/models`.
 *
 * @module
 */

/** File name of the default model (SmolLM2-135M-Instruct, GGUF Q4_1; `cflow pull smollm2`). */
const DEFAULT_MODEL_FILE = "smollm2-135m-instruct.Q4_1.gguf";

function home(): string | undefined {
  try {
    return Deno.env.get("HOME") || undefined;
  } catch {
    return undefined; // no --allow-env=HOME
  }
}

/**
 * The folder models are pulled into and the default model is read from.
 *
 * @example
 * ```ts ignore
 * import { modelsDir } from "./paths.ts";
 * console.log(modelsDir());
 * ```
 */
export function modelsDir(): string {
  if (!Deno.build.standalone) return new URL("../cache/models", import.meta.url).pathname;
  const h = home();
  if (h === undefined) {
    throw new Error("model store: set CFLOW_CACHE or HOME (the executable keeps models under it)");
  }
  return `${h}/.cache/cflow/models`;
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
