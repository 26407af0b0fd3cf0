/**
 * A GGUF file as a {@link ModelSource}.
 *
 * @module
 */

import { canonicalArchitecture, GGUF_NAMES, type Role, tensorName } from "../arch/mod.ts";
import { mapFile } from "../ffi/mod.ts";
import { type ByteSource, mappedSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";
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
    rawRows: t.type.name === "Q4_0" || t.type.name === "Q8_0" ? raw : undefined,
    f32Rows: (start, count, expert = 0) => {
      const bytes = raw(start, count, expert);
      return dequantizeRow(t.type, bytes, count * cols);
    },
  };
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
  const architecture = canonicalArchitecture(archName);
  if (architecture === undefined) {
    throw new FormatError(
      src.name,
      'kv["general.architecture"]',
      gguf.metadataOffsets.get("general.architecture") ?? 0,
      `unsupported architecture "${archName}"`,
    );
  }
  const key = (k: string) => `${archName}.${k}`;
  const hidden = getInt(gguf, key("embedding_length"));
  const heads = getInt(gguf, key("attention.head_count"));
  const embd = tensorByName(gguf, "token_embd.weight");
  if (embd === undefined) {
    throw new FormatError(src.name, "token_embd.weight", 0, "the embedding tensor is missing");
  }
  const vocab = embd.dims[1] ?? 1;
  const experts = getInt(gguf, key("expert_count"), 0);
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
    expertFfnHidden: experts > 0
      ? getInt(gguf, key("expert_feed_forward_length"), getInt(gguf, key("feed_forward_length"), 0))
      : 0,
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
