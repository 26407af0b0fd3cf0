/**
 * Running models: configuration from a `.cflow`/`.vflow` file and the
 * forward pass.
 *
 * ```ts ignore
 * import { Transformer } from "./mod.ts";
 * using model = Transformer.load("smollm2.cflow");
 * const logits = model.forward(1, 0);
 * ```
 *
 * @module
 */

export { COMBINE_STYLE, ropeFrequencies } from "./config.ts";
export type { ModelConfig, MoeConfig, PipelineConfig, RopeScaling } from "./config.ts";
export { Transformer } from "./transformer.ts";
export { embedTokens, Pooler, poolingOf } from "./pooling.ts";
export type { HiddenStateSource, Pooling } from "./pooling.ts";
export { KV_CACHE_TYPES, kvBytesPerPosition, KvLayout, kvRowBytes } from "./kv_cache.ts";
export type { KvCacheType } from "./kv_cache.ts";
export type {
  HiddenStatesOptions,
  LoadStats,
  StepRow,
  TracePosition,
  TraceStep,
  TransformerOptions,
} from "./options.ts";
