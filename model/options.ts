/**
 * What a caller gives and gets back from a `Transformer`: load
 * options, the rows of a batched step, load statistics and traces. Types
 * only.
 *
 * @module
 */

import type { KvCacheType } from "./kv_cache.ts";

/**
 * Options for `Transformer.load`.
 *
 * @example
 * ```ts
 * import type { TransformerOptions } from "./options.ts";
 * const o: TransformerOptions = { contextLength: 2048, kvCache: "f16" };
 * ```
 */
export interface TransformerOptions {
  /**
   * Positions the KV cache holds (default: the model's, at most 4096).
   * `"trained"`: the length the model was trained for (4096 when the file
   * does not say), at most what {@link contextMemoryBytes} of KV cache
   * holds; `Transformer.contextCap` then says whether it was capped.
   */
  contextLength?: number | "trained";
  /**
   * With `contextLength: "trained"`: the most bytes the KV cache may take
   * (default: no limit). The context is cut to what fits, 256 positions at
   * least.
   */
  contextMemoryBytes?: number;
  /**
   * KV cache element type (default f16); `q8_0` stores K and V as Q8_0
   * blocks (llama.cpp's `-ctk q8_0 -ctv q8_0`: 34 bytes per 32 values, about
   * half of f16) and needs a head dimension that is a multiple of 32.
   */
  kvCache?: KvCacheType;
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
   * `"phase-boundary"`, after packing and again by `Transformer.endPrefill`
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
  /** Most prompt tokens per batch of `Transformer.prefill` (default 64). */
  batch?: number;
  /**
   * Sequences the KV cache holds side by side (default 1), each with
   * `contextLength` positions: `Transformer.step` runs tokens of any of
   * them in one batch over one copy of the weights. The single-sequence
   * methods (`Transformer.forward`, `Transformer.prefill`, ...)
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
 * One row of `Transformer.step`: a token of one sequence at its position.
 *
 * @example
 * ```ts
 * import type { StepRow } from "./options.ts";
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
 * One pass of `Transformer.trace`: the schedule step, the L2 norms of
 * the streams after it, the experts selected (MoE layers) and the expert
 * bytes read.
 *
 * @example
 * ```ts
 * import type { TraceStep } from "./options.ts";
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
 * One position of `Transformer.trace`.
 *
 * @example
 * ```ts
 * import type { TracePosition } from "./options.ts";
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
 * Where `Transformer.hiddenStatesAsync` runs its tokens, and how it is cancelled.
 *
 * @example
 * ```ts
 * import type { HiddenStatesOptions } from "./options.ts";
 * const o: HiddenStatesOptions = { sequence: 1, position: 0 };
 * ```
 */
export interface HiddenStatesOptions {
  /** The sequence whose KV cache the tokens are written into (default 0). */
  sequence?: number;
  /**
   * The position of the first token (default 0); the positions before it must
   * hold the tokens before it, as in `Transformer.step`.
   */
  position?: number;
  /** Checked between batches: aborting stops before the next one and rejects. */
  signal?: AbortSignal;
}
