/**
 * The boundary between TypeScript and the Zig kernel library. Everything
 * that touches a pointer lives in this folder.
 *
 * ```ts ignore
 * import { mapFile, openKernels } from "@cflow/run/ffi";
 *
 * const k = openKernels({ threads: 2 });
 * const x = k.quantizeQ8_0(new Float32Array(4096).fill(0.25));
 * using file = mapFile("weights.bin");
 * const y = k.matvec("q8_0", file.bytes, 1024, 4096, x);
 * ```
 *
 * @module
 */

export { describeStatus, KernelError, KernelLoadError } from "./errors.ts";
export {
  libraryCandidates,
  localLibraryPath,
  openBackend,
  openLibrary,
  openWasm,
  readEnv,
  wasmRequested,
} from "./loader.ts";
export type { KernelBackend, OpenedLibrary } from "./loader.ts";
export {
  localWasmPath,
  openWasmLibrary,
  WASM_FILE,
  wasmLibraryFromExports,
} from "./wasm_backend.ts";
export { prepareKernels } from "./remote_kernels.ts";
export { DIST } from "./dist.ts";
export type { DistFile, DistManifest } from "./dist.ts";
export type { WasmLibrary } from "./wasm_backend.ts";
export {
  kernelOptionsFromEnv,
  Kernels,
  MAX_THREADS,
  PANEL_KERNELS,
  panelsByDefault,
  parseFeatures,
  parseThreads,
  parseVariant,
  ROPE_MAX_POS,
} from "./kernels.ts";
export { openedKernels, openKernels, openWasmKernels } from "./open_kernels.ts";
export type { KernelOptions, PanelPrefetch, SettingSource, WeightType } from "./kernels.ts";
export { AlignedBuffer, allocAligned, mapFile, MappedFile, MemoryRegion } from "./memory.ts";
export { createStage, DirectFile, MAX_STAGE_SLOTS, openDirect, Stage } from "./io.ts";
export type { FetchResult, OpenDirectOptions, StageStats } from "./io.ts";
export {
  ABI_VERSION,
  ADVICE,
  CPU_FEATURES,
  IO_BASE,
  STATUS,
  symbols,
  VARIANT_ARCH,
  VARIANTS,
} from "./symbols.ts";
export type { Advice, CpuFeature, KernelSymbols, VariantName } from "./symbols.ts";
export { attention, tilesMatvec } from "./model_kernels.ts";
export type { Activation, KvBuffer } from "./model_kernels.ts";
export { MAX_PLAN_BATCH, Plan, PlanBuilder } from "./plan.ts";
export type { Buf, OpOptions, PlanSection } from "./plan.ts";
export {
  actRowBytes,
  kQuantRun,
  moeScratchBytes,
  packedBytes,
  packRun,
  type PanelQuant,
  panelQuants,
  RUN_KIND,
} from "./weight_run.ts";
export type { RunKind, WeightRun } from "./weight_run.ts";
