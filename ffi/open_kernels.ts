/**
 * The process's one {@link Kernels} instance: {@link openKernels} loads the library once and
 * (re)configures it, {@link openedKernels} returns it when it is loaded, and
 * {@link openWasmKernels} makes a separate WebAssembly instance beside it.
 *
 * @module
 */

import { Kernels } from "./kernels.ts";
import type { KernelOptions } from "./kernel_options.ts";
import { openBackend, openWasm } from "./loader.ts";

let opened: Kernels | undefined;

/**
 * Loads the kernel library (once per process) and configures it.
 *
 * @example
 * ```ts ignore
 * import { openKernels } from "./open_kernels.ts";
 * const k = openKernels();
 * console.log(`${k.variant} kernels on ${k.threads} threads`);
 * ```
 */
export function openKernels(options?: KernelOptions): Kernels {
  if (opened === undefined) {
    const k = new Kernels(openBackend());
    k.configure(options);
    opened = k;
    return k;
  }
  if (options !== undefined) opened.configure(options);
  return opened;
}

/**
 * The process's kernels if {@link openKernels} has opened them, else undefined (nothing is
 * loaded): for code that uses a kernel when one is there and has its own path otherwise, such as
 * the sampler's greedy pick.
 *
 * @example
 * ```ts
 * import { openedKernels } from "./open_kernels.ts";
 * const k = openedKernels();
 * console.log(k === undefined ? "not loaded" : k.variant);
 * ```
 */
export function openedKernels(): Kernels | undefined {
  return opened;
}

/**
 * A separate instance of the WebAssembly kernels, configured, beside the
 * process's {@link openKernels} one (to compare the two backends in one
 * process). Regions, plans and `tilesMatvec` go through {@link openKernels}
 * only; this instance serves the array kernels (quantize, dot, matvec, the
 * float kernels).
 *
 * @example
 * ```ts ignore
 * import { openWasmKernels } from "./open_kernels.ts";
 * const w = openWasmKernels();
 * console.log(w.backend, w.variant); // "wasm" "scalar"
 * ```
 */
export function openWasmKernels(options?: KernelOptions, path?: string): Kernels {
  const k = new Kernels(openWasm(path));
  k.configure(options);
  return k;
}
