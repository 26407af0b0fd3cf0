/**
 * Conversion of GGUF files, Hugging Face checkpoints and `.cflow`/`.vflow`
 * files to `.cflow` and `.vflow`.
 *
 * ```ts ignore
 * import { convertFile } from "./mod.ts";
 * await convertFile("smollm2.gguf", "smollm2.cflow", {
 *   format: "cflow", quant: "q4_0", rule: "ggml", measureError: true,
 * });
 * ```
 *
 * @module
 */

export { buildModelWeights } from "./build_weights.ts";
export type { BuildOptions, MatrixReport, TargetQuant } from "./build_weights.ts";
export { convertFile, openSource } from "./convert_file.ts";
export type { ConvertOptions, ConvertResult } from "./convert_file.ts";
export { openGgufSource } from "./gguf_source.ts";
export { openHfSource } from "./hf_source.ts";
export { openTiledSource, tiledModelSource } from "./tiled_source.ts";
export type { HyperParams, ModelSource, SourceTensor } from "./model_source.ts";
export { dequantizeRows, quantizeRows } from "./quantize_rules.ts";
export type { Q4Rule } from "./quantize_rules.ts";
export { kquantArchFactsFromGguf, kquantTensorType, kquantTensorTypes } from "./kquant_rules.ts";
export type {
  KQuantArchFacts,
  KQuantGgufMetadata,
  KQuantModelFacts,
  KQuantOrder,
  KQuantScheme,
  KQuantTensorFacts,
} from "./kquant_rules.ts";
export type { ByteSource } from "../formats/byte_source.ts";
export type { Role } from "../arch/mod.ts";
