/**
 * A checkpoint seen the way the converter needs it: hyperparameters and
 * tensors by role, whatever the file format. GGUF files, Hugging Face
 * directories and `.cflow`/`.vflow` files each implement it.
 *
 * @module
 */

import type { Role } from "../arch/mod.ts";

/**
 * One tensor of a checkpoint (for expert tensors: one expert's slice).
 *
 * @example
 * ```ts
 * import type { SourceTensor } from "./model_source.ts";
 * const t: SourceTensor = {
 *   name: "norm", rows: 1, cols: 4, experts: 0, typeName: "F32",
 *   f32Rows: () => new Float32Array(4),
 * };
 * ```
 */
export interface SourceTensor {
  /** Name as stored in the source. */
  name: string;
  /** Output rows (1 for vectors). */
  rows: number;
  /** Input columns (the contiguous dimension). */
  cols: number;
  /** Experts stacked in this tensor (GGUF 3-D expert tensors), else 0. */
  experts: number;
  /** Storage type name: a ggml type ("Q4_0", "F16", ...) or a safetensors dtype. */
  typeName: string;
  /**
   * Rows as raw ggml bytes; present only when the storage type is a tile
   * type (`TILE_TYPE`: Q4_0, Q8_0, F32, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
   * F16, BF16), whose tiles keep those bytes.
   */
  rawRows?: (start: number, count: number, expert?: number) => Uint8Array;
  /** Rows as f32 values. */
  f32Rows: (start: number, count: number, expert?: number) => Float32Array;
}

/**
 * Hyperparameters the `.cflow` header and metadata need.
 *
 * @example
 * ```ts
 * import type { HyperParams } from "./model_source.ts";
 * const h: Partial<HyperParams> = { hidden: 576, layers: 30 };
 * ```
 */
export interface HyperParams {
  /** Architecture name. */
  architecture: string;
  /** Model width d. */
  hidden: number;
  /** Number of decoder layers. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads. */
  kvHeads: number;
  /** Dimension of one attention head. */
  headDim: number;
  /** Dense FFN width (0: none). */
  ffnHidden: number;
  /** Number of experts (0 for dense models). */
  experts: number;
  /** Experts selected per token. */
  topK: number;
  /** FFN width of each expert. */
  expertFfnHidden: number;
  /** Vocabulary size. */
  vocab: number;
  /** Window of sliding-attention layers (0: none). */
  slidingWindow: number;
  /** Every n-th layer is global, the others slide (0: none). */
  slidingPattern: number;
  /** The output projection reuses the embedding matrix. */
  tiedEmbeddings: boolean;
  /** Final logit soft-cap (0: disabled). */
  finalLogitSoftcap: number;
  /** Everything else worth keeping (rope, eps, context length, tokenizer). */
  extra: Record<string, unknown>;
}

/**
 * A checkpoint the converter can read.
 *
 * @example
 * ```ts ignore
 * import type { ModelSource } from "./model_source.ts";
 * function describe(s: ModelSource): string {
 *   return `${s.format} ${s.hyper.architecture}`;
 * }
 * ```
 */
export interface ModelSource {
  /** Source format (`cflow`/`vflow`: a converted file, re-laid out or re-quantized). */
  format: "gguf" | "hf" | "cflow" | "vflow";
  /** Path shown in messages. */
  path: string;
  /** Hyperparameters. */
  hyper: HyperParams;
  /** The tensor for a role of a layer (and an expert for per-expert HF tensors). */
  tensor(role: Role, layer: number, expert?: number): SourceTensor | undefined;
  /** Bytes of tensor data in the source (for progress). */
  dataBytes: number;
  /** Releases mapped files. */
  close(): void;
}
