/**
 * The forward pass of a decoder-only transformer over a validated, mapped
 * `.cflow`/`.vflow` file, in the style of llama2.c's `forward()`: the
 * weights (weights.ts) are loaded once, the run's shape, workspace, KV
 * caches (kv_cache.ts) and plan (forward_plan.ts and its blocks) set up
 * once (_run_setup.ts), and `forward`, `prefill` and `step` run the plan,
 * allocating nothing per token. What each sequence's KV cache holds is
 * kept apart from the weights (_sequences.ts); the calls that want every
 * row's output run through _batch_rows.ts, traces through _trace.ts.
 *
 * @module
 */

import {
  type AlignedBuffer,
  type Kernels,
  openKernels,
  type Plan,
  type VariantName,
} from "../ffi/mod.ts";
import type { DirectFile, Stage } from "../ffi/io.ts";
import { type LoadedTiledFile, loadTiledFile } from "../formats/cflow/mod.ts";
import { type ModelConfig, modelConfig } from "./config.ts";
import type { Schedule } from "../scheduler/mod.ts";
import type { RunState } from "./_plan_state.ts";
import type {
  HiddenStatesOptions,
  LoadStats,
  StepRow,
  TracePosition,
  TransformerOptions,
} from "./options.ts";
import {
  chooseDecodeThreads,
  type RunSetup,
  runShape,
  setUpRun,
  weightOptions,
} from "./_run_setup.ts";
import { BatchRows } from "./_batch_rows.ts";
import { ExpertCounters } from "./_expert_counters.ts";
import { Sequences } from "./_sequences.ts";
import { traceTokens } from "./_trace.ts";
import { ModelWeights } from "./weights.ts";

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
  /** The shared part: the file, its runs, the packed panels, the vectors. */
  readonly #weights: ModelWeights;
  readonly #k: Kernels;
  readonly #workspace: AlignedBuffer;
  readonly #plan: Plan;
  readonly #logits: Float32Array;
  readonly #logitsBytes: Uint8Array;
  readonly #logitsOffset: number;
  readonly #one = new Uint32Array(1);
  readonly #singleThreadDecode: boolean;
  /** The layers' expert-byte counters: per layer in the last call, and in total. */
  readonly #counters: ExpertCounters;
  readonly #direct: DirectFile | undefined;
  readonly #stage: Stage | undefined;
  /** Workspace offset of the u64 timestamps taken after the embedding and each pass. */
  readonly #times: number;
  readonly #stateBuffers: RunState;
  /** The per-request state: what each sequence's KV cache holds, and where the caches are. */
  readonly #seqs: Sequences;
  /** The calls that want every row's output (prefillAll, step, hiddenStates). */
  readonly #rows: BatchRows;
  /**
   * The delay-aware schedule the plan follows: per pass, what its
   * attention, dense FFN and experts read and which expert outputs it
   * injects (scheduler/).
   */
  readonly schedule: Schedule;

  private constructor(file: LoadedTiledFile, options: TransformerOptions, loaded?: ModelWeights) {
    this.#k = openKernels();
    const c = modelConfig(file.file);
    this.config = c;
    // The run's shape, checked before anything is packed.
    const shape = runShape(c, options);
    this.sequences = shape.sequences;
    this.contextLength = shape.contextLength;
    if (shape.contextCap !== undefined) this.contextCap = shape.contextCap;
    this.batch = shape.batch;

    // Weights: the tiled runs of the file, packed into panels where that is faster.
    const weights = loaded ?? new ModelWeights(file, c, weightOptions(options, this.#k.variant));
    this.#weights = weights;

    // Workspace (activations for a batch, vectors, KV caches) and the plan over it.
    let setup: RunSetup;
    try {
      setup = setUpRun(c, weights, options, shape);
    } catch (error) {
      if (loaded === undefined) weights.release();
      throw error;
    }
    this.schedule = setup.schedule;
    this.#workspace = setup.workspace;
    this.#plan = setup.plan;
    this.#stateBuffers = setup.state;
    this.#seqs = new Sequences(
      {
        sequences: shape.sequences,
        context: shape.contextLength,
        batch: shape.batch,
        vocab: c.vocab,
      },
      setup.kv,
      setup.workspace,
    );
    this.#counters = new ExpertCounters(
      setup.workspace,
      setup.countersAt,
      setup.counters,
      c.moe !== null,
    );
    this.#rows = new BatchRows({
      config: c,
      batch: shape.batch,
      plan: setup.plan,
      memory: setup.workspace,
      head: setup.head,
      sequences: this.#seqs,
      counters: this.#counters,
      lastLogits: () => this.#readLogits(),
    });
    this.#times = setup.times;
    this.#stage = setup.stage;
    this.#direct = setup.direct;
    const s = setup.state;
    this.#logits = new Float32Array(c.vocab);
    this.#logitsBytes = new Uint8Array(this.#logits.buffer);
    this.#logitsOffset = s.logits.offset;
    // Decode on the calling thread alone where that measures faster than the pool.
    const decode = chooseDecodeThreads(this.#plan, this.#k, options, c.vocab);
    this.#singleThreadDecode = decode.single;
    this.#counters.reset(); // the decode tuning's reads are not the caller's
    this.loadStats = {
      packed: weights.packed,
      packMs: weights.packMs,
      packedBytes: weights.packedBytes,
      workspaceBytes: setup.workspaceBytes,
      decodeThreads: this.#singleThreadDecode ? 1 : this.#k.threads,
      decodeTuning: decode.tuning,
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
   * {@link load} without blocking the event loop for long: the weights are
   * packed with a macrotask turn between runs (`ModelWeights.load`), so a
   * server answers other requests while a large model loads. The same
   * model as {@link load} gives.
   *
   * @example
   * ```ts ignore
   * const model = await Transformer.loadAsync("smollm2.cflow");
   * ```
   */
  static async loadAsync(path: string, options: TransformerOptions = {}): Promise<Transformer> {
    const file = loadTiledFile(path, { verifyChecksums: options.verifyChecksums ?? false });
    try {
      return await Transformer.fromFileAsync(file, options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /**
   * {@link fromFile} with the weights packed as {@link loadAsync} does. The
   * model owns the file once this resolves; if it rejects, the caller still
   * does.
   */
  static async fromFileAsync(
    file: LoadedTiledFile,
    options: TransformerOptions = {},
  ): Promise<Transformer> {
    const c = modelConfig(file.file);
    runShape(c, options); // a shape it refuses is refused before anything is packed
    const weights = await ModelWeights.load(file, c, weightOptions(options, openKernels().variant));
    try {
      return new Transformer(file, options, weights);
    } catch (error) {
      weights.release();
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

  #checkToken(token: number): void {
    if (!Number.isSafeInteger(token) || token < 0 || token >= this.config.vocab) {
      throw new RangeError(`model: token ${token} is not in [0, ${this.config.vocab})`);
    }
  }

  /** Copies the last logits out of the workspace, and reads the expert counters. */
  #readLogits(): Float32Array {
    this.#workspace.read(this.#logitsOffset, this.#logitsBytes.length, this.#logitsBytes);
    this.#counters.read();
    return this.#logits;
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
    return { perLayer: this.#counters.last, total: this.#counters.total };
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
    return this.#weights.bankBytes;
  }

  /**
   * Runs one token at position `pos` through the model and returns the
   * logits (a buffer reused by the next call).
   */
  forward(token: number, pos: number): Float32Array {
    this.#checkToken(token);
    this.#seqs.claimFirst(pos, 1);
    this.#one[0] = token;
    this.#plan.run(this.#one, pos, this.#singleThreadDecode);
    return this.#readLogits();
  }

  /**
   * Runs `tokens` at positions [pos, pos + tokens.length) of sequence 0 in
   * one step and writes the logits after each of them into `into[i]`: each
   * bit for bit what {@link forward} gives for that token. This is how
   * speculative decoding checks drafted tokens: one read of the weights for
   * all of them. Positions from `pos` on may run again later (a rollback).
   *
   * @example
   * ```ts ignore
   * const into = [0, 1, 2].map(() => new Float32Array(model.config.vocab));
   * model.forwardAll([42, 7, 9], 12, into); // into[2]: the logits after 9 at position 14
   * ```
   */
  forwardAll(tokens: readonly number[], pos: number, into: readonly Float32Array[]): void {
    if (tokens.length === 0 || into.length !== tokens.length) {
      throw new RangeError(
        `model: forwardAll of ${tokens.length} tokens into ${into.length} buffers`,
      );
    }
    for (const b of into) {
      if (b.length !== this.config.vocab) {
        throw new RangeError(
          `model: forwardAll buffer of ${b.length} values, not ${this.config.vocab}`,
        );
      }
    }
    // step checks the tokens and positions.
    this.step(
      tokens.map((token, i) => ({ token, sequence: 0, position: pos + i, logits: true })),
      (logits, row) => into[row].set(logits),
    );
  }

  /**
   * Runs prompt tokens at positions [pos, pos + tokens.length) in batches
   * (each weight read once per batch) and returns the logits of the last
   * one. Every token gets the same arithmetic as through {@link forward}.
   */
  prefill(tokens: readonly number[], pos: number): Float32Array {
    if (tokens.length === 0) throw new RangeError("model: prefill needs at least one token");
    for (const t of tokens) this.#checkToken(t);
    this.#seqs.claimFirst(pos, tokens.length);
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
    for (const t of tokens) this.#checkToken(t);
    this.#seqs.claimFirst(pos, tokens.length);
    this.#rows.prefillAll(Uint32Array.from(tokens), pos, onLogits, from);
  }

  /**
   * The final hidden state of each of `tokens`: the model's output norm of
   * the last layer's output, the vector the LM head multiplies (f32,
   * `config.hidden` values), with no logits computed. The tokens run as a
   * prompt, in batches of {@link batch} rows, at positions [position,
   * position + n) of `sequence` (default: from 0 of sequence 0), so they
   * **overwrite that part of the sequence's KV cache**: whoever records what
   * the cache holds (a `PromptCache`) must drop what was there. Each row's
   * layers run the arithmetic of {@link prefill} (the keys and values written
   * are the same), and its output norm is the head's own operation.
   * `onRow` gets the rows in order, in one
   * buffer the next row overwrites; it must not run this model. Each batch
   * runs on one of Deno's blocking threads; no other call may run this
   * model until the promise settles.
   *
   * @example
   * ```ts ignore
   * const last = new Float32Array(model.config.hidden);
   * await model.hiddenStatesAsync(tokens, (h, i) => {
   *   if (i === tokens.length - 1) last.set(h);
   * });
   * ```
   */
  async hiddenStatesAsync(
    tokens: readonly number[],
    onRow: (hidden: Float32Array, index: number) => void,
    options: HiddenStatesOptions = {},
  ): Promise<void> {
    await this.#rows.hiddenAsync(tokens, onRow, options);
  }

  /**
   * {@link hiddenStatesAsync} on the calling thread, returning a copy of
   * every row's final hidden state.
   *
   * @example
   * ```ts ignore
   * const rows = model.hiddenStates([1, 2, 3]); // 3 Float32Arrays of config.hidden values
   * ```
   */
  hiddenStates(
    tokens: readonly number[],
    options: Omit<HiddenStatesOptions, "signal"> = {},
  ): Float32Array[] {
    return this.#rows.hidden(tokens, options);
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
    this.#rows.step(rows, onLogits);
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
    await this.#rows.stepAsync(rows, onLogits);
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
    this.#seqs.copy(from, to, length);
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
    this.#seqs.claimFirst(pos, 1);
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
    for (const t of tokens) this.#checkToken(t);
    this.#seqs.claimFirst(pos, tokens.length);
    return traceTokens(
      {
        config: this.config,
        schedule: this.schedule,
        plan: this.#plan,
        memory: this.#workspace,
        state: this.#stateBuffers,
        counters: this.#counters,
        logits: () => this.#readLogits(),
      },
      tokens,
      pos,
    );
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
    for (const t of tokens) this.#checkToken(t);
    this.#seqs.claimFirst(pos, tokens.length);
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
    return this.#weights.evictSource();
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
    if (this.#weights.evict === "phase-boundary") this.evictSource();
  }

  /** The kernel variant this model's plan runs on (`./cflow doctor`). */
  get kernelVariant(): VariantName {
    return this.#k.variant;
  }

  /** The eviction mode chosen at load. */
  get evictMode(): "never" | "after-pack" | "phase-boundary" {
    return this.#weights.evict;
  }

  /** Frees the plan, the workspace and the packed weights, and unmaps the file. */
  close(): void {
    this.#rows.close();
    this.#plan.close();
    this.#stage?.close();
    this.#direct?.close();
    this.#workspace.close();
    this.#weights.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
