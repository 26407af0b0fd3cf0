/**
 * The penalties' window: the last `penaltyLastN` accepted tokens, how often each occurs in it,
 * and llama.cpp's repetition, presence and frequency penalties applied to the logits of the
 * distinct tokens in it ({@link PenaltyWindow}). Used by `Sampler`.
 *
 * @module
 */

const F32_MAX = 3.4028234663852886e38;

/** x rounded to f32 and clamped to the finite f32 range. */
export function clampF32(x: number): number {
  const y = Math.fround(x);
  return y > F32_MAX ? F32_MAX : y < -F32_MAX ? -F32_MAX : y;
}

/**
 * The last `lastN` accepted tokens and their counts, in memory allocated once (a ring of `lastN`
 * ids, and a count and an epoch stamp per vocabulary entry): {@link PenaltyWindow.accept} and
 * {@link PenaltyWindow.apply} allocate nothing.
 *
 * @example
 * ```ts
 * import { PenaltyWindow } from "./_penalty_window.ts";
 *
 * const w = new PenaltyWindow(3, 2, 2, 0, 0);
 * w.accept(0);
 * const logits = new Float32Array([2, 1, -1]);
 * w.apply(logits);
 * console.log(logits[0]); // 1: 2 / repetitionPenalty 2
 * ```
 */
export class PenaltyWindow {
  readonly #repeat: number;
  readonly #presence: number;
  readonly #frequency: number;
  readonly #ring: Int32Array;
  #len = 0;
  #pos = 0;
  readonly #counts: Uint32Array;
  readonly #stamp: Uint32Array;
  #epoch = 0;

  /**
   * @param vocabSize Vocabulary entries (the counts' length).
   * @param lastN Tokens the window holds, >= 1.
   * @param repeat Repetition penalty, already rounded to f32.
   * @param presence Presence penalty, already rounded to f32.
   * @param frequency Frequency penalty, already rounded to f32.
   */
  constructor(
    vocabSize: number,
    lastN: number,
    repeat: number,
    presence: number,
    frequency: number,
  ) {
    this.#repeat = repeat;
    this.#presence = presence;
    this.#frequency = frequency;
    this.#ring = new Int32Array(lastN);
    this.#counts = new Uint32Array(vocabSize);
    this.#stamp = new Uint32Array(vocabSize);
  }

  /** Whether the window holds any token (so that {@link PenaltyWindow.apply} changes logits). */
  get active(): boolean {
    return this.#len > 0;
  }

  /**
   * Penalizes, in place, the logit of each distinct token in the window (a `-Infinity` stays),
   * in f32 as llama.cpp does: `l = l <= 0 ? l * repeat : l / repeat`, then
   * `l -= count * frequency + presence`, each step clamped to the finite f32 range.
   */
  apply(w: Float32Array): void {
    const ring = this.#ring, counts = this.#counts, stamp = this.#stamp;
    const repeat = this.#repeat, presence = this.#presence, frequency = this.#frequency;
    if (++this.#epoch === 0x100000000) {
      stamp.fill(0);
      this.#epoch = 1;
    }
    const epoch = this.#epoch;
    for (let j = 0; j < this.#len; j++) {
      const t = ring[j];
      if (stamp[t] === epoch) continue;
      stamp[t] = epoch;
      let v = w[t];
      if (v === -Infinity) continue;
      if (repeat !== 1) v = clampF32(v <= 0 ? v * repeat : v / repeat);
      const c = counts[t];
      v = clampF32(v - clampF32(clampF32(c * frequency) + presence));
      w[t] = v;
    }
  }

  /** Adds a token (an id the caller has checked), dropping the oldest when the window is full. */
  accept(token: number): void {
    const ring = this.#ring, counts = this.#counts;
    if (this.#len === ring.length) {
      counts[ring[this.#pos]]--;
    } else {
      this.#len++;
    }
    ring[this.#pos] = token;
    counts[token]++;
    this.#pos = this.#pos + 1 === ring.length ? 0 : this.#pos + 1;
  }

  /** Empties the window. */
  reset(): void {
    for (let j = 0; j < this.#len; j++) this.#counts[this.#ring[j]] = 0;
    this.#len = 0;
    this.#pos = 0;
  }
}
