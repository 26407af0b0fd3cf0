/**
 * The kernel builds a published package carries under `dist/`, pinned by
 * SHA-256. In a checkout this is empty (the kernels are built locally);
 * `deno task publish:prepare` builds them, copies them to `dist/` and
 * rewrites this file before `deno publish`.
 *
 * @module
 */

/**
 * One built file of the package.
 *
 * @example
 * ```ts
 * import type { DistFile } from "./dist.ts";
 * const f: DistFile = { file: "cflow_kernels.wasm", size: 1, sha256: "00" };
 * ```
 */
export interface DistFile {
  /** Name under `dist/`. */
  file: string;
  /** Size in bytes. */
  size: number;
  /** SHA-256 of the bytes, lowercase hex. */
  sha256: string;
}

/**
 * What `dist/` holds.
 *
 * @example
 * ```ts
 * import { DIST } from "./dist.ts";
 * console.log(DIST.native === undefined || DIST.native.size > 0); // true
 * ```
 */
export interface DistManifest {
  /** The native library for x86-64 Linux (glibc 2.28+), every ISA variant inside. */
  native?: DistFile;
  /** The WebAssembly build. */
  wasm?: DistFile;
}

/** The builds this package carries (none in a checkout). */
export const DIST: DistManifest = {};
