/**
 * Random models of arbitrary (odd) shapes for format tests: every matrix is
 * a {@link RowMatrix} over random bytes with valid f16 scales, so tiling and
 * untiling can be compared byte for byte.
 *
 * @module
 */

import { ARCH_IDS, FUSED, type Geometry, MATRIX } from "../../formats/cflow/container.ts";
import type { ModelWeights, WeightItem } from "../../formats/cflow/model_weights.ts";
import { groupsPerRow, rowBytes, type RowMatrix, TILE_TYPE } from "../../formats/cflow/tile.ts";
import { f32ToF16Bits } from "../../reference/mod.ts";
import { Rng } from "./rng.ts";

/** A RowMatrix over fixed random bytes, keeping them for comparison. */
export interface StoredMatrix extends RowMatrix {
  bytes: Uint8Array;
}

/**
 * Random rows in a tile type; padding in the last group is canonical (zero
 * value) so untiling returns exactly these bytes.
 *
 * @example
 * ```ts
 * import { randomMatrix } from "./random_model.ts";
 * import { Rng } from "./rng.ts";
 * const m = randomMatrix(new Rng(1), 1, 3, 5);
 * console.log(m.bytes.length); // 3 rows x 1 Q4_0 block x 18 bytes = 54
 * ```
 */
export function randomMatrix(rng: Rng, type: number, rows: number, cols: number): StoredMatrix {
  const rb = rowBytes(type, cols);
  const bytes = new Uint8Array(rows * rb);
  if (type === TILE_TYPE.F32) {
    const f = new Float32Array(bytes.buffer);
    for (let i = 0; i < f.length; i++) f[i] = rng.normal();
  } else {
    const gdb = type === TILE_TYPE.Q4_0 ? 16 : 32;
    const groups = groupsPerRow(cols);
    for (let r = 0; r < rows; r++) {
      for (let g = 0; g < groups; g++) {
        const o = r * rb + g * (2 + gdb);
        const d = f32ToF16Bits(0.01 + rng.next() * 0.1);
        bytes[o] = d & 0xff;
        bytes[o + 1] = d >> 8;
        for (let j = 0; j < gdb; j++) bytes[o + 2 + j] = rng.int(0, 255);
        // canonical padding of the last group: value zero
        const valid = Math.min(32, cols - g * 32);
        for (let j = valid; j < 32; j++) {
          if (type === TILE_TYPE.Q8_0) bytes[o + 2 + j] = 0;
          else {
            const byte = o + 2 + (j % 16);
            bytes[byte] = j < 16 ? (bytes[byte] & 0xf0) | 8 : (bytes[byte] & 0x0f) | 0x80;
          }
        }
      }
    }
  }
  return {
    type,
    rows,
    cols,
    bytes,
    readRows: (start, count) => bytes.subarray(start * rb, (start + count) * rb),
  };
}

function tiled(
  rng: Rng,
  type: number,
  id: number,
  rows: number,
  cols: number,
  fused = 0,
): WeightItem {
  return { matrixId: id, rows, cols, fused, matrix: randomMatrix(rng, type, rows, cols) };
}

function vector(rng: Rng, id: number, n: number): WeightItem {
  const v = new Float32Array(n).map(() => rng.normal());
  return { matrixId: id, rows: 1, cols: n, fused: 0, f32: () => v };
}

/** Options for {@link randomModel}. */
export interface RandomModelOptions {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  vocab: number;
  experts?: number;
  topK?: number;
  expertFfn?: number;
  type?: number;
  denseDelay?: number;
  expertDelay?: number;
  tied?: boolean;
  seed?: number;
  /** arch_id (default: mixtral with experts, else llama). */
  archId?: number;
  /** metadata `architecture` (default: mixtral with experts, else llama). */
  architecture?: string;
  /** combine_style (default 0). */
  combineStyle?: number;
  /** style_param (default 0). */
  styleParam?: number;
  /** feature_flags (default: 4 when tied, else 0). */
  featureFlags?: number;
  /** Give every MoE layer a `moe_norm` (pipeline-native). */
  moeNorm?: boolean;
  /** Give every MoE layer a shared expert of this width (Qwen2-MoE). */
  sharedFfn?: number;
  /** q_norm and k_norm of this width (head_dim, or the whole q/k for OLMoE); absent: none. */
  qkNorm?: "head" | "full";
}

/**
 * A random llama-shaped model (optionally with MoE layers).
 *
 * @example
 * ```ts
 * import { randomModel } from "./random_model.ts";
 * const m = randomModel({ hidden: 40, layers: 2, heads: 2, kvHeads: 1, headDim: 20, ffn: 70, vocab: 130 });
 * console.log(m.layers.length); // 2
 * ```
 */
export function randomModel(o: RandomModelOptions): ModelWeights {
  const rng = new Rng(o.seed ?? 7);
  const type = o.type ?? TILE_TYPE.Q4_0;
  const experts = o.experts ?? 0;
  const geometry: Geometry = {
    archId: o.archId ?? (experts > 0 ? ARCH_IDS.mixtral : ARCH_IDS.llama),
    hidden: o.hidden,
    layers: o.layers,
    heads: o.heads,
    kvHeads: o.kvHeads,
    headDim: o.headDim,
    ffnHidden: o.ffn,
    experts,
    topK: o.topK ?? (experts > 0 ? 2 : 0),
    expertFfnHidden: o.expertFfn ?? 0,
    vocab: o.vocab,
    tileRows: 128,
    tileCols: 256,
    quantGroup: 32,
    quantType: type,
    slidingWindow: 0,
    slidingPattern: 0,
    denseDelay: o.denseDelay ?? 0,
    expertDelay: o.expertDelay ?? 0,
    combineStyle: o.combineStyle ?? 0,
    styleParam: o.styleParam ?? 0,
    featureFlags: o.featureFlags ?? (o.tied ? 4 : 0),
    finalLogitSoftcap: 0,
  };
  const layers = [];
  for (let l = 0; l < o.layers; l++) {
    const attention = [
      vector(rng, MATRIX.ATTN_NORM, o.hidden),
      tiled(rng, type, MATRIX.Q, o.heads * o.headDim, o.hidden, FUSED.QKV),
      tiled(rng, type, MATRIX.K, o.kvHeads * o.headDim, o.hidden, FUSED.QKV),
      tiled(rng, type, MATRIX.V, o.kvHeads * o.headDim, o.hidden, FUSED.QKV),
      tiled(rng, type, MATRIX.O, o.hidden, o.heads * o.headDim),
    ];
    if (o.qkNorm !== undefined) {
      const full = o.qkNorm === "full";
      attention.splice(
        4,
        0,
        vector(rng, MATRIX.Q_NORM, full ? o.heads * o.headDim : o.headDim),
        vector(rng, MATRIX.K_NORM, full ? o.kvHeads * o.headDim : o.headDim),
      );
    }
    const ffn = o.ffn > 0
      ? [
        vector(rng, MATRIX.FFN_NORM, o.hidden),
        tiled(rng, type, MATRIX.GATE, o.ffn, o.hidden, FUSED.GATE_UP),
        tiled(rng, type, MATRIX.UP, o.ffn, o.hidden, FUSED.GATE_UP),
        tiled(rng, type, MATRIX.DOWN, o.hidden, o.ffn),
      ]
      : [];
    const moe = experts > 0
      ? {
        router: {
          ...vector(rng, MATRIX.ROUTER, experts * o.hidden),
          rows: experts,
          cols: o.hidden,
        },
        experts: Array.from({ length: experts }, () => ({
          gate: tiled(rng, type, MATRIX.EXPERT_GATE, o.expertFfn!, o.hidden, FUSED.GATE_UP),
          up: tiled(rng, type, MATRIX.EXPERT_UP, o.expertFfn!, o.hidden, FUSED.GATE_UP),
          down: tiled(rng, type, MATRIX.EXPERT_DOWN, o.hidden, o.expertFfn!),
        })),
        norm: o.moeNorm ? vector(rng, MATRIX.MOE_NORM, o.hidden) : undefined,
        shared: o.sharedFfn !== undefined
          ? {
            gate: tiled(rng, type, MATRIX.SHARED_GATE, o.sharedFfn, o.hidden, FUSED.GATE_UP),
            up: tiled(rng, type, MATRIX.SHARED_UP, o.sharedFfn, o.hidden, FUSED.GATE_UP),
            down: tiled(rng, type, MATRIX.SHARED_DOWN, o.hidden, o.sharedFfn),
            gateInp: vector(rng, MATRIX.SHARED_EXPERT_GATE_INP, o.hidden),
          }
          : undefined,
      }
      : undefined;
    layers.push({ attention, ffn, moe });
  }
  const vocab = [
    tiled(rng, type, MATRIX.TOKEN_EMBD, o.vocab, o.hidden),
    vector(rng, MATRIX.OUTPUT_NORM, o.hidden),
  ];
  if (!o.tied) vocab.push(tiled(rng, type, MATRIX.OUTPUT, o.vocab, o.hidden));
  return {
    geometry,
    metadata: {
      architecture: o.architecture ?? (experts > 0 ? "mixtral" : "llama"),
      test: true,
    },
    layers,
    vocab,
  };
}
