/**
 * Prompt lookup decoding (llama.cpp's `llama-lookup`): the tokens that
 * followed the latest earlier occurrence of the history's last n-gram,
 * the case where an edit, a summary or a refactor repeats long spans of
 * its input. Costs a scan of the history, no model.
 *
 * @module
 */

import type { Drafter } from "./speculative.ts";

/** The longest n-gram {@link NgramLookup} matches. */
export const MAX_LOOKUP_NGRAM = 16;

/**
 * Proposes the continuation of the most recent earlier occurrence of the
 * history's last `n` tokens; failing that, of its last n - 1, and so on
 * down to one token. Proposes nothing when no suffix occurred before.
 *
 * @example
 * ```ts
 * import { NgramLookup } from "./ngram_lookup.ts";
 * const lookup = new NgramLookup(2);
 * console.log(lookup.propose([5, 6, 7, 8, 1, 5, 6], 3)); // [7, 8, 1]
 * ```
 */
export class NgramLookup implements Drafter {
  /** Prompt lookup. */
  readonly kind = "lookup";
  /** Proposing is a scan of the history. */
  readonly free = true;
  /** The length of the suffix the last proposal matched (0: none). */
  lastClass = 0;
  /** The longest suffix matched. */
  readonly n: number;
  /** How far back a match is searched (tokens). */
  readonly #window: number;

  /** Lookup with suffixes of at most `n` tokens (1-16), searched in the last `window` tokens. */
  constructor(n: number, window = 1 << 16) {
    if (!Number.isInteger(n) || n < 1 || n > MAX_LOOKUP_NGRAM) {
      throw new RangeError(
        `lookup: n-gram size ${n} is not an integer in [1, ${MAX_LOOKUP_NGRAM}]`,
      );
    }
    if (!Number.isSafeInteger(window) || window < 2) {
      throw new RangeError(`lookup: window ${window} is not an integer >= 2`);
    }
    this.n = n;
    this.#window = window;
  }

  /** Up to `max` tokens that followed the latest earlier occurrence of the longest matching suffix. */
  propose(history: readonly number[], max: number): number[] {
    const end = history.length;
    const low = Math.max(0, end - this.#window);
    for (let size = Math.min(this.n, end - 1); size >= 1; size--) {
      const key = end - size;
      // Candidate starts j < key, newest first: history[j, j + size) equals the suffix.
      for (let j = key - 1; j >= low; j--) {
        let same = true;
        for (let i = 0; i < size; i++) {
          if (history[j + i] !== history[key + i]) {
            same = false;
            break;
          }
        }
        if (!same) continue;
        const from = j + size;
        this.lastClass = size;
        return history.slice(from, Math.min(end, from + max));
      }
    }
    this.lastClass = 0;
    return [];
  }
}
