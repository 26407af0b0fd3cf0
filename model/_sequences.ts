/**
 * The per-request half of a loaded model: what each sequence's KV cache
 * holds. The weights are shared by every sequence; the positions each one
 * has run, and the copies of a prefix between them, are kept here.
 *
 * @module
 */

import type { AlignedBuffer } from "../ffi/mod.ts";
import type { KvLayout } from "./kv_cache.ts";
import type { StepRow } from "./options.ts";
import { planStepRows, type StepBatch } from "./step_rows.ts";

/** Where each pass's K and V caches lie in the workspace, and their layout. */
export interface KvPlaces {
  caches: { k: number; v: number }[];
  layout: KvLayout;
}

/**
 * How many leading positions each sequence's KV cache holds (a high-water
 * mark), the checks of the positions a call runs, and the copies of a
 * prefix from one sequence to another.
 *
 * @example
 * ```ts ignore
 * const seqs = new Sequences({ sequences: 4, context: 512, batch: 64, vocab: 49152 }, kv, ws);
 * seqs.claimFirst(0, 3); // sequence 0, positions 0..2
 * seqs.copy(0, 1, 3);
 * ```
 */
export class Sequences {
  readonly #shape: { sequences: number; context: number; batch: number; vocab: number };
  readonly #filled: number[];
  readonly #kv: KvPlaces;
  readonly #memory: AlignedBuffer;

  /** `shape` is the run's (checked by `runShape`); `kv` says where the caches lie in `memory`. */
  constructor(
    shape: { sequences: number; context: number; batch: number; vocab: number },
    kv: KvPlaces,
    memory: AlignedBuffer,
  ) {
    this.#shape = shape;
    this.#filled = new Array(shape.sequences).fill(0);
    this.#kv = kv;
    this.#memory = memory;
  }

  /**
   * Checks positions [first, first + count) of sequence 0 (the
   * single-sequence calls) and marks them held. Throws a RangeError when
   * they are outside the context.
   */
  claimFirst(first: number, count: number): void {
    const ctx = this.#shape.context;
    if (!Number.isSafeInteger(first) || first < 0 || first + count > ctx) {
      throw new RangeError(
        `model: positions [${first}, ${first + count}) are outside the context of ${ctx}`,
      );
    }
    this.#filled[0] = Math.max(this.#filled[0], first + count);
  }

  /** Checks the rows of a step and cuts them into batches (step_rows.ts). */
  plan(rows: readonly StepRow[]): {
    batches: StepBatch[];
    span: Map<number, { first: number; next: number }>;
  } {
    return planStepRows(rows, { ...this.#shape, filled: this.#filled });
  }

  /** Records that `sequence` has run every position before `next`. */
  held(sequence: number, next: number): void {
    this.#filled[sequence] = Math.max(this.#filled[sequence], next);
  }

  /** Records the positions a step's sequences ran (its `span`). */
  heldSpan(span: Map<number, { first: number; next: number }>): void {
    for (const [sequence, { next }] of span) this.held(sequence, next);
  }

  /**
   * Copies the keys and values of the first `length` positions of sequence
   * `from` into sequence `to`, and sets what `to` holds to `length`.
   * Throws a RangeError naming the argument out of range.
   */
  copy(from: number, to: number, length: number): void {
    const s = this.#shape.sequences;
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
    const kv = this.#kv;
    kv.layout.copyPrefix(this.#memory, kv.caches.flatMap((c) => [c.k, c.v]), from, to, length);
    this.#filled[to] = length;
  }
}
