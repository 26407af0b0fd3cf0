/**
 * A GGUF file as a {@link ModelSource}.
 *
 * @module
 */

import { canonicalArchitecture, GGUF_NAMES, type Role, tensorName } from "../arch/mod.ts";
import { mapFile } from "../ffi/mod.ts";
import { type ByteSource, mappedSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";
import { TILE_TYPE, type TileTypeName, tileTypeName } from "../formats/cflow/tile.ts";
import { dequantizeRow } from "../formats/ggml/mod.ts";
import { ggmlBytes } from "../formats/ggml/types.ts";
import {
  getArray,
  getFloat,
  getInt,
  getString,
  type GgufFile,
  type GgufTensorInfo,
  type GgufValue,
  parseGguf,
  tensorByName,
} from "../formats/gguf/mod.ts";
import type { HyperParams, ModelSource, SourceTensor } from "./model_source.ts";

function sourceTensor(src: ByteSource, t: GgufTensorInfo): SourceTensor {
  const dims = t.dims;
  const cols = dims[0];
  const rows = dims.length >= 2 ? dims[1] : 1;
  const experts = dims.length >= 3 ? dims[2] : 0;
  if (dims.length > 3 || (dims.length === 3 && dims[2] < 1)) {
    throw new FormatError(
      src.name,
      `${t.name}.dims`,
      t.infoOffset,
      `unsupported shape [${dims.join(", ")}]`,
    );
  }
  const rowBytes = ggmlBytes(t.type, cols)!;
  const rowOffset = (start: number, expert = 0) => t.offset + (expert * rows + start) * rowBytes;
  const check = (start: number, count: number, expert = 0) => {
    if (
      start < 0 || count < 0 || start + count > rows || expert < 0 || expert >= Math.max(1, experts)
    ) {
      throw new RangeError(`${t.name}: rows ${start}+${count} of expert ${expert} out of range`);
    }
  };
  const raw = (start: number, count: number, expert = 0) => {
    check(start, count, expert);
    return src.read(rowOffset(start, expert), count * rowBytes, t.name);
  };
  return {
    name: t.name,
    rows,
    cols,
    experts,
    typeName: t.type.name,
    // Every tile type keeps ggml's row bytes (docs/FORMAT.md), so a tensor
    // of one of them is copied, not requantized.
    rawRows: tileTypeName(TILE_TYPE[t.type.name as TileTypeName] ?? 0) !== undefined
      ? raw
      : undefined,
    f32Rows: (start, count, expert = 0) => {
      const bytes = raw(start, count, expert);
      return dequantizeRow(t.type, bytes, count * cols);
    },
  };
}

/** A tensor's ggml row count (ne[1]), or undefined when the file lacks it. */
function rowsOf(gguf: GgufFile, name: string): number | undefined {
  const t = tensorByName(gguf, name);
  return t === undefined ? undefined : t.dims[1] ?? 1;
}

/** Where a metadata key sits, for errors. */
function keyOffset(gguf: GgufFile, k: string): number {
  return gguf.metadataOffsets.get(k) ?? 0;
}

/**
 * Each routed expert's FFN width: `expert_feed_forward_length` (Qwen-MoE),
 * which must agree with the rows of layer 0's 3-D gate tensor
 * (ne = [hidden, width, experts]); else those rows; else, for a file without
 * a dense FFN, `feed_forward_length` (how Mixtral and OLMoE give it).
 */
function expertWidth(src: ByteSource, gguf: GgufFile, arch: string, denseFfn: boolean): number {
  const fromShape = rowsOf(gguf, "blk.0.ffn_gate_exps.weight");
  const k = `${arch}.expert_feed_forward_length`;
  if (gguf.metadata.has(k)) {
    const fromKey = getInt(gguf, k);
    if (fromShape !== undefined && fromShape !== fromKey) {
      throw new FormatError(
        src.name,
        `kv["${k}"]`,
        keyOffset(gguf, k),
        `${fromKey} disagrees with blk.0.ffn_gate_exps.weight (${fromShape} rows)`,
      );
    }
    return fromKey;
  }
  // Without the key, feed_forward_length is the expert width for Mixtral and
  // OLMoE but the unused dense width for Qwen-MoE: the tensor decides.
  return fromShape ?? (denseFfn ? 0 : getInt(gguf, `${arch}.feed_forward_length`, 0));
}

/**
 * Routing metadata of a mixture-of-experts GGUF, in the names the Hugging
 * Face path writes: whether the top-k weights are renormalized
 * (`moe_norm_topk_prob`) and the shared expert's width (`shared_expert_ffn`).
 *
 * Renormalization: the file's `{arch}.expert_weights_norm` when it has one,
 * else what llama.cpp hard-codes per architecture (its build_moe_ffn
 * `norm_w`): Mixtral ("llama" with experts) and Qwen3-MoE renormalize,
 * Qwen2-MoE and OLMoE do not. llama.cpp's converter writes no such key for
 * these four.
 */
function moeExtra(
  src: ByteSource,
  gguf: GgufFile,
  arch: string,
  architecture: string,
): Record<string, unknown> {
  const k = (s: string) => `${arch}.${s}`;
  const norm = gguf.metadata.get(k("expert_weights_norm"));
  if (norm !== undefined && norm.type !== "bool") {
    throw new FormatError(
      src.name,
      `kv["${k("expert_weights_norm")}"]`,
      keyOffset(gguf, k("expert_weights_norm")),
      `is ${norm.type}, want bool`,
    );
  }
  // Routing cflow does not implement: refuse rather than compute something else.
  const scale = getFloat(gguf, k("expert_weights_scale"), 1);
  if (scale !== 1 && scale !== 0) {
    throw new FormatError(
      src.name,
      `kv["${k("expert_weights_scale")}"]`,
      keyOffset(gguf, k("expert_weights_scale")),
      `${scale}: scaled expert weights are not supported`,
    );
  }
  const gating = getInt(gguf, k("expert_gating_func"), 1);
  if (gating !== 1) {
    throw new FormatError(
      src.name,
      `kv["${k("expert_gating_func")}"]`,
      keyOffset(gguf, k("expert_gating_func")),
      `${gating}: only softmax gating (1) is supported`,
    );
  }
  const out: Record<string, unknown> = {
    moe_norm_topk_prob: norm !== undefined
      ? norm.value as boolean
      : architecture === "mixtral" || architecture === "qwen3moe",
  };
  // Qwen2-MoE's shared expert: its width from the tensor, checked against
  // expert_shared_feed_forward_length when the file has it.
  const shared = rowsOf(gguf, "blk.0.ffn_gate_shexp.weight");
  const sharedKey = k("expert_shared_feed_forward_length");
  const fromKey = gguf.metadata.has(sharedKey) ? getInt(gguf, sharedKey) : undefined;
  if (shared !== undefined && fromKey !== undefined && fromKey !== shared) {
    throw new FormatError(
      src.name,
      `kv["${sharedKey}"]`,
      keyOffset(gguf, sharedKey),
      `${fromKey} disagrees with blk.0.ffn_gate_shexp.weight (${shared} rows)`,
    );
  }
  if (shared !== undefined) out.shared_expert_ffn = shared;
  return out;
}

function plain(v: GgufValue): unknown {
  if (v.type === "array") {
    const a = v.value as unknown;
    if (ArrayBuffer.isView(a)) {
      if (a instanceof BigInt64Array || a instanceof BigUint64Array) {
        return Array.from(a, (x) => x.toString());
      }
      return Array.from(a as unknown as ArrayLike<number>);
    }
    return a;
  }
  if (typeof v.value === "bigint") return v.value.toString();
  return v.value;
}

/**
 * Opens a GGUF file (mapped through the kernel library) as a ModelSource.
 *
 * @example
 * ```ts ignore
 * import { openGgufSource } from "./gguf_source.ts";
 * const source = openGgufSource("smollm2.gguf");
 * console.log(source.hyper.layers);
 * source.close();
 * ```
 */
export function openGgufSource(path: string): ModelSource {
  const file = mapFile(path);
  try {
    const src = mappedSource(file);
    const gguf = parseGguf(src);
    return ggufModelSource(src, gguf, () => file.close());
  } catch (error) {
    file.close();
    throw error;
  }
}

/**
 * Builds a ModelSource from an already parsed GGUF file.
 *
 * @example
 * ```ts ignore
 * import { ggufModelSource } from "./gguf_source.ts";
 * const source = ggufModelSource(src, parseGguf(src), () => {});
 * ```
 */
export function ggufModelSource(src: ByteSource, gguf: GgufFile, close: () => void): ModelSource {
  const archName = getString(gguf, "general.architecture");
  const canonical = canonicalArchitecture(archName);
  if (canonical === undefined) {
    throw new FormatError(
      src.name,
      'kv["general.architecture"]',
      gguf.metadataOffsets.get("general.architecture") ?? 0,
      `unsupported architecture "${archName}"`,
    );
  }
  const key = (k: string) => `${archName}.${k}`;
  const experts = getInt(gguf, key("expert_count"), 0);
  // llama.cpp writes Mixtral as "llama" with experts; cflow calls it "mixtral"
  // (as the Hugging Face model_type does).
  const architecture = canonical === "llama" && experts > 0 ? "mixtral" : canonical;
  const hidden = getInt(gguf, key("embedding_length"));
  const heads = getInt(gguf, key("attention.head_count"));
  const embd = tensorByName(gguf, "token_embd.weight");
  if (embd === undefined) {
    throw new FormatError(src.name, "token_embd.weight", 0, "the embedding tensor is missing");
  }
  const vocab = embd.dims[1] ?? 1;
  const denseFfn = tensorByName(gguf, "blk.0.ffn_gate.weight") !== undefined ||
    tensorByName(gguf, "blk.0.ffn_up.weight") !== undefined;
  const extra: Record<string, unknown> = {
    rope_theta: getFloat(gguf, key("rope.freq_base"), 10000),
    rms_norm_eps: getFloat(gguf, key("attention.layer_norm_rms_epsilon"), 1e-5),
    context_length: getInt(gguf, key("context_length"), 0),
    rope_dimension_count: getInt(gguf, key("rope.dimension_count"), 0),
    // llama.cpp's converter permutes Q/K of llama-family models for its
    // adjacent-pair RoPE; Hugging Face weights use split halves.
    rope_style: ["llama", "mixtral"].includes(architecture) ? "normal" : "neox",
    gguf: Object.fromEntries(
      [...gguf.metadata].filter(([k]) => !k.startsWith("tokenizer.ggml.")).map((
        [k, v],
      ) => [k, plain(v)]),
    ),
    tokenizer: Object.fromEntries(
      [...gguf.metadata].filter(([k]) => k.startsWith("tokenizer.")).map(([k, v]) => [k, plain(v)]),
    ),
  };
  void getArray;
  if (experts > 0) Object.assign(extra, moeExtra(src, gguf, archName, architecture));
  const slidingWindow = getInt(gguf, key("attention.sliding_window"), 0);
  const hyper: HyperParams = {
    architecture,
    hidden,
    layers: getInt(gguf, key("block_count")),
    heads,
    kvHeads: getInt(gguf, key("attention.head_count_kv"), heads),
    headDim: getInt(gguf, key("attention.key_length"), Math.floor(hidden / heads)),
    // Mixtral-style GGUFs have no dense FFN and give the expert width as
    // feed_forward_length; Qwen-MoE-style ones give expert_feed_forward_length.
    ffnHidden: denseFfn ? getInt(gguf, key("feed_forward_length"), 0) : 0,
    experts,
    topK: getInt(gguf, key("expert_used_count"), 0),
    expertFfnHidden: experts > 0 ? expertWidth(src, gguf, archName, denseFfn) : 0,
    vocab,
    slidingWindow,
    // Gemma 3: five sliding layers, then a global one (llama.cpp's n_swa_pattern 6);
    // no window, no pattern.
    slidingPattern: architecture === "gemma3" && slidingWindow > 0 ? 6 : 0,
    tiedEmbeddings: tensorByName(gguf, "output.weight") === undefined,
    finalLogitSoftcap: getFloat(gguf, key("final_logit_softcapping"), 0),
    extra,
  };
  const cache = new Map<string, SourceTensor>();
  return {
    format: "gguf",
    path: src.name,
    hyper,
    dataBytes: gguf.tensors.reduce((n, t) => n + t.bytes, 0),
    tensor(role: Role, layer: number): SourceTensor | undefined {
      const name = tensorName(GGUF_NAMES[role], layer);
      let t = cache.get(name);
      if (t === undefined) {
        const info = tensorByName(gguf, name);
        if (info === undefined) return undefined;
        t = sourceTensor(src, info);
        cache.set(name, t);
      }
      return t;
    },
    close,
  };
}
