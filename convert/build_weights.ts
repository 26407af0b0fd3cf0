/**
 * Turns a {@link ModelSource} into {@link ModelWeights} for the writer:
 * roles become matrix ids in consumption order, tensors become row readers
 * in the target tile type. Q4_0 and Q8_0 sources re-tile losslessly when the
 * target type matches; everything else is dequantized and requantized, and
 * the error introduced can be measured per matrix.
 *
 * @module
 */

import type { Role } from "../arch/mod.ts";
import {
  ARCH_IDS,
  COMBINE,
  FEATURE,
  FUSED,
  type Geometry,
  MATRIX,
} from "../formats/cflow/container.ts";
import type { LayerWeights, ModelWeights, WeightItem } from "../formats/cflow/model_weights.ts";
import {
  type RowMatrix,
  TILE_TYPE,
  type TileTypeName,
  tileTypeName,
} from "../formats/cflow/tile.ts";
import type { ModelSource, SourceTensor } from "./model_source.ts";
import { GGUF_NAMES, tensorName } from "../arch/mod.ts";
import { ggmlTypeByName, quantizeSupported } from "../formats/ggml/mod.ts";
import { type KQuantScheme, kquantTensorTypes } from "./kquant_rules.ts";
import { dequantizeRows, type Q4Rule, quantizeRows } from "./quantize_rules.ts";

/**
 * Target weight types.
 *
 * @example
 * ```ts
 * import type { TargetQuant } from "./build_weights.ts";
 * const q: TargetQuant = "q4_0";
 * ```
 */
export type TargetQuant = "auto" | "q4_0" | "q8_0" | "f32" | KQuantScheme;

/**
 * Conversion options.
 *
 * @example
 * ```ts
 * import type { BuildOptions } from "./build_weights.ts";
 * const o: BuildOptions = { quant: "q4_0", rule: "ggml", measureError: false };
 * ```
 */
export interface BuildOptions {
  /**
   * Target weight type. `"auto"` keeps every matrix in its source type when
   * that is a tile type (Q4_0, Q8_0, F32, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
   * Q6_K, F16, BF16: a lossless copy of its blocks) and stores the others
   * (Q2_K, Q3_K, the IQ types, ...) as Q8_0. `"q4_k_m"`, `"q5_k_m"`,
   * `"q6_k"`: llama.cpp's file types, each matrix in the type llama.cpp's
   * quantizer gives it (`kquant_rules.ts`: Q6_K for some `attn_v` and
   * `ffn_down`, the fallbacks for widths that are not a multiple of 256),
   * quantized as ggml's reference quantizers do.
   */
  quant: TargetQuant;
  /**
   * Type of the output matrix (the token embedding when the model ties the
   * two), which every token reads whole and whose rounding reaches the logits
   * directly. Default: `quant`. `"auto"`: as llama.cpp's quantizer keeps it at
   * higher precision, Q8_0 in a Q4_0 file unless the source already stores it
   * as Q4_0; otherwise `quant`.
   */
  outputQuant?: "auto" | "q4_0" | "q8_0" | "f32";
  /** Q4 rounding rule. */
  rule: Q4Rule;
  /** Measure RMS and max-abs error of every requantized matrix. */
  measureError: boolean;
  /**
   * What the metadata names as the source file (`source.file`; default: the source path's last
   * part). A model from Ollama's store records its Ollama name, its file being named for a digest.
   */
  sourceName?: string;
}

/**
 * What happened to one matrix.
 *
 * @example
 * ```ts
 * import type { MatrixReport } from "./build_weights.ts";
 * const r: MatrixReport = { name: "blk.0.attn_q.weight", rows: 2, cols: 32, from: "F16", to: "Q4_0", lossless: false };
 * ```
 */
export interface MatrixReport {
  /** Name as stored in the source. */
  name: string;
  /** Rows (output features). */
  rows: number;
  /** Columns (input features). */
  cols: number;
  /** Storage type in the source. */
  from: string;
  /** Tile type written. */
  to: string;
  /** True when the blocks were copied, not requantized. */
  lossless: boolean;
  /** Root-mean-square error over the matrix (when measured). */
  rms?: number;
  /** Largest absolute error (when measured). */
  maxAbs?: number;
}

const K_SCHEMES: readonly string[] = ["q4_k_m", "q5_k_m", "q6_k"];

/**
 * The tile type llama.cpp's quantizer gives each matrix of the model under a
 * K-quant scheme, by GGUF tensor name (experts: the 3-D tensor's name).
 */
function kquantTypes(source: ModelSource, scheme: KQuantScheme): Map<string, number> {
  const h = source.hyper;
  const list: { name: string; dims: number[] }[] = [];
  const add = (role: Role, layer: number) => {
    const t = source.tensor(role, layer, role.startsWith("expert_") ? 0 : undefined);
    if (t === undefined || t.rows <= 1) return;
    const dims = role.startsWith("expert_") ? [t.cols, t.rows, h.experts] : [t.cols, t.rows];
    list.push({ name: tensorName(GGUF_NAMES[role], layer), dims });
  };
  const tiledRoles: Role[] = [
    "q",
    "k",
    "v",
    "o",
    "gate",
    "up",
    "down",
    "expert_gate",
    "expert_up",
    "expert_down",
    "shared_gate",
    "shared_up",
    "shared_down",
  ];
  // llama.cpp's order: the embedding first, blocks in order, the output last.
  add("token_embd", 0);
  for (let l = 0; l < h.layers; l++) for (const role of tiledRoles) add(role, l);
  if (!h.tiedEmbeddings) add("output", 0);
  const types = kquantTensorTypes(scheme, list, {
    arch: h.architecture,
    nLayer: h.layers,
    nExpert: h.experts,
  });
  const out = new Map<string, number>();
  list.forEach((t, i) => {
    const g = types[i];
    const id = g === undefined ? undefined : TILE_TYPE[g.name as TileTypeName];
    if (g !== undefined && id === undefined) {
      throw new RangeError(
        `${source.path}: ${scheme} gives ${t.name} type ${g.name}, not a tile type`,
      );
    }
    if (id !== undefined) out.set(t.name, id);
  });
  return out;
}

const TYPE_OF: Record<"q4_0" | "q8_0" | "f32", number> = {
  q4_0: TILE_TYPE.Q4_0,
  q8_0: TILE_TYPE.Q8_0,
  f32: TILE_TYPE.F32,
};

/** The tile type `"auto"` gives a tensor stored as `typeName`. */
function autoType(typeName: string): number {
  return TILE_TYPE[typeName as TileTypeName] ?? TILE_TYPE.Q8_0;
}

/** The `.cflow` matrix id of each role (also the tiled source's lookup). */
export const MATRIX_OF: Record<Role, number> = {
  attn_norm: MATRIX.ATTN_NORM,
  q: MATRIX.Q,
  k: MATRIX.K,
  v: MATRIX.V,
  o: MATRIX.O,
  q_bias: MATRIX.Q_BIAS,
  k_bias: MATRIX.K_BIAS,
  v_bias: MATRIX.V_BIAS,
  q_norm: MATRIX.Q_NORM,
  k_norm: MATRIX.K_NORM,
  post_attn_norm: MATRIX.POST_ATTN_NORM,
  ffn_norm: MATRIX.FFN_NORM,
  gate: MATRIX.GATE,
  up: MATRIX.UP,
  down: MATRIX.DOWN,
  post_ffn_norm: MATRIX.POST_FFN_NORM,
  router: MATRIX.ROUTER,
  expert_gate: MATRIX.EXPERT_GATE,
  expert_up: MATRIX.EXPERT_UP,
  expert_down: MATRIX.EXPERT_DOWN,
  moe_norm: MATRIX.MOE_NORM,
  shared_gate: MATRIX.SHARED_GATE,
  shared_up: MATRIX.SHARED_UP,
  shared_down: MATRIX.SHARED_DOWN,
  shared_expert_gate: MATRIX.SHARED_EXPERT_GATE_INP,
  token_embd: MATRIX.TOKEN_EMBD,
  output_norm: MATRIX.OUTPUT_NORM,
  output: MATRIX.OUTPUT,
};

/** A shape mismatch between a tensor and the hyperparameters. */
function shapeError(source: ModelSource, t: SourceTensor, rows: number, cols: number): Error {
  return new RangeError(
    `${source.path}: tensor ${t.name} is ${t.rows}x${t.cols}, the model's hyperparameters imply ${rows}x${cols}`,
  );
}

/**
 * Builds the writer's view of a model.
 *
 * @example
 * ```ts ignore
 * import { buildModelWeights } from "./build_weights.ts";
 * const reports = [];
 * const model = buildModelWeights(source, { quant: "q4_0", rule: "ggml", measureError: false }, reports);
 * ```
 */
export function buildModelWeights(
  source: ModelSource,
  options: BuildOptions,
  reports: MatrixReport[],
): ModelWeights {
  const h = source.hyper;
  const auto = options.quant === "auto";
  const kTypes = K_SCHEMES.includes(options.quant)
    ? kquantTypes(source, options.quant as KQuantScheme)
    : undefined;
  /** The tile type of a matrix: the output matrix's may differ (see BuildOptions.outputQuant). */
  const typeOf = (role: Role, t: SourceTensor, layer: number): number => {
    if (kTypes !== undefined) {
      // llama.cpp's choice covers the output matrix too.
      return kTypes.get(tensorName(GGUF_NAMES[role], layer)) ?? autoType(t.typeName);
    }
    const baseType = auto ? autoType(t.typeName) : TYPE_OF[options.quant as "q4_0"];
    const output = role === "output" || (role === "token_embd" && h.tiedEmbeddings);
    const choice = options.outputQuant;
    if (!output || choice === undefined) return baseType;
    if (choice === "auto") {
      return baseType === TILE_TYPE.Q4_0 && t.typeName !== "Q4_0" ? TILE_TYPE.Q8_0 : baseType;
    }
    return TYPE_OF[choice];
  };
  /** Weights per tile type, for the header's quant_type (the most common). */
  const weightsOf = new Map<number, number>();
  const q = h.heads * h.headDim;
  const kv = h.kvHeads * h.headDim;

  const tiled = (
    role: Role,
    layer: number,
    rows: number,
    cols: number,
    fused: number,
    expert?: number,
  ): WeightItem | undefined => {
    const t = source.tensor(role, layer, expert);
    if (t === undefined) return undefined;
    const slice = t.experts > 0 ? expert ?? 0 : undefined;
    if (t.rows !== rows || t.cols !== cols) throw shapeError(source, t, rows, cols);
    const type = typeOf(role, t, layer);
    const typeName = tileTypeName(type)!;
    const lossless = t.rawRows !== undefined && typeName === t.typeName &&
      (type !== TILE_TYPE.Q4_0 || options.rule === "ggml");
    const ggml = ggmlTypeByName(typeName);
    if (
      !lossless && type !== TILE_TYPE.Q4_0 && type !== TILE_TYPE.Q8_0 && type !== TILE_TYPE.F32 &&
      (ggml === undefined || !quantizeSupported(ggml))
    ) {
      throw new RangeError(
        `${source.path}: ${t.name} (${t.typeName}) cannot be requantized to ${typeName}`,
      );
    }
    weightsOf.set(type, (weightsOf.get(type) ?? 0) + rows * cols);
    const report: MatrixReport = {
      name: slice !== undefined ? `${t.name}[${slice}]` : t.name,
      rows,
      cols,
      from: t.typeName,
      to: typeName,
      lossless,
    };
    reports.push(report);
    let sumSq = 0;
    let maxAbs = 0;
    let measured = 0;
    const matrix: RowMatrix = {
      type,
      rows,
      cols,
      readRows(start: number, count: number): Uint8Array {
        if (lossless) return t.rawRows!(start, count, slice);
        const x = t.f32Rows(start, count, slice);
        const out = quantizeRows(x, count, cols, type, options.rule);
        if (options.measureError && type !== TILE_TYPE.F32) {
          const back = dequantizeRows(out, count, cols, type);
          for (let i = 0; i < x.length; i++) {
            const e = Math.abs(x[i] - back[i]);
            sumSq += e * e;
            if (e > maxAbs) maxAbs = e;
          }
          measured += x.length;
          report.rms = Math.sqrt(sumSq / measured);
          report.maxAbs = maxAbs;
        } else if (options.measureError) {
          report.rms = 0;
          report.maxAbs = 0;
        }
        return out;
      },
    };
    if (lossless && options.measureError) {
      report.rms = 0;
      report.maxAbs = 0;
    }
    return { matrixId: MATRIX_OF[role], rows, cols, fused, matrix };
  };

  const vector = (role: Role, layer: number, n: number, expectRows = 1): WeightItem | undefined => {
    const t = source.tensor(role, layer);
    if (t === undefined) return undefined;
    if (t.rows * t.cols !== expectRows * n || t.cols !== n) {
      throw shapeError(source, t, expectRows, n);
    }
    return {
      matrixId: MATRIX_OF[role],
      rows: expectRows,
      cols: n,
      fused: FUSED.NONE,
      f32: () => t.f32Rows(0, t.rows).slice(),
    };
  };

  const need = <T>(x: T | undefined, role: Role, layer: number): T => {
    if (x === undefined) {
      throw new RangeError(`${source.path}: layer ${layer} has no ${role} tensor`);
    }
    return x;
  };

  const layers: LayerWeights[] = [];
  for (let l = 0; l < h.layers; l++) {
    const attention: WeightItem[] = [];
    const push = (x: WeightItem | undefined) => x !== undefined && attention.push(x);
    attention.push(need(vector("attn_norm", l, h.hidden), "attn_norm", l));
    push(vector("q_bias", l, q));
    push(vector("k_bias", l, kv));
    push(vector("v_bias", l, kv));
    attention.push(need(tiled("q", l, q, h.hidden, FUSED.QKV), "q", l));
    attention.push(need(tiled("k", l, kv, h.hidden, FUSED.QKV), "k", l));
    attention.push(need(tiled("v", l, kv, h.hidden, FUSED.QKV), "v", l));
    // OLMoE's QK-norm spans the whole q and k; the others' one head.
    const olmoe = h.architecture === "olmoe";
    push(vector("q_norm", l, olmoe ? q : h.headDim));
    push(vector("k_norm", l, olmoe ? kv : h.headDim));
    attention.push(need(tiled("o", l, h.hidden, q, FUSED.NONE), "o", l));
    push(vector("post_attn_norm", l, h.hidden));

    const ffn: WeightItem[] = [];
    const gate = h.ffnHidden > 0
      ? tiled("gate", l, h.ffnHidden, h.hidden, FUSED.GATE_UP)
      : undefined;
    const ffnNorm = vector("ffn_norm", l, h.hidden);
    if (gate !== undefined) {
      ffn.push(need(ffnNorm, "ffn_norm", l));
      ffn.push(gate);
      ffn.push(need(tiled("up", l, h.ffnHidden, h.hidden, FUSED.GATE_UP), "up", l));
      ffn.push(need(tiled("down", l, h.hidden, h.ffnHidden, FUSED.NONE), "down", l));
      const post = vector("post_ffn_norm", l, h.hidden);
      if (post !== undefined) ffn.push(post);
    }
    let moe: LayerWeights["moe"];
    const router = h.experts > 0 ? vector("router", l, h.hidden, h.experts) : undefined;
    if (router !== undefined) {
      if (gate === undefined && ffnNorm !== undefined) attention.push(ffnNorm);
      const experts = [];
      for (let e = 0; e < h.experts; e++) {
        experts.push({
          gate: need(
            tiled("expert_gate", l, h.expertFfnHidden, h.hidden, FUSED.GATE_UP, e),
            "expert_gate",
            l,
          ),
          up: need(
            tiled("expert_up", l, h.expertFfnHidden, h.hidden, FUSED.GATE_UP, e),
            "expert_up",
            l,
          ),
          down: need(
            tiled("expert_down", l, h.hidden, h.expertFfnHidden, FUSED.NONE, e),
            "expert_down",
            l,
          ),
        });
      }
      moe = { router, experts };
      const norm = vector("moe_norm", l, h.hidden);
      if (norm !== undefined) moe.norm = norm;
      else if (h.architecture === "pipeline_native") need(norm, "moe_norm", l);
      const sharedFfn = typeof h.extra.shared_expert_ffn === "number"
        ? h.extra.shared_expert_ffn as number
        : 0;
      const sharedGate = tiled(
        "shared_gate",
        l,
        sharedFfn,
        h.hidden,
        FUSED.GATE_UP,
      );
      if (sharedGate !== undefined) {
        moe.shared = {
          gate: sharedGate,
          up: need(tiled("shared_up", l, sharedFfn, h.hidden, FUSED.GATE_UP), "shared_up", l),
          down: need(tiled("shared_down", l, h.hidden, sharedFfn, FUSED.NONE), "shared_down", l),
          gateInp: vector("shared_expert_gate", l, h.hidden),
        };
      }
    }
    layers.push({ attention, ffn, moe });
  }
  const vocab: WeightItem[] = [
    need(tiled("token_embd", 0, h.vocab, h.hidden, FUSED.NONE), "token_embd", 0),
    need(vector("output_norm", 0, h.hidden), "output_norm", 0),
  ];
  const output = h.tiedEmbeddings ? undefined : tiled("output", 0, h.vocab, h.hidden, FUSED.NONE);
  if (!h.tiedEmbeddings) vocab.push(need(output, "output", 0));

  const extra = h.extra as Record<string, unknown>;
  const num = (
    k: string,
    fallback: number,
  ) => (typeof extra[k] === "number" ? extra[k] as number : fallback);
  const geometry: Geometry = {
    archId: ARCH_IDS[h.architecture] ?? 0,
    hidden: h.hidden,
    layers: h.layers,
    heads: h.heads,
    kvHeads: h.kvHeads,
    headDim: h.headDim,
    ffnHidden: h.ffnHidden,
    experts: h.experts,
    topK: h.topK,
    expertFfnHidden: h.expertFfnHidden,
    vocab: h.vocab,
    tileRows: 128,
    tileCols: 256,
    quantGroup: 32,
    // The type most of the weights have (ties: the lower id).
    quantType: [...weightsOf].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]?.[0] ??
      TILE_TYPE.Q8_0,
    slidingWindow: h.slidingWindow,
    slidingPattern: h.slidingPattern,
    denseDelay: num("dense_delay", 0),
    expertDelay: num("expert_delay", 0),
    // DelayedSum with no delays is the plain transformer: every family but
    // the pipeline-native one, whose config gives its style.
    combineStyle: num("combine_style", COMBINE.DELAYED_SUM),
    styleParam: num("style_param", 0),
    featureFlags: typeof extra.feature_flags === "number"
      ? extra.feature_flags as number
      : (h.tiedEmbeddings ? FEATURE.TIED_EMBEDDINGS : 0) |
        (h.architecture === "gemma3" ? FEATURE.EMBED_SCALE : 0),
    finalLogitSoftcap: h.finalLogitSoftcap,
  };
  const metadata = {
    cflow_metadata_version: 1,
    architecture: h.architecture,
    source: { format: source.format, file: options.sourceName ?? source.path.split("/").pop() },
    quant: options.quant,
    q4_rule: options.rule,
    hyperparameters: { ...h, extra: undefined },
    ...h.extra,
  };
  return { geometry, metadata, layers, vocab };
}
