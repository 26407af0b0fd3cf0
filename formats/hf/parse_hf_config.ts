/**
 * `config.json` of a Hugging Face checkpoint: parsed, validated and
 * normalized into the fields cflow needs.
 *
 * @module
 */

import { FormatError } from "../errors.ts";
import { type JsonNode, parseJson, toPlain } from "../safetensors/_json.ts";
import { Fields, requireFinite } from "./_fields.ts";
import { FAMILIES, type FamilyDefaults } from "./_hf_families.ts";
import { readBoundedFile } from "./_files.ts";
import { type PipelineNativeConfig, readPipelineNative } from "./parse_pipeline_native.ts";

/**
 * The model families cflow reads, named like their `model_type`
 * (`gemma3` covers both `gemma3_text` and the multimodal `gemma3` wrapper,
 * whose text model sits in `text_config`).
 *
 * @example
 * ```ts
 * import type { HfFamily } from "./parse_hf_config.ts";
 * const f: HfFamily = "qwen3_moe";
 * ```
 */
export type HfFamily =
  | "llama"
  | "qwen2"
  | "qwen3"
  | "gemma3"
  | "mixtral"
  | "olmoe"
  | "qwen2_moe"
  | "qwen3_moe"
  | "pipeline_native";

/**
 * The attention kind of one layer, as transformers' `layer_types` names it.
 *
 * @example
 * ```ts
 * import type { HfLayerType } from "./parse_hf_config.ts";
 * const t: HfLayerType = "sliding_attention";
 * ```
 */
export type HfLayerType = "full_attention" | "sliding_attention";

/**
 * Mixture-of-experts settings.
 *
 * @example
 * ```ts
 * import type { HfMoeConfig } from "./parse_hf_config.ts";
 * const moe: HfMoeConfig = {
 *   numExperts: 8, numExpertsPerTok: 2, expertIntermediateSize: 14336,
 *   sharedExpertIntermediateSize: 0, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [],
 * };
 * ```
 */
export interface HfMoeConfig {
  /** Experts per MoE layer (`num_local_experts` or `num_experts`). */
  readonly numExperts: number;
  /** Experts routed per token (`num_experts_per_tok`), ≤ numExperts. */
  readonly numExpertsPerTok: number;
  /**
   * Hidden size of one expert: `moe_intermediate_size` for Qwen2-MoE and
   * Qwen3-MoE, `intermediate_size` for Mixtral and OLMoE.
   */
  readonly expertIntermediateSize: number;
  /** Qwen2-MoE's `shared_expert_intermediate_size`; 0 for families without a shared expert. */
  readonly sharedExpertIntermediateSize: number;
  /**
   * Whether the top-k routing weights are renormalized to sum to 1
   * (`norm_topk_prob`; always true for Mixtral, whose router does so).
   */
  readonly normTopkProb: boolean;
  /** Qwen MoE `decoder_sparse_step`: layer i is sparse when (i + 1) % step == 0. 1 elsewhere. */
  readonly decoderSparseStep: number;
  /** Qwen MoE `mlp_only_layers`: layers that use a dense MLP of `intermediateSize`. */
  readonly mlpOnlyLayers: readonly number[];
}

/**
 * A validated, normalized `config.json`. Only `model_type` is required:
 * fields absent from the file (or JSON null) take the defaults of the
 * family's transformers config class, as transformers itself does when it
 * loads the file (published Gemma 3 configs rely on this for their head
 * counts and vocabulary size).
 *
 * @example
 * ```ts
 * import { parseHfConfig } from "./parse_hf_config.ts";
 * const c = parseHfConfig(JSON.stringify({
 *   model_type: "llama", hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
 *   intermediate_size: 96, vocab_size: 320,
 * }));
 * console.log(c.family, c.headDim, c.numKvHeads, c.ropeTheta); // "llama" 16 4 10000
 * ```
 */
export interface HfConfig {
  /** Which family's conventions apply. */
  readonly family: HfFamily;
  /** `model_type` as written (e.g. `gemma3_text` or `gemma3`). */
  readonly modelType: string;
  /** `architectures[0]` (e.g. `LlamaForCausalLM`), or null when absent. */
  readonly architecture: string | null;
  /** `hidden_size`. */
  readonly hiddenSize: number;
  /** `num_hidden_layers`. */
  readonly numLayers: number;
  /** `num_attention_heads`. */
  readonly numHeads: number;
  /** `num_key_value_heads` (default: numHeads); divides numHeads. */
  readonly numKvHeads: number;
  /** `head_dim` (default hidden/heads; 128 for Qwen3 and Qwen3-MoE, 256 for Gemma 3). */
  readonly headDim: number;
  /** `intermediate_size` (the dense MLP; for Mixtral and OLMoE, each expert's). */
  readonly intermediateSize: number;
  /** `vocab_size`. */
  readonly vocabSize: number;
  /** `rms_norm_eps`, in (0, 1). */
  readonly rmsNormEps: number;
  /** RoPE base of the full-attention layers (`rope_theta`, or `rope_parameters.rope_theta`). */
  readonly ropeTheta: number;
  /**
   * RoPE scaling of the full-attention layers, as written (`rope_scaling`,
   * or `rope_parameters` when its `rope_type` is not `default`); null for
   * plain RoPE. Every number in it is finite.
   */
  readonly ropeScaling: Readonly<Record<string, unknown>> | null;
  /** Gemma 3: RoPE base of the sliding-window layers (`rope_local_base_freq`); null elsewhere. */
  readonly ropeLocalTheta: number | null;
  /** `max_position_embeddings`. */
  readonly maxPositionEmbeddings: number;
  /** `tie_word_embeddings`: the output projection reuses the embedding matrix. */
  readonly tieWordEmbeddings: boolean;
  /** Window of the sliding-attention layers; null when no layer slides. */
  readonly slidingWindow: number | null;
  /** One entry per layer (`layer_types`, or derived the way transformers does). */
  readonly layerTypes: readonly HfLayerType[];
  /** MoE settings; null for dense families (and pipeline-native models without experts). */
  readonly moe: HfMoeConfig | null;
  /** Pipeline-native settings (docs/ARCHITECTURES.md); null for every other family. */
  readonly pipelineNative: PipelineNativeConfig | null;
  /** `torch_dtype` / `dtype` as written (e.g. `bfloat16`), or null. */
  readonly dtype: string | null;
  /** The whole file as plain JSON values. */
  readonly raw: Readonly<Record<string, unknown>>;
}

/**
 * Sanity limits applied by {@link parseHfConfig} (inclusive).
 *
 * @example
 * ```ts
 * import { HF_CONFIG_LIMITS } from "./parse_hf_config.ts";
 * console.log(HF_CONFIG_LIMITS.numLayers.max); // 1024
 * ```
 */
export const HF_CONFIG_LIMITS: Readonly<
  Record<string, { readonly min: number; readonly max: number }>
> = Object.freeze(
  {
    hiddenSize: { min: 1, max: 65536 },
    numLayers: { min: 1, max: 1024 },
    numHeads: { min: 1, max: 4096 },
    headDim: { min: 1, max: 4096 },
    intermediateSize: { min: 1, max: 1 << 20 },
    vocabSize: { min: 1, max: 1 << 24 },
    maxPositionEmbeddings: { min: 1, max: 2 ** 31 - 1 },
    slidingWindow: { min: 0, max: 2 ** 31 - 1 },
    numExperts: { min: 1, max: 4096 },
  } as const,
);

/** Largest `config.json` read, in bytes. */
const MAX_CONFIG_BYTES = 16 << 20;

const LAYER_TYPES: readonly string[] = ["full_attention", "sliding_attention"];

/**
 * Parses and validates `config.json` text or bytes. Every problem is a
 * {@link FormatError} naming `file`, the JSON path (e.g.
 * `num_attention_heads`, `text_config.rope_scaling.factor`) and the byte
 * offset of the offending value:
 *
 * - invalid UTF-8 or JSON, duplicate keys, a root that is not an object;
 * - a missing `model_type`, or one outside {@link HfFamily};
 * - a value of the wrong type (`"64"` is not a number;
 *   JSON has no NaN or Infinity, and an overflowing literal such as `1e999`
 *   is refused as not finite);
 * - values outside {@link HF_CONFIG_LIMITS}, `rms_norm_eps` outside (0, 1),
 *   `rope_theta` not > 0, non-finite numbers anywhere in `rope_scaling` /
 *   `rope_parameters` or a `factor` ≤ 0;
 * - `hidden_size` not a multiple of `num_attention_heads` when `head_dim`
 *   is absent (and the family has no default), `num_key_value_heads` not
 *   dividing `num_attention_heads`;
 * - MoE: `num_experts` and `num_local_experts` disagreeing,
 *   `num_experts_per_tok` not in [1, experts], bad `mlp_only_layers`;
 * - `layer_types` of the wrong length or with unknown kinds, or sliding
 *   layers without a `sliding_window`.
 *
 * JSON `null` counts as absent, except for `sliding_window`, where it means
 * "no window" (as in Mixtral configs). Defaults are those of transformers' config
 * classes (see {@link HfConfig}).
 *
 * @example
 * ```ts
 * import { parseHfConfig } from "./parse_hf_config.ts";
 * const c = parseHfConfig(JSON.stringify({
 *   architectures: ["Qwen3MoeForCausalLM"], model_type: "qwen3_moe",
 *   hidden_size: 2048, num_hidden_layers: 48, num_attention_heads: 32, num_key_value_heads: 4,
 *   head_dim: 128, intermediate_size: 6144, moe_intermediate_size: 768, vocab_size: 151936,
 *   num_experts: 128, num_experts_per_tok: 8, norm_topk_prob: true, rope_theta: 1000000.0,
 * }));
 * console.log(c.moe?.numExperts, c.moe?.expertIntermediateSize); // 128 768
 * ```
 *
 * @example Errors name the field and the byte
 * ```ts
 * import { parseHfConfig } from "./parse_hf_config.ts";
 * try {
 *   parseHfConfig('{"model_type": "llama", "hidden_size": "64"}', "tiny/config.json");
 * } catch (e) {
 *   console.log((e as Error).message);
 *   // tiny/config.json: hidden_size at byte 39: must be an integer, found a string
 * }
 * ```
 */
export function parseHfConfig(json: string | Uint8Array, file = "config.json"): HfConfig {
  const bytes = typeof json === "string" ? new TextEncoder().encode(json) : json;
  const root = parseJson(bytes, { file, base: 0, root: "" });
  if (root.kind !== "object") {
    throw new FormatError(file, "(root)", root.offset, "config.json must be a JSON object");
  }
  const top = new Fields(file, root);

  const modelType = top.str("model_type") ?? top.fail("model_type", "is required but missing");
  const defaults = FAMILIES.get(modelType) ??
    top.fail(
      "model_type",
      `unsupported model_type ${JSON.stringify(modelType)} (cflow reads ${
        [...FAMILIES.keys()].join(", ")
      })`,
      top.get("model_type"),
    );

  let architecture: string | null = null;
  const archs = top.array("architectures");
  if (archs !== undefined) {
    const list = new Fields(file, root, ["architectures"]);
    archs.forEach((a, i) => {
      if (a.kind !== "string" || a.value === "") list.fail(i, "must be a non-empty string", a);
    });
    if (archs.length > 0) architecture = (archs[0] as { value: string }).value;
  }

  // The multimodal Gemma 3 wrapper keeps the text model's settings in text_config.
  // Without one, every text setting takes Gemma3TextConfig's default.
  const noTextConfig = {
    kind: "object",
    offset: root.offset,
    entries: new Map(),
    keyOffsets: new Map(),
  } as const;
  const f = modelType !== "gemma3"
    ? top
    : top.object("text_config") ?? new Fields(file, noTextConfig, ["text_config"]);
  const L = HF_CONFIG_LIMITS;

  const hiddenSize = f.int("hidden_size", L.hiddenSize, defaults.hidden);
  const numLayers = f.int("num_hidden_layers", L.numLayers, defaults.layers);
  const numHeads = f.int("num_attention_heads", L.numHeads, defaults.heads);
  const numKvHeads = f.int(
    "num_key_value_heads",
    { min: 1, max: numHeads },
    defaults.kvHeads ?? numHeads,
  );
  if (numHeads % numKvHeads !== 0) {
    f.fail(
      "num_key_value_heads",
      `${numKvHeads} does not divide num_attention_heads ${numHeads}`,
      f.get("num_key_value_heads"),
    );
  }
  let headDim: number;
  if (f.get("head_dim") !== undefined) headDim = f.int("head_dim", L.headDim);
  else if (defaults.headDim !== null) headDim = defaults.headDim;
  else {
    if (hiddenSize % numHeads !== 0) {
      f.fail(
        "num_attention_heads",
        `hidden_size ${hiddenSize} is not a multiple of ${numHeads} heads and head_dim is not given`,
        f.get("num_attention_heads"),
      );
    }
    headDim = hiddenSize / numHeads;
    if (headDim > L.headDim.max) {
      f.fail(
        "num_attention_heads",
        `hidden_size ${hiddenSize} / ${numHeads} heads gives head_dim ${headDim}, above ${L.headDim.max}`,
        f.get("num_attention_heads") ?? f.get("hidden_size"),
      );
    }
  }
  const intermediateSize = f.int("intermediate_size", L.intermediateSize, defaults.intermediate);
  const vocabSize = f.int("vocab_size", L.vocabSize, defaults.vocab);
  const rmsNormEps = f.num("rms_norm_eps", 0, 1, defaults.rmsNormEps);
  const maxPositionEmbeddings = f.int(
    "max_position_embeddings",
    L.maxPositionEmbeddings,
    defaults.maxPos,
  );
  const tieWordEmbeddings = f.bool(
    "tie_word_embeddings",
    f === top ? defaults.tie : top.bool("tie_word_embeddings", defaults.tie),
  );

  const rope = readRope(f, defaults);
  const { layerTypes, slidingWindow } = readLayers(f, defaults, numLayers);
  let moe = defaults.moe ? readMoe(f, defaults, numLayers, intermediateSize) : null;
  let pipelineNative: PipelineNativeConfig | null = null;
  if (defaults.family === "pipeline_native") {
    const n = f.int("num_experts", { min: 0, max: L.numExperts.max }, 0);
    if (n > 0) {
      moe = Object.freeze({
        numExperts: n,
        numExpertsPerTok: f.int("num_experts_per_tok", { min: 1, max: n }),
        expertIntermediateSize: f.int("expert_intermediate_size", L.intermediateSize),
        sharedExpertIntermediateSize: 0,
        // Selection by softmax, then top-k renormalized (Mixtral's rule).
        normTopkProb: true,
        decoderSparseStep: 1,
        mlpOnlyLayers: Object.freeze([]),
      });
    }
    pipelineNative = readPipelineNative(f, numLayers, n, tieWordEmbeddings);
  }

  const dtype = f.str("torch_dtype") ?? f.str("dtype") ?? top.str("torch_dtype") ??
    top.str("dtype") ?? null;

  return Object.freeze({
    family: defaults.family,
    modelType,
    architecture,
    hiddenSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    intermediateSize,
    vocabSize,
    rmsNormEps,
    ropeTheta: rope.theta,
    ropeScaling: rope.scaling,
    ropeLocalTheta: rope.localTheta,
    maxPositionEmbeddings,
    tieWordEmbeddings,
    slidingWindow,
    layerTypes,
    moe,
    pipelineNative,
    dtype,
    raw: toPlain(root) as Record<string, unknown>,
  });
}

/**
 * Reads and parses `config.json` from disk (at most 16 MiB).
 *
 * @example
 * ```ts ignore
 * import { readHfConfig } from "./parse_hf_config.ts";
 * const config = readHfConfig("models/tiny/config.json");
 * console.log(config.family, config.numLayers);
 * ```
 */
export function readHfConfig(path: string): HfConfig {
  return parseHfConfig(readBoundedFile(path, MAX_CONFIG_BYTES, "config.json"), path);
}

function ropeScalingOf(
  f: Fields,
  key: string,
  node: JsonNode,
): Readonly<Record<string, unknown>> | null {
  requireFinite(f.file, [...f.path, key], node);
  if (node.kind !== "object") return f.fail(key, "must be an object", node);
  const s = new Fields(f.file, node, [...f.path, key]);
  const type = s.str("rope_type") ?? s.str("type") ?? "default";
  if (s.get("factor") !== undefined) s.num("factor", 0, Infinity);
  for (const k of ["rope_theta", "original_max_position_embeddings"]) {
    if (s.get(k) !== undefined) s.num(k, 0, Infinity);
  }
  return type === "default" ? null : Object.freeze(toPlain(node) as Record<string, unknown>);
}

function readRope(
  f: Fields,
  d: FamilyDefaults,
): { theta: number; scaling: Readonly<Record<string, unknown>> | null; localTheta: number | null } {
  const topTheta = f.get("rope_theta") === undefined ? undefined : f.num("rope_theta", 0, Infinity);
  const params = f.object("rope_parameters");
  let theta = topTheta;
  let scaling: Readonly<Record<string, unknown>> | null = null;
  let localTheta: number | null = d.family === "gemma3"
    ? f.num("rope_local_base_freq", 0, Infinity, 1e4)
    : null;

  const legacy = f.get("rope_scaling");
  if (legacy !== undefined) scaling = ropeScalingOf(f, "rope_scaling", legacy);
  if (params !== undefined) {
    // transformers v5 (supersedes rope_scaling): one set of parameters, or one per layer type.
    const keys = [...params.obj.entries.keys()];
    const perLayerType = keys.length > 0 && keys.every((k) => LAYER_TYPES.includes(k));
    let full: Fields;
    if (perLayerType) {
      requireFinite(f.file, params.path, params.obj);
      full = params.object("full_attention") ??
        params.fail(undefined, "has no full_attention entry");
      scaling = ropeScalingOf(params, "full_attention", full.obj);
    } else {
      full = params;
      scaling = ropeScalingOf(f, "rope_parameters", params.obj);
    }
    if (full.get("rope_theta") !== undefined) {
      const t = full.num("rope_theta", 0, Infinity);
      if (topTheta !== undefined && topTheta !== t) {
        f.fail(
          "rope_theta",
          `${topTheta} disagrees with ${full.field("rope_theta")} ${t}`,
          f.get("rope_theta"),
        );
      }
      theta = t;
    }
    const sliding = perLayerType ? params.object("sliding_attention") : undefined;
    if (sliding !== undefined) {
      requireFinite(f.file, sliding.path, sliding.obj);
      if (sliding.get("rope_theta") !== undefined) {
        localTheta = sliding.num("rope_theta", 0, Infinity);
      }
    }
  }
  return { theta: theta ?? d.ropeTheta, scaling, localTheta };
}

function readLayers(
  f: Fields,
  d: FamilyDefaults,
  numLayers: number,
): { layerTypes: readonly HfLayerType[]; slidingWindow: number | null } {
  let window: number | null = f.get("sliding_window") === undefined
    ? (f.obj.entries.has("sliding_window") ? null : d.slidingWindow)
    : f.int("sliding_window", HF_CONFIG_LIMITS.slidingWindow);
  if (d.sliding === "qwen" && !f.bool("use_sliding_window", false)) window = null;
  if (window === 0) window = null;

  let types: HfLayerType[];
  const given = f.array("layer_types");
  if (given !== undefined) {
    if (given.length !== numLayers) {
      f.fail(
        "layer_types",
        `has ${given.length} entries for ${numLayers} layers`,
        f.get("layer_types"),
      );
    }
    types = given.map((n, i) => {
      if (n.kind !== "string" || !LAYER_TYPES.includes(n.value)) {
        return new Fields(f.file, f.obj, [...f.path, "layer_types"]).fail(
          i,
          `must be one of ${LAYER_TYPES.join(", ")}`,
          n,
        );
      }
      return n.value as HfLayerType;
    });
    if (d.sliding === "qwen" && window === null) {
      // transformers v5 writes layer_types even when use_sliding_window is false.
      types = types.map(() => "full_attention");
    }
  } else if (d.sliding === "gemma") {
    const pattern = f.get("sliding_window_pattern") !== undefined
      ? f.int("sliding_window_pattern", { min: 1, max: 1024 })
      : f.int("_sliding_window_pattern", { min: 1, max: 1024 }, 6);
    types = Array.from(
      { length: numLayers },
      (_, i) => (i + 1) % pattern !== 0 ? "sliding_attention" : "full_attention",
    );
  } else if (d.sliding === "qwen" && window !== null) {
    const first = f.int("max_window_layers", { min: 0, max: HF_CONFIG_LIMITS.numLayers.max }, 28);
    types = Array.from(
      { length: numLayers },
      (_, i) => i >= first ? "sliding_attention" : "full_attention",
    );
  } else if (d.sliding === "all" && window !== null) {
    types = Array(numLayers).fill("sliding_attention");
  } else {
    types = Array(numLayers).fill("full_attention");
  }
  const slides = types.includes("sliding_attention");
  if (slides && window === null) {
    f.fail(
      "sliding_window",
      "layer_types has sliding_attention layers but sliding_window is not set",
      f.get("sliding_window"),
    );
  }
  return { layerTypes: Object.freeze(types), slidingWindow: slides ? window : null };
}

function readMoe(
  f: Fields,
  d: FamilyDefaults,
  numLayers: number,
  intermediateSize: number,
): HfMoeConfig {
  const L = HF_CONFIG_LIMITS;
  const family = d.family;
  const [defExperts, defTopK, defExpertSize, defShared] = d.moe!;
  const local = f.get("num_local_experts") === undefined
    ? undefined
    : f.int("num_local_experts", L.numExperts);
  const plain = f.get("num_experts") === undefined ? undefined : f.int("num_experts", L.numExperts);
  if (local !== undefined && plain !== undefined && local !== plain) {
    f.fail(
      "num_experts",
      `${plain} disagrees with num_local_experts ${local}`,
      f.get("num_experts"),
    );
  }
  const numExperts = local ?? plain ?? defExperts;
  const numExpertsPerTok = f.int("num_experts_per_tok", { min: 1, max: numExperts }, defTopK);
  if (numExpertsPerTok > numExperts) {
    f.fail("num_experts_per_tok", `defaults to ${defTopK}, more than the ${numExperts} experts`);
  }
  const qwen = family === "qwen2_moe" || family === "qwen3_moe";
  const expertIntermediateSize = qwen
    ? f.int("moe_intermediate_size", L.intermediateSize, defExpertSize)
    : intermediateSize;
  const sharedExpertIntermediateSize = family === "qwen2_moe"
    ? f.int("shared_expert_intermediate_size", L.intermediateSize, defShared)
    : 0;
  const normTopkProb = family === "mixtral" ? true : f.bool("norm_topk_prob", false);
  const decoderSparseStep = qwen
    ? f.int("decoder_sparse_step", { min: 1, max: L.numLayers.max }, 1)
    : 1;
  const mlpOnlyLayers: number[] = [];
  const only = qwen ? f.array("mlp_only_layers") : undefined;
  if (only !== undefined) {
    const g = new Fields(f.file, f.obj, [...f.path, "mlp_only_layers"]);
    only.forEach((n, i) => {
      const layer = g.intOf(i, n, { min: 0, max: numLayers - 1 });
      if (mlpOnlyLayers.includes(layer)) g.fail(i, `layer ${layer} is listed twice`, n);
      mlpOnlyLayers.push(layer);
    });
  }
  return Object.freeze({
    numExperts,
    numExpertsPerTok,
    expertIntermediateSize,
    sharedExpertIntermediateSize,
    normTopkProb,
    decoderSparseStep,
    mlpOnlyLayers: Object.freeze(mlpOnlyLayers),
  });
}
