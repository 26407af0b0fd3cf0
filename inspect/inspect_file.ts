/**
 * `cflow inspect`: one report for `.cflow`, `.vflow`, GGUF, safetensors and
 * Hugging Face checkpoint directories.
 *
 * @module
 */

import { canonicalArchitecture } from "../arch/mod.ts";
import { mapFile } from "../ffi/mod.ts";
import { type ByteSource, mappedSource } from "../formats/byte_source.ts";
import {
  ARCH_IDS,
  ENTRY_KIND,
  matrixName,
  matrixTileBytes,
  readTiledFile,
  sniffTiled,
  TILE_COLS,
  TILE_ROWS,
  tileBytes,
  type TiledFile,
  tileTypeName,
  verifyChecksums,
  VOCAB_LAYER,
} from "../formats/cflow/mod.ts";
import { parseGguf } from "../formats/gguf/mod.ts";
import { ggufModelSource } from "../convert/gguf_source.ts";
import { inspectHf, inspectSafetensors } from "./inspect_hf.ts";

/**
 * One tensor in a report.
 *
 * @example
 * ```ts
 * import type { TensorReport } from "./inspect_file.ts";
 * const t: TensorReport = { name: "token_embd", type: "Q4_0", shape: [49152, 576], bytes: 1 };
 * ```
 */
export interface TensorReport {
  /** Name as stored in the source. */
  name: string;
  /** Storage type. */
  type: string;
  /** Rows first (out x in), as Hugging Face prints shapes; experts first for banks. */
  shape: number[];
  /** Size in bytes. */
  bytes: number;
}

/**
 * What `cflow inspect --json` prints.
 *
 * @example
 * ```ts
 * import type { InspectReport } from "./inspect_file.ts";
 * function layers(r: InspectReport): number | null {
 *   return r.layers;
 * }
 * ```
 */
export interface InspectReport {
  /** Path of the file or directory. */
  file: string;
  /** What was inspected. */
  format: "cflow" | "vflow" | "gguf" | "safetensors" | "hf";
  /** Format version. */
  version: number | null;
  /** Size of the file (or the shards) in bytes. */
  file_bytes: number;
  /** Architecture name. */
  architecture: string | null;
  /** Model width d. */
  hidden: number | null;
  /** Number of decoder layers. */
  layers: number | null;
  /** Query heads. */
  heads: number | null;
  /** Key/value heads. */
  kv_heads: number | null;
  /** Dimension of one attention head. */
  head_dim: number | null;
  /** Dense FFN width. */
  ffn_hidden: number | null;
  /** Vocabulary size. */
  vocab: number | null;
  /** Number of experts (0 for dense models). */
  experts: number | null;
  /** Experts selected per token. */
  top_k: number | null;
  /** FFN width of each expert. */
  expert_ffn_hidden: number | null;
  /** Dense-FFN pipelining delay in layers. */
  dense_delay: number | null;
  /** Expert pipelining delay in layers. */
  expert_delay: number | null;
  /** How dense FFN and expert outputs combine. */
  combine_style: number | null;
  /** Every tensor. */
  tensors: TensorReport[];
  /** Format-specific fields (tile sizes, checksums, alignment, shards). */
  [extra: string]: unknown;
}

function tiledReport(path: string, src: ByteSource, file: TiledFile): InspectReport {
  const g = file.geometry;
  const archName = typeof file.metadata.architecture === "string"
    ? file.metadata.architecture
    : Object.entries(ARCH_IDS).find(([, id]) => id === g.archId)?.[0] ?? null;
  const tensors: TensorReport[] = [];
  const seen = new Set<string>();
  for (const b of file.blocks) {
    for (const e of b.entries) {
      if (e.kind === ENTRY_KIND.EXPERT_TABLE) continue;
      const prefix = e.layerId === VOCAB_LAYER ? "" : `blk.${e.layerId}.`;
      const name = `${prefix}${matrixName(e.matrixId)}`;
      if (seen.has(name)) continue;
      seen.add(name);
      if (e.kind === ENTRY_KIND.F32) {
        tensors.push({
          name,
          type: "F32",
          shape: e.rows === 1 ? [e.cols] : [e.rows, e.cols],
          bytes: e.length,
        });
      } else if (e.kind === ENTRY_KIND.TILES) {
        tensors.push({
          name,
          type: tileTypeName(e.tileType) ?? "?",
          shape: [e.rows, e.cols],
          bytes: matrixTileBytes(e.tileType, e.rows, e.cols),
        });
      } else {
        const n = file.experts.get(e.layerId)?.spans.length ?? 0;
        tensors.push({
          name,
          type: tileTypeName(e.tileType) ?? "?",
          shape: [n, e.rows, e.cols],
          bytes: n * matrixTileBytes(e.tileType, e.rows, e.cols),
        });
      }
    }
  }
  const bad = verifyChecksums(src, file);
  return {
    file: path,
    format: file.format,
    version: file.version,
    file_bytes: file.size,
    architecture: archName,
    hidden: g.hidden,
    layers: g.layers,
    heads: g.heads,
    kv_heads: g.kvHeads,
    head_dim: g.headDim,
    ffn_hidden: g.ffnHidden,
    vocab: g.vocab,
    experts: g.experts,
    top_k: g.topK,
    expert_ffn_hidden: file.format === "cflow" ? g.expertFfnHidden : null,
    dense_delay: g.denseDelay,
    expert_delay: g.expertDelay,
    combine_style: g.combineStyle,
    feature_flags: g.featureFlags,
    final_logit_softcap: g.finalLogitSoftcap,
    quant_type: tileTypeName(g.quantType) ?? null,
    header_bytes: file.headerBytes,
    tile_rows: TILE_ROWS,
    tile_cols: TILE_COLS,
    tile_bytes: tileBytes(g.quantType, TILE_ROWS, TILE_COLS),
    sections: file.sections.length,
    groups: file.format === "vflow"
      ? file.groups.map((x) => ({
        first_layer: x.firstLayer,
        layers: x.layerCount,
        offset: x.offset,
        length: x.length,
      }))
      : undefined,
    checksums_ok: bad.length === 0,
    bad_sections: bad,
    tensors,
  };
}

/**
 * `general.file_type` names, as llama.cpp prints them (`llama_model_ftype_name`;
 * ids from llama.h's `llama_ftype`, gguf-py's `LlamaFileType`).
 */
const FILE_TYPES: Readonly<Record<number, string>> = {
  0: "all F32",
  1: "F16",
  2: "Q4_0",
  3: "Q4_1",
  7: "Q8_0",
  8: "Q5_0",
  9: "Q5_1",
  10: "Q2_K - Medium",
  11: "Q3_K - Small",
  12: "Q3_K - Medium",
  13: "Q3_K - Large",
  14: "Q4_K - Small",
  15: "Q4_K - Medium",
  16: "Q5_K - Small",
  17: "Q5_K - Medium",
  18: "Q6_K",
  19: "IQ2_XXS",
  20: "IQ2_XS",
  21: "Q2_K - Small",
  22: "IQ3_XS",
  23: "IQ3_XXS",
  24: "IQ1_S",
  25: "IQ4_NL",
  26: "IQ3_S",
  27: "IQ3_M",
  28: "IQ2_S",
  29: "IQ2_M",
  30: "IQ4_XS",
  31: "IQ1_M",
  32: "BF16",
};

/** Tensor count per type, most common first (ties by name). */
function typeCounts(tensors: readonly TensorReport[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const t of tensors) counts.set(t.type, (counts.get(t.type) ?? 0) + 1);
  return Object.fromEntries(
    [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
  );
}

function ggufReport(path: string, src: ByteSource): InspectReport {
  const gguf = parseGguf(src);
  const tensors = gguf.tensors.map((t) => ({
    name: t.name,
    type: t.type.name,
    shape: [...t.dims].reverse(),
    bytes: t.bytes,
  }));
  const arch = gguf.metadata.get("general.architecture");
  const archName = arch?.type === "string" ? arch.value : null;
  let hyper = null;
  if (archName !== null && canonicalArchitecture(archName) !== undefined) {
    hyper = ggufModelSource(src, gguf, () => {}).hyper;
  }
  const extra = hyper?.extra ?? {};
  const num = (k: string) => (typeof extra[k] === "number" ? extra[k] : null);
  const meta = (k: string) => gguf.metadata.get(k);
  const text = (k: string) => {
    const v = meta(k);
    return v?.type === "string" ? v.value : null;
  };
  const int = (k: string) => {
    const v = meta(k)?.value;
    return typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : null;
  };
  const fileType = int("general.file_type");
  const tokenizerModel = text("tokenizer.ggml.model");
  const tokenizerPre = text("tokenizer.ggml.pre");
  return {
    file: path,
    format: "gguf",
    version: gguf.version,
    file_bytes: gguf.size,
    architecture: hyper?.architecture ?? archName,
    hidden: hyper?.hidden ?? null,
    layers: hyper?.layers ?? null,
    heads: hyper?.heads ?? null,
    kv_heads: hyper?.kvHeads ?? null,
    head_dim: hyper?.headDim ?? null,
    ffn_hidden: hyper?.ffnHidden ?? null,
    vocab: hyper?.vocab ?? null,
    experts: hyper?.experts ?? null,
    top_k: hyper?.topK ?? null,
    expert_ffn_hidden: hyper?.expertFfnHidden ?? null,
    dense_delay: num("dense_delay") ?? (hyper ? 0 : null),
    expert_delay: num("expert_delay") ?? (hyper ? 0 : null),
    combine_style: num("combine_style") ?? (hyper ? 1 : null),
    name: text("general.name"),
    file_type: fileType === null ? null : FILE_TYPES[fileType] ?? `file type ${fileType}`,
    context_length: archName === null ? null : int(`${archName}.context_length`),
    chat_template: meta("tokenizer.chat_template") !== undefined,
    tokenizer: tokenizerModel === null
      ? null
      : tokenizerPre === null
      ? tokenizerModel
      : `${tokenizerModel} (pre-tokenizer ${tokenizerPre})`,
    tensor_types: typeCounts(tensors),
    alignment: gguf.alignment,
    metadata_keys: gguf.metadata.size,
    tensors,
  };
}

/**
 * Inspects a file or checkpoint directory.
 *
 * @example
 * ```ts ignore
 * import { inspectPath } from "./inspect_file.ts";
 * const r = inspectPath("smollm2.cflow");
 * console.log(r.tile_bytes); // 18448
 * ```
 */
export function inspectPath(path: string): InspectReport {
  if (Deno.statSync(path).isDirectory) return inspectHf(path);
  using file = mapFile(path);
  const src = mappedSource(file);
  const tiled = sniffTiled(src);
  if (tiled !== undefined) return tiledReport(path, src, readTiledFile(src));
  const magic = src.size >= 4 ? new TextDecoder().decode(src.read(0, 4, "magic")) : "";
  if (magic === "GGUF") return ggufReport(path, src);
  return inspectSafetensors(path, src);
}

/**
 * A short human-readable summary of a report.
 *
 * @example
 * ```ts ignore
 * import { formatInspect, inspectPath } from "./inspect_file.ts";
 * console.log(formatInspect(inspectPath("model.gguf")));
 * ```
 */
export function formatInspect(r: InspectReport): string {
  const lines = [
    `file          ${r.file} (${r.file_bytes} bytes)`,
    `format        ${r.format}${r.version !== null ? ` v${r.version}` : ""}`,
  ];
  if (typeof r.name === "string") lines.push(`name          ${r.name}`);
  lines.push(`architecture  ${r.architecture ?? "unknown"}`);
  if (r.file_type !== undefined && r.file_type !== null) lines.push(`file type     ${r.file_type}`);
  lines.push(
    `geometry      hidden ${r.hidden}, layers ${r.layers}, heads ${r.heads}/${r.kv_heads} (head ${r.head_dim}), ffn ${r.ffn_hidden}, vocab ${r.vocab}`,
  );
  if (typeof r.context_length === "number") {
    lines.push(`context       ${r.context_length} tokens (trained)`);
  }
  if (r.tokenizer !== undefined && r.tokenizer !== null) lines.push(`tokenizer     ${r.tokenizer}`);
  if (typeof r.chat_template === "boolean") {
    lines.push(`chat template ${r.chat_template ? "yes" : "no"}`);
  }
  // Mixture-of-experts and pipeline fields only where the model has them.
  if (r.experts !== null && r.experts > 0) {
    lines.push(`experts       ${r.experts} (top-${r.top_k}, hidden ${r.expert_ffn_hidden})`);
  }
  if ((r.dense_delay ?? 0) !== 0 || (r.expert_delay ?? 0) !== 0) {
    lines.push(
      `delays        dense ${r.dense_delay}, expert ${r.expert_delay}, combine style ${r.combine_style}`,
    );
  }
  if (r.tensor_types !== undefined) {
    const types = Object.entries(r.tensor_types as Record<string, number>);
    lines.push(`tensor types  ${types.map(([t, n]) => `${t} x${n}`).join(", ")}`);
  }
  if (r.tile_bytes !== undefined) {
    lines.push(
      `tiles         ${r.tile_rows}x${r.tile_cols} ${r.quant_type}, ${r.tile_bytes} bytes per full tile; header ${r.header_bytes} bytes`,
    );
    lines.push(
      `checksums     ${
        r.checksums_ok ? "ok" : `MISMATCH in sections ${(r.bad_sections as number[]).join(", ")}`
      }`,
    );
  }
  const total = r.tensors.reduce((n, t) => n + t.bytes, 0);
  lines.push(`tensors       ${r.tensors.length}, ${total} bytes`);
  for (const t of r.tensors.slice(0, 12)) {
    lines.push(`  ${t.name.padEnd(28)} ${t.type.padEnd(5)} [${t.shape.join(", ")}] ${t.bytes}`);
  }
  if (r.tensors.length > 12) lines.push(`  ... ${r.tensors.length - 12} more (--json lists all)`);
  return lines.join("\n");
}
