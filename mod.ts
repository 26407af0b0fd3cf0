/**
 * cflow: CPU-first LLM inference on Deno with Zig kernels.
 *
 * This release holds the foundation: the kernel library (per-ISA SIMD
 * kernels chosen at run time, a worker pool, file mapping) and its typed
 * bindings, plus the TypeScript reference kernels. Model loading and
 * generation are not implemented yet.
 *
 * ```ts ignore
 * import { openKernels } from "@cflow/run";
 *
 * const kernels = openKernels({ threads: 2 });
 * console.log(kernels.variant); // e.g. "avx512vnni"
 * const q = kernels.quantizeQ8_0(new Float32Array(64).fill(1));
 * ```
 *
 * Permissions: `--allow-ffi=<path of libcflow_kernels.so>` and read access
 * to it; unscoped `--allow-ffi` only for zero-copy views of mapped files.
 *
 * @module
 */

export {
  AlignedBuffer,
  allocAligned,
  KernelError,
  KernelLoadError,
  Kernels,
  mapFile,
  MappedFile,
  MemoryRegion,
  openKernels,
} from "./ffi/mod.ts";
export type { Advice, CpuFeature, KernelOptions, VariantName } from "./ffi/mod.ts";
export { VERSION } from "./version.ts";
