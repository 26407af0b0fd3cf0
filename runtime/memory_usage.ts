/**
 * The process's memory as the kernel accounts it (/proc/self/smaps_rollup,
 * read by the kernel library since Deno cannot read /proc/self without full
 * permissions): resident bytes (RSS) and proportional set size (PSS), split
 * into file-backed pages (the mapped model) and anonymous ones (packed
 * weights, the workspace, the heap).
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";

/**
 * Bytes of memory in use.
 *
 * @example
 * ```ts
 * import type { MemoryUsage } from "./memory_usage.ts";
 * const m: MemoryUsage = { rss: 1, pss: 1, pssFile: 0, pssAnon: 1 };
 * ```
 */
export interface MemoryUsage {
  /** Resident set size. */
  rss: number;
  /** Proportional set size (shared pages divided among their users). */
  pss: number;
  /** PSS of file-backed pages (mapped files). */
  pssFile: number;
  /** PSS of anonymous pages. */
  pssAnon: number;
}

/**
 * The current process's memory, or undefined where it cannot be read (no
 * /proc/self/smaps_rollup, or the WebAssembly build).
 *
 * @example
 * ```ts ignore
 * import { memoryUsage } from "./memory_usage.ts";
 * console.log(memoryUsage()?.pssFile);
 * ```
 */
export function memoryUsage(): MemoryUsage | undefined {
  return openKernels().memoryUsage();
}
