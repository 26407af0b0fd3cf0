/**
 * cflow: CPU-first LLM inference on Deno with Zig kernels.
 *
 * Load a model (a `.cflow`/`.vflow` file, a GGUF file or a Hugging Face folder, converted
 * once into a cache) and stream tokens from it:
 *
 * ```ts ignore
 * import { loadModel } from "@cflow/run";
 *
 * using model = await loadModel("cache/models/smollm2-135m-instruct.Q4_1.gguf");
 * const stop = new AbortController();
 * for await (const t of model.generate("The three primary colors are", {
 *   maxTokens: 48,
 *   temperature: 0,
 *   signal: stop.signal,
 * })) {
 *   console.log(t.text);
 * }
 * ```
 *
 * The kernel library and its typed bindings are exported too (`openKernels`, mappings and
 * aligned buffers), as are the converter and the inspector.
 *
 * Permissions: `--allow-ffi=<path of libcflow_kernels.so>`, read access to it and to the model,
 * write access to the conversion cache when a GGUF or HF folder is converted; unscoped
 * `--allow-ffi` only for zero-copy views of mapped files.
 *
 * Run as a program (`deno run ... jsr:@cflow/run generate --model M --prompt P`), this module is
 * the `cflow` command line. The package carries the kernels' Zig source, not a built library:
 * build it (`zig build -Doptimize=ReleaseFast` in `kernels-zig/`) and name it in
 * `CFLOW_KERNELS`.
 *
 * @module
 */

export { loadModel, Model } from "./api/mod.ts";
export type {
  ChatStats,
  Embeddings,
  EmbedOptions,
  LoadModelOptions,
  ModelChatOptions,
  ModelGenerateOptions,
  Pooling,
  Token,
  ToolCall,
  ToolChatMessage,
  ToolChoice,
  ToolDefinition,
} from "./api/mod.ts";
export type { GenerationStats } from "./runtime/generate.ts";
export type { MemoryUsage } from "./runtime/memory_usage.ts";
export type { Drafter, SpeculationStats } from "./runtime/speculative.ts";
export type { Progress } from "./runtime/mod.ts";
export type { SamplerOptions } from "./sampling/mod.ts";
export type { ChatMessage } from "./chat/mod.ts";
export type { ConstraintSpec } from "./grammar/mod.ts";
export { GrammarError, SchemaError } from "./grammar/mod.ts";
export type {
  KvCacheType,
  ModelConfig,
  MoeConfig,
  PipelineConfig,
  RopeScaling,
  TransformerOptions,
} from "./model/mod.ts";
export { convertFile } from "./convert/mod.ts";
export type {
  BuildOptions,
  ConvertOptions,
  ConvertResult,
  KQuantScheme,
  MatrixReport,
  Q4Rule,
  TargetQuant,
} from "./convert/mod.ts";
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
export { ADVICE, CPU_FEATURES, VARIANTS } from "./ffi/mod.ts";
export type {
  Advice,
  CpuFeature,
  KernelBackend,
  KernelOptions,
  PanelPrefetch,
  SettingSource,
  VariantName,
  WeightType,
} from "./ffi/mod.ts";
export { VERSION } from "./version.ts";

if (import.meta.main) {
  const { main } = await import("./cli/main.ts");
  Deno.exit(await main(Deno.args));
}
