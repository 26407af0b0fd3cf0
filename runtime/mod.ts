/**
 * Running a model for users: the generation loop with its statistics, speculative decoding
 * (a draft model or prompt lookup), continuous batching
 * of many generations over one model (`BatchEngine`),
 * llama.cpp-style perplexity, and the user-level cache of models and conversions.
 *
 * ```ts ignore
 * import { fnv1a64, generate } from "./mod.ts";
 * ```
 *
 * @module
 */

export { fnv1a64, generate } from "./generate.ts";
export { memoryUsage } from "./memory_usage.ts";
export {
  checkSpeculation,
  DraftLength,
  MAX_DRAFT,
  ROW_COST_PRIOR,
  StepCosts,
} from "./speculative.ts";
export type { Drafter, SpeculationOptions, SpeculationStats } from "./speculative.ts";
export { MAX_LOOKUP_NGRAM, NgramLookup } from "./ngram_lookup.ts";
export { checkDraftVocabulary, DraftModel } from "./draft_model.ts";
export type { DraftModelOptions, DraftRunner, VocabularyView } from "./draft_model.ts";
export { PromptCache } from "./prompt_cache.ts";
export type { MemoryUsage } from "./memory_usage.ts";
export { BatchEngine, Sequence } from "./batch_engine.ts";
export type { BatchEngineOptions, BatchEngineStats } from "./batch_engine.ts";
export type {
  GeneratedToken,
  GenerateOptions,
  GenerationConstraint,
  GenerationConstraintMatcher,
  GenerationModel,
  GenerationSampler,
  GenerationStats,
  GenerationTokenizer,
} from "./generate.ts";
export { cacheDir, resolveModel } from "./model_store.ts";
export {
  findOllamaModel,
  isOllamaReference,
  ollamaStoreDirs,
  OllamaStoreError,
  parseOllamaName,
} from "./ollama_store.ts";
export type { OllamaModel, OllamaName } from "./ollama_store.ts";
export { CacheDirError, cacheRoot, convertedDir, modelsDir } from "./cache_paths.ts";
export type { EnvReader } from "./cache_paths.ts";
export { BUILTIN_MODELS } from "./builtin.ts";
export { openModel } from "./open_model.ts";
export type { OpenedModel } from "./open_model.ts";
export type { ResolveOptions } from "./model_store.ts";
export { perplexity } from "./perplexity.ts";
export type { PerplexityResult } from "./perplexity.ts";
export type { Transformer } from "../model/mod.ts";
export type { TargetQuant } from "../convert/mod.ts";
export type { Progress } from "../formats/cflow/mod.ts";
export type { ModelConfig, RopeScaling } from "../model/mod.ts";
