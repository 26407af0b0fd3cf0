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
export const smollm2Present: boolean = isFile(SMOLLM2_GGUF);

/**
 * True when `path` is a file (of `size` bytes, when given): whether a model a
 * test needs has been fetched, without throwing for an absent one.
 *
 * @example
 * ```ts ignore
 * import { isFile, MODELS_DIR } from "./test_models.ts";
 * Deno.test({ name: "needs Qwen", ignore: !isFile(`${MODELS_DIR}/qwen.gguf`), fn() {} });
 * ```
 */
export function isFile(path: string, size?: number): boolean {
  try {
    const info = Deno.statSync(path);
    return info.isFile && (size === undefined || info.size === size);
  } catch {
    return false;
  }
}

/**
 * Asserts two logit vectors are the same bits (NaN as NaN, -0 apart from +0),
 * naming the first position that differs.
 *
 * @example
 * ```ts ignore
 * import { sameBits } from "./test_models.ts";
 * sameBits(batched, single, "q8_0 panels");
 * ```
 */
export function sameBits(a: Float32Array, b: Float32Array, what: string): void {
  if (a.length !== b.length) throw new Error(`${what}: ${a.length} logits, expected ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) throw new Error(`${what}: logit ${i} is ${a[i]}, expected ${b[i]}`);
  }
}
