/**
 * A Hugging Face checkpoint directory as a {@link ModelSource}.
 *
 * @module
 */

import { canonicalArchitecture, HF_NAMES, type Role, tensorName } from "../arch/mod.ts";
import { FormatError } from "../formats/errors.ts";
import { type HfCheckpoint, openHfCheckpoint } from "../formats/hf/mod.ts";
import { readTensorF32 } from "../formats/safetensors/mod.ts";
import type { HyperParams, ModelSource, SourceTensor } from "./model_source.ts";

/** Largest tokenizer file embedded in a converted model's metadata. */
const MAX_TOKENIZER_BYTES = 64 << 20;

/** The text of a tokenizer file of the checkpoint, or undefined when there is none. */
function readTokenizerText(path: string | null): string | undefined {
  if (path === null) return undefined;
  const size = Deno.statSync(path).size;
  if (size > MAX_TOKENIZER_BYTES) {
    throw new FormatError(path, "size", 0, `${size} bytes, more than ${MAX_TOKENIZER_BYTES}`);
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(Deno.readFileSync(path));
}

/**
 * Builds a ModelSource over an opened checkpoint.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "../formats/hf/mod.ts";
 * import { hfModelSource } from "./hf_source.ts";
 * const source = hfModelSource(openHfCheckpoint("tests/fixtures/hf/llama"));
 * ```
 */
export function hfModelSource(ckpt: HfCheckpoint): ModelSource {
  const c = ckpt.config;
  const names = HF_NAMES[c.family] ?? HF_NAMES[c.modelType];
  const architecture = canonicalArchitecture(c.family) ?? canonicalArchitecture(c.modelType);
  if (names === undefined || architecture === undefined) {
    throw new FormatError(
      `${ckpt.dir}/config.json`,
      "model_type",
      0,
      `unsupported model_type "${c.modelType}"`,
    );
  }
  const moe = c.moe;
  const pn = c.pipelineNative;
  const where = `${ckpt.dir}/config.json`;
  if (moe !== null && (c.family === "qwen2_moe" || c.family === "qwen3_moe")) {
    // Every layer sparse, none dense: what cflow implements.
    if (moe.mlpOnlyLayers.length > 0) {
      throw new FormatError(
        where,
        "mlp_only_layers",
        0,
        `[${
          moe.mlpOnlyLayers.join(", ")
        }]: layers with a dense MLP instead of experts are not supported`,
      );
    }
    if (moe.decoderSparseStep !== 1) {
      throw new FormatError(
        where,
        "decoder_sparse_step",
        0,
        `${moe.decoderSparseStep}: only 1 (every layer sparse) is supported`,
      );
    }
  }
  if (moe !== null && c.family !== "pipeline_native") {
    // (router_jitter_noise acts in training only.)
    if (c.family === "olmoe" && c.raw.clip_qkv !== undefined && c.raw.clip_qkv !== null) {
      throw new FormatError(
        where,
        "clip_qkv",
        0,
        `${c.raw.clip_qkv}: QKV clipping is not supported`,
      );
    }
  }
  const sliding = c.layerTypes.filter((t) => t === "sliding_attention").length;
  const hyper: HyperParams = {
    architecture,
    hidden: c.hiddenSize,
    layers: c.numLayers,
    heads: c.numHeads,
    kvHeads: c.numKvHeads,
    headDim: c.headDim,
    // The HF MoE families have no dense MLP (Mixtral's and OLMoE's
    // intermediate_size is each expert's); pipeline-native layers all have one.
    ffnHidden: moe !== null && c.family !== "pipeline_native" ? 0 : c.intermediateSize,
    experts: moe?.numExperts ?? 0,
    topK: moe?.numExpertsPerTok ?? 0,
    expertFfnHidden: moe?.expertIntermediateSize ?? 0,
    vocab: c.vocabSize,
    slidingWindow: sliding > 0 ? c.slidingWindow ?? 0 : 0,
    slidingPattern: architecture === "gemma3" && sliding > 0 ? 6 : 0,
    tiedEmbeddings: c.tieWordEmbeddings || !ckpt.tensors.has("lm_head.weight"),
    finalLogitSoftcap: pn !== null
      ? pn.finalLogitSoftcap
      : typeof c.raw.final_logit_softcapping === "number"
      ? c.raw.final_logit_softcapping
      : 0,
    extra: {
      rope_theta: c.ropeTheta,
      rope_local_theta: c.ropeLocalTheta,
      rope_scaling: c.ropeScaling,
      rms_norm_eps: c.rmsNormEps,
      context_length: c.maxPositionEmbeddings,
      layer_types: c.layerTypes,
      rope_style: "neox",
      // Gemma's RMSNorm multiplies by (1 + w); its checkpoints store w.
      norm_weight_offset: architecture === "gemma3" ? 1 : 0,
      moe: moe ?? undefined,
      // Top-k weights renormalized to sum 1 (Mixtral: its softmax over the
      // top-k logits is the same number).
      moe_norm_topk_prob: moe !== null ? moe.normTopkProb : undefined,
      shared_expert_ffn: c.family === "qwen2_moe" && moe !== null
        ? moe.sharedExpertIntermediateSize
        : undefined,
      ...(pn === null ? {} : {
        pipeline_native: pn.name,
        combine_style: pn.combineStyle,
        dense_delay: pn.denseDelay,
        expert_delay: pn.expertDelay,
        style_param: pn.styleParam,
        feature_flags: pn.featureFlags,
      }),
      hf_config: c.raw,
      // The tokenizer travels inside the converted file, so that it does not
      // depend on the checkpoint folder staying where it was.
      tokenizer_json: readTokenizerText(ckpt.files.tokenizerJson),
      tokenizer_config_json: readTokenizerText(ckpt.files.tokenizerConfig),
    },
  };
  const cache = new Map<string, SourceTensor>();
  return {
    format: "hf",
    path: ckpt.dir,
    hyper,
    dataBytes: [...ckpt.tensors.values()].reduce((n, t) => n + t.info.bytes, 0),
    tensor(role: Role, layer: number, expert?: number): SourceTensor | undefined {
      const pattern = names[role];
      if (pattern === "") return undefined;
      const name = tensorName(pattern, layer, expert ?? 0);
      const hit = cache.get(name);
      if (hit !== undefined) return hit;
      const ref = ckpt.tensors.get(name);
      if (ref === undefined) return undefined;
      const shape = ref.info.shape;
      if (shape.length < 1 || shape.length > 2) {
        throw new FormatError(
          ref.shard.path,
          `${name}.shape`,
          0,
          `unsupported shape [${shape.join(", ")}]`,
        );
      }
      const rows = shape.length === 2 ? shape[0] : 1;
      const cols = shape.length === 2 ? shape[1] : shape[0];
      const t: SourceTensor = {
        name,
        rows,
        cols,
        experts: 0,
        typeName: ref.info.dtype,
        f32Rows: (start, count) => {
          if (shape.length === 1) return readTensorF32(ref.shard.source, ref.info);
          return readTensorF32(ref.shard.source, ref.info, start, count);
        },
      };
      cache.set(name, t);
      return t;
    },
    close: () => ckpt.close(),
  };
}

/**
 * Opens a Hugging Face checkpoint directory as a ModelSource.
 *
 * @example
 * ```ts ignore
 * import { openHfSource } from "./hf_source.ts";
 * const s = openHfSource("tests/fixtures/hf/llama");
 * console.log(s.hyper.architecture);
 * s.close();
 * ```
 */
export function openHfSource(dir: string): ModelSource {
  const ckpt = openHfCheckpoint(dir);
  try {
    return hfModelSource(ckpt);
  } catch (error) {
    ckpt.close();
    throw error;
  }
}
