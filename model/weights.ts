/**
 * The shared part of a loaded model: the validated, mapped file, the tiled
 * runs of its matrices (fused Q/K/V and gate/up, each expert's spans), the
 * panels they are packed into at load, the f32 vectors (norms, biases,
 * routers) and the eviction of source pages. It knows tensor names and
 * bytes, not the forward pass; one instance serves every sequence of the
 * `Transformer` that owns it (KV caches and activations are the
 * Transformer's).
 *
 * @module
 */

import {
  type AlignedBuffer,
  allocAligned,
  packedBytes,
  packRun,
  panelQuants,
  RUN_KIND,
  type RunKind,
  type WeightRun,
} from "../ffi/mod.ts";
import {
  ENTRY_KIND,
  type EntryDescriptor,
  findEntry,
  FUSED,
  type LoadedTiledFile,
  MATRIX,
  matrixTileBytes,
  readF32Entry,
  TILE_TYPE,
  VOCAB_LAYER,
} from "../formats/cflow/mod.ts";
import type { ModelConfig } from "./config.ts";

/** The experts of one layer: their runs, the router and the norm of their input. */
export interface MoeTensors {
  /** Norm of the router's and experts' input. */
  norm: Float32Array;
  /** f32 router, experts x hidden. */
  router: Float32Array;
  gateUp: WeightRun[];
  down: WeightRun[];
  /** Qwen2-MoE's shared expert and its sigmoid gate. */
  shared?: { gateUp: WeightRun; down: WeightRun; gate: Float32Array; ffn: number };
}

/** One layer's weights: runs (packed where packed) and f32 vectors. */
export interface LayerTensors {
  attnNorm: Float32Array;
  qkv: WeightRun;
  qBias?: Float32Array;
  kBias?: Float32Array;
  vBias?: Float32Array;
  qNorm?: Float32Array;
  kNorm?: Float32Array;
  o: WeightRun;
  postAttnNorm?: Float32Array;
  ffnNorm?: Float32Array;
  gateUp?: WeightRun;
  down?: WeightRun;
  postFfnNorm?: Float32Array;
  moe?: MoeTensors;
}

/** Eviction of packed matrices' source pages (TransformerOptions.evict). */
export type EvictMode = "never" | "after-pack" | "phase-boundary";

/** How {@link ModelWeights} is built: packed into panels or not, eviction, packing progress. */
export interface WeightOptions {
  packed: boolean;
  evict?: EvictMode;
  packProgress?: (done: number, total: number) => void;
}

/**
 * The plan's run kind for tiles of these member types: the one-type kinds
 * for Q4_0, Q8_0 and F32 runs (which can be packed into panels), `TILES`
 * with the types member by member otherwise.
 */
function tileRunKind(types: readonly number[]): { kind: RunKind; types?: readonly number[] } {
  const t = types[0];
  if (types.every((x) => x === t)) {
    if (t === TILE_TYPE.Q4_0) return { kind: RUN_KIND.TILES_Q4_0 };
    if (t === TILE_TYPE.Q8_0) return { kind: RUN_KIND.TILES_Q8_0 };
    if (t === TILE_TYPE.F32) return { kind: RUN_KIND.TILES_F32 };
  }
  return { kind: RUN_KIND.TILES, types: [...types] };
}

function hugePages(region: AlignedBuffer): void {
  try {
    region.advise("hugepage");
  } catch {
    // THP disabled or unsupported: nothing to do.
  }
}

/** The tiled runs of one layer. */
interface LayerRuns {
  qkv: WeightRun;
  o: WeightRun;
  gateUp?: WeightRun;
  down?: WeightRun;
  experts?: { gateUp: WeightRun[]; down: WeightRun[] };
  shared?: { gateUp: WeightRun; down: WeightRun };
}

/** The tiled runs of a model's matrices. */
interface ModelRuns {
  layers: LayerRuns[];
  embd: WeightRun;
  output: WeightRun;
}

/**
 * A model's weights, loaded once: read by the plan of the Transformer that
 * owns them, for every sequence it runs.
 *
 * @example
 * ```ts ignore
 * const weights = new ModelWeights(file, modelConfig(file.file), { packed: true });
 * console.log(weights.layers[0].qkv.rows, weights.packedBytes);
 * weights.close();
 * ```
 */
export class ModelWeights {
  /** The file the weights are read from (owned: closed by {@link close}). */
  readonly file: LoadedTiledFile;
  /** The model's configuration. */
  readonly config: ModelConfig;
  /** The final norm. */
  readonly outputNorm: Float32Array;
  /** Whether some expert's tiles are quantized (their input is then Q8_0 rows). */
  readonly expertsQuantized: boolean;
  /** Per layer, the bytes of all its experts' tiles (0 without experts). */
  readonly bankBytes: readonly number[];
  /** The eviction mode. */
  readonly evict: EvictMode;
  readonly #packedRuns = new Map<number, WeightRun>();
  /** The file ranges the packed copy was made from. */
  readonly #sources: WeightRun[] = [];
  #buffer: AlignedBuffer | undefined;
  readonly #runs: ModelRuns;
  #layers: LayerTensors[] = [];
  /** Per layer, the tensors as read from the file (runs not packed). */
  #read: LayerTensors[] | undefined;
  #embd!: WeightRun;
  #output!: WeightRun;
  #packMs = 0;

  /**
   * Collects the file's runs and vectors, checking every shape against the
   * configuration, and packs the runs into panels when `packed`.
   */
  constructor(
    file: LoadedTiledFile,
    config: ModelConfig,
    options: WeightOptions,
  ) {
    this.file = file;
    this.config = config;
    const evict = options.evict ?? "after-pack";
    if (!["never", "after-pack", "phase-boundary"].includes(evict)) {
      throw new RangeError(
        `model: evict mode "${evict}" is not never, after-pack or phase-boundary`,
      );
    }
    this.evict = evict;
    const runs = this.#collectRuns();
    this.#runs = runs;
    this.outputNorm = this.#need(
      this.#norm(VOCAB_LAYER, MATRIX.OUTPUT_NORM, config.hidden),
      -1,
      "output_norm",
    );
    this.#resolve(); // checks every layer's shapes before anything is packed
    if (options.packed) {
      const start = performance.now();
      for (const _ of this.#packSteps(options.packProgress)) { /* all at once */ }
      this.#packMs = performance.now() - start;
      this.#resolve();
    }
    this.expertsQuantized = runs.layers.some((r) =>
      r.experts !== undefined && r.experts.down[0].kind !== RUN_KIND.TILES_F32
    );
    this.bankBytes = this.layers.map((w) =>
      w.moe === undefined
        ? 0
        : w.moe.gateUp.reduce((n, r, e) => n + r.length + w.moe!.down[e].length, 0)
    );
  }

  /**
   * {@link ModelWeights} built without blocking the event loop for long: a
   * macrotask turn between the runs it packs (each one FFI call of at most
   * a few hundred milliseconds on a large matrix), so that a server keeps
   * answering (its `/health` says "loading") while a model loads.
   *
   * @example
   * ```ts ignore
   * const weights = await ModelWeights.load(file, modelConfig(file.file), { packed: true });
   * ```
   */
  static async load(
    file: LoadedTiledFile,
    config: ModelConfig,
    options: WeightOptions,
  ): Promise<ModelWeights> {
    const w = new ModelWeights(file, config, { ...options, packed: false });
    if (!options.packed) return w;
    const start = performance.now();
    for (const _ of w.#packSteps(options.packProgress)) {
      await new Promise<void>((resolve) => setTimeout(resolve, 0));
    }
    w.#packMs = performance.now() - start;
    w.#resolve();
    return w;
  }

  /** Per layer: runs (packed where packed) and vectors. */
  get layers(): readonly LayerTensors[] {
    return this.#layers;
  }

  /** Token embeddings. */
  get embd(): WeightRun {
    return this.#embd;
  }

  /** Output projection (the embeddings when tied). */
  get output(): WeightRun {
    return this.#output;
  }

  /** Milliseconds packing took (0 when nothing was packed). */
  get packMs(): number {
    return this.#buffer === undefined ? 0 : this.#packMs;
  }

  /** The layers' tensors, each run replaced by its packed copy where there is one. */
  #resolve(): void {
    const run = (r: WeightRun) => this.#packedRuns.get(r.offset) ?? r;
    // The vectors are read from the file once, before packing: after it only
    // the runs change (a second read would map the file's pages again).
    this.#read ??= this.#runs.layers.map((r, l) => this.#layerTensors(l, r));
    this.#layers = this.#read.map((w) => {
      return {
        ...w,
        qkv: run(w.qkv),
        o: run(w.o),
        gateUp: w.gateUp && run(w.gateUp),
        down: w.down && run(w.down),
        moe: w.moe && {
          ...w.moe,
          shared: w.moe.shared &&
            { ...w.moe.shared, gateUp: run(w.moe.shared.gateUp), down: run(w.moe.shared.down) },
        },
      };
    });
    this.#embd = run(this.#runs.embd);
    this.#output = run(this.#runs.output);
  }

  /** Whether some runs were packed into panels. */
  get packed(): boolean {
    return this.#buffer !== undefined;
  }

  /** Bytes of the packed copy (0 when nothing is packed). */
  get packedBytes(): number {
    return this.#buffer?.size ?? 0;
  }

  /**
   * Drops the mapped file's pages of every packed matrix (madvise
   * DONTNEED); returns the bytes advised. See `Transformer.evictSource`.
   */
  evictSource(): number {
    let bytes = 0;
    for (const r of this.#sources) {
      this.file.region.advise("dontneed", r.offset, r.length);
      bytes += r.length;
    }
    return bytes;
  }

  /** Frees the packed copy, leaving the file mapped (its owner closes it). */
  release(): void {
    this.#buffer?.close();
    this.#buffer = undefined;
  }

  /** Frees the packed copy and unmaps the file. */
  close(): void {
    this.release();
    this.file.close();
  }

  #entry(layer: number, id: number): EntryDescriptor | undefined {
    return findEntry(this.file.file, layer, id);
  }

  #norm(layer: number, id: number, n: number): Float32Array | undefined {
    const e = this.#entry(layer, id);
    if (e === undefined) return undefined;
    if (e.kind !== ENTRY_KIND.F32 || e.rows * e.cols !== n) {
      throw new RangeError(`model: layer ${layer} matrix ${id} has the wrong shape`);
    }
    const v = readF32Entry(this.file.source, e).slice();
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
    return readF32Entry(this.file.source, e).slice();
  }

  /** The tiled run holding matrix `id` (with its fused partners, in file order). */
  #run(layer: number, id: number): WeightRun {
    const e = this.#entry(layer, id);
    if (e === undefined || e.kind !== ENTRY_KIND.TILES) {
      throw new RangeError(`model: layer ${layer} has no tiled matrix ${id}`);
    }
    const members: EntryDescriptor[] = [];
    for (const b of this.file.file.blocks) {
      for (const x of b.entries) {
        if (x.kind === ENTRY_KIND.TILES && x.offset === e.offset && x.layerId === e.layerId) {
          members.push(x);
        }
      }
    }
    return {
      ...tileRunKind(members.map((m) => m.tileType)),
      region: this.file.region,
      offset: e.offset,
      length: e.length,
      cols: e.cols,
      rows: members.map((m) => m.rows),
    };
  }

  /** Every tiled run the forward pass reads. */
  #collectRuns(): ModelRuns {
    const c = this.config;
    const layers: LayerRuns[] = [];
    for (let l = 0; l < c.layers; l++) {
      const r: LayerRuns = { qkv: this.#run(l, MATRIX.Q), o: this.#run(l, MATRIX.O) };
      if (c.ffnHidden > 0) {
        r.gateUp = this.#run(l, MATRIX.GATE);
        r.down = this.#run(l, MATRIX.DOWN);
      }
      if (c.moe !== null) {
        r.experts = this.#expertRuns(l);
        if (this.#entry(l, MATRIX.SHARED_GATE) !== undefined) {
          r.shared = {
            gateUp: this.#run(l, MATRIX.SHARED_GATE),
            down: this.#run(l, MATRIX.SHARED_DOWN),
          };
        }
      }
      layers.push(r);
    }
    const embd = this.#run(VOCAB_LAYER, MATRIX.TOKEN_EMBD);
    const output = c.tied ? embd : this.#run(VOCAB_LAYER, MATRIX.OUTPUT);
    return { layers, embd, output };
  }

  /**
   * Each expert's gate/up run and down run, found through the layer's
   * expert table: the plan reads only the spans of the experts it selects.
   */
  #expertRuns(l: number): { gateUp: WeightRun[]; down: WeightRun[] } {
    const c = this.config;
    const bank = this.file.file.experts.get(l);
    if (bank === undefined || bank.spans.length !== c.moe!.experts) {
      throw new RangeError(`model: layer ${l} has no expert bank of ${c.moe!.experts} experts`);
    }
    const { gate, up, down } = bank;
    if (
      gate.rows !== up.rows || gate.cols !== c.hidden || up.cols !== c.hidden ||
      down.rows !== c.hidden || down.cols !== gate.rows
    ) {
      throw new RangeError(`model: layer ${l} expert matrices do not fit together`);
    }
    const guBytes = matrixTileBytes(gate.tileType, gate.rows, gate.cols) +
      matrixTileBytes(up.tileType, up.rows, up.cols);
    const downBytes = matrixTileBytes(down.tileType, down.rows, down.cols);
    const out = { gateUp: [] as WeightRun[], down: [] as WeightRun[] };
    for (const span of bank.spans) {
      if (span.length !== guBytes + downBytes) {
        throw new RangeError(`model: layer ${l} has an expert span of ${span.length} bytes`);
      }
      out.gateUp.push({
        ...tileRunKind([gate.tileType, up.tileType]),
        region: this.file.region,
        offset: span.offset,
        length: guBytes,
        cols: gate.cols,
        rows: [gate.rows, up.rows],
      });
      out.down.push({
        ...tileRunKind([down.tileType]),
        region: this.file.region,
        offset: span.offset + guBytes,
        length: downBytes,
        cols: down.cols,
        rows: [down.rows],
      });
    }
    return out;
  }

  /**
   * Packs every run that has panels ({@link panelQuants}) into one allocation of 16-row panels, then
   * (when `evict`) drops the file pages it came from.
   */
  *#packSteps(progress?: (done: number, total: number) => void): Generator<void> {
    const runs = this.#runs;
    const evict = this.evict !== "never";
    // Reading the norms and biases (a few KiB each, copied out) maps whole
    // page-cache folios around them on kernels that map large folios at once:
    // on SmolLM2-135M Q4_1 (Linux 6.18) 31 MiB of the file, source pages of
    // matrices about to be packed. Drop every page of the file first (the
    // kernels fault back what they read), and again when every run is packed
    // (fault-around while packing maps the runs' neighbours).
    const dropFile = () => {
      if (this.evict === "after-pack") this.file.region.advise("dontneed");
    };
    dropFile();
    // Experts stay in the mapped file: each token reads only its selected
    // experts' spans, and a packed copy would make all of them resident.
    const all = new Map<number, WeightRun>();
    for (const l of runs.layers) {
      for (const r of [l.qkv, l.o, l.gateUp, l.down, l.shared?.gateUp, l.shared?.down]) {
        if (r !== undefined) all.set(r.offset, r);
      }
    }
    all.set(runs.embd.offset, runs.embd);
    all.set(runs.output.offset, runs.output);
    // Panels hold whole records (32 columns, 256 for K types); a run with a
    // partial last group (a 48-wide shared expert) stays in tiles.
    const todo = [...all.values()].filter((r) => panelQuants(r) !== undefined);
    if (todo.length === 0) return;
    const sizes = todo.map((r) => packedBytes(panelQuants(r)!, r.cols, r.rows));
    const total = sizes.reduce((a, n) => a + Math.ceil(n / 64) * 64, 0);
    // 2 MiB aligned and advised: transparent huge pages spare the TLB a miss
    // every 4 KiB of the stream (where the kernel does not allow them, the
    // advice is refused and ignored).
    const dst = allocAligned(total, 2 << 20);
    this.#buffer = dst;
    try {
      hugePages(dst);
      let at = 0;
      for (const [i, r] of todo.entries()) {
        this.#sources.push(r);
        this.#packedRuns.set(r.offset, packRun(r, dst, at, { evictSource: evict }));
        at += Math.ceil(sizes[i] / 64) * 64;
        progress?.(at, total);
        yield;
      }
      dropFile();
    } catch (error) {
      this.#packedRuns.clear();
      this.#sources.length = 0;
      this.#buffer = undefined;
      dst.close();
      throw error;
    }
  }

  #layerTensors(l: number, r: LayerRuns): LayerTensors {
    const c = this.config;
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const q = this.#entry(l, MATRIX.Q)!;
    if (
      q.fused !== FUSED.QKV || r.qkv.rows.length !== 3 || r.qkv.rows[0] !== qDim ||
      r.qkv.rows[1] !== kvDim || r.qkv.rows[2] !== kvDim
    ) {
      throw new RangeError(
        `model: layer ${l} Q/K/V are not one fused run of ${qDim}/${kvDim}/${kvDim} rows`,
      );
    }
    const w: LayerTensors = {
      attnNorm: this.#need(this.#norm(l, MATRIX.ATTN_NORM, c.hidden), l, "attn_norm"),
      qkv: r.qkv,
      qBias: this.#bias(l, MATRIX.Q_BIAS, qDim),
      kBias: this.#bias(l, MATRIX.K_BIAS, kvDim),
      vBias: this.#bias(l, MATRIX.V_BIAS, kvDim),
      qNorm: this.#norm(l, MATRIX.Q_NORM, c.qkNormFull ? qDim : c.headDim),
      kNorm: this.#norm(l, MATRIX.K_NORM, c.qkNormFull ? kvDim : c.headDim),
      o: r.o,
      postAttnNorm: this.#norm(l, MATRIX.POST_ATTN_NORM, c.hidden),
    };
    if (r.gateUp !== undefined && r.down !== undefined) {
      if (
        r.gateUp.rows.length !== 2 || r.gateUp.rows[0] !== c.ffnHidden ||
        r.gateUp.rows[1] !== c.ffnHidden
      ) {
        throw new RangeError(
          `model: layer ${l} gate/up are not one fused run of ${c.ffnHidden} rows each`,
        );
      }
      w.ffnNorm = this.#need(this.#norm(l, MATRIX.FFN_NORM, c.hidden), l, "ffn_norm");
      w.gateUp = r.gateUp;
      w.down = r.down;
      w.postFfnNorm = this.#norm(l, MATRIX.POST_FFN_NORM, c.hidden);
    }
    if (r.experts !== undefined) {
      const moe = c.moe!;
      const router = this.#entry(l, MATRIX.ROUTER);
      if (router === undefined || router.kind !== ENTRY_KIND.F32 || router.rows !== moe.experts) {
        throw new RangeError(`model: layer ${l} has no f32 router of ${moe.experts} rows`);
      }
      // The MoE families read the FFN norm; pipeline-native layers have their own.
      const norm = this.#norm(l, MATRIX.MOE_NORM, c.hidden) ??
        (c.pipeline === null ? this.#norm(l, MATRIX.FFN_NORM, c.hidden) : undefined);
      let shared: MoeTensors["shared"];
      if (r.shared !== undefined) {
        const ffn = r.shared.down.cols;
        if (r.shared.gateUp.rows.length !== 2 || r.shared.gateUp.rows[0] !== ffn) {
          throw new RangeError(`model: layer ${l} shared gate/up are not one fused run`);
        }
        const gate = this.#bias(l, MATRIX.SHARED_EXPERT_GATE_INP, c.hidden);
        shared = {
          gateUp: r.shared.gateUp,
          down: r.shared.down,
          gate: this.#need(gate, l, "shared_expert_gate_inp"),
          ffn,
        };
      }
      w.moe = {
        norm: this.#need(norm, l, "moe_norm"),
        router: readF32Entry(this.file.source, router).slice(),
        gateUp: r.experts.gateUp,
        down: r.experts.down,
        shared,
      };
    }
    return w;
  }

  #need<T>(v: T | undefined, l: number, what: string): T {
    if (v === undefined) {
      throw new RangeError(l < 0 ? `model: no ${what}` : `model: layer ${l} has no ${what}`);
    }
    return v;
  }
}
