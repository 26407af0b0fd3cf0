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
  moeScratchBytes,
  openKernels,
  packableQuant,
  packedBytes,
  packRun,
  panelsByDefault,
  type Plan,
  PlanBuilder,
  RUN_KIND,
  type RunKind,
  type VariantName,
  type WeightRun,
} from "../ffi/mod.ts";
import { createStage, type DirectFile, openDirect, type Stage } from "../ffi/io.ts";
import {
  ENTRY_KIND,
  type EntryDescriptor,
  findEntry,
  FUSED,
  type LoadedTiledFile,
  loadTiledFile,
  MATRIX,
  matrixTileBytes,
  readF32Entry,
  TILE_TYPE,
  VOCAB_LAYER,
} from "../formats/cflow/mod.ts";
import { COMBINE_STYLE, type ModelConfig, modelConfig, ropeFrequencies } from "./config.ts";
import { buildSchedule, type Schedule, type StreamRead } from "../scheduler/mod.ts";
import { type HeadOps, OutputRows } from "./output_rows.ts";

/** The experts of one layer: runs, and workspace offsets of the router and norm. */
interface MoeWeights {
  /** Norm of the router's and experts' input. */
  norm: number;
  /** f32 router, experts x hidden. */
  router: number;
  gateUp: WeightRun[];
  down: WeightRun[];
  /** Qwen2-MoE's shared expert and its sigmoid gate. */
  shared?: { gateUp: WeightRun; down: WeightRun; gate: number; ffn: number };
  /** Workspace offset of this layer's u64 count of expert bytes read. */
  counter: number;
}

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
  ffnNorm?: number;
  gateUp?: WeightRun;
  down?: WeightRun;
  postFfnNorm?: number;
  moe?: MoeWeights;
}

/** The disk expert tier's plan inputs. */
interface DiskTier {
  stage: Stage;
  /** Reads wait at the injection pass rather than in the routing pass. */
  staged: boolean;
  /** Per layer: workspace offset of its experts' file ranges (-1: no experts). */
  spans: number[];
  /** Saved selections (route + slots) and expert inputs, one per pass in flight. */
  sel: Buf[];
  x: Buf[];
}

/** Asks for transparent huge pages; where the kernel refuses, 4 KiB pages work too. */
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
  proj: Buf; // output of O (hidden)
  gateUp: Buf; // gate | up
  hb: Buf; // act(gate) * up (padded)
  hq: Buf;
  d: Buf; // dense FFN output (hidden)
  e: Buf; // expert output (hidden), when not queued
  sel: Buf; // selected experts: top_k ids, top_k weights
  moeScratch: Buf;
  shared: Buf; // shared expert output (hidden)
  xf: Buf; // the second stream: s_f (DecoupledStreams) or xfm_reg (PipelineRegisters)
  ring: Buf[]; // residual snapshots for the dense delay
  queue: Buf[]; // expert outputs in flight
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
  /**
   * Positions the KV cache holds (default: the model's, at most 4096).
   * `"trained"`: the length the model was trained for (4096 when the file
   * does not say), at most what {@link contextMemoryBytes} of KV cache
   * holds; {@link Transformer.contextCap} then says whether it was capped.
   */
  contextLength?: number | "trained";
  /**
   * With `contextLength: "trained"`: the most bytes the KV cache may take
   * (default: no limit). The context is cut to what fits, 256 positions at
   * least.
   */
  contextMemoryBytes?: number;
  /** KV cache element type (default f16). */
  kvCache?: "f16" | "f32";
  /** Verify section checksums at load. */
  verifyChecksums?: boolean;
  /**
   * Repack Q4_0/Q8_0 tiles into 16-row panels at load (docs/KERNELS.md):
   * `true`, `false`, or `"auto"` (the default): on where panels measured
   * faster than the row kernels over tiles, i.e. every SIMD variant (avx2,
   * avxvnni, avx512vnni), off for the scalar one (`panelsByDefault`).
   */
  packed?: boolean | "auto";
  /**
   * After packing, drop the file's pages that were packed (madvise
   * DONTNEED) so that the weights are resident once (default true). Same as
   * `evict: "after-pack"` (true) or `"never"` (false).
   */
  evictSource?: boolean;
  /**
   * When the mapped source pages of packed weights are dropped: `"never"`;
   * `"after-pack"` (the default), as each matrix is packed; or
   * `"phase-boundary"`, after packing and again by {@link Transformer.endPrefill}
   * at the prefill/decode boundary, in case prefill faulted some back.
   */
  evict?: "never" | "after-pack" | "phase-boundary";
  /**
   * Called while packing with the bytes packed so far and the total, after
   * each matrix (for a progress bar; not called when nothing is packed).
   */
  packProgress?: (done: number, total: number) => void;
  /**
   * Where expert tiles are read from: `"mmap"` (default), in place from the
   * mapped file; `"disk"`, by direct reads (O_DIRECT where the file system
   * allows it) into staging slots, only the selected experts'.
   */
  expertTier?: "mmap" | "disk";
  /**
   * With the disk tier: `"sync"` (default) reads the selected experts and
   * waits for them in the routing layer; `"staged"` starts the reads at the
   * routing layer and waits at the injection layer, `expert_delay` layers
   * later, so that the reads overlap those layers' compute (the same
   * arithmetic on the same saved inputs: bit-identical output).
   */
  expertFetch?: "sync" | "staged";
  /**
   * With the disk tier: MiB of staging slots kept beyond what the schedule
   * needs in flight, as an LRU cache of experts (default 0).
   */
  expertCacheMiB?: number;
  /** Most prompt tokens per batch of {@link Transformer.prefill} (default 64). */
  batch?: number;
  /**
   * Sequences the KV cache holds side by side (default 1), each with
   * `contextLength` positions: {@link Transformer.step} runs tokens of any of
   * them in one batch over one copy of the weights. The single-sequence
   * methods ({@link Transformer.forward}, {@link Transformer.prefill}, ...)
   * use sequence 0. With `contextLength: "trained"` the memory budget is
   * shared by all of them.
   */
  sequences?: number;
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
 * One row of {@link Transformer.step}: a token of one sequence at its position.
 *
 * @example
 * ```ts
 * import type { StepRow } from "./transformer.ts";
 * const row: StepRow = { token: 42, sequence: 1, position: 7, logits: true };
 * ```
 */
export interface StepRow {
  /** The token id. */
  token: number;
  /** Its sequence, in [0, sequences). */
  sequence: number;
  /** Its position in that sequence, in [0, contextLength). */
  position: number;
  /** Whether its logits are wanted (a decoded token, the last token of a prompt). */
  logits: boolean;
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
 * One pass of {@link Transformer.trace}: the schedule step, the L2 norms of
 * the streams after it, the experts selected (MoE layers) and the expert
 * bytes read.
 *
 * @example
 * ```ts
 * import type { TraceStep } from "./transformer.ts";
 * const s: TraceStep = { step: 0, layer: 0, norms: { x: 3.2 }, expertBytes: 0 };
 * ```
 */
export interface TraceStep {
  /** Pass index. */
  step: number;
  /** Layer (block) whose weights it read. */
  layer: number;
  /** L2 norm of each stream after the pass. */
  norms: Record<string, number>;
  /** The router's selection: expert ids in order and their weights. */
  experts?: { ids: number[]; weights: number[] };
  /** Expert weight bytes the pass read. */
  expertBytes: number;
}

/**
 * One position of {@link Transformer.trace}.
 *
 * @example
 * ```ts
 * import type { TracePosition } from "./transformer.ts";
 * const p: TracePosition = { steps: [], finalNorm: 1, argmax: 3, logits: new Float32Array(4) };
 * ```
 */
export interface TracePosition {
  /** Every pass, in order. */
  steps: TraceStep[];
  /** L2 norm of what the final norm reads (after the flush or merge). */
  finalNorm: number;
  /** Index of the largest logit. */
  argmax: number;
  /** The logits. */
  logits: Float32Array;
}

/**
 * Bytes of KV cache one position takes: keys and values of every layer's KV
 * heads.
 *
 * @example
 * ```ts ignore
 * import { kvBytesPerPosition } from "./transformer.ts";
 * kvBytesPerPosition(model.config, "f16");
 * ```
 */
export function kvBytesPerPosition(c: ModelConfig, kvCache: "f16" | "f32"): number {
  return c.layers * 2 * c.kvHeads * c.headDim * (kvCache === "f32" ? 4 : 2);
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
  /**
   * Set when `contextLength: "trained"` was cut to fit `contextMemoryBytes`:
   * the trained length, the length chosen and its KV cache bytes.
   */
  readonly contextCap?: { trained: number; chosen: number; kvBytes: number };
  /** Largest prompt batch of one {@link prefill} step, and most rows of one {@link step}. */
  readonly batch: number;
  /** Sequences the KV cache holds ({@link TransformerOptions.sequences}). */
  readonly sequences: number;
  /** What loading did. */
  readonly loadStats: LoadStats;
  readonly #file: LoadedTiledFile;
  readonly #region: MemoryRegion;
  readonly #k: Kernels;
  readonly #packedRuns = new Map<number, WeightRun>();
  /** The file ranges the packed copy was made from. */
  readonly #packedSources: WeightRun[] = [];
  #packedBuffer: AlignedBuffer | undefined;
  readonly #workspace: AlignedBuffer;
  readonly #plan: Plan;
  readonly #logits: Float32Array;
  readonly #logitsBytes: Uint8Array;
  readonly #logitsOffset: number;
  readonly #one = new Uint32Array(1);
  #singleThreadDecode = false;
  /** Workspace offsets of each layer's expert-byte counter (-1: no experts). */
  #counters: number[] = [];
  /** Workspace offset of the layers' counters (one u64 each) and a buffer to read them. */
  #countersAt = 0;
  #counterBytes = new Uint8Array(8);
  readonly #counterSeen: number[] = [];
  #bankBytes: number[] = [];
  #evict: "never" | "after-pack" | "phase-boundary" = "after-pack";
  #direct: DirectFile | undefined;
  #stage: Stage | undefined;
  /** Workspace offset of the u64 timestamps taken after the embedding and each pass. */
  #times = 0;
  #stateBuffers!: RunState;
  /** The output head's operations, its norm's workspace offset and input (#buildPlan). */
  #head!: { ops: HeadOps; norm: number; input: Buf };
  /** Per sequence, how many leading positions its KV cache holds (a high-water mark). */
  readonly #filled: number[];
  /** Where each pass's K and V caches are, their element size and KV head count. */
  #kv: { caches: { k: number; v: number }[]; elt: number; heads: number } | undefined;
  /** The output head over every row of a batch, made by the first {@link prefillAll}. */
  #outputRows: OutputRows | undefined;
  /** Expert bytes each layer read in the last call (forward, prefill, trace). */
  #lastExpertBytes: number[] = [];
  #totalExpertBytes = 0;
  /**
   * The delay-aware schedule the plan follows: per pass, what its
   * attention, dense FFN and experts read and which expert outputs it
   * injects (scheduler/).
   */
  readonly schedule: Schedule;

  private constructor(file: LoadedTiledFile, options: TransformerOptions) {
    this.#file = file;
    this.#region = file.region;
    this.#k = openKernels();
    const c = modelConfig(file.file);
    this.config = c;
    const sequences = options.sequences ?? 1;
    if (!Number.isSafeInteger(sequences) || sequences < 1 || sequences > 256) {
      throw new RangeError(`model: sequences ${sequences} is not in [1, 256]`);
    }
    this.sequences = sequences;
    this.#filled = new Array(sequences).fill(0);
    let ctx: number;
    if (options.contextLength === "trained") {
      const trained = c.contextLength > 0 ? Math.min(c.contextLength, 1 << 20) : 4096;
      const perPosition = kvBytesPerPosition(c, options.kvCache ?? "f16") * sequences;
      const budget = options.contextMemoryBytes ?? Infinity;
      if (!(budget > 0)) throw new RangeError(`model: contextMemoryBytes ${budget} is not > 0`);
      const fits = Math.max(256, Math.floor(budget / perPosition));
      ctx = Math.min(trained, fits);
      if (ctx < trained) this.contextCap = { trained, chosen: ctx, kvBytes: ctx * perPosition };
    } else {
      ctx = options.contextLength ?? Math.min(c.contextLength > 0 ? c.contextLength : 4096, 4096);
    }
    if (!Number.isSafeInteger(ctx) || ctx < 1 || ctx > (1 << 20)) {
      throw new RangeError(`model: context length ${ctx} is out of range`);
    }
    if (ctx * sequences > (1 << 22)) {
      throw new RangeError(
        `model: ${sequences} sequences of ${ctx} positions exceed the 4,194,304 the kernels hold`,
      );
    }
    this.contextLength = ctx;
    const batch = options.batch ?? 64;
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > 1024) {
      throw new RangeError(`model: batch ${batch} is not in [1, 1024]`);
    }
    this.batch = batch;

    // Weights: the tiled runs of the file, packed into panels where that is faster.
    const packStart = performance.now();
    const packed = options.packed ?? "auto";
    if (packed !== true && packed !== false && packed !== "auto") {
      throw new RangeError(`model: packed ${packed} is not true, false or "auto"`);
    }
    const wantPacked = packed === "auto" ? panelsByDefault(this.#k.variant) : packed;
    const runs = this.#collectRuns();
    this.#evict = options.evict ?? (options.evictSource === false ? "never" : "after-pack");
    if (!["never", "after-pack", "phase-boundary"].includes(this.#evict)) {
      throw new RangeError(
        `model: evict mode "${this.#evict}" is not never, after-pack or phase-boundary`,
      );
    }
    if (wantPacked) this.#pack(runs, this.#evict !== "never", options.packProgress);
    const packMs = this.#packedBuffer ? performance.now() - packStart : 0;
    const run = (r: WeightRun) => this.#packedRuns.get(r.offset) ?? r;

    // Workspace: activations for a batch, norms, RoPE tables, KV caches.
    const schedule = buildSchedule({
      layers: c.layers,
      hasDense: c.ffnHidden > 0,
      hasExperts: c.moe !== null,
      pipeline: c.pipeline,
    });
    this.schedule = schedule;
    const L = new Layout();
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const pad = (n: number) => Math.ceil(n / 32) * 32;
    const widest = Math.max(
      c.ffnHidden,
      runs.layers.reduce((m, r) => Math.max(m, r.shared?.down.cols ?? 0), 0),
    );
    const hiddenRows = () => L.rows(c.hidden * 4, batch);
    const expertsQuantized = runs.layers.some((r) =>
      r.experts !== undefined && r.experts.down[0].kind !== RUN_KIND.TILES_F32
    );
    const s: RunState = {
      x: hiddenRows(),
      xb: L.rows(pad(c.hidden) * 4, batch),
      xq: L.rows(actRowBytes(pad(c.hidden)), batch),
      qkv: L.rows((qDim + 2 * kvDim) * 4, batch),
      att: L.rows(pad(qDim) * 4, batch),
      attq: L.rows(actRowBytes(pad(qDim)), batch),
      proj: hiddenRows(),
      gateUp: L.rows(2 * Math.max(1, widest) * 4, batch),
      hb: L.rows(pad(Math.max(1, widest)) * 4, batch),
      hq: L.rows(actRowBytes(pad(Math.max(1, widest))), batch),
      d: hiddenRows(),
      e: hiddenRows(),
      sel: L.rows(8 * Math.max(1, c.moe?.topK ?? 1), batch),
      moeScratch: c.moe === null
        ? { offset: 0, stride: 0 }
        : L.rows(moeScratchBytes(c.hidden, c.moe.expertFfn, expertsQuantized), batch),
      shared: hiddenRows(),
      xf: hiddenRows(),
      ring: Array.from({ length: schedule.ringSlots }, hiddenRows),
      queue: Array.from({ length: schedule.queueSlots }, hiddenRows),
      logits: { offset: L.take(c.vocab * 4), stride: 0 },
    };
    const vectors: [number, Float32Array][] = [];
    const vec = (v: Float32Array | undefined): number | undefined => {
      if (v === undefined) return undefined;
      const at = L.take(v.byteLength);
      vectors.push([at, v]);
      return at;
    };
    // Sequence s keeps its keys and values at cache indices [s * ctx, (s + 1) * ctx).
    const kvBytes = sequences * ctx * kvDim * (options.kvCache === "f32" ? 4 : 2);
    const layers: LayerWeights[] = [];
    // One block of u64 expert-byte counters, one per layer, read in one call per token.
    const counters = L.take(8 * c.layers);
    this.#countersAt = counters;
    for (let l = 0; l < c.layers; l++) {
      const w = this.#layerWeights(l, runs.layers[l], vec, () => counters + 8 * l);
      layers.push({
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
      });
    }
    const caches = schedule.steps.map(() => ({ k: L.take(kvBytes), v: L.take(kvBytes) }));
    this.#kv = { caches, elt: options.kvCache === "f32" ? 4 : 2, heads: c.kvHeads };
    this.#times = L.take(8 * (schedule.steps.length + 1));
    const disk = this.#diskTier(options, schedule, layers, batch, expertsQuantized, L, vectors);
    this.#counters = layers.map((w) => w.moe?.counter ?? -1);
    this.#counterBytes = new Uint8Array(8 * c.layers);
    this.#bankBytes = layers.map((w) =>
      w.moe === undefined
        ? 0
        : w.moe.gateUp.reduce((n, r, e) => n + r.length + w.moe!.down[e].length, 0)
    );
    const outputNorm = vec(this.#norm(VOCAB_LAYER, MATRIX.OUTPUT_NORM, c.hidden))!;
    const freqGlobal = vec(ropeFrequencies(c.ropeDims, c.ropeTheta, c.ropeScaling))!;
    const freqLocal = vec(ropeFrequencies(c.ropeDims, c.ropeLocalTheta, null))!;
    const ones = c.vNorm ? vec(new Float32Array(c.headDim).fill(1)) : undefined;
    const embd = run(runs.embd);
    const output = run(runs.output);
    this.#stateBuffers = s;

    // Not huge pages: the KV cache is touched a position at a time, and a
    // 2 MiB page would make all of it resident at once.
    this.#workspace = allocAligned(L.size, 4096);
    try {
      for (const [at, v] of vectors) {
        this.#workspace.write(at, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
      }
      this.#plan = this.#buildPlan(c, s, layers, caches, embd, output, {
        outputNorm,
        freqGlobal,
        freqLocal,
        ones,
        kvType: options.kvCache === "f32" ? 1 : 2,
      }, disk);
    } catch (error) {
      this.#workspace.close();
      this.#stage?.close();
      this.#direct?.close();
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
    this.#readCounters(); // the decode tuning's reads are not the caller's
    this.#totalExpertBytes = 0;
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

  /**
   * Opens the disk expert tier when asked for and the model has experts:
   * the file for direct reads, staging slots for every expert a batch can
   * have in flight over the fetch window (one pass when sync, the expert
   * queue's length when staged) plus the LRU cache, and in the workspace
   * each layer's expert file ranges and the saved selections and inputs.
   */
  #diskTier(
    options: TransformerOptions,
    schedule: Schedule,
    layers: LayerWeights[],
    batch: number,
    quantized: boolean,
    L: Layout,
    vectors: [number, Float32Array][],
  ): DiskTier | undefined {
    const c = this.config;
    const tier = options.expertTier ?? "mmap";
    const fetch = options.expertFetch ?? "sync";
    if (tier !== "mmap" && tier !== "disk") {
      throw new RangeError(`model: expert tier "${tier}" is not mmap or disk`);
    }
    if (fetch !== "sync" && fetch !== "staged") {
      throw new RangeError(`model: expert fetch "${fetch}" is not sync or staged`);
    }
    const cacheMiB = options.expertCacheMiB ?? 0;
    if (!Number.isFinite(cacheMiB) || cacheMiB < 0 || cacheMiB > 1 << 20) {
      throw new RangeError(`model: an expert cache of ${cacheMiB} MiB`);
    }
    if (tier === "mmap" || c.moe === null) return undefined;
    const moe = c.moe;
    const staged = fetch === "staged" && schedule.queueSlots > 0;
    // As many slots in both modes (the staged window's), so that sync and
    // staged differ only in when they wait, not in what stays cached.
    const window = Math.max(1, schedule.queueSlots);
    let span = 0;
    for (const w of layers) {
      w.moe?.gateUp.forEach((g, e) => span = Math.max(span, g.length + w.moe!.down[e].length));
    }
    const direct = openDirect(this.#file.path);
    try {
      const slotBytes = span + 2 * direct.alignment;
      const inFlight = window * Math.min(moe.experts, batch * moe.topK);
      const slots = inFlight + Math.floor(cacheMiB * 2 ** 20 / slotBytes);
      if (slots > 4096) {
        throw new RangeError(
          `model: the disk tier needs ${slots} staging slots, more than 4096 (lower the batch or the cache)`,
        );
      }
      this.#stage = createStage(direct, slotBytes, slots);
    } catch (error) {
      direct.close();
      throw error;
    }
    this.#direct = direct;
    const spans = layers.map((w, l) => {
      if (w.moe === undefined) return -1;
      const bank = this.#file.file.experts.get(l)!;
      const table = new BigUint64Array(bank.spans.length * 2);
      bank.spans.forEach((x, e) => {
        table[2 * e] = BigInt(x.offset);
        table[2 * e + 1] = BigInt(x.length);
      });
      const at = L.take(table.byteLength);
      vectors.push([at, new Float32Array(table.buffer)]);
      return at;
    });
    const xBytes = quantized ? actRowBytes(c.hidden) : c.hidden * 4;
    return {
      stage: this.#stage,
      staged,
      spans,
      sel: Array.from({ length: staged ? window : 1 }, () => L.rows(12 * moe.topK, batch)),
      x: Array.from({ length: staged ? window : 1 }, () => L.rows(xBytes, batch)),
    };
  }

  /**
   * The disk expert tier's counters since load: experts found in a staging
   * slot (hits) or read (misses), bytes read, and milliseconds spent
   * waiting for reads; undefined without the disk tier.
   *
   * @example
   * ```ts ignore
   * console.log(model.expertTierStats?.stallMs);
   * ```
   */
  get expertTierStats():
    | { hits: number; misses: number; bytesRead: number; stallMs: number; direct: boolean }
    | undefined {
    if (this.#stage === undefined) return undefined;
    const st = this.#stage.stats();
    return {
      hits: st.hits,
      misses: st.misses,
      bytesRead: st.bytesRead,
      stallMs: st.stallNs / 1e6,
      direct: this.#direct!.direct,
    };
  }

  /**
   * Milliseconds of each pass of the last run (the wall time between the
   * end of the previous pass, or the embedding, and its end, waits for
   * staged expert reads included), from timestamps the plan takes.
   *
   * @example
   * ```ts ignore
   * model.forward(1, 0);
   * console.log(model.passTimes());
   * ```
   */
  passTimes(): number[] {
    const n = this.schedule.steps.length + 1;
    const bytes = new Uint8Array(8 * n);
    this.#workspace.read(this.#times, bytes.length, bytes);
    const v = new BigUint64Array(bytes.buffer);
    return Array.from({ length: n - 1 }, (_, i) => Number(v[i + 1] - v[i]) / 1e6);
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
   * 1. token embedding (times sqrt(d) when the header says so);
   * 2. per pass of the schedule (scheduler/; one pass per layer except for
   *    FixedPoint models): attention on the stream the schedule names
   *    (RMSNorm, one Q8_0 quantization, fused Q/K/V (+ biases), QK-norm,
   *    V-norm, RoPE, K/V appended to the pass's cache, attention over the
   *    visible positions, O projection, post-attention norm) added into its
   *    stream; the dense FFN (RMSNorm, fused gate/up, gated activation, down,
   *    post-FFN norm) on the stream or delayed residual the schedule names;
   *    the experts (RMSNorm, f32 router, top-k, only the selected experts'
   *    tiles, shared expert), into the queue slot of the pass they are
   *    injected at; then the combination of the layer's combine style;
   * 3. expert outputs still pending are added (the flush);
   * 4. for the batch's last token only: final norm, output projection (the
   *    embeddings when tied), final soft-cap.
   */
  #buildPlan(
    c: ModelConfig,
    s: RunState,
    layers: LayerWeights[],
    caches: { k: number; v: number }[],
    embd: WeightRun,
    output: WeightRun,
    v: {
      outputNorm: number;
      freqGlobal: number;
      freqLocal: number;
      ones?: number;
      kvType: number;
    },
    disk?: DiskTier,
  ): Plan {
    const b = new PlanBuilder();
    const sched = this.schedule;
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
    const project = (r: WeightRun, x: Buf, n: number, xq: Buf, y: Buf, last = false, into = b) => {
      const o = { lastOnly: last };
      if (quantized(r)) {
        into.quantize(x, pad(n), xq, o);
        into.matmul(r, xq, y, o);
      } else {
        into.matmul(r, x, y, o);
      }
    };
    const rope = c.ropeStyle === "normal" ? 0 : 1;
    const act = c.activation === "silu" ? "silu" : "gelu";
    const copy = (dst: Buf, src: Buf) => b.lincomb(dst, dst, src, c.hidden, 0, 1);

    /** stream += Attn(N_attn(input)) of layer l with the KV cache of pass `step`. */
    const attention = (l: number, step: number, input: Buf, stream: Buf) => {
      const w = layers[l];
      const window = c.windows[l];
      // RMSNorm, one quantization of the normed input, fused Q/K/V (+ biases).
      b.rmsNorm(input, w.attnNorm, s.xb, c.hidden, c.eps);
      project(w.qkv, s.xb, c.hidden, s.xq, s.qkv);
      if (w.qBias !== undefined) b.addVec(q, w.qBias, qDim);
      if (w.kBias !== undefined) b.addVec(kNew, w.kBias, kvDim);
      if (w.vBias !== undefined) b.addVec(vNew, w.vBias, kvDim);
      // QK-norm (per head, or over the whole q and k for OLMoE), V-norm, then RoPE.
      if (w.qNorm !== undefined) {
        if (c.qkNormFull) b.headNorm(q, 1, qDim, w.qNorm, c.eps);
        else b.headNorm(q, c.heads, c.headDim, w.qNorm, c.eps);
      }
      if (w.kNorm !== undefined) {
        if (c.qkNormFull) b.headNorm(kNew, 1, kvDim, w.kNorm, c.eps);
        else b.headNorm(kNew, c.kvHeads, c.headDim, w.kNorm, c.eps);
      }
      if (v.ones !== undefined) b.headNorm(vNew, c.kvHeads, c.headDim, v.ones, c.eps);
      const freqs = window > 0 ? v.freqLocal : v.freqGlobal;
      b.rope(q, c.heads, c.headDim, c.ropeDims, freqs, rope);
      b.rope(kNew, c.kvHeads, c.headDim, c.ropeDims, freqs, rope);
      // Append k and v to the pass's cache; attend over the visible positions.
      b.kvStore(kNew, caches[step].k, kvDim, v.kvType, c.headDim);
      b.kvStore(vNew, caches[step].v, kvDim, v.kvType, c.headDim);
      b.attention({
        q,
        k: caches[step].k,
        v: caches[step].v,
        kvType: v.kvType,
        heads: c.heads,
        kvHeads: c.kvHeads,
        headDim: c.headDim,
        window,
        scale: c.attnScale,
        softcap: c.attnSoftcap,
        out: s.att,
      });
      // Output projection, optional post-attention norm, into the stream.
      project(w.o, s.att, qDim, s.attq, s.proj);
      if (w.postAttnNorm !== undefined) {
        b.rmsNorm(s.proj, w.postAttnNorm, s.proj, c.hidden, c.eps);
      }
      b.add(stream, s.proj, c.hidden);
    };

    /** out = FFN(N_ffn(input)) of layer l. */
    const dense = (l: number, input: Buf, out: Buf) => {
      const w = layers[l];
      b.rmsNorm(input, w.ffnNorm!, s.xb, c.hidden, c.eps);
      project(w.gateUp!, s.xb, c.hidden, s.xq, s.gateUp);
      b.gated(act, s.gateUp, s.hb, c.ffnHidden);
      project(w.down!, s.hb, c.ffnHidden, s.hq, out);
      if (w.postFfnNorm !== undefined) b.rmsNorm(out, w.postFfnNorm, out, c.hidden, c.eps);
    };

    /**
     * out = MoE(N_moe(input)) of layer l: the shared expert (if any), then
     * only the selected experts. With the disk tier the selection and the
     * input are kept in saved buffer `saved` and the experts fetched; unless
     * `defer`, they are also computed here (else by `finishExperts` at the
     * injection pass, from the same saved inputs, so with the same result).
     */
    const experts = (l: number, input: Buf, out: Buf, saved = 0, defer = false) => {
      const m = layers[l].moe!;
      const moe = c.moe!;
      const sel = disk ? disk.sel[saved] : s.sel;
      b.rmsNorm(input, m.norm, s.xb, c.hidden, c.eps);
      b.route(s.xb, m.router, c.hidden, moe.experts, moe.topK, moe.renormalize, sel);
      const quant = quantized(m.down[0]);
      if (disk) {
        if (quant) b.quantize(s.xb, pad(c.hidden), disk.x[saved]);
        else b.lincomb(disk.x[saved], disk.x[saved], s.xb, c.hidden, 0, 1);
        b.fetch(disk.stage, l, moe.experts, moe.topK, sel, disk.spans[l]);
      } else if (quant) {
        b.quantize(s.xb, pad(c.hidden), s.xq);
      }
      b.lincomb(out, out, out, c.hidden, 0, 0);
      if (m.shared !== undefined) {
        const sh = m.shared;
        project(sh.gateUp, s.xb, c.hidden, s.xq, s.gateUp);
        b.gated(act, s.gateUp, s.hb, sh.ffn);
        project(sh.down, s.hb, sh.ffn, s.hq, s.shared);
        b.gateScale(s.shared, c.hidden, sh.gate, s.xb, c.hidden);
        b.add(out, s.shared, c.hidden);
      }
      if (!defer) finishExperts(l, out, saved);
    };
    /** out += the selected experts of layer l (from saved buffer `saved` with the disk tier). */
    const finishExperts = (l: number, out: Buf, saved: number) => {
      const m = layers[l].moe!;
      const moe = c.moe!;
      if (disk) {
        b.moeStaged({
          stage: disk.stage,
          gateUp: m.gateUp[0],
          down: m.down[0],
          nExperts: moe.experts,
          topK: moe.topK,
          sel: disk.sel[saved],
          x: disk.x[saved],
          act,
          scratch: s.moeScratch,
          out,
          counter: m.counter,
        });
        return;
      }
      b.moe({
        gateUp: m.gateUp,
        down: m.down,
        topK: moe.topK,
        sel: s.sel,
        x: quantized(m.down[0]) ? s.xq : s.xb,
        act,
        scratch: s.moeScratch,
        out,
        counter: m.counter,
      });
    };

    const mod = (i: number, n: number) => ((i % n) + n) % n;
    /** Where the expert output of pass `step` waits until it is injected. */
    const queued = (step: number) =>
      s.queue.length === 0 ? s.e : s.queue[mod(step + c.pipeline!.expertDelay, s.queue.length)];
    /** The disk tier's saved selection and input of pass `step`. */
    const savedOf = (step: number) =>
      disk === undefined || disk.sel.length === 1
        ? 0
        : mod(step + c.pipeline!.expertDelay, disk.sel.length);
    const staged = disk?.staged ?? false;
    /** Adds the expert output of pass `from` (computed here when staged) into `into`. */
    const inject = (from: number, into: Buf) => {
      if (staged) finishExperts(sched.steps[from].layer, queued(from), savedOf(from));
      b.add(into, queued(from), c.hidden);
    };
    const residual = (r: StreamRead, xIn: Buf): Buf => {
      if ("residualOf" in r) return s.ring[mod(r.residualOf, s.ring.length)];
      if (r.stream === "s_f" || r.stream === "xfm_reg") return s.xf;
      return xIn;
    };

    // 1. Token embedding (scaled by sqrt(d) when the header says so).
    b.section("embedding");
    b.embed(embd, s.x, c.embedScale);
    b.timestamp(this.#times);
    if (sched.ringSlots > 0) copy(s.ring[mod(-1, s.ring.length)], s.x);
    if (sched.style === COMBINE_STYLE.DECOUPLED_STREAMS) copy(s.xf, s.x);
    if (sched.style === COMBINE_STYLE.PIPELINE_REGISTERS) copy(s.xf, s.x);

    // 2. The passes.
    for (const step of sched.steps) {
      const l = step.layer;
      b.section(`layer ${step.step} attention`);
      switch (sched.style) {
        case COMBINE_STYLE.DECOUPLED_STREAMS: {
          attention(l, step.step, s.x, s.x);
          b.section(`layer ${step.step} ffn`);
          if (step.dense) dense(l, s.xf, s.d);
          if (step.experts) experts(l, s.xf, s.e);
          if (step.dense) b.add(s.xf, s.d, c.hidden);
          if (step.experts) b.add(s.xf, s.e, c.hidden);
          if (step.merge) {
            b.lincomb(s.x, s.x, s.xf, c.hidden, 0.5, 0.5);
            copy(s.xf, s.x);
          }
          break;
        }
        case COMBINE_STYLE.PIPELINE_REGISTERS: {
          // f reads the previous layer's xfm_reg; then attn_reg moves on; xfm_reg = attn_reg + f.
          if (step.dense) dense(l, s.xf, s.d);
          else b.lincomb(s.d, s.d, s.d, c.hidden, 0, 0);
          if (step.experts) {
            experts(l, s.xf, s.e);
            b.add(s.d, s.e, c.hidden);
          }
          attention(l, step.step, s.x, s.x);
          b.section(`layer ${step.step} ffn`);
          b.lincomb(s.xf, s.x, s.d, c.hidden, 1, 1);
          break;
        }
        default: {
          // ParallelSqrt2, DelayedSum, AsyncExperts, FixedPoint and the sequential families.
          if (
            step.experts && "stream" in step.experts.input && step.experts.input.stream === "x_in"
          ) {
            // AsyncExperts: routed before attention.
            experts(l, s.x, queued(step.step), savedOf(step.step), staged);
          }
          attention(l, step.step, s.x, s.x); // s.x is x_mid from here
          b.section(`layer ${step.step} ffn`);
          // Route (and with the disk tier start the reads) before the dense
          // FFN: the two read different inputs into different buffers, and
          // routing first gives the reads the dense FFN's time as well.
          if (
            step.experts &&
            !("stream" in step.experts.input && step.experts.input.stream === "x_in")
          ) {
            experts(l, s.x, queued(step.step), savedOf(step.step), staged);
          }
          if (step.dense) dense(l, residual(step.dense, s.x), s.d);
          if (sched.style === COMBINE_STYLE.PARALLEL_SQRT2) {
            const r = Math.fround(1 / Math.SQRT2);
            if (step.dense) b.lincomb(s.d, s.d, s.e, c.hidden, r, r);
            else b.lincomb(s.d, s.d, s.e, c.hidden, 0, r);
            b.add(s.x, s.d, c.hidden);
          } else {
            if (step.dense) b.add(s.x, s.d, c.hidden);
            for (const from of step.injects) inject(from, s.x);
          }
          if (sched.ringSlots > 0) copy(s.ring[mod(step.step, s.ring.length)], s.x);
        }
      }
      b.timestamp(this.#times + 8 * (step.step + 1));
    }
    // 3. Expert outputs still pending after the last layer.
    const final = sched.output === "xfm_reg" ? s.xf : s.x;
    if (sched.flush.length > 0) {
      b.section("flush");
      for (const from of sched.flush) inject(from, final);
    }
    // 4. Last token only: final norm, output projection (the embeddings when tied), soft-cap.
    // prefillAll runs the same operations over every row, as a plan of their own (OutputRows).
    const head: HeadOps = (into, input, norm, out, lastOnly) => {
      const o = { lastOnly };
      into.rmsNorm(input, norm, out.xb, c.hidden, c.eps, o);
      project(output, out.xb, c.hidden, out.xq, out.logits, lastOnly, into);
      if (c.finalSoftcap > 0) into.softcap(out.logits, c.vocab, c.finalSoftcap, o);
    };
    this.#head = { ops: head, norm: v.outputNorm, input: final };
    b.section("output");
    head(b, final, v.outputNorm, s, true);
    return b.build(this.#workspace, this.batch, this.contextLength * this.sequences);
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
    return {
      ...tileRunKind(members.map((m) => m.tileType)),
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
    const bank = this.#file.file.experts.get(l);
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
        region: this.#region,
        offset: span.offset,
        length: guBytes,
        cols: gate.cols,
        rows: [gate.rows, up.rows],
      });
      out.down.push({
        ...tileRunKind([down.tileType]),
        region: this.#region,
        offset: span.offset + guBytes,
        length: downBytes,
        cols: down.cols,
        rows: [down.rows],
      });
    }
    return out;
  }

  /**
   * Packs every Q4_0/Q8_0/Q4_1 run into one allocation of 16-row panels, then
   * (when `evict`) drops the file pages it came from.
   */
  #pack(
    runs: ModelRuns,
    evict: boolean,
    progress?: (done: number, total: number) => void,
  ): void {
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
    // Panels hold whole groups of 32 columns; a run with a partial last
    // group (a 48-wide shared expert) stays in tiles.
    const todo = [...all.values()].filter((r) =>
      packableQuant(r) !== undefined && r.cols % 32 === 0
    );
    if (todo.length === 0) return;
    const sizes = todo.map((r) => packedBytes(packableQuant(r)!, r.cols, r.rows));
    const total = sizes.reduce((a, n) => a + Math.ceil(n / 64) * 64, 0);
    // 2 MiB aligned and advised: transparent huge pages spare the TLB a miss
    // every 4 KiB of the stream (where the kernel does not allow them, the
    // advice is refused and ignored).
    const dst = allocAligned(total, 2 << 20);
    try {
      hugePages(dst);
      let at = 0;
      todo.forEach((r, i) => {
        this.#packedSources.push(r);
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
    r: LayerRuns,
    vec: (v: Float32Array | undefined) => number | undefined,
    counter: () => number,
  ): LayerWeights {
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
    const w: LayerWeights = {
      attnNorm: vec(this.#norm(l, MATRIX.ATTN_NORM, c.hidden))!,
      qkv: r.qkv,
      qBias: vec(this.#bias(l, MATRIX.Q_BIAS, qDim)),
      kBias: vec(this.#bias(l, MATRIX.K_BIAS, kvDim)),
      vBias: vec(this.#bias(l, MATRIX.V_BIAS, kvDim)),
      qNorm: vec(this.#norm(l, MATRIX.Q_NORM, c.qkNormFull ? qDim : c.headDim)),
      kNorm: vec(this.#norm(l, MATRIX.K_NORM, c.qkNormFull ? kvDim : c.headDim)),
      o: r.o,
      postAttnNorm: vec(this.#norm(l, MATRIX.POST_ATTN_NORM, c.hidden)),
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
      w.ffnNorm = vec(this.#need(this.#norm(l, MATRIX.FFN_NORM, c.hidden), l, "ffn_norm"));
      w.gateUp = r.gateUp;
      w.down = r.down;
      w.postFfnNorm = vec(this.#norm(l, MATRIX.POST_FFN_NORM, c.hidden));
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
      let shared: MoeWeights["shared"];
      if (r.shared !== undefined) {
        const ffn = r.shared.down.cols;
        if (r.shared.gateUp.rows.length !== 2 || r.shared.gateUp.rows[0] !== ffn) {
          throw new RangeError(`model: layer ${l} shared gate/up are not one fused run`);
        }
        const gate = this.#bias(l, MATRIX.SHARED_EXPERT_GATE_INP, c.hidden);
        shared = {
          gateUp: r.shared.gateUp,
          down: r.shared.down,
          gate: vec(this.#need(gate, l, "shared_expert_gate_inp"))!,
          ffn,
        };
      }
      w.moe = {
        norm: vec(this.#need(norm, l, "moe_norm"))!,
        router: vec(readF32Entry(this.#file.source, router).slice())!,
        gateUp: r.experts.gateUp,
        down: r.experts.down,
        shared,
        counter: counter(),
      };
    }
    return w;
  }

  #need<T>(v: T | undefined, l: number, what: string): T {
    if (v === undefined) throw new RangeError(`model: layer ${l} has no ${what}`);
    return v;
  }

  /** Checks positions of sequence 0 (the single-sequence methods) and marks them held. */
  #checkPositions(first: number, count: number): void {
    if (!Number.isSafeInteger(first) || first < 0 || first + count > this.contextLength) {
      throw new RangeError(
        `model: positions [${first}, ${
          first + count
        }) are outside the context of ${this.contextLength}`,
      );
    }
    this.#filled[0] = Math.max(this.#filled[0], first + count);
  }

  #checkToken(token: number): void {
    if (!Number.isSafeInteger(token) || token < 0 || token >= this.config.vocab) {
      throw new RangeError(`model: token ${token} is not in [0, ${this.config.vocab})`);
    }
  }

  /** Copies the last logits out of the workspace, and the expert counters. */
  #readLogits(): Float32Array {
    this.#workspace.read(this.#logitsOffset, this.#logitsBytes.length, this.#logitsBytes);
    this.#readCounters();
    return this.#logits;
  }

  /** The expert bytes each layer read since the counters were last read. */
  #readCounters(): void {
    if (this.config.moe === null) {
      this.#lastExpertBytes = this.#counters.map(() => 0);
      return;
    }
    this.#workspace.read(this.#countersAt, this.#counterBytes.length, this.#counterBytes);
    const view = new DataView(this.#counterBytes.buffer);
    this.#lastExpertBytes = this.#counters.map((off, l) => {
      if (off < 0) return 0;
      const now = Number(view.getBigUint64(8 * l, true));
      const delta = now - (this.#counterSeen[l] ?? 0);
      this.#counterSeen[l] = now;
      return delta;
    });
    for (const n of this.#lastExpertBytes) this.#totalExpertBytes += n;
  }

  /**
   * Expert weight bytes read: per layer by the last {@link forward},
   * {@link prefill} or {@link trace} call (for one decoded token, exactly
   * the spans of the experts its router selected), and in total since load.
   * All zero for dense models.
   *
   * @example
   * ```ts ignore
   * model.forward(1, 0);
   * console.log(model.expertBytes.perLayer);
   * ```
   */
  get expertBytes(): { perLayer: readonly number[]; total: number } {
    return { perLayer: this.#lastExpertBytes, total: this.#totalExpertBytes };
  }

  /**
   * Per layer, the bytes of all its experts' tiles: what a runtime that
   * reads the whole bank would read per token (0 for layers without experts).
   *
   * @example
   * ```ts ignore
   * console.log(model.expertBankBytes);
   * ```
   */
  get expertBankBytes(): readonly number[] {
    return this.#bankBytes;
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
   * Runs prompt tokens at positions [pos, pos + tokens.length) in batches
   * like {@link prefill}, and calls `onLogits` with the logits of every
   * token from index `from` on (default 0), in order: each bit for bit the
   * logits {@link forward} returns for that token. The tokens before `from`
   * still fill the KV cache; only the output head is skipped for them.
   *
   * `logits` is a buffer the next row overwrites: copy what you keep, and
   * do not run this model from `onLogits`. The first call allocates the head's own workspace (one batch of
   * logits, batch x vocab x 4 bytes, and the batch's hidden rows), which
   * the model keeps until it is closed; generation never allocates it.
   *
   * @example
   * ```ts ignore
   * // The log-probability of each next token of a text.
   * const logp: number[] = [];
   * model.prefillAll(tokens.slice(0, -1), 0, (logits, i) => {
   *   let max = -Infinity;
   *   for (const x of logits) max = Math.max(max, x);
   *   let sum = 0;
   *   for (const x of logits) sum += Math.exp(x - max);
   *   logp.push(logits[tokens[i + 1]] - max - Math.log(sum));
   * });
   * ```
   */
  prefillAll(
    tokens: readonly number[],
    pos: number,
    onLogits: (logits: Float32Array, index: number) => void,
    from = 0,
  ): void {
    if (tokens.length === 0) throw new RangeError("model: prefillAll needs at least one token");
    if (!Number.isSafeInteger(from) || from < 0 || from > tokens.length) {
      throw new RangeError(`model: prefillAll from ${from} is not in [0, ${tokens.length}]`);
    }
    this.#checkPositions(pos, tokens.length);
    for (const t of tokens) this.#checkToken(t);
    const head = this.#head;
    const rows = this.#headRows();
    // Everything up to the output section, which would compute the last row's logits only.
    const output = this.#plan.sections.find((x) => x.name === "output")!.first;
    const ids = Uint32Array.from(tokens);
    for (let i = 0; i < ids.length; i += this.batch) {
      const n = Math.min(ids.length - i, this.batch);
      this.#plan.runOps(ids.subarray(i, i + n), pos + i, 0, output);
      if (i + n > from) {
        rows.run(
          this.#workspace,
          head.input,
          Math.max(0, from - i),
          n,
          (l, r) => onLogits(l, i + r),
        );
      }
    }
    this.#readCounters();
  }

  /** The output head over every row of a batch, made on first use. */
  #headRows(): OutputRows {
    const head = this.#head;
    this.#outputRows ??= new OutputRows({
      ops: head.ops,
      norm: new Float32Array(this.#workspace.read(head.norm, this.config.hidden * 4).buffer),
      hidden: this.config.hidden,
      vocab: this.config.vocab,
      batch: this.batch,
      inputStride: head.input.stride,
    });
    return this.#outputRows;
  }

  /**
   * One step over several sequences at once: each row is a token of one
   * sequence at its position, and every weight is read once for all of them
   * (batched decode: one row per running sequence; a chunk of a prompt is
   * several rows of one sequence). `onLogits` gets the logits of each row
   * that asks for them, in row order, bit for bit what {@link forward} or
   * {@link prefill} of that sequence alone gives: every row's arithmetic is
   * its own, whatever else is in the batch.
   *
   * A sequence's rows must be at consecutive positions, starting at or
   * before the first position it has not run yet (a position below that
   * runs again, as after a rollback: later positions are then stale until
   * run again). More rows than {@link batch} run in several batches, in
   * order. `logits` is a buffer the next row overwrites.
   *
   * @example
   * ```ts ignore
   * // Sequence 0 decodes its token at position 12, sequence 1 prefills 3 prompt tokens.
   * model.step([
   *   { token: 42, sequence: 0, position: 12, logits: true },
   *   { token: 1, sequence: 1, position: 0, logits: false },
   *   { token: 2, sequence: 1, position: 1, logits: false },
   *   { token: 3, sequence: 1, position: 2, logits: true },
   * ], (logits, row) => console.log(row, logits[0]));
   * ```
   */
  step(
    rows: readonly StepRow[],
    onLogits: (logits: Float32Array, row: number) => void,
  ): void {
    const plan = this.#stepPlan(rows);
    for (const batch of plan.batches) {
      const last = this.#lastOnly(rows, batch.first, batch.ids.length);
      this.#plan.runRows(
        batch.ids,
        batch.bases,
        batch.positions,
        0,
        last ? 0xffffffff : plan.output,
      );
      this.#stepHead(rows, batch.first, batch.ids.length, onLogits, last);
    }
    this.#stepDone(plan.span);
  }

  /**
   * {@link step} without blocking the event loop: each batch runs on one of
   * Deno's blocking threads (the output head, a small part, on the caller).
   * The model must not be used otherwise until the promise settles.
   *
   * @example
   * ```ts ignore
   * await model.stepAsync([{ token: 42, sequence: 0, position: 12, logits: true }], (l) => {});
   * ```
   */
  async stepAsync(
    rows: readonly StepRow[],
    onLogits: (logits: Float32Array, row: number) => void,
  ): Promise<void> {
    const plan = this.#stepPlan(rows);
    for (const batch of plan.batches) {
      const last = this.#lastOnly(rows, batch.first, batch.ids.length);
      await this.#plan.runRowsAsync(
        batch.ids,
        batch.bases,
        batch.positions,
        0,
        last ? 0xffffffff : plan.output,
      );
      this.#stepHead(rows, batch.first, batch.ids.length, onLogits, last);
    }
    this.#stepDone(plan.span);
  }

  /**
   * Whether only the last row of a batch wants logits (one decoding
   * sequence, or a prompt chunk): then the plan's own head computes them, as
   * in {@link forward}, with no copy of the hidden rows into the batch head.
   */
  #lastOnly(rows: readonly StepRow[], first: number, n: number): boolean {
    for (let r = 0; r < n - 1; r++) if (rows[first + r].logits) return false;
    return rows[first + n - 1].logits;
  }

  /**
   * Copies the keys and values of the first `length` positions of sequence
   * `from` into sequence `to` (a prompt prefix both share, such as a system
   * prompt: `to` then runs only the rest), and sets what `to` holds to
   * `length` positions. The bytes are copied as they are, so `to`
   * continues exactly as if it had run the prefix itself. Not while a
   * {@link stepAsync} runs.
   *
   * @example
   * ```ts ignore
   * model.copySequence(0, 3, 120); // sequence 3 starts from sequence 0's first 120 positions
   * ```
   */
  copySequence(from: number, to: number, length: number): void {
    const s = this.sequences;
    for (const [name, v] of [["from", from], ["to", to]] as const) {
      if (!Number.isSafeInteger(v) || v < 0 || v >= s) {
        throw new RangeError(`model: copySequence ${name} ${v} is not in [0, ${s})`);
      }
    }
    if (from === to) throw new RangeError("model: copySequence from and to are the same");
    if (!Number.isSafeInteger(length) || length < 0 || length > this.#filled[from]) {
      throw new RangeError(
        `model: copySequence of ${length} positions; sequence ${from} holds ${this.#filled[from]}`,
      );
    }
    const kv = this.#kv!;
    const ctx = this.contextLength;
    const hd = this.config.headDim;
    // Caches are [kv head][sequence x ctx + position][head_dim]: one range per head.
    const bytes = length * hd * kv.elt;
    const buffer = new Uint8Array(bytes);
    for (const cache of kv.caches) {
      for (const base of [cache.k, cache.v]) {
        for (let h = 0; h < kv.heads; h++) {
          const head = base + h * s * ctx * hd * kv.elt;
          this.#workspace.read(head + from * ctx * hd * kv.elt, bytes, buffer);
          this.#workspace.write(head + to * ctx * hd * kv.elt, buffer);
        }
      }
    }
    this.#filled[to] = length;
  }

  /** Checks the rows of a step and cuts them into batches. */
  #stepPlan(rows: readonly StepRow[]): {
    batches: { first: number; ids: Uint32Array; bases: Uint32Array; positions: Uint32Array }[];
    span: Map<number, { first: number; next: number }>;
    output: number;
  } {
    if (rows.length === 0) throw new RangeError("model: step needs at least one row");
    const ctx = this.contextLength;
    // Per sequence: its rows' positions must be consecutive and reach back to what it holds.
    const span = new Map<number, { first: number; next: number }>();
    for (const [i, r] of rows.entries()) {
      this.#checkToken(r.token);
      if (!Number.isSafeInteger(r.sequence) || r.sequence < 0 || r.sequence >= this.sequences) {
        throw new RangeError(
          `model: row ${i}: sequence ${r.sequence} is not in [0, ${this.sequences})`,
        );
      }
      if (!Number.isSafeInteger(r.position) || r.position < 0 || r.position >= ctx) {
        throw new RangeError(
          `model: row ${i}: position ${r.position} is outside the context of ${ctx}`,
        );
      }
      const seen = span.get(r.sequence);
      if (seen === undefined) {
        if (r.position > this.#filled[r.sequence]) {
          throw new RangeError(
            `model: row ${i}: sequence ${r.sequence} holds ${
              this.#filled[r.sequence]
            } positions; ` +
              `position ${r.position} would leave a gap`,
          );
        }
        span.set(r.sequence, { first: r.position, next: r.position + 1 });
      } else if (r.position !== seen.next) {
        throw new RangeError(
          `model: row ${i}: sequence ${r.sequence} at position ${r.position}, expected ${seen.next}`,
        );
      } else seen.next++;
    }
    this.#headRows();
    const batches = [];
    for (let i = 0; i < rows.length; i += this.batch) {
      const n = Math.min(rows.length - i, this.batch);
      const ids = new Uint32Array(n);
      const bases = new Uint32Array(n);
      const positions = new Uint32Array(n);
      for (let r = 0; r < n; r++) {
        const row = rows[i + r];
        ids[r] = row.token;
        // Sequence s keeps its keys and values at cache indices [s * ctx, (s + 1) * ctx).
        bases[r] = row.sequence * ctx;
        positions[r] = row.position;
      }
      batches.push({ first: i, ids, bases, positions });
    }
    // Everything up to the output section, which would compute the last row's logits only.
    const output = this.#plan.sections.find((x) => x.name === "output")!.first;
    return { batches, span, output };
  }

  /** The head over each run of consecutive rows of a batch that want logits. */
  #stepHead(
    rows: readonly StepRow[],
    first: number,
    n: number,
    onLogits: (logits: Float32Array, row: number) => void,
    lastOnly: boolean,
  ): void {
    if (lastOnly) {
      onLogits(this.#readLogits(), first + n - 1);
      return;
    }
    const head = this.#outputRows!;
    for (let r = 0; r < n;) {
      if (!rows[first + r].logits) {
        r++;
        continue;
      }
      let end = r + 1;
      while (end < n && rows[first + end].logits) end++;
      head.run(this.#workspace, this.#head.input, r, end, (l, k) => onLogits(l, first + k));
      r = end;
    }
  }

  #stepDone(span: Map<number, { first: number; next: number }>): void {
    for (const [sequence, { next }] of span) {
      this.#filled[sequence] = Math.max(this.#filled[sequence], next);
    }
    this.#readCounters();
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
   * Runs `tokens` at positions [pos, ...) one at a time, pass by pass, and
   * records after every pass of the schedule the L2 norm of each stream it
   * keeps (`x`; DecoupledStreams `s_a` and `s_f`; PipelineRegisters `A`
   * and `X`), the experts its router selected and the expert bytes it read;
   * then the norm of what the final norm reads, the argmax and the logits.
   * The same arithmetic as {@link forward}; for tests and notebooks.
   *
   * @example
   * ```ts ignore
   * const t = model.trace([1, 2, 3], 0);
   * console.log(t[2].steps[0].norms.x, t[2].argmax);
   * ```
   */
  trace(tokens: readonly number[], pos: number): TracePosition[] {
    if (tokens.length === 0) throw new RangeError("model: trace needs at least one token");
    this.#checkPositions(pos, tokens.length);
    for (const t of tokens) this.#checkToken(t);
    const c = this.config;
    const s = this.#stateBuffers;
    const row = new Uint8Array(c.hidden * 4);
    const norm = (buf: Buf) => {
      this.#workspace.read(buf.offset, row.length, row);
      const f = new Float32Array(row.buffer);
      let sum = 0;
      for (const x of f) sum += x * x;
      return Math.sqrt(sum);
    };
    const streams: [string, Buf][] = this.schedule.style === COMBINE_STYLE.DECOUPLED_STREAMS
      ? [["s_a", s.x], ["s_f", s.xf]]
      : this.schedule.style === COMBINE_STYLE.PIPELINE_REGISTERS
      ? [["A", s.x], ["X", s.xf]]
      : [["x", s.x]];
    const final = this.schedule.output === "xfm_reg" ? s.xf : s.x;
    const perLayer = new Array<number>(c.layers).fill(0);
    const out: TracePosition[] = [];
    tokens.forEach((token, i) => {
      this.#one[0] = token;
      const steps: TraceStep[] = [];
      let finalNorm = 0;
      for (const sec of this.#plan.sections) {
        if (sec.name === "output") finalNorm = norm(final);
        this.#plan.runOps(this.#one, pos + i, sec.first, sec.last);
        const m = /^layer (\d+) ffn$/.exec(sec.name);
        if (m === null) continue;
        const step = this.schedule.steps[Number(m[1])];
        const rec: TraceStep = { step: step.step, layer: step.layer, norms: {}, expertBytes: 0 };
        for (const [name, buf] of streams) rec.norms[name] = norm(buf);
        if (step.experts !== null && c.moe !== null) {
          const bytes = new Uint8Array(8 * c.moe.topK);
          this.#workspace.read(s.sel.offset, bytes.length, bytes);
          const v = new DataView(bytes.buffer);
          rec.experts = {
            ids: Array.from({ length: c.moe.topK }, (_, j) => v.getUint32(j * 4, true)),
            weights: Array.from(
              { length: c.moe.topK },
              (_, j) => v.getFloat32((c.moe!.topK + j) * 4, true),
            ),
          };
          this.#readCounters();
          rec.expertBytes = this.#lastExpertBytes[step.layer];
          perLayer[step.layer] += rec.expertBytes;
        }
        steps.push(rec);
      }
      const logits = this.#readLogits().slice();
      let argmax = 0;
      for (let j = 1; j < logits.length; j++) if (logits[j] > logits[argmax]) argmax = j;
      out.push({ steps, finalNorm, argmax, logits });
    });
    this.#lastExpertBytes = perLayer;
    return out;
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

  /**
   * Drops the mapped file's pages of every packed matrix (madvise
   * DONTNEED): the plan reads the packed copy, so they are only faulted
   * back by something else reading the file. Returns the bytes advised (0
   * when nothing is packed).
   *
   * @example
   * ```ts ignore
   * model.evictSource();
   * ```
   */
  evictSource(): number {
    let bytes = 0;
    for (const r of this.#packedSources) {
      this.#region.advise("dontneed", r.offset, r.length);
      bytes += r.length;
    }
    return bytes;
  }

  /**
   * Marks the prefill/decode boundary: with `evict: "phase-boundary"` the
   * packed matrices' file pages are dropped again (see
   * {@link evictSource}); otherwise nothing. {@link generate} calls it after
   * the prompt.
   *
   * @example
   * ```ts ignore
   * model.prefill(prompt, 0);
   * model.endPrefill();
   * ```
   */
  endPrefill(): void {
    if (this.#evict === "phase-boundary") this.evictSource();
  }

  /** The kernel variant this model's plan runs on (`./cflow doctor`). */
  get kernelVariant(): VariantName {
    return this.#k.variant;
  }

  /** The eviction mode chosen at load. */
  get evictMode(): "never" | "after-pack" | "phase-boundary" {
    return this.#evict;
  }

  /** Frees the plan, the workspace and the packed weights, and unmaps the file. */
  close(): void {
    this.#outputRows?.close();
    this.#outputRows = undefined;
    this.#plan.close();
    this.#stage?.close();
    this.#direct?.close();
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
