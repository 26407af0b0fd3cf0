/**
 * What a Transformer sets up once, before its first token: the run's shape
 * from the options (sequences, context length, batch), and the workspace
 * laid out for it (activations of a batch, the layers' vectors, KV caches,
 * counters and timestamps) with the forward plan built over it. The
 * Transformer keeps the result and runs the plan; nothing here runs it.
 * Internal to model/.
 *
 * @module
 */

import {
  actRowBytes,
  type AlignedBuffer,
  allocAligned,
  moeScratchBytes,
  panelsByDefault,
  type Plan,
  PlanBuilder,
  type VariantName,
} from "../ffi/mod.ts";
import type { DirectFile, Stage } from "../ffi/io.ts";
import { buildSchedule, type Schedule } from "../scheduler/mod.ts";
import { type ModelConfig, ropeFrequencies } from "./config.ts";
import { kvBytesPerPosition, KvLayout, kvPlanType } from "./kv_cache.ts";
import {
  type BlockContext,
  type LayerWeights,
  Layout,
  pad32,
  placeLayer,
  type RunState,
} from "./_plan_state.ts";
import { openDiskTier } from "./disk_tier.ts";
import { buildForwardPlan, type ForwardHead } from "./forward_plan.ts";
import type { TransformerOptions } from "./options.ts";
import type { ModelWeights, WeightOptions } from "./weights.ts";

/** How many sequences of how many positions, in batches of how many rows. */
export interface RunShape {
  sequences: number;
  contextLength: number;
  /** Set when `contextLength: "trained"` was cut to fit `contextMemoryBytes`. */
  contextCap?: { trained: number; chosen: number; kvBytes: number };
  batch: number;
  /**
   * The KV cache's layout: sequence s keeps its keys and values at cache
   * indices [s * contextLength, (s + 1) * contextLength).
   */
  kvLayout: KvLayout;
}

/**
 * The run's shape for these options, each value checked: sequences in
 * [1, 256], a context length in [1, 2^20] (the trained length cut to the
 * memory budget with `"trained"`), at most 2^22 positions in all, a batch in
 * [1, 1024], and a KV cache type the model's head_dim allows (q8_0 needs a
 * multiple of 32); nothing is allocated, so it can run before the weights
 * are packed.
 *
 * @example
 * ```ts ignore
 * const shape = runShape(config, { contextLength: 2048, sequences: 4 });
 * ```
 */
export function runShape(c: ModelConfig, options: TransformerOptions): RunShape {
  const sequences = options.sequences ?? 1;
  if (!Number.isSafeInteger(sequences) || sequences < 1 || sequences > 256) {
    throw new RangeError(`model: sequences ${sequences} is not in [1, 256]`);
  }
  let ctx: number;
  let contextCap: RunShape["contextCap"];
  if (options.contextLength === "trained") {
    const trained = c.contextLength > 0 ? Math.min(c.contextLength, 1 << 20) : 4096;
    const perPosition = kvBytesPerPosition(c, options.kvCache ?? "f16") * sequences;
    const budget = options.contextMemoryBytes ?? Infinity;
    if (!(budget > 0)) throw new RangeError(`model: contextMemoryBytes ${budget} is not > 0`);
    const fits = Math.max(256, Math.floor(budget / perPosition));
    ctx = Math.min(trained, fits);
    if (ctx < trained) contextCap = { trained, chosen: ctx, kvBytes: ctx * perPosition };
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
  const decode = options.decodeThreads;
  if (decode !== undefined && decode !== "auto" && decode !== "pool" && decode !== "single") {
    throw new RangeError(`model: decodeThreads ${decode} is not "auto", "pool" or "single"`);
  }
  const batch = options.batch ?? 64;
  if (!Number.isSafeInteger(batch) || batch < 1 || batch > 1024) {
    throw new RangeError(`model: batch ${batch} is not in [1, 1024]`);
  }
  const kvLayout = new KvLayout({
    type: options.kvCache ?? "f16",
    heads: c.kvHeads,
    headDim: c.headDim,
    context: ctx,
    sequences,
  });
  return { sequences, contextLength: ctx, contextCap, batch, kvLayout };
}

/** The workspace, the plan over it, and where the Transformer reads from it. */
export interface RunSetup {
  /** The delay-aware schedule the plan follows (scheduler/). */
  schedule: Schedule;
  workspace: AlignedBuffer;
  plan: Plan;
  /** The output head's operations, its norm's workspace offset and input. */
  head: ForwardHead;
  /** The activation buffers of a batch. */
  state: RunState;
  /** Where each pass's K and V caches are, and their layout. */
  kv: { caches: { k: number; v: number }[]; layout: KvLayout };
  /** Workspace offset of the layers' u64 expert-byte counters. */
  countersAt: number;
  /** Per layer, its counter's workspace offset (-1: no experts). */
  counters: number[];
  /** Workspace offset of the u64 timestamps taken after the embedding and each pass. */
  times: number;
  /** The disk expert tier's stager and file, when it is on. */
  stage?: Stage;
  direct?: DirectFile;
  /** Bytes of the workspace. */
  workspaceBytes: number;
}

/**
 * Lays out the workspace for `shape` (activations of a batch, the layers'
 * vectors, one K and one V cache per pass, counters, timestamps and, with
 * the disk tier, its staging), allocates it, writes the vectors and builds
 * the forward plan. On failure everything it opened is closed again; the
 * weights stay the caller's.
 *
 * @example
 * ```ts ignore
 * const setup = setUpRun(config, weights, options, runShape(config, options));
 * ```
 */
export function setUpRun(
  c: ModelConfig,
  weights: ModelWeights,
  options: TransformerOptions,
  shape: RunShape,
): RunSetup {
  const { batch, sequences, contextLength: ctx, kvLayout } = shape;
  const schedule = buildSchedule({
    layers: c.layers,
    hasDense: c.ffnHidden > 0,
    hasExperts: c.moe !== null,
    pipeline: c.pipeline,
  });

  // Activations for a batch of rows.
  const L = new Layout();
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  const pad = pad32;
  const widest = Math.max(
    c.ffnHidden,
    weights.layers.reduce((m, w) => Math.max(m, w.moe?.shared?.ffn ?? 0), 0),
  );
  const hiddenRows = () => L.rows(c.hidden * 4, batch);
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
      : L.rows(moeScratchBytes(c.hidden, c.moe.expertFfn, weights.expertsQuantized), batch),
    shared: hiddenRows(),
    xf: hiddenRows(),
    ring: Array.from({ length: schedule.ringSlots }, hiddenRows),
    queue: Array.from({ length: schedule.queueSlots }, hiddenRows),
    logits: { offset: L.take(c.vocab * 4), stride: 0 },
  };

  // The f32 vectors (norms, biases, RoPE frequencies), written once allocated.
  const vectors: [number, Float32Array][] = [];
  const vec = (v: Float32Array): number => {
    const at = L.take(v.byteLength);
    vectors.push([at, v]);
    return at;
  };
  // One block of u64 expert-byte counters, one per layer, read in one call per token.
  const countersAt = L.take(8 * c.layers);
  const layers: LayerWeights[] = weights.layers.map((w, l) =>
    placeLayer(w, vec, countersAt + 8 * l)
  );
  const kvBytes = kvLayout.cacheBytes;
  const caches = schedule.steps.map(() => ({ k: L.take(kvBytes), v: L.take(kvBytes) }));
  const times = L.take(8 * (schedule.steps.length + 1));
  const opened = openDiskTier(options, weights, schedule, batch, L, vectors);
  const outputNorm = vec(weights.outputNorm);
  const freqGlobal = vec(ropeFrequencies(c.ropeDims, c.ropeTheta, c.ropeScaling));
  const freqLocal = vec(ropeFrequencies(c.ropeDims, c.ropeLocalTheta, null));
  const ones = c.vNorm ? vec(new Float32Array(c.headDim).fill(1)) : undefined;

  // Not huge pages: the KV cache is touched a position at a time, and a
  // 2 MiB page would make all of it resident at once.
  let workspace: AlignedBuffer | undefined;
  try {
    workspace = allocAligned(L.size, 4096);
    for (const [at, v] of vectors) {
      workspace.write(at, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    }
    const blocks: BlockContext = {
      b: new PlanBuilder(),
      c,
      s,
      layers,
      v: { outputNorm, freqGlobal, freqLocal, ones, kvType: kvPlanType(kvLayout.type) },
      caches,
      disk: opened?.tier,
    };
    const built = buildForwardPlan(blocks, {
      schedule,
      embd: weights.embd,
      output: weights.output,
      times,
      workspace,
      batch,
      positions: ctx * sequences,
    });
    return {
      schedule,
      workspace,
      plan: built.plan,
      head: built.head,
      state: s,
      kv: { caches, layout: kvLayout },
      countersAt,
      counters: layers.map((w) => w.moe?.counter ?? -1),
      times,
      stage: opened?.stage,
      direct: opened?.direct,
      workspaceBytes: L.size,
    };
  } catch (error) {
    workspace?.close();
    opened?.stage?.close();
    opened?.direct?.close();
    throw error;
  }
}

/**
 * What ModelWeights is given for these options on this kernel variant:
 * panels where they are faster on it unless `packed` says otherwise.
 *
 * @example
 * ```ts ignore
 * const w = weightOptions({ packed: "auto" }, "avx2"); // w.packed: true
 * ```
 */
export function weightOptions(
  options: TransformerOptions,
  variant: VariantName,
): WeightOptions {
  const packed = options.packed ?? "auto";
  if (packed !== true && packed !== false && packed !== "auto") {
    throw new RangeError(`model: packed ${packed} is not true, false or "auto"`);
  }
  return {
    packed: packed === "auto" ? panelsByDefault(variant) : packed,
    evict: options.evict ?? (options.evictSource === false ? "never" : "after-pack"),
    packProgress: options.packProgress,
  };
}

/**
 * Whether decode (one token a call) runs on the calling thread alone:
 * always with one thread or `decodeThreads: "single"`, never with `"pool"`,
 * and with `"auto"` (the default unless the user chose the thread count)
 * when one thread measured faster. The measurement times decode steps on
 * one thread and on the pool, alternating (after a warmup of each), and
 * keeps the best of each. The steps write position 0 of sequence 0's KV
 * cache, which any real use overwrites first.
 *
 * @example
 * ```ts ignore
 * const { single, tuning } = chooseDecodeThreads(plan, kernels, options, config.vocab);
 * ```
 */
export function chooseDecodeThreads(
  plan: Plan,
  kernels: { threads: number; sources: { threads: string } },
  options: TransformerOptions,
  vocab: number,
): { single: boolean; tuning?: { singleMs: number; poolMs: number } } {
  const mode = options.decodeThreads ?? (kernels.sources.threads === "default" ? "auto" : "pool");
  if (kernels.threads === 1 || mode === "single") return { single: true };
  if (mode !== "auto") return { single: false };
  const best = [Infinity, Infinity];
  const one = Uint32Array.of(Math.min(1, vocab - 1));
  for (let round = 0; round < 4; round++) {
    for (const single of [true, false]) {
      const t0 = performance.now();
      plan.run(one, 0, single);
      const ms = performance.now() - t0;
      if (round > 0) best[single ? 0 : 1] = Math.min(best[single ? 0 : 1], ms);
    }
  }
  const tuning = { singleMs: best[0], poolMs: best[1] };
  return { single: tuning.singleMs < tuning.poolMs, tuning };
}
