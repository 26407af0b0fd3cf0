/**
 * The cflow release version (kept equal to `version` in deno.json by a test).
 *
 * @module
 */

/**
 * cflow's version.
 *
 * @example
 * ```ts
 * import { VERSION } from "./version.ts";
 * console.log(`cflow ${VERSION}`);
 * ```
 */
export const VERSION = "0.1.0";
