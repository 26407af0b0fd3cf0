/**
 * Continuous batching: many conversations over one copy of the weights.
 *
 * A {@link BatchEngine} owns a {@link Transformer} loaded with `sequences: N`
 * and hands out N {@link Sequence}s. Each sequence looks like a model of its
 * own to {@link generate} (its own KV cache range, sampler, prompt cache,
 * stop strings and signal), but its `forward` and `prefillAsync` calls do
 * not run at once: the engine gathers what every sequence asks for and runs
 * it as one {@link Transformer.stepAsync}, so one read of the weights serves
 * the next token of every decoding sequence. A sequence joins at the next
 * step and leaves as soon as it stops asking. Prompts run in chunks beside
 * the decode rows of the others (at most `prefillChunk` rows per step while
 * anyone decodes, a whole batch otherwise), so a long prompt does not stall
 * the running streams. Every sequence's logits are bit for bit those it
 * gets alone ({@link Transformer.step}), so greedy and seeded outputs do not
 * depend on who else is running.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import type { StepRow, Transformer } from "../model/mod.ts";
import type { GenerationModel } from "./generate.ts";

/** Options of {@link BatchEngine}. */
export interface BatchEngineOptions {
  /**
   * Most prompt rows one step takes while other sequences decode (default
   * 16): the step's time, and so the others' gap between tokens, grows with
   * it. With nobody decoding a prompt takes whole batches.
   */
  prefillChunk?: number;
  /**
   * Most milliseconds a step waits for the sequences inside a generation
   * to ask again (they sample and hand their token to their client first),
   * so that they share the step instead of taking turns: this, or a tenth of
   * the last step's time if more (default 2; after a 90 ms step, 9 ms). A
   * sequence whose generation ended is not waited for.
   */
  gatherMs?: number;
}

/** What one sequence asked for: tokens to run from a position, the logits of the last. */
interface Work {
  sequence: number;
  /** The sequence's own logits buffer. */
  into: Float32Array;
  /** A check of drafted tokens: every row's logits, into these (one per token), in one step. */
  all?: readonly Float32Array[];
  tokens: number[];
  pos: number;
  done: number;
  signal?: AbortSignal;
  /** Called once `into` holds the logits of the last token. */
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Counters of a {@link BatchEngine}, for stats and `/metrics`-style reports. */
export interface BatchEngineStats {
  /** Steps run. */
  steps: number;
  /** Rows run (decode rows and prompt rows). */
  rows: number;
  /** Decode rows (one generated token each). */
  decodeRows: number;
  /** Most rows in one step. */
  widest: number;
}

/**
 * One sequence of a {@link BatchEngine}: a {@link GenerationModel} whose
 * steps run together with the other sequences'. Its logits buffer is its
 * own. Call {@link Sequence.idle} when a generation ends, so that the
 * engine stops waiting for it.
 *
 * @example
 * ```ts ignore
 * const [a, b] = engine.sequences;
 * const ta = generate(a, tokenizer, samplerA, promptA, { maxTokens: 32 });
 * const tb = generate(b, tokenizer, samplerB, promptB, { maxTokens: 32 });
 * ```
 */
export class Sequence implements GenerationModel {
  readonly #engine: BatchEngine;
  /** Its index among the engine's sequences (its range of the KV cache). */
  readonly index: number;
  readonly #logits: Float32Array;

  /** @internal Made by {@link BatchEngine}. */
  constructor(engine: BatchEngine, index: number) {
    this.#engine = engine;
    this.index = index;
    this.#logits = new Float32Array(engine.model.config.vocab);
  }

  /** The model's configuration. */
  get config(): Transformer["config"] {
    return this.#engine.model.config;
  }
  /** Positions this sequence holds (each sequence has the model's context length). */
  get contextLength(): number {
    return this.#engine.model.contextLength;
  }
  /** The model's pass schedule. */
  get schedule(): Transformer["schedule"] {
    return this.#engine.model.schedule;
  }
  /** The expert bytes of the last step (every sequence's rows of it together). */
  get expertBytes(): Transformer["expertBytes"] {
    return this.#engine.model.expertBytes;
  }
  /** Per layer, the bytes of all its experts (the model's). */
  get expertBankBytes(): Transformer["expertBankBytes"] {
    return this.#engine.model.expertBankBytes;
  }
  /** The disk tier's counters (the model's, every sequence together). */
  get expertTierStats(): Transformer["expertTierStats"] {
    return this.#engine.model.expertTierStats;
  }
  /** The pass times of the last step (every sequence's rows of it together). */
  passTimes(): number[] {
    return this.#engine.model.passTimes();
  }
  /** The model's prefill/decode boundary (its residency mode's eviction). */
  endPrefill(): void {
    this.#engine.model.endPrefill();
  }

  /** Runs `tokens` from `pos` in the coming steps; resolves with the last one's logits. */
  prefillAsync(
    tokens: readonly number[],
    pos: number,
    signal?: AbortSignal,
  ): Promise<Float32Array> {
    if (tokens.length === 0) {
      return Promise.reject(new RangeError("model: prefill needs at least one token"));
    }
    return this.#engine.submit(this.index, tokens, pos, this.#logits, signal);
  }

  /** Runs one token at `pos` in the next step; resolves with its logits. */
  forward(token: number, pos: number): Promise<Float32Array> {
    return this.#engine.submit(this.index, [token], pos, this.#logits);
  }

  /**
   * Runs `tokens` from `pos` together in the next step (beside the other
   * sequences' rows) and writes the logits after each into `into[i]`
   * ({@link Transformer.forwardAll}); at most the model's batch of tokens.
   */
  async forwardAll(
    tokens: readonly number[],
    pos: number,
    into: readonly Float32Array[],
  ): Promise<void> {
    const vocab = this.config.vocab;
    if (
      tokens.length === 0 || into.length !== tokens.length ||
      tokens.length > this.#engine.model.batch
    ) {
      throw new RangeError(
        `model: forwardAll of ${tokens.length} tokens into ${into.length} buffers (batch ${this.#engine.model.batch})`,
      );
    }
    for (const b of into) {
      if (b.length !== vocab) {
        throw new RangeError(`model: forwardAll buffer of ${b.length} values, not ${vocab}`);
      }
    }
    await this.#engine.submit(this.index, tokens, pos, this.#logits, undefined, into);
  }

  /**
   * The final hidden states of `tokens` at positions [0, n) of this
   * sequence (`Transformer.hiddenStatesAsync`, which says what it
   * overwrites), a batch at a time between the engine's steps: the other
   * sequences' generations go on between two batches. Not while this
   * sequence has a step waiting.
   *
   * @example
   * ```ts ignore
   * await engine.sequences[1].hiddenStatesAsync(tokens, (h, i) => rows.push(h.slice()));
   * ```
   */
  hiddenStatesAsync(
    tokens: readonly number[],
    onRow: (hidden: Float32Array, index: number) => void,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    return this.#engine.hiddenStates(this.index, tokens, onRow, options.signal);
  }

  /** Says this sequence asks for nothing more until its next generation. */
  idle(): void {
    this.#engine.idle(this.index);
  }
}

/**
 * Runs the steps of several {@link Sequence}s together over one model.
 *
 * @example
 * ```ts ignore
 * import { Transformer } from "../model/mod.ts";
 * import { BatchEngine } from "./batch_engine.ts";
 * const model = Transformer.load("smollm2.cflow", { sequences: 4, contextLength: 2048 });
 * const engine = new BatchEngine(model);
 * const outputs = await Promise.all(engine.sequences.map(async (seq, i) => {
 *   const it = generate(seq, tokenizer, new Sampler(model.config.vocab, { temperature: 0 }), prompts[i], { maxTokens: 32 });
 *   const ids = [];
 *   for (let r = await it.next(); !r.done; r = await it.next()) ids.push(r.value.id);
 *   seq.idle();
 *   return ids;
 * }));
 * ```
 */
export class BatchEngine {
  /** The model (`sequences` of them share its weights and its KV cache). */
  readonly model: Transformer;
  /** One per sequence of the model. */
  readonly sequences: readonly Sequence[];
  readonly #prefillChunk: number;
  readonly #gatherMs: number;
  #lastStepMs = 0;
  #queue: Work[] = [];
  /** Prefix copies waiting for the gap between two steps. */
  #copies: { from: number; to: number; length: number; done: (error?: unknown) => void }[] = [];
  /** Runs that need the model to themselves, waiting for the gap between two steps. */
  #alone: { run: () => Promise<void>; reject: (error: unknown) => void }[] = [];
  #running = false;
  #closed = false;
  /** The loop while it runs (settles after its last step). */
  #loopDone: Promise<void> = Promise.resolve();
  /**
   * Sequences inside a generation: they have asked for a step and not said
   * they are idle since. A step waits a moment for those not queued yet,
   * and while any of them is not a prompt being read, a prompt takes at
   * most `prefillChunk` rows of a step.
   */
  #active = new Set<number>();
  #stats: BatchEngineStats = { steps: 0, rows: 0, decodeRows: 0, widest: 0 };

  /** An engine over `model`, with one {@link Sequence} per sequence it holds. */
  constructor(model: Transformer, options: BatchEngineOptions = {}) {
    const chunk = options.prefillChunk ?? 16;
    if (!Number.isSafeInteger(chunk) || chunk < 1) {
      throw new RangeError(`batch engine: prefillChunk ${chunk} is not an integer >= 1`);
    }
    const gather = options.gatherMs ?? 2;
    if (!(gather >= 0 && gather <= 1000)) {
      throw new RangeError(`batch engine: gatherMs ${gather} is not in [0, 1000]`);
    }
    this.model = model;
    this.#prefillChunk = chunk;
    this.#gatherMs = gather;
    this.sequences = Array.from({ length: model.sequences }, (_, i) => new Sequence(this, i));
  }

  /** What the engine has run so far. */
  get stats(): Readonly<BatchEngineStats> {
    return { ...this.#stats };
  }

  /** @internal Queues work of sequence `sequence` (a Sequence's forward and prefill). */
  submit(
    sequence: number,
    tokens: readonly number[],
    pos: number,
    into: Float32Array,
    signal?: AbortSignal,
    all?: readonly Float32Array[],
  ): Promise<Float32Array> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#closed) return Promise.reject(new Error("batch engine: closed"));
    if (this.#queue.some((w) => w.sequence === sequence)) {
      return Promise.reject(
        new Error(`batch engine: sequence ${sequence} already has a step waiting`),
      );
    }
    if (!Number.isSafeInteger(pos) || pos < 0 || pos + tokens.length > this.model.contextLength) {
      return Promise.reject(
        new RangeError(
          `model: positions [${pos}, ${
            pos + tokens.length
          }) are outside the context of ${this.model.contextLength}`,
        ),
      );
    }
    this.#active.add(sequence);
    return new Promise<Float32Array>((resolve, reject) => {
      this.#queue.push({
        sequence,
        into,
        all,
        tokens: [...tokens],
        pos,
        done: 0,
        signal,
        resolve: () => resolve(into),
        reject,
      });
      if (!this.#running) this.#loopDone = this.#loop();
    });
  }

  /**
   * Stops taking work: what waits is rejected, and the promise settles once
   * the step in flight (if any) has finished, after which the model may be
   * closed.
   *
   * @example
   * ```ts ignore
   * await engine.close();
   * model.close();
   * ```
   */
  async close(): Promise<void> {
    this.#closed = true;
    const closed = new Error("batch engine: closed");
    for (const w of this.#queue.splice(0)) w.reject(closed);
    for (const c of this.#copies.splice(0)) c.done(closed);
    for (const a of this.#alone.splice(0)) a.reject(closed);
    await this.#loopDone;
  }

  /**
   * @internal A sequence's hidden states ({@link Sequence.hiddenStatesAsync}):
   * one batch of rows at a time, each with the model to itself between two
   * steps.
   */
  async hiddenStates(
    sequence: number,
    tokens: readonly number[],
    onRow: (hidden: Float32Array, index: number) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    if (tokens.length === 0) throw new RangeError("model: hidden states need at least one token");
    const batch = this.model.batch;
    for (let i = 0; i < tokens.length; i += batch) {
      const chunk = tokens.slice(i, i + batch);
      await this.#exclusive(() => {
        if (this.#queue.some((w) => w.sequence === sequence)) {
          throw new Error(`batch engine: sequence ${sequence} has a step waiting`);
        }
        return this.model.hiddenStatesAsync(chunk, (h, r) => onRow(h, i + r), {
          sequence,
          position: i,
          signal,
        });
      });
    }
  }

  /** Runs `fn` between two steps, when no step is in flight, and settles as it does. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error("batch engine: closed"));
    return new Promise<T>((resolve, reject) => {
      this.#alone.push({
        run: async () => {
          try {
            resolve(await fn());
          } catch (error) {
            reject(error);
          }
        },
        reject,
      });
      if (!this.#running) this.#loopDone = this.#loop();
    });
  }

  /** The runs that asked for the model alone before this gap (later ones wait for a step). */
  async #runAlone(): Promise<void> {
    for (const a of this.#alone.splice(0)) await a.run();
  }

  /**
   * Copies the first `length` positions of sequence `from`'s KV cache into
   * sequence `to` ({@link Transformer.copySequence}) between two steps, so
   * that `to` starts from a prefix `from` already ran (a shared system
   * prompt is computed once). `from` may be generating meanwhile: the
   * positions it holds below its record are not written again. `to` must
   * have nothing waiting.
   *
   * @example
   * ```ts ignore
   * await engine.copyPrefix(0, 1, 120);
   * ```
   */
  copyPrefix(from: number, to: number, length: number): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("batch engine: closed"));
    if (this.#queue.some((w) => w.sequence === to)) {
      return Promise.reject(new Error(`batch engine: sequence ${to} has a step waiting`));
    }
    return new Promise<void>((resolve, reject) => {
      this.#copies.push({
        from,
        to,
        length,
        done: (error) => error === undefined ? resolve() : reject(error),
      });
      if (!this.#running) this.#loopDone = this.#loop();
    });
  }

  /** @internal A sequence's generation ended: the next steps need not wait for it. */
  idle(sequence: number): void {
    this.#active.delete(sequence);
  }

  async #loop(): Promise<void> {
    this.#running = true;
    try {
      while (this.#queue.length > 0 || this.#copies.length > 0 || this.#alone.length > 0) {
        this.#runCopies();
        await this.#runAlone();
        if (this.#queue.length === 0) continue;
        // Let the sequences inside a generation sample and ask again, so they share this step.
        const until = performance.now() + Math.max(this.#gatherMs, this.#lastStepMs / 10);
        while (performance.now() < until) {
          const waiting = new Set(this.#queue.map((w) => w.sequence));
          if ([...this.#active].every((s) => waiting.has(s))) break;
          // A macrotask turn (setImmediate: chained setTimeout(0)s are clamped to milliseconds).
          await new Promise<void>((r) => setImmediate(r));
        }
        await this.#step();
      }
    } finally {
      this.#running = false;
    }
  }

  /** The prefix copies asked for since the last step (no step runs now). */
  #runCopies(): void {
    for (const c of this.#copies.splice(0)) {
      try {
        this.model.copySequence(c.from, c.to, c.length);
        c.done();
      } catch (error) {
        c.done(error);
      }
    }
  }

  /** One step: a row for each decoding sequence, then prompt chunks in arrival order. */
  async #step(): Promise<void> {
    this.#runCopies();
    // Work whose signal has aborted leaves before the step.
    this.#queue = this.#queue.filter((w) => {
      if (!w.signal?.aborted) return true;
      w.reject(w.signal.reason);
      return false;
    });
    if (this.#queue.length === 0) return;
    const batch = this.model.batch;
    // Decode rows first (one token, or the drafted tokens a sequence checks), then prompt chunks.
    const decodes = this.#queue.filter((w) => w.tokens.length === 1 || w.all !== undefined);
    const prompts = this.#queue.filter((w) => w.tokens.length > 1 && w.all === undefined);
    const rows: StepRow[] = [];
    /** Where each row's logits go (rows that want them). */
    const dest = new Map<number, Float32Array>();
    const taken = new Map<Work, number>();
    for (const w of decodes) {
      if (rows.length + w.tokens.length > batch) continue; // the next step takes it
      w.tokens.forEach((token, i) => {
        if (w.all !== undefined) dest.set(rows.length, w.all[i]);
        else dest.set(rows.length, w.into);
        rows.push({ token, sequence: w.sequence, position: w.pos + i, logits: true });
      });
      taken.set(w, w.tokens.length);
    }
    // Chunks beside anyone decoding, or about to (active but not queued this instant).
    const reading = new Set(prompts.map((w) => w.sequence));
    const others = rows.length > 0 || [...this.#active].some((s) => !reading.has(s));
    let room = Math.min(batch - rows.length, others ? this.#prefillChunk : batch);
    for (const w of prompts) {
      if (room <= 0) break;
      const n = Math.min(room, w.tokens.length - w.done);
      for (let i = 0; i < n; i++) {
        const at = w.done + i;
        const last = at === w.tokens.length - 1;
        if (last) dest.set(rows.length, w.into);
        rows.push({
          token: w.tokens[at],
          sequence: w.sequence,
          position: w.pos + at,
          logits: last,
        });
      }
      taken.set(w, n);
      room -= n;
    }
    if (rows.length === 0) {
      // More decoding sequences than a batch holds would have filled it; nothing is left.
      return;
    }
    const started = performance.now();
    try {
      await this.model.stepAsync(rows, (logits, i) => dest.get(i)!.set(logits));
    } catch (error) {
      for (const w of taken.keys()) this.#finish(w);
      for (const w of taken.keys()) w.reject(error);
      return;
    }
    this.#lastStepMs = performance.now() - started;
    this.#stats.steps++;
    this.#stats.rows += rows.length;
    this.#stats.decodeRows += [...taken.keys()].filter((w) => w.tokens.length === 1 || w.all)
      .reduce((n, w) => n + w.tokens.length, 0);
    this.#stats.widest = Math.max(this.#stats.widest, rows.length);
    for (const [w, n] of taken) {
      w.done += n;
      if (w.done < w.tokens.length) continue; // a prompt with chunks still to run
      this.#finish(w);
      w.resolve();
    }
  }

  #finish(w: Work): void {
    const i = this.#queue.indexOf(w);
    if (i >= 0) this.#queue.splice(i, 1);
  }
}
