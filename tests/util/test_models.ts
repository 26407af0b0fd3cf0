/**
 * Where the test suite finds its models and where its `./cflow` processes keep their cache.
 *
 * `scripts/fetch-models.sh` (run by `./dev task test:ts` first) downloads the models into the
 * user-level cache (`CFLOW_CACHE`, else `$XDG_CACHE_HOME/cflow`, else `~/.cache/cflow`) and
 * makes the checkout's `cache/models/` a link to its `models/`, so tests name
 * `cache/models/FILE` whatever the cache is. Tests that run `./cflow` pass
 * {@link TEST_CACHE_ENV}: the checkout's `cache/` as `CFLOW_CACHE`, so that their conversions
 * go into the checkout's `cache/converted/`, never into the user's home folder, while their
 * models are still read through the link.
 *
 * @module
 */

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/**
 * The cache folder of the suite's `./cflow` processes: the checkout's `cache/`.
 *
 * @example
 * ```ts
 * import { TEST_CACHE } from "./test_models.ts";
 * console.log(TEST_CACHE.endsWith("/cache")); // true
 * ```
 */
export const TEST_CACHE: string = `${ROOT}/cache`;

/**
 * The environment a test passes to `./cflow` (merged over its own) so that the process uses
 * {@link TEST_CACHE}.
 *
 * @example
 * ```ts ignore
 * import { TEST_CACHE_ENV } from "./test_models.ts";
 * await new Deno.Command("./cflow", { args: ["generate"], env: { ...TEST_CACHE_ENV } }).output();
 * ```
 */
export const TEST_CACHE_ENV: Readonly<Record<string, string>> = { CFLOW_CACHE: TEST_CACHE };

/**
 * The test models' folder: the checkout's `cache/models/` (a link to the user cache's models).
 *
 * @example
 * ```ts
 * import { MODELS_DIR } from "./test_models.ts";
 * console.log(MODELS_DIR.endsWith("/cache/models")); // true
 * ```
 */
export const MODELS_DIR: string = `${TEST_CACHE}/models`;

/**
 * SmolLM2-135M-Instruct, GGUF Q4_1 (94 MB), the model the suite fetches first
 * (`scripts/fetch-models.sh smollm2`), for tests that need it and are ignored without it.
 *
 * @example
 * ```ts
 * import { SMOLLM2_GGUF } from "./test_models.ts";
 * console.log(SMOLLM2_GGUF.endsWith("smollm2-135m-instruct.Q4_1.gguf")); // true
 * ```
 */
export const SMOLLM2_GGUF: string = `${MODELS_DIR}/smollm2-135m-instruct.Q4_1.gguf`;

/**
 * True when {@link SMOLLM2_GGUF} has been fetched.
 *
 * @example
 * ```ts ignore
 * import { smollm2Present } from "./test_models.ts";
 * Deno.test({ name: "needs SmolLM2", ignore: !smollm2Present, fn() {} });
 * ```
 */
export const smollm2Present: boolean = (() => {
  try {
    return Deno.statSync(SMOLLM2_GGUF).isFile;
  } catch {
    return false;
  }
})();
