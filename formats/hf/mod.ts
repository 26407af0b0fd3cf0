/**
 * Hugging Face checkpoint directories: a validating `config.json` reader for
 * the Llama, Qwen2, Qwen3, Gemma 3, Mixtral, OLMoE, Qwen2-MoE and Qwen3-MoE
 * families, and a checkpoint opener that maps the safetensors weights (one
 * file or index + shards) and merges their tensor tables.
 *
 * ```ts ignore
 * import { openHfCheckpoint } from "./mod.ts";
 *
 * using ckpt = openHfCheckpoint("models/Qwen2.5-0.5B");
 * const { hiddenSize, numLayers } = ckpt.config;
 * const embedRows = ckpt.readF32("model.embed_tokens.weight", 0, 16); // 16 rows as f32
 * console.log(ckpt.files.tokenizerJson);
 * ```
 *
 * @module
 */

export { HF_CONFIG_LIMITS, parseHfConfig, readHfConfig } from "./parse_hf_config.ts";
export type { HfConfig, HfFamily, HfLayerType, HfMoeConfig } from "./parse_hf_config.ts";
export { PIPELINE_NATIVE_NAMES } from "./parse_pipeline_native.ts";
export type { PipelineNativeConfig } from "./parse_pipeline_native.ts";
export {
  diskFs,
  HfCheckpoint,
  inMemoryCheckpoint,
  mapShard,
  openHfCheckpoint,
} from "./open_hf_checkpoint.ts";
export type {
  CheckpointFs,
  HfCheckpointFiles,
  HfShard,
  HfTensorRef,
  OpenHfCheckpointOptions,
  ShardHandle,
  ShardOpener,
} from "./open_hf_checkpoint.ts";
export type { ByteSource } from "../byte_source.ts";
export type { SafetensorsFile, SafetensorsTensor } from "../safetensors/mod.ts";
export type { SafetensorsDtype } from "../safetensors/mod.ts";
export { FormatError } from "../errors.ts";
