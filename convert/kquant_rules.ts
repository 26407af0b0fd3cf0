/**
 * Which ggml type llama.cpp's quantizer gives each tensor of a Q4_K_M, Q5_K_M or Q6_K model
 * when it runs without an importance matrix (`llama-quantize model.gguf out.gguf Q4_K_M`).
 *
 * A port of `llama_tensor_get_type` with `tensor_allows_quantization`,
 * `tensor_get_category`, `llama_tensor_get_type_impl` and `tensor_type_fallback` from
 * `src/llama-quant.cpp` of llama.cpp commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f (as
 * vendored by the PyPI sdist llama_cpp_python 0.3.36), for the default quantize parameters
 * (no `--pure`, no `--tensor-type`, `--output-tensor-type` or `--token-embedding-type`
 * overrides, output tensor quantized) and the three schemes. For them the rules are:
 *
 * - Only tensors of 2 or more dimensions whose name ends in `weight` are quantized; norms,
 *   `ffn_gate_inp` (MoE routers), positional embeddings and a list of small tensors keep their
 *   source type ({@link kquantTensorType} returns `undefined`).
 * - `output.weight`, and `token_embd.weight` / `per_layer_token_embd.weight` when the model has
 *   no `output.weight` (tied embeddings): Q6_K, or Q8_0 when the column count is not a multiple
 *   of 256 or the architecture is Falcon.
 * - `attn_v` (and `attn_qkv`, `attn_kv_b`): Q6_K in Q4_K_M and Q5_K_M when
 *   `use_more_bits(i, n)`, i.e. for the first and last eighth of them and every third one in
 *   between (`i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2`); Q5_K instead of Q4_K in a 70B
 *   model; Q8_0 in every scheme when the model has exactly 8 experts.
 * - `attn_k`: Q8_0 with exactly 8 experts.
 * - `ffn_down` (any name containing it): Q6_K in Q4_K_M and Q5_K_M when `use_more_bits`
 *   (Falcon in Q4_K_M: Q6_K for the first sixteenth, then Q5_K / Q4_K).
 * - `attn_output`: Q5_K in Q4_K_M with exactly 8 experts (not Falcon).
 * - `glm5-next`: `attn_q_a`, `attn_q_b` and `nextn.eh_proj` Q8_0.
 * - Everything else, untied `token_embd` included: the scheme's type (Q4_K, Q5_K, Q6_K).
 * - The GQA ratio, which llama.cpp reads for Q2_K, Q3_K and the IQ schemes, plays no part in
 *   these three.
 * - Fallback when the column count (ne[0]) is not a multiple of 256: Q4_K -> Q5_0,
 *   Q5_K -> Q5_1, Q6_K -> Q8_0 (Q8_0 stays), and F16 if the column count is not a multiple of
 *   32 either. Qwen2.5-0.5B's 896 columns thus give Q5_0 for most matrices, Q8_0 for the
 *   Q6_K ones.
 *
 * The `i` of `attn_v` and of a dense model's `ffn_down` is a counter in llama.cpp: the
 * position of the tensor among those tensors in the order the quantizer visits them. llama.cpp
 * since PR #9935 (late 2024) visits tensors sorted by block number, so the counter is the block
 * number when every block has one; before it, the quantizer visited them in file order, and files
 * converted from checkpoints that list blocks as strings (0, 1, 10, 11, ..., 2, 20, ...) got the
 * position in that order. In a hybrid model (attention in some blocks only) the `attn_v`
 * counter and count are those of the attention blocks. {@link kquantTensorTypes} numbers a
 * whole model's tensors either way. For MoE models (more than one expert) llama.cpp reads the
 * `ffn_down` block number from the name.
 *
 * Checked against llama.cpp's own `llama_quant_compute_types` on mock models of many
 * architectures (`tests/fixtures/ggml_kquant/llama_tensor_types.json`) and against the
 * tensor types of three Q4_K_M GGUF files made by llama.cpp (`kquant_rules_test.ts`).
 *
 * @example
 * ```ts
 * import { kquantTensorType } from "./kquant_rules.ts";
 * import assert from "node:assert/strict";
 *
 * // Qwen2.5-Coder-1.5B (28 blocks, 1536 columns, untied output), Q4_K_M.
 * const model = { arch: "qwen2", nLayer: 28, nExpert: 0, tiedEmbeddings: false };
 * const t = (name: string, dims: number[]) => kquantTensorType("q4_k_m", { name, dims }, model)?.name;
 * assert.equal(t("blk.0.attn_v.weight", [1536, 256]), "Q6_K");
 * assert.equal(t("blk.3.attn_v.weight", [1536, 256]), "Q4_K");
 * assert.equal(t("blk.5.ffn_down.weight", [8960, 1536]), "Q6_K");
 * assert.equal(t("output.weight", [1536, 151936]), "Q6_K");
 * assert.equal(t("blk.0.attn_norm.weight", [1536]), undefined); // kept as in the source
 * ```
 *
 * @module
 */

import { ggmlTypeByName, type GgmlTypeInfo } from "../formats/ggml/mod.ts";

/**
 * The llama.cpp file types these rules cover: `LLAMA_FTYPE_MOSTLY_Q4_K_M`,
 * `LLAMA_FTYPE_MOSTLY_Q5_K_M` and `LLAMA_FTYPE_MOSTLY_Q6_K` (`general.file_type` 15, 17, 18).
 *
 * @example
 * ```ts
 * import type { KQuantScheme } from "./kquant_rules.ts";
 * const scheme: KQuantScheme = "q4_k_m";
 * ```
 */
export type KQuantScheme = "q4_k_m" | "q5_k_m" | "q6_k";

/**
 * The facts about a model that llama.cpp's type choice reads for any tensor.
 *
 * @example
 * ```ts
 * import type { KQuantArchFacts } from "./kquant_rules.ts";
 * const gemma3: KQuantArchFacts = { arch: "gemma3", nLayer: 18, nExpert: 0 };
 * ```
 */
export interface KQuantArchFacts {
  /**
   * The GGUF `general.architecture` ("llama", "qwen2", "gemma3", ...). Of the architectures,
   * only "falcon" and "glm5-next" have rules of their own in these schemes.
   */
  readonly arch: string;
  /** `{arch}.block_count` (llama.cpp's `n_layer_all`), the `n` of `ffn_down`. */
  readonly nLayer: number;
  /** `{arch}.expert_count`, 0 (or 1) for a dense model. Exactly 8 has rules of its own. */
  readonly nExpert: number;
  /**
   * Whether llama.cpp's model type is `LLM_TYPE_70B` (80-block Llama with grouped-query
   * attention, 80-block Qwen2, Deci, OLMo, 68-block Jais2); default false.
   * {@link kquantArchFactsFromGguf} works it out.
   */
  readonly is70B?: boolean;
}

/**
 * {@link KQuantArchFacts} plus the two facts llama.cpp derives from the model's tensor list.
 *
 * @example
 * ```ts
 * import type { KQuantModelFacts } from "./kquant_rules.ts";
 * const model: KQuantModelFacts = { arch: "gemma3", nLayer: 18, nExpert: 0, tiedEmbeddings: true };
 * ```
 */
export interface KQuantModelFacts extends KQuantArchFacts {
  /** True when the model has no `output.weight`, so the token embedding is also the output. */
  readonly tiedEmbeddings: boolean;
  /**
   * How many `attn_v` / `attn_qkv` / `attn_kv_b` weights the model has (the `n` of
   * `use_more_bits` for them); default {@link KQuantArchFacts.nLayer}.
   */
  readonly nAttentionV?: number;
}

/**
 * One tensor, as llama.cpp's type choice sees it.
 *
 * @example
 * ```ts
 * import type { KQuantTensorFacts } from "./kquant_rules.ts";
 * const t: KQuantTensorFacts = { name: "blk.4.ffn_down.weight", dims: [8960, 1536] };
 * ```
 */
export interface KQuantTensorFacts {
  /** The GGUF tensor name, e.g. `blk.3.attn_v.weight`. */
  readonly name: string;
  /** Dimensions in ggml order: `dims[0]` (ne[0]) is the column count, the row length. */
  readonly dims: readonly number[];
  /**
   * The counter llama.cpp's rule reads for `attn_v`-like tensors and for a dense model's
   * `ffn_down`: the tensor's position among those tensors in the quantizer's order. Default: the
   * block number `N` of a name `blk.N.…` (what current llama.cpp gives when every block has
   * one such tensor). Not read for other tensors, nor for a MoE model's `ffn_down`.
   */
  readonly layer?: number;
}

type Category =
  | "token_embd"
  | "attn_q"
  | "attn_v"
  | "attn_k"
  | "attn_qkv"
  | "attn_kv_b"
  | "attn_output"
  | "ffn_up"
  | "ffn_gate"
  | "ffn_down"
  | "output"
  | "other";

/** `tensor_get_category`: the first matching rule wins. */
function category(name: string): Category {
  if (name === "output.weight") return "output";
  if (name === "token_embd.weight" || name === "per_layer_token_embd.weight") return "token_embd";
  if (name.includes("attn_qkv.weight")) return "attn_qkv";
  if (name.includes("attn_kv_b.weight")) return "attn_kv_b";
  if (name.includes("attn_v.weight")) return "attn_v";
  if (name.includes("attn_k.weight")) return "attn_k";
  if (name.includes("attn_q.weight")) return "attn_q";
  if (name.includes("attn_output.weight")) return "attn_output";
  if (name.includes("ffn_up")) return "ffn_up";
  if (name.includes("ffn_gate")) return "ffn_gate";
  if (name.includes("ffn_down")) return "ffn_down";
  return "other";
}

/** `category_is_attn_v`. */
function isAttnV(c: Category): boolean {
  return c === "attn_v" || c === "attn_qkv" || c === "attn_kv_b";
}

/** Substrings that keep a tensor unquantized (`tensor_allows_quantization`). */
const NEVER_QUANTIZED = [
  "_norm.weight",
  "ffn_gate_inp.weight",
  "ffn_gate_tid2eid.weight",
  "altup",
  "laurel",
  "per_layer_model_proj",
  "ssm_conv1d",
  "shortconv.conv.weight",
  "indexer.k_proj.weight",
  "indexer.q_proj.weight",
  "time_mix_first.weight",
  "time_mix_w0.weight",
  "time_mix_w1.weight",
  "time_mix_w2.weight",
  "time_mix_v0.weight",
  "time_mix_v1.weight",
  "time_mix_v2.weight",
  "time_mix_a0.weight",
  "time_mix_a1.weight",
  "time_mix_a2.weight",
  "time_mix_g1.weight",
  "time_mix_g2.weight",
  "time_mix_decay_w1.weight",
  "time_mix_decay_w2.weight",
  "time_mix_lerp_fused.weight",
  "attn_rel_b.weight",
  ".position_embd",
  "sam.pos_embd",
  "sam.neck.",
  "sam.net_",
  ".rel_pos",
  ".patch_embd",
  ".patch_merger",
  "a.rvq.codebook",
  "mm.a.code_embd",
];

/** The extra exclusions for `glm5-next`. */
const NEVER_QUANTIZED_GLM5_NEXT = [
  "hc_",
  "indexer.attn_q_b",
  "indexer.attn_k",
  "indexer.proj",
  "indexer_compressor_gate",
  "indexer_compressor_ape",
  "ssm_f_a.weight",
  "ssm_f_b.weight",
  "ssm_g_a.weight",
  "ssm_g_b.weight",
  "ssm_beta.weight",
  "attn_kv_a_mqa.weight",
  "attn_k_b.weight",
  "attn_v_b.weight",
];

/** `ggml_n_dims`: trailing dimensions of 1 do not count. */
function nDims(dims: readonly number[]): number {
  for (let i = dims.length - 1; i >= 1; i--) if (dims[i] > 1) return i + 1;
  return 1;
}

/** `tensor_allows_quantization` with llama.cpp's default quantize parameters. */
function allowsQuantization(arch: string, name: string, dims: readonly number[]): boolean {
  if (nDims(dims) < 2) return false;
  // `name.rfind("weight") == name.size() - 6`: also true for 5-character names, where both
  // sides are std::string::npos.
  if (!(name.endsWith("weight") || name.length === 5)) return false;
  if (NEVER_QUANTIZED.some((s) => name.includes(s))) return false;
  if (name === "position_embd.weight" || name === "token_types.weight") return false;
  if (arch === "glm5-next" && NEVER_QUANTIZED_GLM5_NEXT.some((s) => name.includes(s))) {
    return false;
  }
  return true;
}

function useMoreBits(i: number, n: number): boolean {
  const n8 = Math.trunc(n / 8);
  return i < n8 || i >= Math.trunc((7 * n) / 8) || (i - n8) % 3 === 2;
}

const DEFAULT_TYPE: Readonly<Record<KQuantScheme, string>> = {
  q4_k_m: "Q4_K",
  q5_k_m: "Q5_K",
  q6_k: "Q6_K",
};

/** `tensor_type_fallback`: a type whose block fits `columns`. */
function fallback(type: string, columns: number): string {
  const block = type.endsWith("_K") ? 256 : 32;
  if (columns % block === 0) return type;
  const to = type === "Q4_K" ? "Q5_0" : type === "Q5_K" ? "Q5_1" : type === "Q6_K" ? "Q8_0" : type;
  return columns % 32 === 0 ? to : "F16";
}

function checkCount(fn: string, what: string, v: unknown, min: number): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) {
    throw new RangeError(`${fn}: ${what} must be an integer >= ${min}, got ${String(v)}`);
  }
  return v;
}

function blockNumber(name: string): number | undefined {
  const m = /^blk\.(\d+)\./.exec(name);
  return m === null ? undefined : Number(m[1]);
}

/**
 * The ggml type llama.cpp's quantizer (`llama_tensor_get_type`, no importance matrix, default
 * parameters) gives one tensor of a model quantized with `scheme`, or `undefined` when it keeps
 * the tensor's source type (1-D tensors, norms, MoE routers, ...). See the module
 * documentation for the rules.
 *
 * @example
 * ```ts
 * import { kquantTensorType } from "./kquant_rules.ts";
 * import assert from "node:assert/strict";
 *
 * // Qwen2.5-0.5B: 24 blocks of 896 columns, a multiple of 32 but not of 256.
 * const model = { arch: "qwen2", nLayer: 24, nExpert: 0, tiedEmbeddings: true };
 * const type = (name: string, dims: number[]) =>
 *   kquantTensorType("q4_k_m", { name, dims }, model)?.name;
 * assert.equal(type("blk.7.attn_q.weight", [896, 896]), "Q5_0"); // Q4_K falls back
 * assert.equal(type("blk.0.attn_v.weight", [896, 128]), "Q8_0"); // Q6_K falls back
 * assert.equal(type("blk.7.ffn_down.weight", [4864, 896]), "Q4_K"); // 4864 = 19 * 256
 * assert.equal(type("token_embd.weight", [896, 151936]), "Q8_0"); // tied: the output rule
 * ```
 *
 * @param scheme The llama.cpp file type.
 * @param tensor The tensor's name, dimensions and, where the block number is not llama.cpp's
 * counter, {@link KQuantTensorFacts.layer}.
 * @param model The model's architecture facts.
 * @returns ggml's entry for the type, or `undefined` for "not quantized: keep the source type".
 * @throws {RangeError} If `scheme` is not one of the three, `dims` is empty or holds a
 * non-integer or a value < 1, a count in `model` is not an integer, or `tensor` needs a
 * layer index and has none (no `layer` and no `blk.N.` prefix; in a MoE model, an `ffn_down`
 * whose `blk.N.` is missing or not below `nLayer`, which llama.cpp refuses too).
 */
export function kquantTensorType(
  scheme: KQuantScheme,
  tensor: KQuantTensorFacts,
  model: KQuantModelFacts,
): GgmlTypeInfo | undefined {
  const fn = "kquantTensorType";
  if (typeof scheme !== "string" || !Object.hasOwn(DEFAULT_TYPE, scheme)) {
    throw new RangeError(`${fn}: scheme must be q4_k_m, q5_k_m or q6_k, got ${String(scheme)}`);
  }
  const defaultType = DEFAULT_TYPE[scheme];
  const { name, dims } = tensor;
  if (!Array.isArray(dims) || dims.length === 0) {
    throw new RangeError(`${fn}: ${name}: dims must be a non-empty array`);
  }
  dims.forEach((d, i) => checkCount(fn, `${name}: dims[${i}]`, d, 1));
  const nLayer = checkCount(fn, "model.nLayer", model.nLayer, 0);
  const nExpertRaw = checkCount(fn, "model.nExpert", model.nExpert, 0);
  const nAttentionV = checkCount(fn, "model.nAttentionV", model.nAttentionV ?? nLayer, 0);
  const { arch } = model;
  if (!allowsQuantization(arch, name, dims)) return undefined;

  const cat = category(name);
  const columns = dims[0];
  const counter = (): number => {
    const i = tensor.layer ?? blockNumber(name);
    if (i === undefined) {
      throw new RangeError(`${fn}: ${name}: no layer given and no blk.N. prefix`);
    }
    return checkCount(fn, `${name}: layer`, i, 0);
  };
  let type = defaultType;
  if (
    arch === "glm5-next" &&
    (name.includes("attn_q_a") || name.includes("attn_q_b") || name.includes("nextn.eh_proj"))
  ) {
    type = "Q8_0";
  } else if (cat === "output" || (model.tiedEmbeddings && cat === "token_embd")) {
    type = arch === "falcon" || columns % 256 !== 0 ? "Q8_0" : "Q6_K";
  } else if (cat === "token_embd") {
    // Untied token embeddings keep the scheme's type in these schemes.
  } else if (isAttnV(cat)) {
    const i = counter();
    if ((scheme === "q4_k_m" || scheme === "q5_k_m") && useMoreBits(i, nAttentionV)) {
      type = "Q6_K";
    }
    if (model.is70B === true && (type === "Q3_K" || type === "Q4_K")) type = "Q5_K";
    if (nExpertRaw === 8) type = "Q8_0";
  } else if (cat === "attn_k") {
    if (nExpertRaw === 8) type = "Q8_0";
  } else if (cat === "ffn_down") {
    let i: number;
    if (Math.max(1, nExpertRaw) > 1) {
      const b = blockNumber(name);
      if (b === undefined || b >= nLayer) {
        throw new RangeError(`${fn}: ${name}: no block number below ${nLayer} in the name`);
      }
      i = b;
    } else {
      i = counter();
    }
    if (scheme === "q4_k_m") {
      if (arch === "falcon") {
        type = i < Math.trunc(nLayer / 16) ? "Q6_K" : useMoreBits(i, nLayer) ? "Q5_K" : "Q4_K";
      } else if (useMoreBits(i, nLayer)) {
        type = "Q6_K";
      }
    } else if (scheme === "q5_k_m" && useMoreBits(i, nLayer)) {
      type = "Q6_K";
    }
  } else if (cat === "attn_output") {
    if (arch !== "falcon" && nExpertRaw === 8 && scheme === "q4_k_m") type = "Q5_K";
  }
  return ggmlTypeByName(fallback(type, columns))!;
}

/**
 * The order in which {@link kquantTensorTypes} numbers `attn_v`-like and `ffn_down` tensors:
 * `"by-layer"` as llama.cpp since PR #9935 (sorted by block number, then by name, tensors
 * without a block number first), `"as-given"` as llama.cpp before it (the order of the input
 * file's tensor infos).
 *
 * @example
 * ```ts
 * import type { KQuantOrder } from "./kquant_rules.ts";
 * const order: KQuantOrder = "by-layer";
 * ```
 */
export type KQuantOrder = "by-layer" | "as-given";

/** `weight_name_comparer`: block number (-1 without one), then the name's bytes. */
function compareWeightNames(a: string, b: string): number {
  const la = blockNumber(a) ?? -1;
  const lb = blockNumber(b) ?? -1;
  if (la !== lb) return la - lb;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The types llama.cpp's quantizer gives every tensor of a model, as {@link kquantTensorType}
 * with llama.cpp's own bookkeeping: tied embeddings and the number of `attn_v`-like tensors
 * are read off the tensor list, and the `attn_v` / `ffn_down` counters are the tensors'
 * positions in `order` (default `"by-layer"`, current llama.cpp).
 *
 * @example
 * ```ts
 * import { kquantTensorTypes } from "./kquant_rules.ts";
 * import assert from "node:assert/strict";
 *
 * const tensors = [];
 * for (let b = 0; b < 24; b++) tensors.push({ name: `blk.${b}.attn_v.weight`, dims: [896, 128] });
 * tensors.push({ name: "token_embd.weight", dims: [896, 151936] }, { name: "output.weight", dims: [896, 151936] });
 * const arch = { arch: "qwen2", nLayer: 24, nExpert: 0 };
 * const now = kquantTensorTypes("q4_k_m", tensors, arch).map((t) => t?.name);
 * assert.equal(now[2], "Q8_0"); // blk.2: use_more_bits(2, 24), Q6_K falling back to Q8_0
 * // llama.cpp before PR #9935, on a file listing blocks as 0, 1, 10, 11, ..., 19, 2, 20, ...:
 * const asText = [...tensors].sort((a, b) => (a.name < b.name ? -1 : 1));
 * const old = kquantTensorTypes("q4_k_m", asText, arch, "as-given").map((t) => t?.name);
 * assert.equal(old[asText.findIndex((t) => t.name === "blk.2.attn_v.weight")], "Q5_0");
 * assert.equal(now[24], "Q5_0"); // untied token_embd: Q4_K falling back to Q5_0
 * ```
 *
 * @param scheme The llama.cpp file type.
 * @param tensors Every tensor of the model (names and ggml-order dims), in file order.
 * @param arch The architecture facts.
 * @param order How the counters are numbered.
 * @returns The type of each tensor, aligned with `tensors`; `undefined` where the source type
 * is kept.
 * @throws {RangeError} As {@link kquantTensorType}, for a bad `order` or repeated names.
 */
export function kquantTensorTypes(
  scheme: KQuantScheme,
  tensors: readonly { readonly name: string; readonly dims: readonly number[] }[],
  arch: KQuantArchFacts,
  order: KQuantOrder = "by-layer",
): (GgmlTypeInfo | undefined)[] {
  if (order !== "by-layer" && order !== "as-given") {
    throw new RangeError(`kquantTensorTypes: order must be by-layer or as-given, got ${order}`);
  }
  const names = new Set<string>();
  for (const t of tensors) {
    if (names.has(t.name)) throw new RangeError(`kquantTensorTypes: ${t.name} appears twice`);
    names.add(t.name);
  }
  const visit = tensors.map((_, i) => i);
  if (order === "by-layer") {
    visit.sort((a, b) => compareWeightNames(tensors[a].name, tensors[b].name));
  }
  const model: KQuantModelFacts = {
    ...arch,
    tiedEmbeddings: !names.has("output.weight"),
    nAttentionV: tensors.filter((t) => isAttnV(category(t.name))).length,
  };
  const out: (GgmlTypeInfo | undefined)[] = new Array(tensors.length);
  let iAttnV = 0;
  let iFfnDown = 0;
  for (const k of visit) {
    const t = tensors[k];
    // llama.cpp's counters count the tensors its rules run on: the quantized ones.
    const quantized = allowsQuantization(arch.arch, t.name, t.dims);
    const cat = category(t.name);
    let layer: number | undefined;
    if (quantized && isAttnV(cat)) layer = iAttnV++;
    if (quantized && cat === "ffn_down") layer = iFfnDown++;
    out[k] = kquantTensorType(scheme, { name: t.name, dims: t.dims, layer }, model);
  }
  return out;
}

/**
 * The part of a parsed GGUF file that {@link kquantArchFactsFromGguf} reads: its metadata. A
 * `GgufFile` from `formats/gguf`'s `parseGguf` is one.
 *
 * @example
 * ```ts
 * import type { KQuantGgufMetadata } from "./kquant_rules.ts";
 * const file: KQuantGgufMetadata = {
 *   metadata: new Map([["general.architecture", { type: "string", value: "qwen2" }]]),
 * };
 * ```
 */
export interface KQuantGgufMetadata {
  /** GGUF metadata: key to `{ type, value }`, as `parseGguf` returns it. */
  readonly metadata: ReadonlyMap<string, { readonly type: string; readonly value: unknown }>;
}

/** An integer value (any GGUF integer type), or the first of an array of them. */
function intValue(file: KQuantGgufMetadata, key: string, arrayFirst = false): number | undefined {
  const v = file.metadata.get(key);
  if (v === undefined) return undefined;
  let x = v.value;
  if (v.type === "array" && arrayFirst) x = (x as ArrayLike<unknown>)[0];
  if (typeof x === "bigint") x = Number(x);
  if (typeof x !== "number" || !Number.isSafeInteger(x) || v.type.startsWith("f")) {
    throw new RangeError(`kquantArchFactsFromGguf: ${key} is not an integer`);
  }
  return x;
}

/**
 * The {@link KQuantArchFacts} of a parsed GGUF file: `general.architecture`,
 * `{arch}.block_count`, `{arch}.expert_count` (0 when absent) and llama.cpp's 70B test (from
 * the block count and `{arch}.attention.head_count` / `head_count_kv`, whose first element
 * llama.cpp reads when they are per-layer arrays).
 *
 * @example
 * ```ts
 * import { kquantArchFactsFromGguf } from "./kquant_rules.ts";
 * import { parseGguf, writeGguf } from "../formats/gguf/mod.ts";
 * import { bytesSource } from "../formats/byte_source.ts";
 * import assert from "node:assert/strict";
 *
 * const file = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [
 *     ["general.architecture", { type: "string", value: "llama" }],
 *     ["llama.block_count", { type: "u32", value: 80 }],
 *     ["llama.attention.head_count", { type: "u32", value: 64 }],
 *     ["llama.attention.head_count_kv", { type: "u32", value: 8 }],
 *   ],
 * })));
 * assert.deepEqual(kquantArchFactsFromGguf(file), { arch: "llama", nLayer: 80, nExpert: 0, is70B: true });
 * ```
 *
 * @param file A GGUF file parsed by `parseGguf` (only its metadata is read).
 * @returns The facts.
 * @throws {RangeError} If `general.architecture` is not a string, `{arch}.block_count` is
 * missing, or one of the counts is not an integer.
 */
export function kquantArchFactsFromGguf(file: KQuantGgufMetadata): KQuantArchFacts {
  const a = file.metadata.get("general.architecture");
  if (a === undefined || a.type !== "string" || typeof a.value !== "string") {
    throw new RangeError("kquantArchFactsFromGguf: general.architecture is not a string");
  }
  const arch = a.value;
  const nLayer = intValue(file, `${arch}.block_count`);
  if (nLayer === undefined) {
    throw new RangeError(`kquantArchFactsFromGguf: ${arch}.block_count is missing`);
  }
  const nExpert = intValue(file, `${arch}.expert_count`) ?? 0;
  const nHead = intValue(file, `${arch}.attention.head_count`, true);
  const nHeadKv = intValue(file, `${arch}.attention.head_count_kv`, true) ?? nHead;
  // The LLM_TYPE_70B cases of llama.cpp's load_arch_hparams (src/models/*.cpp).
  const is70B = (arch === "llama" && nExpert !== 8 && nLayer === 80 && nHead !== nHeadKv) ||
    ((arch === "qwen2" || arch === "deci" || arch === "olmo") && nLayer === 80) ||
    (arch === "jais2" && nLayer === 68);
  return { arch, nLayer, nExpert, is70B };
}
