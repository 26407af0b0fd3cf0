/**
 * Writes a llama-architecture GGUF with random weights in a chosen geometry, for benchmarks
 * that need a model larger than the fetched ones (bench/vs_llama.ts). Deterministic: the same
 * preset, type and seed give the same bytes.
 *
 * Presets:
 *
 *   llama-3.2-1b   Llama-3.2-1B's layer geometry: hidden 2048, 16 layers, 32 query heads and
 *                  8 KV heads of 64, FFN 8192, tied embeddings, RoPE theta 500000, RMSNorm eps
 *                  1e-5. The vocabulary is NOT Llama 3's 128,256 tokens: the file carries
 *                  SmolLM2's tokenizer (copied from the fetched SmolLM2 GGUF, 49,152 tokens),
 *                  because llama.cpp refuses a model without tokenizer metadata and no Llama 3
 *                  tokenizer is available offline here. The embedding matrix is therefore
 *                  49152 x 2048 (Llama 3.2 1B: 128256 x 2048), which makes the tied output
 *                  projection 2.6x smaller than the real model's; the 16 layers are exact.
 *                  Llama 3's RoPE frequency scaling is left out (no `rope_freqs.weight`
 *                  tensor, which llama.cpp would read, and no scaling metadata, which cflow
 *                  would): it changes the frequencies of the low dimensions, which with random
 *                  weights changes nothing anyone reads and costs the same to compute.
 *
 * Weights: every matrix (the embeddings included) is drawn from a normal distribution with
 * standard deviation 0.02 (Hugging Face's `initializer_range` for Llama) and quantized with
 * ggml's reference rounding (`quantize_row_q4_0_ref` / `quantize_row_q8_0_ref`); the norm
 * weights are 1.0 (F32). The normals come from a 65,536-entry table of the standard normal's
 * quantiles indexed by a seeded PRNG (fast, tails cut at 4.2 sigma). With these scales the
 * residual stream grows to a few units over 16 layers and the logits stay near unit scale, so
 * both engines run without overflow.
 *
 * The file is streamed to a temporary file next to the output (the tensors never sit in memory
 * together), parsed back with the project's GGUF reader, then renamed into place. An existing
 * output with the expected `general.name` and layout is kept unless `--force`.
 *
 * Usage:
 *
 *   ./dev run --allow-read --allow-write=cache/models --allow-ffi --allow-env \
 *     scripts/gen-random-gguf.ts [--preset llama-3.2-1b] [--type q4_0|q8_0] [--seed 1]
 *     [--tokenizer cache/models/smollm2-135m-instruct.Q4_1.gguf] [--out PATH] [--force]
 *
 * Prints the output's path on stdout.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { mapFile } from "../ffi/mod.ts";
import { mappedSource } from "../formats/byte_source.ts";
import { type GgufValue, type GgufWriteTensor, parseGguf, writeGguf } from "../formats/gguf/mod.ts";
import { ggmlTypeByName, type GgmlTypeInfo, quantizeRow } from "../formats/ggml/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** Layer geometry of a random model. The vocabulary comes from the tokenizer. */
export interface RandomGeometry {
  /** Model width. */
  hidden: number;
  /** Decoder layers. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads. */
  kvHeads: number;
  /** Dimension of one head. */
  headDim: number;
  /** FFN width. */
  ffn: number;
  /** RoPE base. */
  ropeTheta: number;
  /** RMSNorm epsilon. */
  eps: number;
  /** `llama.context_length`. */
  contextLength: number;
}

/** The presets {@link writeRandomGguf} is run with from the command line. */
export const PRESETS: Record<string, RandomGeometry> = {
  "llama-3.2-1b": {
    hidden: 2048,
    layers: 16,
    heads: 32,
    kvHeads: 8,
    headDim: 64,
    ffn: 8192,
    ropeTheta: 500000,
    eps: 1e-5,
    contextLength: 8192,
  },
};

/** Standard deviation of every random matrix. */
export const WEIGHT_STD = 0.02;

/** LLAMA_FTYPE_MOSTLY_* of llama.h for the matrix types written. */
const FILE_TYPE: Record<string, number> = { Q4_0: 2, Q8_0: 7 };

/** Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9). */
function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376,
    220.9460984245205,
    -275.9285104469687,
    138.357751867269,
    -30.66479806614716,
    2.506628274631,
  ];
  const b = [
    -54.47609879822406,
    161.5858368580409,
    -155.6989798598866,
    66.80131188771972,
    -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293,
    -0.3223964580411365,
    -2.400758277161838,
    -2.549732539343734,
    4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo || p > 1 - lo) {
    const q = Math.sqrt(-2 * Math.log(p < lo ? p : 1 - p));
    const x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    return p < lo ? x : -x;
  }
  const q = p - 0.5;
  const r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/** 65,536 quantiles of N(0, std^2) at (i + 0.5) / 65536. */
function quantileTable(std: number): Float32Array {
  const t = new Float32Array(65536);
  for (let i = 0; i < t.length; i++) t[i] = std * normalQuantile((i + 0.5) / 65536);
  return t;
}

/** Seeded normal samples: two per 32-bit draw of mulberry32, each half indexing the table. */
class NormalStream {
  #s: number;
  #table: Float32Array;
  constructor(seed: number, std: number) {
    this.#s = seed >>> 0;
    this.#table = quantileTable(std);
  }
  fill(out: Float32Array): void {
    const t = this.#table;
    let s = this.#s;
    for (let i = 0; i < out.length; i += 2) {
      s = (s + 0x6d2b79f5) >>> 0;
      let z = Math.imul(s ^ (s >>> 15), s | 1);
      z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
      z = (z ^ (z >>> 14)) >>> 0;
      out[i] = t[z >>> 16];
      out[i + 1] = t[z & 0xffff];
    }
    this.#s = s;
  }
}

interface PlannedTensor {
  name: string;
  /** ggml order: [cols, rows] or [n]. */
  dims: number[];
  type: GgmlTypeInfo;
  bytes: number;
  /** Values: "random" matrices or "ones" norms. */
  fill: "random" | "ones";
}

/** The llama tensors of `g` with vocabulary `vocab`, in llama.cpp's order. */
export function planTensors(
  g: RandomGeometry,
  vocab: number,
  matrixType: GgmlTypeInfo,
): PlannedTensor[] {
  const f32 = ggmlTypeByName("F32")!;
  const out: PlannedTensor[] = [];
  const mat = (name: string, rows: number, cols: number) => {
    if (cols % matrixType.blockSize !== 0) {
      throw new RangeError(`gen-random-gguf: ${name}: ${cols} columns is not a multiple of 32`);
    }
    out.push({
      name,
      dims: [cols, rows],
      type: matrixType,
      bytes: (rows * cols / matrixType.blockSize) * matrixType.typeSize,
      fill: "random",
    });
  };
  const vec = (name: string, n: number) =>
    out.push({ name, dims: [n], type: f32, bytes: 4 * n, fill: "ones" });
  mat("token_embd.weight", vocab, g.hidden);
  for (let l = 0; l < g.layers; l++) {
    vec(`blk.${l}.attn_norm.weight`, g.hidden);
    mat(`blk.${l}.attn_q.weight`, g.heads * g.headDim, g.hidden);
    mat(`blk.${l}.attn_k.weight`, g.kvHeads * g.headDim, g.hidden);
    mat(`blk.${l}.attn_v.weight`, g.kvHeads * g.headDim, g.hidden);
    mat(`blk.${l}.attn_output.weight`, g.hidden, g.heads * g.headDim);
    vec(`blk.${l}.ffn_norm.weight`, g.hidden);
    mat(`blk.${l}.ffn_gate.weight`, g.ffn, g.hidden);
    mat(`blk.${l}.ffn_up.weight`, g.ffn, g.hidden);
    mat(`blk.${l}.ffn_down.weight`, g.hidden, g.ffn);
  }
  vec("output_norm.weight", g.hidden);
  return out;
}

/** Options of {@link writeRandomGguf}. */
export interface RandomGgufOptions {
  /** Layer geometry. */
  geometry: RandomGeometry;
  /** `tokenizer.*` metadata to carry; its `tokenizer.ggml.tokens` sets the vocabulary. */
  tokenizer: [string, GgufValue][];
  /** Matrix type: Q4_0 or Q8_0. */
  type: "Q4_0" | "Q8_0";
  /** PRNG seed. */
  seed: number;
  /** `general.name`. */
  name: string;
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await file.write(bytes.subarray(off));
}

/**
 * Streams a random GGUF to `path` (overwriting it) and returns its size in bytes. The header
 * and tensor infos come from {@link writeGguf} (given empty data and the offsets of the final
 * layout); the tensor data is generated and written one chunk of rows at a time.
 */
export async function writeRandomGguf(path: string, o: RandomGgufOptions): Promise<number> {
  const tokens = o.tokenizer.find(([k]) => k === "tokenizer.ggml.tokens")?.[1];
  if (tokens?.type !== "array" || tokens.elementType !== "string") {
    throw new RangeError("gen-random-gguf: the tokenizer metadata has no tokenizer.ggml.tokens");
  }
  const vocab = tokens.value.length;
  const g = o.geometry;
  const matrixType = ggmlTypeByName(o.type)!;
  const plan = planTensors(g, vocab, matrixType);
  const u32 = (v: number): GgufValue => ({ type: "u32", value: v });
  const f32 = (v: number): GgufValue => ({ type: "f32", value: v });
  const metadata: [string, GgufValue][] = [
    ["general.architecture", { type: "string", value: "llama" }],
    ["general.type", { type: "string", value: "model" }],
    ["general.name", { type: "string", value: o.name }],
    ["llama.block_count", u32(g.layers)],
    ["llama.context_length", u32(g.contextLength)],
    ["llama.embedding_length", u32(g.hidden)],
    ["llama.feed_forward_length", u32(g.ffn)],
    ["llama.attention.head_count", u32(g.heads)],
    ["llama.attention.head_count_kv", u32(g.kvHeads)],
    ["llama.attention.key_length", u32(g.headDim)],
    ["llama.attention.value_length", u32(g.headDim)],
    ["llama.rope.freq_base", f32(g.ropeTheta)],
    ["llama.attention.layer_norm_rms_epsilon", f32(g.eps)],
    ["general.file_type", u32(FILE_TYPE[o.type])],
    ["llama.vocab_size", u32(vocab)],
    ["llama.rope.dimension_count", u32(g.headDim)],
    ...o.tokenizer,
    ["general.quantization_version", u32(2)],
  ];
  const alignment = 32;
  const pad = (n: number) => (alignment - (n % alignment)) % alignment;
  const infos: GgufWriteTensor[] = [];
  let offset = 0;
  for (const t of plan) {
    infos.push({ name: t.name, dims: t.dims, type: t.type, data: new Uint8Array(0), offset });
    offset += t.bytes + pad(t.bytes);
  }
  // With empty data the writer's output ends at the aligned start of the data section.
  const header = writeGguf({ metadata, tensors: infos });
  const normals = new NormalStream(o.seed, WEIGHT_STD);
  const file = await Deno.open(path, { write: true, create: true, truncate: true, mode: 0o644 });
  try {
    await writeAll(file, header);
    let written = header.length;
    for (const t of plan) {
      if (t.fill === "ones") {
        await writeAll(file, new Uint8Array(new Float32Array(t.dims[0]).fill(1).buffer));
      } else {
        const [cols, rows] = t.dims;
        const rowsPerChunk = Math.max(1, Math.floor((1 << 22) / cols));
        const values = new Float32Array(rowsPerChunk * cols);
        for (let r = 0; r < rows; r += rowsPerChunk) {
          const n = Math.min(rowsPerChunk, rows - r) * cols;
          const chunk = values.subarray(0, n);
          normals.fill(chunk);
          await writeAll(file, quantizeRow(t.type, chunk));
        }
      }
      await writeAll(file, new Uint8Array(pad(t.bytes)));
      written += t.bytes + pad(t.bytes);
    }
    await file.sync();
    return written;
  } finally {
    file.close();
  }
}

/** The `tokenizer.*` metadata of a GGUF file, in file order. */
export function tokenizerMetadata(path: string): [string, GgufValue][] {
  using file = mapFile(path);
  const gguf = parseGguf(mappedSource(file));
  const out: [string, GgufValue][] = [];
  for (const [k, v] of gguf.metadata) if (k.startsWith("tokenizer.")) out.push([k, v]);
  return out;
}

/** True when `path` parses as a GGUF named `name` (what a previous run with these settings wrote). */
function upToDate(path: string, name: string): boolean {
  try {
    using file = mapFile(path);
    const gguf = parseGguf(mappedSource(file));
    const v = gguf.metadata.get("general.name");
    return v?.type === "string" && v.value === name;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      preset: { type: "string", default: "llama-3.2-1b" },
      type: { type: "string", default: "q4_0" },
      seed: { type: "string", default: "1" },
      tokenizer: {
        type: "string",
        default: `${ROOT}/cache/models/smollm2-135m-instruct.Q4_1.gguf`,
      },
      out: { type: "string" },
      force: { type: "boolean", default: false },
    },
  });
  const geometry = PRESETS[values.preset];
  if (geometry === undefined) {
    throw new RangeError(
      `unknown preset '${values.preset}' (known: ${Object.keys(PRESETS).join(", ")})`,
    );
  }
  const type = values.type.toUpperCase();
  if (type !== "Q4_0" && type !== "Q8_0") throw new RangeError(`--type must be q4_0 or q8_0`);
  const seed = Number(values.seed);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`--seed must be an integer in [0, 2^32)`);
  }
  const out = values.out ??
    `${ROOT}/cache/models/random-${values.preset}-geometry-s${seed}.${type}.gguf`;
  const name = `random weights, ${values.preset} geometry, ${type}, seed ${seed}, ` +
    `std ${WEIGHT_STD}, tokenizer from ${values.tokenizer.split("/").pop()}`;
  if (!values.force && upToDate(out, name)) {
    console.log(out);
    return;
  }
  try {
    await Deno.stat(values.tokenizer);
  } catch {
    throw new Error(
      `${values.tokenizer} is absent (the tokenizer source; run: bash scripts/fetch-models.sh smollm2)`,
    );
  }
  const tokenizer = tokenizerMetadata(values.tokenizer);
  const dir = out.slice(0, out.lastIndexOf("/")) || ".";
  await Deno.mkdir(dir, { recursive: true });
  const tmp = `${out}.tmp-${Deno.pid}`;
  const t0 = performance.now();
  try {
    const size = await writeRandomGguf(tmp, { geometry, tokenizer, type, seed, name });
    {
      using file = mapFile(tmp);
      const gguf = parseGguf(mappedSource(file));
      if (gguf.size !== size) throw new Error(`wrote ${gguf.size} bytes, planned ${size}`);
    }
    await Deno.rename(tmp, out);
    console.error(
      `gen-random-gguf: wrote ${out} (${(size / 1e6).toFixed(1)} MB) in ${
        ((performance.now() - t0) / 1000).toFixed(1)
      } s`,
    );
  } catch (error) {
    await Deno.remove(tmp).catch(() => {});
    throw error;
  }
  console.log(out);
}

if (import.meta.main) {
  try {
    await main();
  } catch (error) {
    console.error(`gen-random-gguf: ${error instanceof Error ? error.message : String(error)}`);
    Deno.exit(1);
  }
}
