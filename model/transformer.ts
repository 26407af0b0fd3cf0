/**
 * The forward pass of a dense decoder-only transformer over a validated,
 * mapped `.cflow`/`.vflow` file, in the style of llama2.c's `forward()`:
 * configuration, weights and run state are set up once; `forward` is a list
 * of commented steps over kernels and allocates nothing per token.
 *
 * @module
 */

import {
  actRowBytes,
  type AlignedBuffer,
  allocAligned,
  type Buf,
  type Kernels,
  type MemoryRegion,
  openKernels,
  packedBytes,
  packRun,
  type Plan,
  PlanBuilder,
  RUN_KIND,
  type WeightRun,
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
  TILE_TYPE,
  VOCAB_LAYER,
} from "../formats/cflow/mod.ts";
import { type ModelConfig, modelConfig, ropeFrequencies } from "./config.ts";

/** One layer's weights: runs, and workspace offsets of its f32 vectors. */
interface LayerWeights {
  attnNorm: number;
  qkv: WeightRun;
  qBias?: number;
  kBias?: number;
  vBias?: number;
  qNorm?: number;
  kNorm?: number;
  o: WeightRun;
  postAttnNorm?: number;
  ffnNorm: number;
  gateUp: WeightRun;
  down: WeightRun;
  postFfnNorm?: number;
  kCache: number;
  vCache: number;
}

/** Asks for transparent huge pages; where the kernel refuses, 4 KiB pages work too. */
function hugePages(region: AlignedBuffer): void {
  try {
    region.advise("hugepage");
  } catch {
    // THP disabled or unsupported: nothing to do.
  }
}

/** The tiled runs of a model's matrices. */
interface ModelRuns {
  layers: { qkv: WeightRun; o: WeightRun; gateUp: WeightRun; down: WeightRun }[];
  embd: WeightRun;
  output: WeightRun;
}

/** Bytes of the workspace handed out in order, 64-byte aligned. */
class Layout {
  size = 0;
  take(bytes: number): number {
    const at = this.size;
    this.size += Math.ceil(bytes / 64) * 64;
    return at;
  }
  /** A buffer of `rowBytes` per row for `rows` rows. */
  rows(rowBytes: number, rows: number): Buf {
    const stride = Math.ceil(rowBytes / 64) * 64;
    return { offset: this.take(stride * rows), stride };
  }
}

/** The activation buffers of one batch (rows = tokens), allocated once. */
interface RunState {
  x: Buf; // residual stream (hidden)
  xb: Buf; // normed input to a projection (padded to whole groups)
  xq: Buf; // its Q8_0 quantization
  qkv: Buf; // q | k | v
  att: Buf; // attention output (heads x head_dim, padded)
  attq: Buf;
  proj: Buf; // output of O and down (hidden)
  gateUp: Buf; // gate | up
  hb: Buf; // act(gate) * up (padded)
  hq: Buf;
  logits: Buf; // one row: the batch's last token
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
  /**
   * Repack Q4_0/Q8_0 tiles into 16-row panels at load (docs/KERNELS.md).
   * Default: on where the kernels have a VNNI panel kernel (avx512vnni),
   * off elsewhere, where the row kernels are faster.
   */
  packed?: boolean;
  /**
   * After packing, drop the file's pages that were packed (madvise
   * DONTNEED) so that the weights are resident once (default true).
   */
  evictSource?: boolean;
  /**
   * Called while packing with the bytes packed so far and the total, after
   * each matrix (for a progress bar; not called when nothing is packed).
   */
  packProgress?: (done: number, total: number) => void;
  /** Most prompt tokens per batch of {@link Transformer.prefill} (default 64). */
  batch?: number;
  /**
   * Threads for decode (one token at a time): `"auto"` times a few decode
   * steps on the calling thread alone and on the whole pool at load and
   * keeps the faster (on small models a second thread can cost more in
   * synchronization than it brings in bandwidth); `"pool"` always uses the
   * pool, `"single"` the calling thread. Prefill always uses the pool.
   * Default: `"auto"` when the thread count is the default one, `"pool"`
   * when the user chose it (`--threads`, `CFLOW_THREADS`).
   */
  decodeThreads?: "auto" | "pool" | "single";
}

/**
 * What loading did: whether the weights were repacked, how long that took,
 * and the bytes of the packed copy and the workspace.
 *
 * @example
 * ```ts ignore
 * console.log(model.loadStats.packMs);
 * ```
 */
export interface LoadStats {
  /** True when the quantized weights run from packed panels. */
  packed: boolean;
  /** Milliseconds spent packing. */
  packMs: number;
  /** Bytes of the packed copy (0 when not packed). */
  packedBytes: number;
  /** Bytes of the workspace (activations, norms, KV cache). */
  workspaceBytes: number;
  /** Threads decode runs on: 1 or the pool's. */
  decodeThreads: number;
  /** Milliseconds per decode step measured by `"auto"` (1 thread, pool), if it ran. */
  decodeTuning?: { singleMs: number; poolMs: number };
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
  /** Largest prompt batch of one {@link prefill} step. */
  readonly batch: number;
  /** What loading did. */
  readonly loadStats: LoadStats;
  readonly #file: LoadedTiledFile;
  readonly #region: MemoryRegion;
  readonly #k: Kernels;
  readonly #packedRuns = new Map<number, WeightRun>();
  #packedBuffer: AlignedBuffer | undefined;
  readonly #workspace: AlignedBuffer;
  readonly #plan: Plan;
  readonly #logits: Float32Array;
  readonly #logitsBytes: Uint8Array;
  readonly #logitsOffset: number;
  readonly #one = new Uint32Array(1);
  #singleThreadDecode = false;

  private constructor(file: LoadedTiledFile, options: TransformerOptions) {
    this.#file = file;
    this.#region = file.region;
    this.#k = openKernels();
    const c = modelConfig(file.file);
    this.config = c;
    const ctx = options.contextLength ??
      Math.min(c.contextLength > 0 ? c.contextLength : 4096, 4096);
    if (!Number.isSafeInteger(ctx) || ctx < 1 || ctx > (1 << 20)) {
      throw new RangeError(`model: context length ${ctx} is out of range`);
    }
    this.contextLength = ctx;
    const batch = options.batch ?? 64;
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > 1024) {
      throw new RangeError(`model: batch ${batch} is not in [1, 1024]`);
    }
    this.batch = batch;

    // Weights: the tiled runs of the file, packed into panels where that is faster.
    const packStart = performance.now();
    const wantPacked = options.packed ?? this.#k.variant === "avx512vnni";
    const runs = this.#collectRuns();
    if (wantPacked) this.#pack(runs, options.evictSource ?? true, options.packProgress);
    const packMs = this.#packedBuffer ? performance.now() - packStart : 0;
    const run = (r: WeightRun) => this.#packedRuns.get(r.offset) ?? r;

    // Workspace: activations for a batch, norms, RoPE tables, KV caches.
    const L = new Layout();
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const pad = (n: number) => Math.ceil(n / 32) * 32;
    const s: RunState = {
      x: L.rows(c.hidden * 4, batch),
      xb: L.rows(pad(c.hidden) * 4, batch),
      xq: L.rows(actRowBytes(pad(c.hidden)), batch),
      qkv: L.rows((qDim + 2 * kvDim) * 4, batch),
      att: L.rows(pad(qDim) * 4, batch),
      attq: L.rows(actRowBytes(pad(qDim)), batch),
      proj: L.rows(c.hidden * 4, batch),
      gateUp: L.rows(2 * c.ffnHidden * 4, batch),
      hb: L.rows(pad(c.ffnHidden) * 4, batch),
      hq: L.rows(actRowBytes(pad(c.ffnHidden)), batch),
      logits: { offset: L.take(c.vocab * 4), stride: 0 },
    };
    const vectors: [number, Float32Array][] = [];
    const vec = (v: Float32Array | undefined): number | undefined => {
      if (v === undefined) return undefined;
      const at = L.take(v.byteLength);
      vectors.push([at, v]);
      return at;
    };
    const kvBytes = ctx * kvDim * (options.kvCache === "f32" ? 4 : 2);
    const layers: LayerWeights[] = [];
    for (let l = 0; l < c.layers; l++) {
      const w = this.#layerWeights(l, runs, vec);
      layers.push({
        ...w,
        qkv: run(w.qkv),
        o: run(w.o),
        gateUp: run(w.gateUp),
        down: run(w.down),
        kCache: L.take(kvBytes),
        vCache: L.take(kvBytes),
      });
    }
    const outputNorm = vec(this.#norm(VOCAB_LAYER, MATRIX.OUTPUT_NORM, c.hidden))!;
    const freqGlobal = vec(ropeFrequencies(c.ropeDims, c.ropeTheta, c.ropeScaling))!;
    const freqLocal = vec(ropeFrequencies(c.ropeDims, c.ropeLocalTheta, null))!;
    const embd = run(runs.embd);
    const output = run(runs.output);

    // Not huge pages: the KV cache is touched a position at a time, and a
    // 2 MiB page would make all of it resident at once.
    this.#workspace = allocAligned(L.size, 4096);
    try {
      for (const [at, v] of vectors) {
        this.#workspace.write(at, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      }
      this.#plan = this.#buildPlan(c, s, layers, embd, output, {
        outputNorm,
        freqGlobal,
        freqLocal,
        kvType: options.kvCache === "f32" ? 1 : 2,
      });
    } catch (error) {
      this.#workspace.close();
      throw error;
    }
    this.#logits = new Float32Array(c.vocab);
    this.#logitsBytes = new Uint8Array(this.#logits.buffer);
    this.#logitsOffset = s.logits.offset;
    const mode = options.decodeThreads ??
      (this.#k.sources.threads === "default" ? "auto" : "pool");
    let decodeTuning: LoadStats["decodeTuning"];
    if (this.#k.threads === 1 || mode === "single") {
      this.#singleThreadDecode = true;
    } else if (mode === "auto") {
      decodeTuning = this.#tuneDecode();
      this.#singleThreadDecode = decodeTuning.singleMs < decodeTuning.poolMs;
    }
    this.loadStats = {
      packed: this.#packedBuffer !== undefined,
      packMs,
      packedBytes: this.#packedBuffer?.size ?? 0,
      workspaceBytes: L.size,
      decodeThreads: this.#singleThreadDecode ? 1 : this.#k.threads,
      decodeTuning,
    };
  }

  /**
   * Times decode steps on one thread and on the pool, alternating (after a
   * warmup of each), and returns the best time of each. The steps write
   * position 0 of the KV cache, which any real use overwrites first.
   */
  #tuneDecode(): { singleMs: number; poolMs: number } {
    const best = [Infinity, Infinity];
    this.#one[0] = Math.min(1, this.config.vocab - 1);
    for (let round = 0; round < 4; round++) {
      for (const single of [true, false]) {
        const t0 = performance.now();
        this.#plan.run(this.#one, 0, single);
        const ms = performance.now() - t0;
        if (round > 0) best[single ? 0 : 1] = Math.min(best[single ? 0 : 1], ms);
      }
    }
    return { singleMs: best[0], poolMs: best[1] };
  }

  /** Maps, validates and prepares a `.cflow` or `.vflow` file. */
  static load(path: string, options: TransformerOptions = {}): Transformer {
    const file = loadTiledFile(path, { verifyChecksums: options.verifyChecksums ?? false });
    try {
      return new Transformer(file, options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /**
   * Prepares an already loaded file (for callers that also read its
   * metadata, such as its tokenizer, so that it is validated once). The
   * model owns the file from then on; if this throws, the caller still
   * does.
   */
  static fromFile(file: LoadedTiledFile, options: TransformerOptions = {}): Transformer {
    return new Transformer(file, options);
  }

  /**
   * The forward pass, decided here and run by the library in one call per
   * batch: for every token of the batch, at its own position,
   *
   * 1. token embedding (times sqrt(d) for Gemma);
   * 2. per layer: RMSNorm, one Q8_0 quantization of the normed input, fused
   *    Q/K/V (+ biases), QK-norm, RoPE, K/V appended to the cache,
   *    attention over the visible positions (sliding window where the layer
   *    has one), one quantization, O projection (+ post-attention norm),
   *    residual; RMSNorm, one quantization, fused gate/up, gated
   *    activation, one quantization, down (+ post-FFN norm), residual;
   * 3. for the batch's last token only: final norm, output projection
   *    (the embeddings when tied), final soft-cap.
   */
  #buildPlan(
    c: ModelConfig,
    s: RunState,
    layers: LayerWeights[],
    embd: WeightRun,
    output: WeightRun,
    v: { outputNorm: number; freqGlobal: number; freqLocal: number; kvType: number },
  ): Plan {
    const b = new PlanBuilder();
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const pad = (n: number) => Math.ceil(n / 32) * 32;
    const at = (buf: Buf, floats: number): Buf => ({
      offset: buf.offset + floats * 4,
      stride: buf.stride,
    });
    const q = s.qkv;
    const kNew = at(s.qkv, qDim);
    const vNew = at(s.qkv, qDim + kvDim);
    const quantized = (r: WeightRun) => r.kind !== RUN_KIND.TILES_F32;
    /** y = W x, through one quantization of x when the run is quantized. */
    const project = (r: WeightRun, x: Buf, n: number, xq: Buf, y: Buf, last = false) => {
      const o = { lastOnly: last };
      if (quantized(r)) {
        b.quantize(x, pad(n), xq, o);
        b.matmul(r, xq, y, o);
      } else {
        b.matmul(r, x, y, o);
      }
    };
    const fused = (r: WeightRun, x: Buf, n: number, xq: Buf, y: Buf) => project(r, x, n, xq, y);
    const rope = c.ropeStyle === "normal" ? 0 : 1;

    // 1. Token embedding (scaled by sqrt(d) for Gemma).
    b.section("embedding");
    b.embed(embd, s.x, c.embedScale);
    for (let l = 0; l < c.layers; l++) {
      const w = layers[l];
      const window = c.windows[l];
      // 2. Attention: RMSNorm, one quantization of the normed input, fused Q/K/V.
      b.section(`layer ${l} attention`);
      b.rmsNorm(s.x, w.attnNorm, s.xb, c.hidden, c.eps);
      fused(w.qkv, s.xb, c.hidden, s.xq, s.qkv);
      if (w.qBias !== undefined) b.addVec(q, w.qBias, qDim);
      if (w.kBias !== undefined) b.addVec(kNew, w.kBias, kvDim);
      if (w.vBias !== undefined) b.addVec(vNew, w.vBias, kvDim);
      // 3. QK-norm (Qwen3, Gemma 3), then RoPE on q and k at each row's position.
      if (w.qNorm !== undefined) b.headNorm(q, c.heads, c.headDim, w.qNorm, c.eps);
      if (w.kNorm !== undefined) b.headNorm(kNew, c.kvHeads, c.headDim, w.kNorm, c.eps);
      const freqs = window > 0 ? v.freqLocal : v.freqGlobal;
      b.rope(q, c.heads, c.headDim, c.ropeDims, freqs, rope);
      b.rope(kNew, c.kvHeads, c.headDim, c.ropeDims, freqs, rope);
      // 4. Append k and v to the cache; attend over the visible positions.
      b.kvStore(kNew, w.kCache, kvDim, v.kvType, c.headDim);
      b.kvStore(vNew, w.vCache, kvDim, v.kvType, c.headDim);
      b.attention({
        q,
        k: w.kCache,
        v: w.vCache,
        kvType: v.kvType,
        heads: c.heads,
        kvHeads: c.kvHeads,
        headDim: c.headDim,
        window,
        scale: c.attnScale,
        softcap: c.attnSoftcap,
        out: s.att,
      });
      // 5. Output projection, optional post-attention norm, residual.
      project(w.o, s.att, qDim, s.attq, s.proj);
      if (w.postAttnNorm !== undefined) {
        b.rmsNorm(s.proj, w.postAttnNorm, s.proj, c.hidden, c.eps);
      }
      b.add(s.x, s.proj, c.hidden);
      // 6. FFN: RMSNorm, one quantization, fused gate/up, gated activation, down.
      b.section(`layer ${l} ffn`);
      b.rmsNorm(s.x, w.ffnNorm, s.xb, c.hidden, c.eps);
      fused(w.gateUp, s.xb, c.hidden, s.xq, s.gateUp);
      b.gated(c.activation === "silu" ? "silu" : "gelu", s.gateUp, s.hb, c.ffnHidden);
      project(w.down, s.hb, c.ffnHidden, s.hq, s.proj);
      if (w.postFfnNorm !== undefined) b.rmsNorm(s.proj, w.postFfnNorm, s.proj, c.hidden, c.eps);
      b.add(s.x, s.proj, c.hidden);
    }
    // 7. Last token only: final norm, output projection (the embeddings when tied), soft-cap.
    const last = { lastOnly: true };
    b.section("output");
    b.rmsNorm(s.x, v.outputNorm, s.xb, c.hidden, c.eps, last);
    project(output, s.xb, c.hidden, s.xq, s.logits, true);
    if (c.finalSoftcap > 0) b.softcap(s.logits, c.vocab, c.finalSoftcap, last);
    return b.build(this.#workspace, this.batch, this.contextLength);
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
  #run(layer: number, id: number): WeightRun {
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
    const kind = e.tileType === TILE_TYPE.Q4_0
      ? RUN_KIND.TILES_Q4_0
      : e.tileType === TILE_TYPE.Q8_0
      ? RUN_KIND.TILES_Q8_0
      : RUN_KIND.TILES_F32;
    return {
      kind,
      region: this.#region,
      offset: e.offset,
      length: e.length,
      cols: e.cols,
      rows: members.map((m) => m.rows),
    };
  }

  /** Every tiled run the forward pass reads. */
  #collectRuns(): ModelRuns {
    const c = this.config;
    const layers = [];
    for (let l = 0; l < c.layers; l++) {
      layers.push({
        qkv: this.#run(l, MATRIX.Q),
        o: this.#run(l, MATRIX.O),
        gateUp: this.#run(l, MATRIX.GATE),
        down: this.#run(l, MATRIX.DOWN),
      });
    }
    const embd = this.#run(VOCAB_LAYER, MATRIX.TOKEN_EMBD);
    const output = c.tied ? embd : this.#run(VOCAB_LAYER, MATRIX.OUTPUT);
    return { layers, embd, output };
  }

  /**
   * Packs every Q4_0/Q8_0 run into one allocation of 16-row panels, then
   * (when `evict`) drops the file pages it came from.
   */
  #pack(
    runs: ModelRuns,
    evict: boolean,
    progress?: (done: number, total: number) => void,
  ): void {
    const all = new Map<number, WeightRun>();
    for (const l of runs.layers) {
      for (const r of [l.qkv, l.o, l.gateUp, l.down]) all.set(r.offset, r);
    }
    all.set(runs.embd.offset, runs.embd);
    all.set(runs.output.offset, runs.output);
    const todo = [...all.values()].filter((r) =>
      r.kind === RUN_KIND.TILES_Q4_0 || r.kind === RUN_KIND.TILES_Q8_0
    );
    if (todo.length === 0) return;
    const sizes = todo.map((r) =>
      packedBytes(r.kind === RUN_KIND.TILES_Q4_0 ? "q4_0" : "q8_0", r.cols, r.rows)
    );
    const total = sizes.reduce((a, n) => a + Math.ceil(n / 64) * 64, 0);
    // 2 MiB aligned and advised: transparent huge pages spare the TLB a miss
    // every 4 KiB of the stream (where the kernel does not allow them, the
    // advice is refused and ignored).
    const dst = allocAligned(total, 2 << 20);
    try {
      hugePages(dst);
      let at = 0;
      todo.forEach((r, i) => {
        this.#packedRuns.set(r.offset, packRun(r, dst, at, { evictSource: evict }));
        at += Math.ceil(sizes[i] / 64) * 64;
        progress?.(at, total);
      });
    } catch (error) {
      this.#packedRuns.clear();
      dst.close();
      throw error;
    }
    this.#packedBuffer = dst;
  }

  #layerWeights(
    l: number,
    runs: ModelRuns,
    vec: (v: Float32Array | undefined) => number | undefined,
  ): Omit<LayerWeights, "kCache" | "vCache"> {
    const c = this.config;
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const { qkv, o, gateUp, down } = runs.layers[l];
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
      attnNorm: vec(this.#norm(l, MATRIX.ATTN_NORM, c.hidden))!,
      qkv,
      qBias: vec(this.#bias(l, MATRIX.Q_BIAS, qDim)),
      kBias: vec(this.#bias(l, MATRIX.K_BIAS, kvDim)),
      vBias: vec(this.#bias(l, MATRIX.V_BIAS, kvDim)),
      qNorm: vec(this.#norm(l, MATRIX.Q_NORM, c.headDim)),
      kNorm: vec(this.#norm(l, MATRIX.K_NORM, c.headDim)),
      o,
      postAttnNorm: vec(this.#norm(l, MATRIX.POST_ATTN_NORM, c.hidden)),
      ffnNorm: vec(this.#norm(l, MATRIX.FFN_NORM, c.hidden))!,
      gateUp,
      down,
      postFfnNorm: vec(this.#norm(l, MATRIX.POST_FFN_NORM, c.hidden)),
    };
  }

  #checkPositions(first: number, count: number): void {
    if (!Number.isSafeInteger(first) || first < 0 || first + count > this.contextLength) {
      throw new RangeError(
        `model: positions [${first}, ${
          first + count
        }) are outside the context of ${this.contextLength}`,
      );
    }
  }

  #checkToken(token: number): void {
    if (!Number.isSafeInteger(token) || token < 0 || token >= this.config.vocab) {
      throw new RangeError(`model: token ${token} is not in [0, ${this.config.vocab})`);
    }
  }

  /** Copies the last logits out of the workspace. */
  #readLogits(): Float32Array {
    this.#workspace.read(this.#logitsOffset, this.#logitsBytes.length, this.#logitsBytes);
    return this.#logits;
  }

  /**
   * Runs one token at position `pos` through the model and returns the
   * logits (a buffer reused by the next call).
   */
  forward(token: number, pos: number): Float32Array {
    this.#checkToken(token);
    this.#checkPositions(pos, 1);
    this.#one[0] = token;
    this.#plan.run(this.#one, pos, this.#singleThreadDecode);
    return this.#readLogits();
  }

  /**
   * Runs prompt tokens at positions [pos, pos + tokens.length) in batches
   * (each weight read once per batch) and returns the logits of the last
   * one. Every token gets the same arithmetic as through {@link forward}.
   */
  prefill(tokens: readonly number[], pos: number): Float32Array {
    if (tokens.length === 0) throw new RangeError("model: prefill needs at least one token");
    this.#checkPositions(pos, tokens.length);
    for (const t of tokens) this.#checkToken(t);
    const ids = Uint32Array.from(tokens);
    for (let i = 0; i < ids.length; i += this.batch) {
      this.#plan.run(ids.subarray(i, Math.min(ids.length, i + this.batch)), pos + i);
    }
    return this.#readLogits();
  }

  /**
   * Runs one token at position `pos` like {@link forward}, one section of
   * the plan at a time (the embedding, each layer's attention and FFN, the
   * output), on the pool, and returns each section's wall time in
   * milliseconds with the logits. Identical results to {@link forward};
   * the timings include one FFI call per section (a few microseconds).
   */
  profile(
    token: number,
    pos: number,
  ): { sections: { name: string; ms: number }[]; logits: Float32Array } {
    this.#checkToken(token);
    this.#checkPositions(pos, 1);
    this.#one[0] = token;
    const sections = this.#plan.sections.map((x) => {
      const t0 = performance.now();
      this.#plan.runOps(this.#one, pos, x.first, x.last);
      return { name: x.name, ms: performance.now() - t0 };
    });
    return { sections, logits: this.#readLogits() };
  }

  /**
   * {@link prefill} without blocking the event loop: each batch runs on one
   * of Deno's blocking threads. Aborting `signal` stops the batch in flight
   * before its next operation and rejects with the signal's reason; the
   * positions of that prompt must then be run again before they are used.
   * Same arithmetic, same logits as {@link prefill}.
   */
  async prefillAsync(
    tokens: readonly number[],
    pos: number,
    signal?: AbortSignal,
  ): Promise<Float32Array> {
    if (tokens.length === 0) throw new RangeError("model: prefill needs at least one token");
    this.#checkPositions(pos, tokens.length);
    for (const t of tokens) this.#checkToken(t);
    const ids = Uint32Array.from(tokens);
    for (let i = 0; i < ids.length; i += this.batch) {
      await this.#plan.runAsync(
        ids.subarray(i, Math.min(ids.length, i + this.batch)),
        pos + i,
        signal,
      );
    }
    return this.#readLogits();
  }

  /** Frees the plan, the workspace and the packed weights, and unmaps the file. */
  close(): void {
    this.#plan.close();
    this.#workspace.close();
    this.#packedBuffer?.close();
    this.#packedBuffer = undefined;
    this.#file.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
