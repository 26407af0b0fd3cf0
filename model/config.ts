/**
 * The model's configuration, read from a `.cflow`/`.vflow` file's header and
 * metadata: everything the forward pass needs, decided once at load.
 *
 * @module
 */

import { FEATURE, type TiledFile } from "../formats/cflow/mod.ts";

/**
 * RoPE frequency scaling of global-attention layers: Llama 3's smooth
 * interpolation, or linear (every frequency divided by the factor).
 *
 * @example
 * ```ts
 * import type { RopeScaling } from "./config.ts";
 * const s: RopeScaling = { kind: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 };
 * ```
 */
export interface RopeScaling {
  /** "llama3" or "linear". */
  kind: "llama3" | "linear";
  /** Overall scaling factor. */
  factor: number;
  /** Wavelengths above original/low are divided by factor. */
  lowFreqFactor: number;
  /** Wavelengths below original/high are kept. */
  highFreqFactor: number;
  /** The context length the model was trained at. */
  originalContext: number;
}

/**
 * What the forward pass needs to know about a model.
 *
 * @example
 * ```ts ignore
 * import { modelConfig } from "./config.ts";
 * const c = modelConfig(file);
 * console.log(c.architecture, c.ropeStyle);
 * ```
 */
export interface ModelConfig {
  /** Architecture name (llama, qwen2, qwen3, gemma3, ...). */
  architecture: string;
  /** Model width. */
  hidden: number;
  /** Decoder layers. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads. */
  kvHeads: number;
  /** Dimension of one head. */
  headDim: number;
  /** Dense FFN width. */
  ffnHidden: number;
  /** Vocabulary size. */
  vocab: number;
  /** RMSNorm epsilon. */
  eps: number;
  /** Added to every norm weight (Gemma's `1 + w`). */
  normOffset: number;
  /** RoPE base of global layers. */
  ropeTheta: number;
  /** RoPE base of sliding-window layers. */
  ropeLocalTheta: number;
  /** "neox": split halves; "normal": adjacent pairs. */
  ropeStyle: "neox" | "normal";
  /** Rotated dimensions of each head. */
  ropeDims: number;
  /** Frequency scaling of global layers, if any. */
  ropeScaling: RopeScaling | null;
  /** Per layer: the sliding window, 0 for global attention. */
  windows: number[];
  /** Attention scale applied to q.k. */
  attnScale: number;
  /** Attention logit soft-cap (0: none). */
  attnSoftcap: number;
  /** Final logit soft-cap (0: none). */
  finalSoftcap: number;
  /** Embedding scale (sqrt(hidden) for Gemma, else 1). */
  embedScale: number;
  /** Gated activation of the FFN. */
  activation: "silu" | "gelu";
  /** Output projection reuses the embeddings. */
  tied: boolean;
  /** Trained context length (0 if unknown). */
  contextLength: number;
  /** Mixture-of-experts layers, or null for a dense model. */
  moe: MoeConfig | null;
  /**
   * The pipeline-native schedule (docs/ARCHITECTURES.md), read from the
   * header; null for the other families, which run the plain sequential
   * layer.
   */
  pipeline: PipelineConfig | null;
  /** V heads RMS-normalized without a weight before caching (feature bit 1). */
  vNorm: boolean;
  /** QK-norm over the whole q and k (OLMoE) rather than per head. */
  qkNormFull: boolean;
  /**
   * The pooling a GGUF source declares for embeddings (`<arch>.pooling_type`,
   * carried in the metadata's `gguf`): 0 none, 1 mean, 2 cls, 3 last, 4 rank,
   * as llama.cpp numbers them; null when the file declares none. Read by
   * `poolingOf` (pooling.ts), which refuses what it cannot do.
   */
  poolingType: number | null;
}

/**
 * The mixture-of-experts part of a model.
 *
 * @example
 * ```ts
 * import type { MoeConfig } from "./config.ts";
 * const m: MoeConfig = { experts: 8, topK: 2, expertFfn: 14336, renormalize: true };
 * ```
 */
export interface MoeConfig {
  /** Experts per MoE layer. */
  experts: number;
  /** Experts selected per token. */
  topK: number;
  /** Each expert's FFN width. */
  expertFfn: number;
  /** The selected probabilities renormalized to sum 1. */
  renormalize: boolean;
}

/**
 * How a pipeline-native model's layers read and combine their streams.
 *
 * @example
 * ```ts
 * import type { PipelineConfig } from "./config.ts";
 * const p: PipelineConfig = { style: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 };
 * ```
 */
export interface PipelineConfig {
  /** combine_style: 0 ParallelSqrt2 ... 5 FixedPoint. */
  style: number;
  /** Layers the dense FFN's input lags. */
  denseDelay: number;
  /** Layers between routing and injecting expert outputs. */
  expertDelay: number;
  /** Merge interval (DecoupledStreams) or iterations (FixedPoint). */
  styleParam: number;
}

/** combine_style values (docs/ARCHITECTURES.md). */
export const COMBINE_STYLE = {
  PARALLEL_SQRT2: 0,
  DELAYED_SUM: 1,
  ASYNC_EXPERTS: 2,
  DECOUPLED_STREAMS: 3,
  PIPELINE_REGISTERS: 4,
  FIXED_POINT: 5,
} as const;

function num(v: unknown, fallback: number): number {
  return typeof v === "number" && Number.isFinite(v) ? v : fallback;
}

/**
 * Builds the configuration; throws a RangeError for what the forward pass
 * does not support (rather than computing something wrong).
 *
 * @example
 * ```ts ignore
 * import { modelConfig } from "./config.ts";
 * const c = modelConfig(readTiledFile(src));
 * ```
 */
export function modelConfig(file: TiledFile): ModelConfig {
  const g = file.geometry;
  const m = file.metadata;
  const arch = typeof m.architecture === "string" ? m.architecture : "llama";
  const supported = [
    "llama",
    "qwen2",
    "qwen3",
    "gemma3",
    "mixtral",
    "olmoe",
    "qwen2moe",
    "qwen3moe",
    "pipeline_native",
  ];
  if (!supported.includes(arch)) {
    throw new RangeError(
      `model: architecture "${arch}" is not supported for generation yet (supported: ${
        supported.join(", ")
      })`,
    );
  }
  const native = arch === "pipeline_native";
  if (!native && (g.denseDelay !== 0 || g.expertDelay !== 0)) {
    throw new RangeError(`model: ${arch} files have no delays (dense_delay, expert_delay)`);
  }
  const styleParam = (g as { styleParam?: number }).styleParam ?? 0;
  const pipeline: PipelineConfig | null = native
    ? { style: g.combineStyle, denseDelay: g.denseDelay, expertDelay: g.expertDelay, styleParam }
    : null;
  if (pipeline !== null) checkPipeline(pipeline, g.experts);
  let moe: MoeConfig | null = null;
  if (g.experts > 0) {
    const norm = m.moe_norm_topk_prob;
    moe = {
      experts: g.experts,
      topK: g.topK,
      // .vflow headers have no room for it: every expert-tile entry has it.
      expertFfn: g.expertFfnHidden > 0
        ? g.expertFfnHidden
        : (file.experts.values().next().value?.gate.rows ?? 0),
      // Mixtral's softmax over the top-k logits is the renormalized rule; the
      // pipeline-native family routes the same way (docs/ARCHITECTURES.md).
      renormalize: typeof norm === "boolean" ? norm : arch === "mixtral" || native,
    };
  }
  const hf = (m.hf_config ?? {}) as Record<string, unknown>;
  const gguf = (m.gguf ?? {}) as Record<string, unknown>;
  const ggufArch = typeof gguf["general.architecture"] === "string"
    ? gguf["general.architecture"] as string
    : arch;
  const gk = (k: string) => gguf[`${ggufArch}.${k}`];
  if (gk("rope.scaling.type") !== undefined && gk("rope.scaling.type") !== "none") {
    throw new RangeError(
      `model: GGUF rope scaling "${gk("rope.scaling.type")}" is not supported yet`,
    );
  }
  let ropeScaling: RopeScaling | null = null;
  const rs = m.rope_scaling as Record<string, unknown> | null | undefined;
  if (rs !== null && rs !== undefined) {
    const type = rs.rope_type ?? rs.type;
    if (type === "llama3") {
      ropeScaling = {
        kind: "llama3",
        factor: num(rs.factor, 1),
        lowFreqFactor: num(rs.low_freq_factor, 1),
        highFreqFactor: num(rs.high_freq_factor, 4),
        originalContext: num(rs.original_max_position_embeddings, 8192),
      };
    } else if (type === "linear") {
      ropeScaling = {
        kind: "linear",
        factor: num(rs.factor, 1),
        lowFreqFactor: 0,
        highFreqFactor: 0,
        originalContext: 0,
      };
    } else if (type !== "default") {
      throw new RangeError(`model: rope scaling "${String(type)}" is not supported yet`);
    }
  }
  const gemma = arch === "gemma3";
  const layerTypes = Array.isArray(m.layer_types) ? m.layer_types as string[] : undefined;
  const windows: number[] = [];
  for (let l = 0; l < g.layers; l++) {
    let sliding: boolean;
    if (layerTypes !== undefined) sliding = layerTypes[l] === "sliding_attention";
    else sliding = g.slidingWindow > 0 && g.slidingPattern > 0 && (l + 1) % g.slidingPattern !== 0;
    windows.push(sliding ? g.slidingWindow : 0);
  }
  const queryPre = num(
    hf.query_pre_attn_scalar,
    num(gk("attention.query_pre_attn_scalar"), g.headDim),
  );
  const ropeTheta = num(m.rope_theta, 10000);
  return {
    architecture: arch,
    hidden: g.hidden,
    layers: g.layers,
    heads: g.heads,
    kvHeads: g.kvHeads,
    headDim: g.headDim,
    ffnHidden: g.ffnHidden,
    vocab: g.vocab,
    eps: num(m.rms_norm_eps, 1e-6),
    normOffset: num(m.norm_weight_offset, 0),
    ropeTheta,
    ropeLocalTheta: num(m.rope_local_theta, gemma ? 10000 : ropeTheta),
    ropeStyle: m.rope_style === "normal" ? "normal" : "neox",
    ropeDims: num(m.rope_dimension_count, 0) > 0
      ? num(m.rope_dimension_count, g.headDim)
      : g.headDim,
    ropeScaling,
    windows,
    attnScale: 1 / Math.sqrt(gemma ? queryPre : g.headDim),
    // transformers' Gemma 3 attention never applies attn_logit_softcapping.
    attnSoftcap: gemma ? 0 : num(hf.attn_logit_softcapping, 0),
    finalSoftcap: g.finalLogitSoftcap,
    embedScale: (g.featureFlags & FEATURE.EMBED_SCALE) !== 0 ? Math.fround(Math.sqrt(g.hidden)) : 1,
    activation: gemma || (native && (g.featureFlags & GEGLU) !== 0) ? "gelu" : "silu",
    tied: (g.featureFlags & FEATURE.TIED_EMBEDDINGS) !== 0,
    contextLength: num(m.context_length, 0),
    moe,
    pipeline,
    vNorm: (g.featureFlags & FEATURE.V_NORM) !== 0,
    qkNormFull: arch === "olmoe",
    poolingType: typeof gk("pooling_type") === "number" ? gk("pooling_type") as number : null,
  };
}

/** feature_flags bit 3: GELU-gated FFNs (docs/FORMAT.md). */
const GEGLU = 8;

/** The header's combination of style, delays and parameter must be one the schedule defines. */
function checkPipeline(p: PipelineConfig, experts: number): void {
  const fail = (why: string) => {
    throw new RangeError(`model: combine_style ${p.style}: ${why}`);
  };
  if (p.style < 0 || p.style > 5) fail("unknown style");
  const delayed = p.denseDelay !== 0 || p.expertDelay !== 0;
  if (p.style === COMBINE_STYLE.PARALLEL_SQRT2 && (delayed || experts === 0)) {
    fail("ParallelSqrt2 needs experts and no delays");
  }
  if (p.style >= COMBINE_STYLE.DECOUPLED_STREAMS && delayed) fail("this style has no delays");
  const wantsParam = p.style === COMBINE_STYLE.DECOUPLED_STREAMS ||
    p.style === COMBINE_STYLE.FIXED_POINT;
  if (wantsParam !== p.styleParam > 0) fail(`style_param ${p.styleParam} does not fit the style`);
}

/**
 * RoPE inverse frequencies of `dims` rotated dimensions, with Llama 3
 * scaling when given (Hugging Face's `_compute_llama3_parameters`).
 *
 * @example
 * ```ts
 * import { ropeFrequencies } from "./config.ts";
 * console.log(ropeFrequencies(4, 10000, null)[1]); // 0.01
 * ```
 */
export function ropeFrequencies(
  dims: number,
  theta: number,
  scaling: RopeScaling | null,
): Float32Array {
  const out = new Float32Array(dims / 2);
  for (let i = 0; i < dims / 2; i++) {
    let f = Math.fround(1 / Math.fround(Math.pow(theta, Math.fround((2 * i) / dims))));
    if (scaling !== null && scaling.kind === "linear") f = f / scaling.factor;
    else if (scaling !== null) {
      const lowWavelen = scaling.originalContext / scaling.lowFreqFactor;
      const highWavelen = scaling.originalContext / scaling.highFreqFactor;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowWavelen) f = f / scaling.factor;
      else if (wavelen >= highWavelen) {
        const smooth = (scaling.originalContext / wavelen - scaling.lowFreqFactor) /
          (scaling.highFreqFactor - scaling.lowFreqFactor);
        f = (1 - smooth) * (f / scaling.factor) + smooth * f;
      }
    }
    out[i] = Math.fround(f);
  }
  return out;
}
