/**
 * The per-family defaults of the `config.json` parser: the `__init__`
 * defaults of each family's transformers config class, keyed by
 * `model_type`. Internal to parse_hf_config.ts.
 *
 * @module
 */

import type { HfFamily } from "./parse_hf_config.ts";

export interface FamilyDefaults {
  readonly family: HfFamily;
  readonly hidden: number;
  readonly layers: number;
  readonly heads: number;
  /** null: num_key_value_heads defaults to num_attention_heads. */
  readonly kvHeads: number | null;
  /** null: head_dim defaults to hidden_size / num_attention_heads. */
  readonly headDim: number | null;
  readonly intermediate: number;
  readonly vocab: number;
  readonly ropeTheta: number;
  readonly rmsNormEps: number;
  readonly maxPos: number;
  readonly tie: boolean;
  /** Sliding rules: qwen (use_sliding_window + max_window_layers), all (every layer), gemma (pattern). */
  readonly sliding: "none" | "qwen" | "all" | "gemma";
  /** Default `sliding_window` (Qwen: only used with use_sliding_window). */
  readonly slidingWindow: number | null;
  /** MoE defaults (experts, top-k, expert size, shared expert size), or null for dense families. */
  readonly moe: readonly [number, number, number, number] | null;
}

// The __init__ defaults of each family's transformers config class, which
// transformers applies to keys absent from config.json (published Gemma 3
// configs, for one, leave out the head counts and vocab_size).
const FAMILY_LIST: readonly FamilyDefaults[] = [
  {
    family: "llama",
    hidden: 4096,
    layers: 32,
    heads: 32,
    kvHeads: null,
    headDim: null,
    intermediate: 11008,
    vocab: 32000,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 2048,
    tie: false,
    slidingWindow: null,
    sliding: "none",
    moe: null,
  },
  {
    family: "qwen2",
    hidden: 4096,
    layers: 32,
    heads: 32,
    kvHeads: 32,
    headDim: null,
    intermediate: 22016,
    vocab: 151936,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 32768,
    tie: false,
    slidingWindow: 4096,
    sliding: "qwen",
    moe: null,
  },
  {
    family: "qwen3",
    hidden: 4096,
    layers: 32,
    heads: 32,
    kvHeads: 32,
    headDim: 128,
    intermediate: 22016,
    vocab: 151936,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 32768,
    tie: false,
    slidingWindow: 4096,
    sliding: "qwen",
    moe: null,
  },
  {
    family: "gemma3",
    hidden: 2304,
    layers: 26,
    heads: 8,
    kvHeads: 4,
    headDim: 256,
    intermediate: 9216,
    vocab: 262208,
    ropeTheta: 1e6,
    rmsNormEps: 1e-6,
    maxPos: 131072,
    tie: true,
    slidingWindow: 4096,
    sliding: "gemma",
    moe: null,
  },
  {
    family: "mixtral",
    hidden: 4096,
    layers: 32,
    heads: 32,
    kvHeads: 8,
    headDim: null,
    intermediate: 14336,
    vocab: 32000,
    ropeTheta: 1e6,
    rmsNormEps: 1e-5,
    maxPos: 131072,
    tie: false,
    slidingWindow: null,
    sliding: "all",
    moe: [8, 2, 14336, 0],
  },
  {
    family: "olmoe",
    hidden: 2048,
    layers: 16,
    heads: 16,
    kvHeads: null,
    headDim: null,
    intermediate: 2048,
    vocab: 50304,
    ropeTheta: 1e4,
    rmsNormEps: 1e-5,
    maxPos: 4096,
    tie: false,
    slidingWindow: null,
    sliding: "none",
    moe: [64, 8, 2048, 0],
  },
  {
    family: "qwen2_moe",
    hidden: 2048,
    layers: 24,
    heads: 16,
    kvHeads: 16,
    headDim: null,
    intermediate: 5632,
    vocab: 151936,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 32768,
    tie: false,
    slidingWindow: 4096,
    sliding: "qwen",
    moe: [60, 4, 1408, 5632],
  },
  {
    family: "qwen3_moe",
    hidden: 2048,
    layers: 24,
    heads: 32,
    kvHeads: 4,
    headDim: 128,
    intermediate: 6144,
    vocab: 151936,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 32768,
    tie: false,
    slidingWindow: 4096,
    sliding: "qwen",
    moe: [128, 8, 768, 0],
  },
  {
    // docs/ARCHITECTURES.md, "Checkpoints (safetensors)"; experts read separately.
    family: "pipeline_native",
    hidden: 32,
    layers: 1,
    heads: 1,
    kvHeads: null,
    headDim: null,
    intermediate: 64,
    vocab: 128,
    ropeTheta: 1e4,
    rmsNormEps: 1e-6,
    maxPos: 2048,
    tie: false,
    slidingWindow: null,
    sliding: "none",
    moe: null,
  },
];

/** model_type → defaults (`gemma3_text` and the `gemma3` wrapper share Gemma 3's). */
export const FAMILIES: ReadonlyMap<string, FamilyDefaults> = new Map([
  ...FAMILY_LIST.map((d) => [d.family, d] as const),
  ["gemma3_text", FAMILY_LIST[3]],
]);
