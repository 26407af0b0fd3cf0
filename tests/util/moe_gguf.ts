/**
 * Builds an f32 GGUF from one of the Hugging Face mixture-of-experts fixtures
 * (tests/fixtures/hf_logits/{mixtral,olmoe,qwen2moe,qwen3moe}) the way
 * llama.cpp's convert_hf_to_gguf.py lays such a model out:
 *
 * - Mixtral is written as `general.architecture = "llama"` with
 *   `llama.expert_count` / `llama.expert_used_count`; its `feed_forward_length`
 *   is the expert width, and Q/K rows are permuted for ggml's adjacent-pair
 *   ("normal") RoPE, per head: new row 2i = old row i, new row 2i+1 = old row
 *   d/2 + i.
 * - `qwen2moe`, `qwen3moe` and `olmoe` keep the Hugging Face row order (NEOX
 *   RoPE); Qwen-MoE GGUFs give the expert width as
 *   `expert_feed_forward_length` (and Qwen2-MoE the shared expert's as
 *   `expert_shared_feed_forward_length`), OLMoE as `feed_forward_length`.
 * - Experts are stacked into one 3-D tensor per layer and projection,
 *   `blk.{l}.ffn_{gate,up,down}_exps.weight`, ggml ne = [cols, rows, experts];
 *   the router is `blk.{l}.ffn_gate_inp.weight` (ne = [hidden, experts]).
 * - Qwen2-MoE's shared expert is `blk.{l}.ffn_{gate,up,down}_shexp.weight`
 *   and its sigmoid gate `blk.{l}.ffn_gate_inp_shexp.weight`, squeezed to 1-D
 *   (the converter squeezes [1, hidden]).
 *
 * No tokenizer keys: the converter does not need them.
 *
 * @module
 */

import { ggmlTypeByName } from "../../formats/ggml/types.ts";
import type { GgufValue, GgufWriteTensor } from "../../formats/gguf/mod.ts";
import { writeGguf } from "../../formats/gguf/mod.ts";

/** The MoE fixture families. */
export type MoeFamily = "mixtral" | "olmoe" | "qwen2moe" | "qwen3moe";

/** Options for {@link moeGgufFromHf}. */
export interface MoeGgufOptions {
  /** Metadata keys (without the `{arch}.` prefix) to leave out. */
  readonly omit?: readonly string[];
  /** Extra metadata keys (without the `{arch}.` prefix), appended. */
  readonly extra?: readonly [string, GgufValue][];
}

interface StTensor {
  shape: number[];
  data: Float32Array;
}

/** Reads an all-F32 single-file safetensors checkpoint. */
function readSafetensors(path: string): Map<string, StTensor> {
  const bytes = Deno.readFileSync(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const out = new Map<string, StTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const t = v as { dtype: string; shape: number[]; data_offsets: [number, number] };
    if (t.dtype !== "F32") throw new TypeError(`${name}: ${t.dtype}, want F32`);
    const [a, b] = t.data_offsets;
    const copy = bytes.slice(8 + n + a, 8 + n + b);
    out.set(name, { shape: t.shape, data: new Float32Array(copy.buffer) });
  }
  return out;
}

/** llama.cpp's LlamaModel.permute: split-half rows of each head to adjacent pairs. */
function permuteRows(w: Float32Array, rows: number, cols: number, heads: number): Float32Array {
  const d = rows / heads;
  const half = d / 2;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (const [j, src] of [[2 * i, i], [2 * i + 1, half + i]]) {
        out.set(w.subarray((h * d + src) * cols, (h * d + src + 1) * cols), (h * d + j) * cols);
      }
    }
  }
  return out;
}

/**
 * The GGUF bytes llama.cpp's converter would write (in F32) for an HF MoE fixture folder.
 *
 * @example
 * ```ts ignore
 * import { moeGgufFromHf } from "./moe_gguf.ts";
 * Deno.writeFileSync("/tmp/mixtral.gguf", moeGgufFromHf("tests/fixtures/hf_logits/mixtral", "mixtral"));
 * ```
 */
export function moeGgufFromHf(
  dir: string,
  family: MoeFamily,
  options: MoeGgufOptions = {},
): Uint8Array {
  const c = JSON.parse(Deno.readTextFileSync(`${dir}/config.json`));
  const st = readSafetensors(`${dir}/model.safetensors`);
  const arch = family === "mixtral" ? "llama" : family;
  const hidden: number = c.hidden_size;
  const heads: number = c.num_attention_heads;
  const kvHeads: number = c.num_key_value_heads ?? heads;
  const experts: number = c.num_local_experts ?? c.num_experts;
  const theta: number = c.rope_parameters?.rope_theta ?? c.rope_theta ?? 10000;
  const u32 = (value: number): GgufValue => ({ type: "u32", value });
  const f32 = (value: number): GgufValue => ({ type: "f32", value });
  const keys: [string, GgufValue][] = [
    ["context_length", u32(c.max_position_embeddings)],
    ["embedding_length", u32(hidden)],
    ["block_count", u32(c.num_hidden_layers)],
    ["feed_forward_length", u32(c.intermediate_size)],
    ["attention.head_count", u32(heads)],
    ["attention.head_count_kv", u32(kvHeads)],
    ["rope.freq_base", f32(theta)],
    ["attention.layer_norm_rms_epsilon", f32(c.rms_norm_eps)],
    ["expert_count", u32(experts)],
    ["expert_used_count", u32(c.num_experts_per_tok)],
  ];
  if (typeof c.head_dim === "number") {
    keys.push(["attention.key_length", u32(c.head_dim)], [
      "attention.value_length",
      u32(c.head_dim),
    ]);
  }
  if (family === "mixtral") {
    keys.push(["vocab_size", u32(c.vocab_size)], ["rope.dimension_count", u32(hidden / heads)]);
  }
  if (typeof c.moe_intermediate_size === "number") {
    keys.push(["expert_feed_forward_length", u32(c.moe_intermediate_size)]);
  }
  if (typeof c.shared_expert_intermediate_size === "number") {
    keys.push(["expert_shared_feed_forward_length", u32(c.shared_expert_intermediate_size)]);
  }
  const metadata: [string, GgufValue][] = [
    ["general.architecture", { type: "string", value: arch }],
    ["general.file_type", u32(0)],
    ...[...keys.filter(([k]) => !(options.omit ?? []).includes(k)), ...(options.extra ?? [])]
      .map(([k, v]): [string, GgufValue] => [`${arch}.${k}`, v]),
  ];

  const F32 = ggmlTypeByName("F32")!;
  const tensors: GgufWriteTensor[] = [];
  const get = (name: string): StTensor => {
    const t = st.get(name);
    if (t === undefined) throw new Error(`${dir}: no tensor ${name}`);
    return t;
  };
  const bytes = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  // ggml dims are the numpy shape reversed; the converter squeezes size-1 axes.
  const put = (name: string, t: StTensor, data = t.data, squeeze = false) => {
    const shape = squeeze ? t.shape.filter((d) => d !== 1) : t.shape;
    tensors.push({ name, dims: [...shape].reverse(), type: F32, data: bytes(data) });
  };
  const map = (from: string, to: string, squeeze = false) => {
    if (st.has(from)) put(to, get(from), undefined, squeeze);
  };
  const stack = (name: string, pattern: string, l: number) => {
    const parts = Array.from(
      { length: experts },
      (_, e) => get(pattern.replace("{l}", String(l)).replace("{e}", String(e))),
    );
    const [rows, cols] = parts[0].shape;
    const all = new Float32Array(experts * rows * cols);
    parts.forEach((p, e) => all.set(p.data, e * rows * cols));
    tensors.push({ name, dims: [cols, rows, experts], type: F32, data: bytes(all) });
  };

  map("model.embed_tokens.weight", "token_embd.weight");
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const hf = `model.layers.${l}`;
    const blk = `blk.${l}`;
    map(`${hf}.input_layernorm.weight`, `${blk}.attn_norm.weight`);
    for (const [p, g] of [["q", "attn_q"], ["k", "attn_k"], ["v", "attn_v"]]) {
      const w = get(`${hf}.self_attn.${p}_proj.weight`);
      const n = p === "q" ? heads : kvHeads;
      const data = family === "mixtral" && p !== "v"
        ? permuteRows(w.data, w.shape[0], w.shape[1], n)
        : w.data;
      put(`${blk}.${g}.weight`, w, data);
      map(`${hf}.self_attn.${p}_proj.bias`, `${blk}.${g}.bias`);
    }
    map(`${hf}.self_attn.o_proj.weight`, `${blk}.attn_output.weight`);
    map(`${hf}.self_attn.q_norm.weight`, `${blk}.attn_q_norm.weight`);
    map(`${hf}.self_attn.k_norm.weight`, `${blk}.attn_k_norm.weight`);
    map(`${hf}.post_attention_layernorm.weight`, `${blk}.ffn_norm.weight`);
    if (family === "mixtral") {
      const moe = `${hf}.block_sparse_moe`;
      map(`${moe}.gate.weight`, `${blk}.ffn_gate_inp.weight`);
      stack(`${blk}.ffn_gate_exps.weight`, `${moe}.experts.{e}.w1.weight`, l);
      stack(`${blk}.ffn_down_exps.weight`, `${moe}.experts.{e}.w2.weight`, l);
      stack(`${blk}.ffn_up_exps.weight`, `${moe}.experts.{e}.w3.weight`, l);
    } else {
      const mlp = `${hf}.mlp`;
      map(`${mlp}.gate.weight`, `${blk}.ffn_gate_inp.weight`);
      for (const p of ["gate", "up", "down"]) {
        stack(`${blk}.ffn_${p}_exps.weight`, `${mlp}.experts.{e}.${p}_proj.weight`, l);
        map(`${mlp}.shared_expert.${p}_proj.weight`, `${blk}.ffn_${p}_shexp.weight`);
      }
      map(`${mlp}.shared_expert_gate.weight`, `${blk}.ffn_gate_inp_shexp.weight`, true);
    }
  }
  map("model.norm.weight", "output_norm.weight");
  map("lm_head.weight", "output.weight");
  return writeGguf({ metadata, tensors });
}
