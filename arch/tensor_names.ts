/**
 * Architecture tables: which tensor of a checkpoint plays which role, per
 * architecture and per source format. Names only; the math lives with the
 * model. `{l}` is the layer index, `{e}` the expert index.
 *
 * @module
 */

/**
 * Roles a tensor can play (the `.cflow` matrix ids, by name).
 *
 * @example
 * ```ts
 * import type { Role } from "./tensor_names.ts";
 * const r: Role = "q";
 * ```
 */
export type Role =
  | "attn_norm"
  | "q"
  | "k"
  | "v"
  | "o"
  | "q_bias"
  | "k_bias"
  | "v_bias"
  | "q_norm"
  | "k_norm"
  | "post_attn_norm"
  | "ffn_norm"
  | "gate"
  | "up"
  | "down"
  | "post_ffn_norm"
  | "router"
  | "expert_gate"
  | "expert_up"
  | "expert_down"
  | "moe_norm"
  | "shared_gate"
  | "shared_up"
  | "shared_down"
  | "shared_expert_gate"
  | "token_embd"
  | "output_norm"
  | "output";

/** Per-layer roles (everything but the vocabulary tensors). */
export const LAYER_ROLES: readonly Role[] = [
  "attn_norm",
  "q",
  "k",
  "v",
  "o",
  "q_bias",
  "k_bias",
  "v_bias",
  "q_norm",
  "k_norm",
  "post_attn_norm",
  "ffn_norm",
  "gate",
  "up",
  "down",
  "post_ffn_norm",
  "router",
  "expert_gate",
  "expert_up",
  "expert_down",
  "moe_norm",
  "shared_gate",
  "shared_up",
  "shared_down",
  "shared_expert_gate",
];

/**
 * GGUF tensor names (llama.cpp's convention, shared by every architecture).
 * Expert tensors are 3-D: ne = [cols, rows, experts].
 *
 * @example
 * ```ts
 * import { GGUF_NAMES } from "./tensor_names.ts";
 * console.log(GGUF_NAMES.q.replace("{l}", "0")); // "blk.0.attn_q.weight"
 * ```
 */
export const GGUF_NAMES: Record<Role, string> = {
  attn_norm: "blk.{l}.attn_norm.weight",
  q: "blk.{l}.attn_q.weight",
  k: "blk.{l}.attn_k.weight",
  v: "blk.{l}.attn_v.weight",
  o: "blk.{l}.attn_output.weight",
  q_bias: "blk.{l}.attn_q.bias",
  k_bias: "blk.{l}.attn_k.bias",
  v_bias: "blk.{l}.attn_v.bias",
  q_norm: "blk.{l}.attn_q_norm.weight",
  k_norm: "blk.{l}.attn_k_norm.weight",
  post_attn_norm: "blk.{l}.post_attention_norm.weight",
  ffn_norm: "blk.{l}.ffn_norm.weight",
  gate: "blk.{l}.ffn_gate.weight",
  up: "blk.{l}.ffn_up.weight",
  down: "blk.{l}.ffn_down.weight",
  post_ffn_norm: "blk.{l}.post_ffw_norm.weight",
  router: "blk.{l}.ffn_gate_inp.weight",
  expert_gate: "blk.{l}.ffn_gate_exps.weight",
  expert_up: "blk.{l}.ffn_up_exps.weight",
  expert_down: "blk.{l}.ffn_down_exps.weight",
  moe_norm: "",
  shared_gate: "blk.{l}.ffn_gate_shexp.weight",
  shared_up: "blk.{l}.ffn_up_shexp.weight",
  shared_down: "blk.{l}.ffn_down_shexp.weight",
  shared_expert_gate: "blk.{l}.ffn_gate_inp_shexp.weight",
  token_embd: "token_embd.weight",
  output_norm: "output_norm.weight",
  output: "output.weight",
};

const HF_COMMON: Record<Role, string> = {
  attn_norm: "model.layers.{l}.input_layernorm.weight",
  q: "model.layers.{l}.self_attn.q_proj.weight",
  k: "model.layers.{l}.self_attn.k_proj.weight",
  v: "model.layers.{l}.self_attn.v_proj.weight",
  o: "model.layers.{l}.self_attn.o_proj.weight",
  q_bias: "model.layers.{l}.self_attn.q_proj.bias",
  k_bias: "model.layers.{l}.self_attn.k_proj.bias",
  v_bias: "model.layers.{l}.self_attn.v_proj.bias",
  q_norm: "model.layers.{l}.self_attn.q_norm.weight",
  k_norm: "model.layers.{l}.self_attn.k_norm.weight",
  post_attn_norm: "",
  ffn_norm: "model.layers.{l}.post_attention_layernorm.weight",
  gate: "model.layers.{l}.mlp.gate_proj.weight",
  up: "model.layers.{l}.mlp.up_proj.weight",
  down: "model.layers.{l}.mlp.down_proj.weight",
  post_ffn_norm: "",
  router: "model.layers.{l}.mlp.gate.weight",
  expert_gate: "model.layers.{l}.mlp.experts.{e}.gate_proj.weight",
  expert_up: "model.layers.{l}.mlp.experts.{e}.up_proj.weight",
  expert_down: "model.layers.{l}.mlp.experts.{e}.down_proj.weight",
  moe_norm: "",
  shared_gate: "",
  shared_up: "",
  shared_down: "",
  shared_expert_gate: "",
  token_embd: "model.embed_tokens.weight",
  output_norm: "model.norm.weight",
  output: "lm_head.weight",
};

/**
 * Hugging Face tensor names per `model_type`. An empty string means the
 * architecture has no such tensor. Expert tensors are one per expert.
 *
 * @example
 * ```ts
 * import { HF_NAMES } from "./tensor_names.ts";
 * console.log(HF_NAMES.mixtral.expert_gate); // "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight"
 * ```
 */
export const HF_NAMES: Record<string, Record<Role, string>> = {
  llama: HF_COMMON,
  mistral: HF_COMMON,
  qwen2: HF_COMMON,
  qwen3: HF_COMMON,
  olmoe: HF_COMMON,
  qwen2_moe: {
    ...HF_COMMON,
    shared_gate: "model.layers.{l}.mlp.shared_expert.gate_proj.weight",
    shared_up: "model.layers.{l}.mlp.shared_expert.up_proj.weight",
    shared_down: "model.layers.{l}.mlp.shared_expert.down_proj.weight",
    shared_expert_gate: "model.layers.{l}.mlp.shared_expert_gate.weight",
  },
  // docs/ARCHITECTURES.md, "Checkpoints (safetensors)".
  pipeline_native: {
    attn_norm: "layers.{l}.attn_norm.weight",
    q: "layers.{l}.attn.q.weight",
    k: "layers.{l}.attn.k.weight",
    v: "layers.{l}.attn.v.weight",
    o: "layers.{l}.attn.o.weight",
    q_bias: "",
    k_bias: "",
    v_bias: "",
    q_norm: "",
    k_norm: "",
    post_attn_norm: "",
    ffn_norm: "layers.{l}.ffn_norm.weight",
    gate: "layers.{l}.ffn.gate.weight",
    up: "layers.{l}.ffn.up.weight",
    down: "layers.{l}.ffn.down.weight",
    post_ffn_norm: "",
    moe_norm: "layers.{l}.moe_norm.weight",
    router: "layers.{l}.moe.router.weight",
    expert_gate: "layers.{l}.moe.experts.{e}.gate.weight",
    expert_up: "layers.{l}.moe.experts.{e}.up.weight",
    expert_down: "layers.{l}.moe.experts.{e}.down.weight",
    shared_gate: "",
    shared_up: "",
    shared_down: "",
    shared_expert_gate: "",
    token_embd: "embed.weight",
    output_norm: "norm.weight",
    output: "lm_head.weight",
  },
  qwen3_moe: HF_COMMON,
  mixtral: {
    ...HF_COMMON,
    router: "model.layers.{l}.block_sparse_moe.gate.weight",
    expert_gate: "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight",
    expert_up: "model.layers.{l}.block_sparse_moe.experts.{e}.w3.weight",
    expert_down: "model.layers.{l}.block_sparse_moe.experts.{e}.w2.weight",
  },
  gemma3_text: {
    ...HF_COMMON,
    post_attn_norm: "model.layers.{l}.post_attention_layernorm.weight",
    ffn_norm: "model.layers.{l}.pre_feedforward_layernorm.weight",
    post_ffn_norm: "model.layers.{l}.post_feedforward_layernorm.weight",
  },
};

/**
 * Canonical cflow architecture names for GGUF `general.architecture` and HF
 * `model_type` values.
 *
 * @example
 * ```ts
 * import { canonicalArchitecture } from "./tensor_names.ts";
 * console.log(canonicalArchitecture("gemma3_text")); // "gemma3"
 * ```
 */
export function canonicalArchitecture(name: string): string | undefined {
  const table: Record<string, string> = {
    llama: "llama",
    mistral: "llama",
    qwen2: "qwen2",
    qwen3: "qwen3",
    gemma3: "gemma3",
    gemma3_text: "gemma3",
    mixtral: "mixtral",
    olmoe: "olmoe",
    qwen2moe: "qwen2moe",
    qwen2_moe: "qwen2moe",
    qwen3moe: "qwen3moe",
    qwen3_moe: "qwen3moe",
    pipeline_native: "pipeline_native",
  };
  return table[name];
}

/**
 * Substitutes a layer (and expert) index into a name pattern.
 *
 * @example
 * ```ts
 * import { tensorName } from "./tensor_names.ts";
 * console.log(tensorName("blk.{l}.attn_q.weight", 3)); // "blk.3.attn_q.weight"
 * ```
 */
export function tensorName(pattern: string, layer: number, expert = 0): string {
  return pattern.replaceAll("{l}", String(layer)).replaceAll("{e}", String(expert));
}
