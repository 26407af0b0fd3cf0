/**
 * A tiny llama-architecture GGUF with random weights of chosen ggml types,
 * for conversion tests. Shapes are deliberately odd.
 *
 * @module
 */

import { ggmlTypeByName } from "../../formats/ggml/types.ts";
import type { GgufValue, GgufWriteTensor } from "../../formats/gguf/mod.ts";
import { writeGguf } from "../../formats/gguf/mod.ts";
import { f32ToF16Bits } from "../../reference/mod.ts";
import { Rng } from "./rng.ts";

/** Shape of the tiny model. */
export const TINY = {
  hidden: 96,
  layers: 2,
  heads: 3,
  kvHeads: 1,
  headDim: 32,
  ffn: 160,
  vocab: 300,
};

function blocks(rng: Rng, type: string, rows: number, cols: number): Uint8Array {
  const t = ggmlTypeByName(type)!;
  if (type === "F32") {
    return new Uint8Array(Float32Array.from({ length: rows * cols }, () => rng.normal()).buffer);
  }
  const n = (rows * cols) / t.blockSize;
  const out = new Uint8Array(n * t.typeSize);
  for (let b = 0; b < n; b++) {
    const o = b * t.typeSize;
    for (let j = 2; j < t.typeSize; j++) out[o + j] = rng.int(0, 255);
    const d = f32ToF16Bits(0.002 + rng.next() * 0.02);
    out[o] = d & 0xff;
    out[o + 1] = d >> 8;
  }
  return out;
}

/**
 * Writes the tiny GGUF: weight matrices in `weightType`, norms in F32.
 *
 * @example
 * ```ts
 * import { tinyGguf } from "./tiny_gguf.ts";
 * console.log(tinyGguf("Q4_0").length > 0); // true
 * ```
 */
export function tinyGguf(weightType: string, seed = 1, tied = false, experts = 0): Uint8Array {
  const rng = new Rng(seed);
  const t = TINY;
  const u32 = (v: number): GgufValue => ({ type: "u32", value: v });
  const metadata: [string, GgufValue][] = [
    ["general.architecture", { type: "string", value: "llama" }],
    ["llama.embedding_length", u32(t.hidden)],
    ["llama.block_count", u32(t.layers)],
    ["llama.attention.head_count", u32(t.heads)],
    ["llama.attention.head_count_kv", u32(t.kvHeads)],
    ["llama.feed_forward_length", u32(t.ffn)],
    ["llama.rope.freq_base", { type: "f32", value: 10000 }],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: 1e-5 }],
    ["llama.context_length", u32(256)],
  ];
  if (experts > 0) {
    metadata.push(["llama.expert_count", u32(experts)], ["llama.expert_used_count", u32(2)]);
  }
  const tensors: GgufWriteTensor[] = [];
  const mat = (name: string, rows: number, cols: number, type = weightType) =>
    tensors.push({
      name,
      dims: [cols, rows],
      type: ggmlTypeByName(type)!,
      data: blocks(rng, type, rows, cols),
    });
  const vec = (name: string, n: number) =>
    tensors.push({ name, dims: [n], type: ggmlTypeByName("F32")!, data: blocks(rng, "F32", 1, n) });
  mat("token_embd.weight", t.vocab, t.hidden);
  for (let l = 0; l < t.layers; l++) {
    vec(`blk.${l}.attn_norm.weight`, t.hidden);
    mat(`blk.${l}.attn_q.weight`, t.heads * t.headDim, t.hidden);
    mat(`blk.${l}.attn_k.weight`, t.kvHeads * t.headDim, t.hidden);
    mat(`blk.${l}.attn_v.weight`, t.kvHeads * t.headDim, t.hidden);
    mat(`blk.${l}.attn_output.weight`, t.hidden, t.heads * t.headDim);
    vec(`blk.${l}.ffn_norm.weight`, t.hidden);
    if (experts === 0) {
      mat(`blk.${l}.ffn_gate.weight`, t.ffn, t.hidden);
      mat(`blk.${l}.ffn_up.weight`, t.ffn, t.hidden);
      mat(`blk.${l}.ffn_down.weight`, t.hidden, t.ffn);
    } else {
      // Mixtral layout: the router, then 3-D expert tensors ne = [cols, rows, experts].
      tensors.push({
        name: `blk.${l}.ffn_gate_inp.weight`,
        dims: [t.hidden, experts],
        type: ggmlTypeByName("F32")!,
        data: blocks(rng, "F32", experts, t.hidden),
      });
      const exps = (name: string, rows: number, cols: number) =>
        tensors.push({
          name,
          dims: [cols, rows, experts],
          type: ggmlTypeByName(weightType)!,
          data: blocks(rng, weightType, rows * experts, cols),
        });
      exps(`blk.${l}.ffn_gate_exps.weight`, t.ffn, t.hidden);
      exps(`blk.${l}.ffn_up_exps.weight`, t.ffn, t.hidden);
      exps(`blk.${l}.ffn_down_exps.weight`, t.hidden, t.ffn);
    }
  }
  vec("output_norm.weight", t.hidden);
  if (!tied) mat("output.weight", t.vocab, t.hidden);
  return writeGguf({ metadata, tensors });
}
