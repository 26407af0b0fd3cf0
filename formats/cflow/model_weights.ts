/**
 * What a writer needs from a model, independent of where the weights came
 * from: the geometry, free-form metadata, and per layer the items each
 * stage consumes, in consumption order. Converters build this from GGUF or
 * Hugging Face checkpoints; tests build it from random matrices.
 *
 * @module
 */

import type { Geometry } from "./container.ts";
import type { RowMatrix } from "./tile.ts";

/**
 * One weight: a tiled matrix or an f32 array (norms, biases, the router).
 *
 * @example
 * ```ts
 * import type { WeightItem } from "./model_weights.ts";
 * const norm: WeightItem = {
 *   matrixId: 0, rows: 1, cols: 4, fused: 0,
 *   f32: () => new Float32Array(4).fill(1),
 * };
 * ```
 */
export interface WeightItem {
  /** MATRIX id. */
  matrixId: number;
  /** Rows (output features). */
  rows: number;
  /** Columns (input features). */
  cols: number;
  /** FUSED group: consecutive items with the same non-zero group are interleaved. */
  fused: number;
  /** Tiled matrices: the rows, in the tile type they are stored as. */
  matrix?: RowMatrix;
  /** f32 arrays: the values (rows * cols), produced when written. */
  f32?: () => Float32Array;
}

/**
 * The experts of one MoE layer.
 *
 * @example
 * ```ts
 * import type { MoeWeights } from "./model_weights.ts";
 * const none: MoeWeights | undefined = undefined;
 * ```
 */
export interface MoeWeights {
  /** The MoE's own input norm (`moe_norm`, 1 x hidden, f32), pipeline-native models. */
  norm?: WeightItem;
  /**
   * Qwen2-MoE's shared expert: gate and up (shared_ffn x hidden, fused
   * gate/up), down (hidden x shared_ffn), and its sigmoid gate
   * (`shared_expert_gate_inp`, 1 x hidden, f32).
   */
  shared?: { gate: WeightItem; up: WeightItem; down: WeightItem; gateInp?: WeightItem };
  /** The router (experts x hidden), stored as f32. */
  router: WeightItem;
  /** Per expert: gate, up, down (tiled). */
  experts: { gate: WeightItem; up: WeightItem; down: WeightItem }[];
}

/**
 * One decoder layer, split by stage.
 *
 * @example
 * ```ts
 * import type { LayerWeights } from "./model_weights.ts";
 * const empty: LayerWeights = { attention: [], ffn: [] };
 * ```
 */
export interface LayerWeights {
  /** attn_norm, biases, Q/K/V (fused), QK norms, O, post-attention norm. */
  attention: WeightItem[];
  /** ffn_norm, gate/up (fused), down, post-FFN norm. */
  ffn: WeightItem[];
  /** MoE norm, shared expert, router and experts, for MoE layers. */
  moe?: MoeWeights;
}

/**
 * A whole model, ready to be written.
 *
 * @example
 * ```ts ignore
 * import type { ModelWeights } from "./model_weights.ts";
 * function layers(m: ModelWeights): number {
 *   return m.layers.length;
 * }
 * ```
 */
export interface ModelWeights {
  /** Model geometry from the header. */
  geometry: Geometry;
  /** JSON-serializable metadata: architecture name, hyperparameters, tokenizer. */
  metadata: Record<string, unknown>;
  /** Number of decoder layers. */
  layers: LayerWeights[];
  /** token_embd (tiled), output_norm (f32), output (tiled, absent when tied). */
  vocab: WeightItem[];
}
