/**
 * The plan's view of one Transformer's workspace, shared by the forward
 * plan and its block builders: the activation buffers of a batch, the
 * layers' weights with their vectors placed in the workspace, and the
 * builder state the blocks add operations to. Internal to model/.
 *
 * @module
 */

import { type Buf, kQuantRun, type PlanBuilder, RUN_KIND, type WeightRun } from "../ffi/mod.ts";
import type { Stage } from "../ffi/io.ts";
import type { ModelConfig } from "./config.ts";
import type { LayerTensors } from "./weights.ts";

/** The experts of one layer: runs, and workspace offsets of the router and norm. */
export interface MoeWeights {
  /** Norm of the router's and experts' input. */
  norm: number;
  /** f32 router, experts x hidden. */
  router: number;
  gateUp: WeightRun[];
  down: WeightRun[];
  /** Qwen2-MoE's shared expert and its sigmoid gate. */
  shared?: { gateUp: WeightRun; down: WeightRun; gate: number; ffn: number };
  /** Workspace offset of this layer's u64 count of expert bytes read. */
  counter: number;
}

/** One layer's weights: runs, and workspace offsets of its f32 vectors. */
export interface LayerWeights {
  attnNorm: number;
  qkv: WeightRun;
  qBias?: number;
  kBias?: number;
  vBias?: number;
  qNorm?: number;
  kNorm?: number;
  o: WeightRun;
  postAttnNorm?: number;
  ffnNorm?: number;
  gateUp?: WeightRun;
  down?: WeightRun;
  postFfnNorm?: number;
  moe?: MoeWeights;
}

/** The disk expert tier's plan inputs. */
export interface DiskTier {
  stage: Stage;
  /** Reads wait at the injection pass rather than in the routing pass. */
  staged: boolean;
  /** Per layer: workspace offset of its experts' file ranges (-1: no experts). */
  spans: number[];
  /** Saved selections (route + slots) and expert inputs, one per pass in flight. */
  sel: Buf[];
  x: Buf[];
}

/** Bytes of the workspace handed out in order, 64-byte aligned. */
export class Layout {
  size = 0;
  take(bytes: number): number {
    const at = this.size;
    this.size += Math.ceil(bytes / 64) * 64;
    return at;
  }
  /** A buffer of `rowBytes` per row for `rows` rows. */
  rows(rowBytes: number, rows: number): Buf {
    const stride = Math.ceil(rowBytes / 64) * 64;
    return { offset: this.take(stride * rows), stride };
  }
}

/** The activation buffers of one batch (rows = tokens), allocated once. */
export interface RunState {
  x: Buf; // residual stream (hidden)
  xb: Buf; // normed input to a projection (padded to whole groups)
  xq: Buf; // its Q8_0 quantization
  qkv: Buf; // q | k | v
  att: Buf; // attention output (heads x head_dim, padded)
  attq: Buf;
  proj: Buf; // output of O (hidden)
  gateUp: Buf; // gate | up
  hb: Buf; // act(gate) * up (padded)
  hq: Buf;
  d: Buf; // dense FFN output (hidden)
  e: Buf; // expert output (hidden), when not queued
  sel: Buf; // selected experts: top_k ids, top_k weights
  moeScratch: Buf;
  shared: Buf; // shared expert output (hidden)
  xf: Buf; // the second stream: s_f (DecoupledStreams) or xfm_reg (PipelineRegisters)
  ring: Buf[]; // residual snapshots for the dense delay
  queue: Buf[]; // expert outputs in flight
  logits: Buf; // one row: the batch's last token
}

/**
 * A layer's weights with each f32 vector copied into the workspace by
 * `vec` (which returns its offset), and the offset of the layer's u64
 * expert-byte counter.
 */
export function placeLayer(
  t: LayerTensors,
  vec: (v: Float32Array) => number,
  counter: number,
): LayerWeights {
  const opt = (v: Float32Array | undefined) => v === undefined ? undefined : vec(v);
  return {
    attnNorm: vec(t.attnNorm),
    qkv: t.qkv,
    qBias: opt(t.qBias),
    kBias: opt(t.kBias),
    vBias: opt(t.vBias),
    qNorm: opt(t.qNorm),
    kNorm: opt(t.kNorm),
    o: t.o,
    postAttnNorm: opt(t.postAttnNorm),
    ffnNorm: opt(t.ffnNorm),
    gateUp: t.gateUp,
    down: t.down,
    postFfnNorm: opt(t.postFfnNorm),
    moe: t.moe && {
      norm: vec(t.moe.norm),
      router: vec(t.moe.router),
      gateUp: t.moe.gateUp,
      down: t.moe.down,
      shared: t.moe.shared && { ...t.moe.shared, gate: vec(t.moe.shared.gate) },
      counter,
    },
  };
}

/** Vector offsets the plan reads besides the layers'. */
export interface PlanVectors {
  outputNorm: number;
  freqGlobal: number;
  freqLocal: number;
  ones?: number;
  /** The KV cache's plan type (kv_cache.ts kvPlanType). */
  kvType: number;
}

/**
 * What every block builder reads: the builder, the configuration, the
 * activation buffers, the layers, the vectors, the KV caches of each pass
 * and the disk tier.
 */
export interface BlockContext {
  b: PlanBuilder;
  c: ModelConfig;
  s: RunState;
  layers: LayerWeights[];
  v: PlanVectors;
  caches: { k: number; v: number }[];
  disk?: DiskTier;
}

/** n rounded up to whole groups of 32 (what a quantized row holds). */
export function pad32(n: number): number {
  return Math.ceil(n / 32) * 32;
}

/** Whether a run's tiles are quantized (its input is then one Q8_0 quantization). */
export function quantizedRun(r: WeightRun): boolean {
  return r.kind !== RUN_KIND.TILES_F32;
}

/**
 * y = W x, through one quantization of x into `xq` when the run is
 * quantized; `lastOnly` computes the batch's last row only.
 */
export function project(
  into: PlanBuilder,
  r: WeightRun,
  x: Buf,
  n: number,
  xq: Buf,
  y: Buf,
  lastOnly = false,
): void {
  const o = { lastOnly };
  if (quantizedRun(r)) {
    // Q8_K activations for K-quant runs (llama.cpp's rule), Q8_0 otherwise.
    if (kQuantRun(r)) into.quantizeK(x, n, xq, o);
    else into.quantize(x, pad32(n), xq, o);
    into.matmul(r, xq, y, o);
  } else {
    into.matmul(r, x, y, o);
  }
}
