/**
 * {@link describeModel}: what the server says about the model it serves (Ollama's `/api/tags`,
 * `/api/show`, `/api/ps`), computed once at load from the file's validated header, metadata
 * and section table, never by reading the weights again.
 *
 * @module
 */

import type { TiledFile } from "../formats/cflow/mod.ts";

/**
 * The served model, as the listing routes describe it.
 *
 * @example
 * ```ts
 * import type { ModelDescription } from "./describe_model.ts";
 * function label(d: ModelDescription): string {
 *   return `${d.family} ${d.parameterSize} ${d.quantizationLevel}`;
 * }
 * ```
 */
export interface ModelDescription {
  /** `cflow` or `vflow`: the container the server loaded. */
  format: string;
  /** The architecture (llama, qwen2, gemma3, ...). */
  family: string;
  /** Parameters: every weight matrix and norm vector's element count, experts included. */
  parameterCount: number;
  /** {@link parameterCount} as Ollama writes it ("134.52M", "1.5B"). */
  parameterSize: string;
  /** The weights' quantization, upper case as Ollama writes it ("Q4_0", "F16"). */
  quantizationLevel: string;
  /** Size of the file in bytes. */
  sizeBytes: number;
  /** The file's modification time (ISO 8601), or the load time when it cannot be read. */
  modifiedAt: string;
  /**
   * SHA-256 (hex) of the header geometry, the metadata and the section table. The table holds
   * each section's CRC-32 of its bytes, so the digest changes with any change to the file (up to
   * CRC collisions) and costs no read of the weights. Not the SHA-256 of the file's bytes.
   */
  digest: string;
  /** Ollama's `model_info`: architecture keys (`<arch>.context_length`, ...) and `general.*`. */
  modelInfo: Record<string, string | number | boolean>;
  /** The license the source file names, if any. */
  license?: string;
}

/**
 * A count as Ollama's `format.HumanNumber` writes it: "135M", "134.52M", "1.5B", "7B".
 *
 * @example
 * ```ts
 * import { humanNumber } from "./describe_model.ts";
 * console.log(humanNumber(134_515_008), humanNumber(1_543_714_304)); // 134.52M 1.5B
 * ```
 */
export function humanNumber(n: number): string {
  const whole = (x: number) => x === Math.floor(x);
  if (n >= 1e9) return whole(n / 1e9) ? `${n / 1e9}B` : `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return whole(n / 1e6) ? `${n / 1e6}M` : `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

function scalar(v: unknown): v is string | number | boolean {
  return typeof v === "string" || typeof v === "boolean" ||
    (typeof v === "number" && Number.isFinite(v));
}

/**
 * Describes the model of `file` (loaded from `path`): cheap, once, at load.
 *
 * @example
 * ```ts ignore
 * import { describeModel } from "./describe_model.ts";
 * const d = await describeModel(opened.file, "smollm2.cflow");
 * console.log(d.parameterSize, d.quantizationLevel);
 * ```
 */
export async function describeModel(file: TiledFile, path: string): Promise<ModelDescription> {
  const meta = file.metadata;
  const g = file.geometry;
  const family = typeof meta.architecture === "string" ? meta.architecture : "unknown";
  let params = 0;
  for (const block of file.blocks) {
    for (const e of block.entries) params += e.rows * e.cols;
  }
  for (const bank of file.experts.values()) {
    const one = [bank.gate, bank.up, bank.down].reduce((n, e) => n + e.rows * e.cols, 0);
    params += one * bank.spans.length;
  }
  const gguf = typeof meta.gguf === "object" && meta.gguf !== null
    ? meta.gguf as Record<string, unknown>
    : {};
  const info: Record<string, string | number | boolean> = {
    "general.architecture": family,
    "general.parameter_count": params,
    [`${family}.block_count`]: g.layers,
    [`${family}.embedding_length`]: g.hidden,
    [`${family}.feed_forward_length`]: g.ffnHidden,
    [`${family}.attention.head_count`]: g.heads,
    [`${family}.attention.head_count_kv`]: g.kvHeads,
    [`${family}.attention.key_length`]: g.headDim,
    [`${family}.vocab_size`]: g.vocab,
  };
  if (g.experts > 0) {
    info[`${family}.expert_count`] = g.experts;
    info[`${family}.expert_used_count`] = g.topK;
  }
  if (typeof meta.context_length === "number") {
    info[`${family}.context_length`] = meta.context_length;
  }
  if (typeof meta.rope_theta === "number") info[`${family}.rope.freq_base`] = meta.rope_theta;
  if (typeof meta.rms_norm_eps === "number") {
    info[`${family}.attention.layer_norm_rms_epsilon`] = meta.rms_norm_eps;
  }
  // The source GGUF's own scalar keys (its names, license, sizes), not its tokenizer or template.
  for (const [k, v] of Object.entries(gguf)) {
    if (k.startsWith("tokenizer.") || !scalar(v) || k === "general.file_type") continue;
    if (typeof v === "string" && v.length > 4096) continue;
    info[k] = v;
  }
  info["general.parameter_count"] = params;
  const described = JSON.stringify({
    format: file.format,
    version: file.version,
    size: file.size,
    geometry: g,
    sections: file.sections,
    metadata: meta,
  }, (_key, v) => typeof v === "bigint" ? v.toString() : v);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(described)),
  );
  let modifiedAt = new Date().toISOString();
  try {
    const mtime = (await Deno.stat(path)).mtime;
    if (mtime !== null) modifiedAt = mtime.toISOString();
  } catch { /* the load time, then */ }
  const license = typeof gguf["general.license"] === "string"
    ? gguf["general.license"] as string
    : undefined;
  return {
    format: file.format,
    family,
    parameterCount: params,
    parameterSize: humanNumber(params),
    quantizationLevel: typeof meta.quant === "string" ? meta.quant.toUpperCase() : "unknown",
    sizeBytes: file.size,
    modifiedAt,
    digest: Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join(""),
    modelInfo: info,
    ...(license === undefined ? {} : { license }),
  };
}
