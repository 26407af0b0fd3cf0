/**
 * The forward pass of a dense decoder-only transformer over a validated,
 * mapped `.cflow`/`.vflow` file, in the style of llama2.c's `forward()`:
 * configuration, weights and run state are set up once; `forward` is a list
 * of commented steps over kernels and allocates nothing per token.
 *
 * @module
 */

import {
  attention,
  type Kernels,
  type KvBuffer,
  type MemoryRegion,
  openKernels,
  tilesMatvec,
} from "../ffi/mod.ts";
import {
  ENTRY_KIND,
  type EntryDescriptor,
  findEntry,
  FUSED,
  type LoadedTiledFile,
  loadTiledFile,
  MATRIX,
  readF32Entry,
  TILE_COLS,
  TILE_HEADER_BYTES,
  TILE_ROWS,
  TILE_TYPE,
  tileBytes,
  VOCAB_LAYER,
} from "../formats/cflow/mod.ts";
import { f16BitsToF32 } from "../reference/mod.ts";
import { type ModelConfig, modelConfig, ropeFrequencies } from "./config.ts";

/** A tiled run the kernels read: one matrix or a fused group. */
interface Run {
  offset: number;
  length: number;
  type: number;
  cols: number;
  rows: Uint32Array;
  total: number;
}

/** One layer's weights: tiled runs and f32 vectors. */
interface LayerWeights {
  attnNorm: Float32Array;
  qkv: Run;
  qBias?: Float32Array;
  kBias?: Float32Array;
  vBias?: Float32Array;
  qNorm?: Float32Array;
  kNorm?: Float32Array;
  o: Run;
  postAttnNorm?: Float32Array;
  ffnNorm: Float32Array;
  gateUp: Run;
  down: Run;
  postFfnNorm?: Float32Array;
}

/** Buffers of one decode step, allocated once. */
class RunState {
  x: Float32Array; // residual stream (hidden)
  xb: Float32Array; // normed input to a projection (padded to whole groups)
  xq: Uint8Array; // its Q8_0 quantization
  qkv: Float32Array; // q | k | v
  att: Float32Array; // attention output (heads x head_dim, padded)
  attq: Uint8Array;
  proj: Float32Array; // output of O and down (hidden)
  gateUp: Float32Array; // gate | up
  hb: Float32Array; // act(gate) * up (padded)
  hq: Uint8Array;
  scores: Float32Array; // heads x context
  logits: Float32Array;
  headTmp: Float32Array;
  embedScratch: Uint8Array; // one tile row of the embedding matrix
  constructor(c: ModelConfig, ctx: number) {
    const pad = (n: number) => Math.ceil(n / 32) * 32;
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    this.x = new Float32Array(c.hidden);
    this.xb = new Float32Array(pad(c.hidden));
    this.xq = new Uint8Array((pad(c.hidden) / 32) * 34);
    this.qkv = new Float32Array(qDim + 2 * kvDim);
    this.att = new Float32Array(pad(qDim));
    this.attq = new Uint8Array((pad(qDim) / 32) * 34);
    this.proj = new Float32Array(c.hidden);
    this.gateUp = new Float32Array(2 * c.ffnHidden);
    this.hb = new Float32Array(pad(c.ffnHidden));
    this.hq = new Uint8Array((pad(c.ffnHidden) / 32) * 34);
    this.scores = new Float32Array(c.heads * ctx);
    this.logits = new Float32Array(c.vocab);
    this.headTmp = new Float32Array(c.headDim);
    this.embedScratch = new Uint8Array(TILE_COLS * 4);
  }
}

/**
 * Options for {@link Transformer.load}.
 *
 * @example
 * ```ts
 * import type { TransformerOptions } from "./transformer.ts";
 * const o: TransformerOptions = { contextLength: 2048, kvCache: "f16" };
 * ```
 */
export interface TransformerOptions {
  /** Positions the KV cache holds (default: the model's, at most 4096). */
  contextLength?: number;
  /** KV cache element type (default f16). */
  kvCache?: "f16" | "f32";
  /** Verify section checksums at load. */
  verifyChecksums?: boolean;
}

/**
 * A loaded model ready to run.
 *
 * @example
 * ```ts ignore
 * import { Transformer } from "./transformer.ts";
 * using model = Transformer.load("smollm2.cflow");
 * const logits = model.forward(1, 0);
 * ```
 */
export class Transformer {
  /** The model's configuration. */
  readonly config: ModelConfig;
  /** Positions the KV cache holds. */
  readonly contextLength: number;
  readonly #file: LoadedTiledFile;
  readonly #region: MemoryRegion;
  readonly #k: Kernels;
  readonly #layers: LayerWeights[];
  readonly #embd: Run;
  readonly #output: Run;
  readonly #outputNorm: Float32Array;
  readonly #s: RunState;
  readonly #kCache: KvBuffer[];
  readonly #vCache: KvBuffer[];
  readonly #freqGlobal: Float32Array;
  readonly #freqLocal: Float32Array;

  private constructor(file: LoadedTiledFile, region: MemoryRegion, options: TransformerOptions) {
    this.#file = file;
    this.#region = region;
    this.#k = openKernels();
    const c = modelConfig(file.file);
    this.config = c;
    const ctx = options.contextLength ??
      Math.min(c.contextLength > 0 ? c.contextLength : 4096, 4096);
    if (!Number.isSafeInteger(ctx) || ctx < 1 || ctx > (1 << 20)) {
      throw new RangeError(`model: context length ${ctx} is out of range`);
    }
    this.contextLength = ctx;
    this.#layers = [];
    for (let l = 0; l < c.layers; l++) this.#layers.push(this.#layerWeights(l));
    this.#embd = this.#run(VOCAB_LAYER, MATRIX.TOKEN_EMBD);
    this.#output = c.tied ? this.#embd : this.#run(VOCAB_LAYER, MATRIX.OUTPUT);
    this.#outputNorm = this.#norm(VOCAB_LAYER, MATRIX.OUTPUT_NORM, c.hidden)!;
    this.#s = new RunState(c, ctx);
    const kvDim = c.kvHeads * c.headDim;
    const make =
      () => (options.kvCache === "f32"
        ? new Float32Array(ctx * kvDim)
        : new Float16Array(ctx * kvDim));
    this.#kCache = this.#layers.map(make);
    this.#vCache = this.#layers.map(make);
    this.#freqGlobal = ropeFrequencies(c.ropeDims, c.ropeTheta, c.ropeScaling);
    this.#freqLocal = ropeFrequencies(c.ropeDims, c.ropeLocalTheta, null);
  }

  /** Maps, validates and prepares a `.cflow` or `.vflow` file. */
  static load(path: string, options: TransformerOptions = {}): Transformer {
    const file = loadTiledFile(path, { verifyChecksums: options.verifyChecksums ?? false });
    try {
      return new Transformer(file, fileRegion(file), options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  #entry(layer: number, id: number): EntryDescriptor | undefined {
    return findEntry(this.#file.file, layer, id);
  }

  #norm(layer: number, id: number, n: number): Float32Array | undefined {
    const e = this.#entry(layer, id);
    if (e === undefined) return undefined;
    if (e.kind !== ENTRY_KIND.F32 || e.rows * e.cols !== n) {
      throw new RangeError(`model: layer ${layer} matrix ${id} has the wrong shape`);
    }
    const v = readF32Entry(this.#file.source, e).slice();
    if (
      this.config.normOffset !== 0 && id !== MATRIX.Q_BIAS && id !== MATRIX.K_BIAS &&
      id !== MATRIX.V_BIAS
    ) {
      for (let i = 0; i < v.length; i++) v[i] = Math.fround(v[i] + this.config.normOffset);
    }
    return v;
  }

  #bias(layer: number, id: number, n: number): Float32Array | undefined {
    const e = this.#entry(layer, id);
    if (e === undefined) return undefined;
    if (e.kind !== ENTRY_KIND.F32 || e.rows * e.cols !== n) {
      throw new RangeError(`model: layer ${layer} bias ${id} has the wrong shape`);
    }
    return readF32Entry(this.#file.source, e).slice();
  }

  /** The tiled run holding matrix `id` (with its fused partners, in file order). */
  #run(layer: number, id: number): Run {
    const e = this.#entry(layer, id);
    if (e === undefined || e.kind !== ENTRY_KIND.TILES) {
      throw new RangeError(`model: layer ${layer} has no tiled matrix ${id}`);
    }
    const members: EntryDescriptor[] = [];
    for (const b of this.#file.file.blocks) {
      for (const x of b.entries) {
        if (x.kind === ENTRY_KIND.TILES && x.offset === e.offset && x.layerId === e.layerId) {
          members.push(x);
        }
      }
    }
    const rows = Uint32Array.from(members, (m) => m.rows);
    return {
      offset: e.offset,
      length: e.length,
      type: e.tileType,
      cols: e.cols,
      rows,
      total: rows.reduce((a, b) => a + b, 0),
    };
  }

  #layerWeights(l: number): LayerWeights {
    const c = this.config;
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const qkv = this.#run(l, MATRIX.Q);
    const gateUp = this.#run(l, MATRIX.GATE);
    const q = this.#entry(l, MATRIX.Q)!;
    if (
      q.fused !== FUSED.QKV || qkv.rows.length !== 3 || qkv.rows[0] !== qDim ||
      qkv.rows[1] !== kvDim || qkv.rows[2] !== kvDim
    ) {
      throw new RangeError(
        `model: layer ${l} Q/K/V are not one fused run of ${qDim}/${kvDim}/${kvDim} rows`,
      );
    }
    if (
      gateUp.rows.length !== 2 || gateUp.rows[0] !== c.ffnHidden || gateUp.rows[1] !== c.ffnHidden
    ) {
      throw new RangeError(
        `model: layer ${l} gate/up are not one fused run of ${c.ffnHidden} rows each`,
      );
    }
    return {
      attnNorm: this.#norm(l, MATRIX.ATTN_NORM, c.hidden)!,
      qkv,
      qBias: this.#bias(l, MATRIX.Q_BIAS, qDim),
      kBias: this.#bias(l, MATRIX.K_BIAS, kvDim),
      vBias: this.#bias(l, MATRIX.V_BIAS, kvDim),
      qNorm: this.#norm(l, MATRIX.Q_NORM, c.headDim),
      kNorm: this.#norm(l, MATRIX.K_NORM, c.headDim),
      o: this.#run(l, MATRIX.O),
      postAttnNorm: this.#norm(l, MATRIX.POST_ATTN_NORM, c.hidden),
      ffnNorm: this.#norm(l, MATRIX.FFN_NORM, c.hidden)!,
      gateUp,
      down: this.#run(l, MATRIX.DOWN),
      postFfnNorm: this.#norm(l, MATRIX.POST_FFN_NORM, c.hidden),
    };
  }

  /** y = W x for a run; x is quantized into `xq` first for quantized tiles. */
  #matvec(run: Run, x: Float32Array, xq: Uint8Array, y: Float32Array): void {
    if (run.type === TILE_TYPE.F32) {
      tilesMatvec(this.#k, this.#region, run.offset, run.length, run.type, run.cols, run.rows, {
        f32: x,
      }, y);
    } else {
      tilesMatvec(this.#k, this.#region, run.offset, run.length, run.type, run.cols, run.rows, {
        q8: xq,
      }, y);
    }
  }

  /** Quantizes `x` (padded to whole groups) into `xq` when the run needs it. */
  #prepare(run: Run, x: Float32Array, xq: Uint8Array): void {
    if (run.type !== TILE_TYPE.F32) this.#k.quantizeQ8_0(x, xq);
  }

  /** Row `token` of the embedding matrix, dequantized, into `out`. */
  #embed(token: number, out: Float32Array): void {
    const run = this.#embd;
    const cols = run.cols;
    const stripe = Math.floor(token / TILE_ROWS);
    const stripeRows = Math.min(TILE_ROWS, run.total - stripe * TILE_ROWS);
    const fullStripe = stripeBytes(run.type, TILE_ROWS, cols);
    let pos = run.offset + stripe * fullStripe;
    const r = token - stripe * TILE_ROWS;
    for (let c0 = 0; c0 < cols; c0 += TILE_COLS) {
      const tc = Math.min(TILE_COLS, cols - c0);
      const body = pos + TILE_HEADER_BYTES;
      const scratch = this.#s.embedScratch;
      if (run.type === TILE_TYPE.F32) {
        this.#file.readInto(body + r * tc * 4, tc * 4, scratch);
        out.set(new Float32Array(scratch.buffer, 0, tc), c0);
      } else {
        const ng = Math.ceil(tc / 32);
        const gb = run.type === TILE_TYPE.Q4_0 ? 16 : 32;
        const scales = this.#file.readInto(body + r * ng * 2, ng * 2, scratch.subarray(0, 16));
        const data = this.#file.readInto(
          body + stripeRows * ng * 2 + r * ng * gb,
          ng * gb,
          scratch.subarray(16),
        );
        for (let g = 0; g < ng; g++) {
          const d = f16BitsToF32(scales[2 * g] | (scales[2 * g + 1] << 8));
          for (let j = 0; j < 32 && g * 32 + j < tc; j++) {
            let q: number;
            if (gb === 32) q = (data[g * 32 + j] << 24) >> 24;
            else q = (j < 16 ? data[g * 16 + j] & 15 : data[g * 16 + j - 16] >> 4) - 8;
            out[c0 + g * 32 + j] = Math.fround(q * d);
          }
        }
      }
      pos += tileBytes(run.type, stripeRows, tc);
    }
  }

  /** RMSNorm of each head of `v` (n heads) in place, with `w` (head_dim). */
  #headNorm(v: Float32Array, n: number, w: Float32Array): void {
    const hd = this.config.headDim;
    const tmp = this.#s.headTmp;
    for (let h = 0; h < n; h++) {
      const head = v.subarray(h * hd, (h + 1) * hd);
      this.#k.rmsNorm(head, w, this.config.eps, tmp);
      head.set(tmp);
    }
  }

  /**
   * Runs one token at position `pos` through the model and returns the
   * logits (a buffer reused by the next call).
   */
  forward(token: number, pos: number): Float32Array {
    const c = this.config;
    const s = this.#s;
    const k = this.#k;
    if (!Number.isSafeInteger(token) || token < 0 || token >= c.vocab) {
      throw new RangeError(`model: token ${token} is not in [0, ${c.vocab})`);
    }
    if (!Number.isSafeInteger(pos) || pos < 0 || pos >= this.contextLength) {
      throw new RangeError(
        `model: position ${pos} is outside the context of ${this.contextLength}`,
      );
    }
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const q = s.qkv.subarray(0, qDim);
    const kNew = s.qkv.subarray(qDim, qDim + kvDim);
    const vNew = s.qkv.subarray(qDim + kvDim);
    const hidden = s.xb.subarray(0, c.hidden);

    // 1. Token embedding (scaled by sqrt(d) for Gemma).
    this.#embed(token, s.x);
    if (c.embedScale !== 1) {
      for (let i = 0; i < c.hidden; i++) s.x[i] = Math.fround(s.x[i] * c.embedScale);
    }

    for (let l = 0; l < c.layers; l++) {
      const w = this.#layers[l];
      const window = c.windows[l];
      // 2. Attention: RMSNorm, one quantization of the normed input, fused Q/K/V.
      k.rmsNorm(s.x, w.attnNorm, c.eps, hidden);
      this.#prepare(w.qkv, s.xb, s.xq);
      this.#matvec(w.qkv, s.xb, s.xq, s.qkv);
      if (w.qBias) { for (let i = 0; i < qDim; i++) q[i] += w.qBias[i]; }
      if (w.kBias) { for (let i = 0; i < kvDim; i++) kNew[i] += w.kBias[i]; }
      if (w.vBias) { for (let i = 0; i < kvDim; i++) vNew[i] += w.vBias[i]; }
      // 3. QK-norm (Qwen3, Gemma 3), then RoPE on q and k at this position.
      if (w.qNorm) this.#headNorm(q, c.heads, w.qNorm);
      if (w.kNorm) this.#headNorm(kNew, c.kvHeads, w.kNorm);
      const freqs = window > 0 ? this.#freqLocal : this.#freqGlobal;
      k.rope(q, c.heads, c.headDim, c.ropeDims, pos, freqs, c.ropeStyle);
      k.rope(kNew, c.kvHeads, c.headDim, c.ropeDims, pos, freqs, c.ropeStyle);
      // 4. Append k and v to the cache; attend over the visible positions.
      this.#kCache[l].set(kNew, pos * kvDim);
      this.#vCache[l].set(vNew, pos * kvDim);
      const first = window > 0 ? Math.max(0, pos - window + 1) : 0;
      attention(
        k,
        q,
        c.heads,
        c.kvHeads,
        c.headDim,
        this.#kCache[l],
        this.#vCache[l],
        first,
        pos + 1,
        c.attnScale,
        c.attnSoftcap,
        s.scores,
        s.att,
      );
      // 5. Output projection, optional post-attention norm, residual.
      this.#prepare(w.o, s.att, s.attq);
      this.#matvec(w.o, s.att, s.attq, s.proj);
      if (w.postAttnNorm) k.rmsNorm(s.proj, w.postAttnNorm, c.eps, s.proj);
      for (let i = 0; i < c.hidden; i++) s.x[i] += s.proj[i];
      // 6. FFN: RMSNorm, one quantization, fused gate/up, gated activation, down.
      k.rmsNorm(s.x, w.ffnNorm, c.eps, hidden);
      this.#prepare(w.gateUp, s.xb, s.xq);
      this.#matvec(w.gateUp, s.xb, s.xq, s.gateUp);
      const gate = s.gateUp.subarray(0, c.ffnHidden);
      const up = s.gateUp.subarray(c.ffnHidden);
      const act = s.hb.subarray(0, c.ffnHidden);
      if (c.activation === "silu") k.siluMul(gate, up, act);
      else k.geluMul(gate, up, act);
      this.#prepare(w.down, s.hb, s.hq);
      this.#matvec(w.down, s.hb, s.hq, s.proj);
      if (w.postFfnNorm) k.rmsNorm(s.proj, w.postFfnNorm, c.eps, s.proj);
      for (let i = 0; i < c.hidden; i++) s.x[i] += s.proj[i];
    }
    // 7. Final norm, output projection (the embeddings when tied), soft-cap.
    k.rmsNorm(s.x, this.#outputNorm, c.eps, hidden);
    this.#prepare(this.#output, s.xb, s.xq);
    this.#matvec(this.#output, s.xb, s.xq, s.logits);
    if (c.finalSoftcap > 0) {
      const cap = c.finalSoftcap;
      for (let i = 0; i < s.logits.length; i++) {
        s.logits[i] = Math.fround(cap * Math.tanh(s.logits[i] / cap));
      }
    }
    return s.logits;
  }

  /** Unmaps the model file. */
  close(): void {
    this.#file.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

function stripeBytes(type: number, rows: number, cols: number): number {
  let total = 0;
  for (let c0 = 0; c0 < cols; c0 += TILE_COLS) {
    total += tileBytes(type, rows, Math.min(TILE_COLS, cols - c0));
  }
  return total;
}

function fileRegion(file: LoadedTiledFile): MemoryRegion {
  return file.region;
}
