/**
 * Inspect reports for safetensors files and Hugging Face checkpoints.
 *
 * @module
 */

import type { ByteSource } from "../formats/byte_source.ts";
import { openHfCheckpoint } from "../formats/hf/mod.ts";
import { parseSafetensors } from "../formats/safetensors/mod.ts";
import { hfModelSource } from "../convert/hf_source.ts";
import type { HyperParams } from "../convert/model_source.ts";
import type { InspectReport } from "./inspect_file.ts";

function geometry(h: HyperParams | null) {
  return {
    architecture: h?.architecture ?? null,
    hidden: h?.hidden ?? null,
    layers: h?.layers ?? null,
    heads: h?.heads ?? null,
    kv_heads: h?.kvHeads ?? null,
    head_dim: h?.headDim ?? null,
    ffn_hidden: h?.ffnHidden ?? null,
    vocab: h?.vocab ?? null,
    experts: h?.experts ?? null,
    top_k: h?.topK ?? null,
    expert_ffn_hidden: h?.expertFfnHidden ?? null,
    dense_delay: h ? 0 : null,
    expert_delay: h ? 0 : null,
    combine_style: h ? 1 : null,
  };
}

/**
 * Reports on a Hugging Face checkpoint directory.
 *
 * @example
 * ```ts ignore
 * import { inspectHf } from "./inspect_hf.ts";
 * console.log(inspectHf("tests/fixtures/hf/llama").layers);
 * ```
 */
export function inspectHf(dir: string): InspectReport {
  const ckpt = openHfCheckpoint(dir);
  try {
    let hyper: HyperParams | null = null;
    try {
      hyper = hfModelSource(ckpt).hyper;
    } catch {
      hyper = null;
    }
    const tensors = [...ckpt.tensors.values()].map((t) => ({
      name: t.name,
      type: t.info.dtype,
      shape: [...t.info.shape],
      bytes: t.info.bytes,
    }));
    let bytes = 0;
    for (const s of ckpt.shards) bytes += s.source.size;
    return {
      file: dir,
      format: "hf",
      version: null,
      file_bytes: bytes,
      ...geometry(hyper),
      model_type: ckpt.config.modelType,
      shards: ckpt.shards.map((s) => s.file),
      tensors,
    };
  } finally {
    ckpt.close();
  }
}

/**
 * Reports on one safetensors file (geometry from a `config.json` beside it,
 * when there is one).
 *
 * @example
 * ```ts ignore
 * import { inspectSafetensors } from "./inspect_hf.ts";
 * ```
 */
export function inspectSafetensors(path: string, src: ByteSource): InspectReport {
  const file = parseSafetensors(src);
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
  let hyper: HyperParams | null = null;
  try {
    const ckpt = openHfCheckpoint(dir);
    try {
      hyper = hfModelSource(ckpt).hyper;
    } finally {
      ckpt.close();
    }
  } catch {
    hyper = null;
  }
  return {
    file: path,
    format: "safetensors",
    version: null,
    file_bytes: src.size,
    ...geometry(hyper),
    header_bytes: file.headerBytes,
    tensors: file.tensors.map((t) => ({
      name: t.name,
      type: t.dtype,
      shape: [...t.shape],
      bytes: t.bytes,
    })),
  };
}
