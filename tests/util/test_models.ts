/**
 * The real test model the suite fetches first (`scripts/fetch-models.sh smollm2`), for tests
 * that need it and are ignored without it.
 *
 * @module
 */

/** SmolLM2-135M-Instruct, GGUF Q4_1 (94 MB). */
export const SMOLLM2_GGUF: string =
  new URL("../../cache/models/smollm2-135m-instruct.Q4_1.gguf", import.meta.url).pathname;

/** True when {@link SMOLLM2_GGUF} has been fetched. */
export const smollm2Present: boolean = (() => {
  try {
    return Deno.statSync(SMOLLM2_GGUF).isFile;
  } catch {
    return false;
  }
})();
