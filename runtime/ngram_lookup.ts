/**
 * Prompt lookup decoding (llama.cpp's `llama-lookup`): the tokens that
 * followed the latest earlier occurrence of the history's last n-gram,
 * the case where an edit, a summary or a refactor repeats long spans of
 * its input. Costs a scan of the history, no model.
 *
 * An edit copies its source with changes: a copy goes on from where the
 * last one stopped, and after a changed token it picks up the source again
 * just after the token it replaced. So the lookup follows the span it last
 * proposed (a "copy pointer") before it searches the whole history: see
 * {@link NgramLookup}.
 *
 * @module
 */

import type { Drafter } from "./speculative.ts";

/** The longest n-gram {@link NgramLookup} matches. */
export const MAX_LOOKUP_NGRAM = 16;

/**
 * The classes of {@link NgramLookup}'s proposals (`lastClass`), each with
 * its own measured acceptance: 1..16 a match of that many tokens anywhere
 * in the history; the others follow the span the previous proposal copied.
 */
export const LOOKUP_CLASS = {
  /** Every token since the last proposal was the source's next: go on copying. */
  follow: 17,
  /**
   * After a change, the last k = 1-3 tokens found again near where the copy
   * stopped: class resync + k (18-20).
   */
  resync: 17,
  /** After a change of a few tokens, the source just after the token it replaced. */
  replace: 21,
} as const;

// How the copy pointer picks up its source after a change: the last 1-3
// tokens are searched within these distances of where the copy stopped
// (nearest first); failing that, a change of at most REPLACE_MAX tokens is
// taken to replace the source's next token, once per change.
const RESYNC_BACK = 4;
const RESYNC_AHEAD = 24;
const RESYNC_MAX = 3;
const REPLACE_MAX = 4;
// History tokens before the last proposal's end that a later call must
// repeat for its pointer to be trusted (a drafter reused on another history).
const TAIL = 8;

/**
 * Proposes the continuation of the source the history is copying:
 *
 * 1. If every token since its last proposal followed that proposal's
 *    source, the source's next tokens (class {@link LOOKUP_CLASS.follow}).
 * 2. If they differ (the model changed something), the last 1-3 tokens
 *    found again near where the copy stopped, and what follows them there.
 * 3. Else, after a change of at most 4 tokens, the source after the token
 *    they replaced (a rename), unless a match of 2 or more tokens below
 *    says otherwise.
 * 4. Else the most recent earlier occurrence of the history's last `n`
 *    tokens; failing that, of its last n - 1, and so on down to one token
 *    (classes 1..n).
 *
 * Proposes nothing when none applies.
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
  /** The class of the last proposal (0: none; see {@link LOOKUP_CLASS}). */
  lastClass = 0;
  /** The longest suffix matched. */
  readonly n: number;
  /** How far back a match is searched (tokens). */
  readonly #window: number;
  /** Where the last proposal copied from (-1: none) and the history's length then. */
  #from = -1;
  #at = 0;
  /** The history's last tokens when the last proposal was made. */
  #tail: number[] = [];

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

  /** A new generation: forgets the span followed. */
  prepare(): void {
    this.#from = -1;
    this.lastClass = 0;
  }

  /** Up to `max` tokens likely to follow `history` (see the class's rules). */
  propose(history: readonly number[], max: number): number[] {
    const end = history.length;
    const last = this.lastClass;
    let replace = -1;
    if (this.#trusted(history)) {
      // a: how many tokens since the last proposal followed its source.
      const from = this.#from;
      const at = this.#at;
      let a = 0;
      while (at + a < end && history[at + a] === history[from + a]) a++;
      const q = from + a;
      if (at + a === end) {
        if (q < end) return this.#take(history, q, max, LOOKUP_CLASS.follow);
      } else {
        const m = end - (at + a);
        const j = nearest(history, q, Math.min(RESYNC_MAX, m));
        if (j !== undefined) return this.#take(history, j.from, max, LOOKUP_CLASS.resync + j.k);
        if (m <= REPLACE_MAX && last !== LOOKUP_CLASS.replace && q + 1 < end) replace = q + 1;
      }
    }
    const match = this.#longest(history);
    if (replace >= 0 && (match === undefined || match.size < 2)) {
      return this.#take(history, replace, max, LOOKUP_CLASS.replace);
    }
    if (match !== undefined) return this.#take(history, match.from, max, match.size);
    this.#from = -1;
    this.lastClass = 0;
    return [];
  }

  /** Whether `history` extends the one the last proposal was made on. */
  #trusted(history: readonly number[]): boolean {
    if (this.#from < 0 || this.#at > history.length) return false;
    const t = this.#tail;
    for (let i = 0; i < t.length; i++) {
      if (history[this.#at - t.length + i] !== t[i]) return false;
    }
    return true;
  }

  /** The latest earlier occurrence of the longest suffix of at most n tokens. */
  #longest(history: readonly number[]): { from: number; size: number } | undefined {
    const end = history.length;
    const low = Math.max(0, end - this.#window);
    for (let size = Math.min(this.n, end - 1); size >= 1; size--) {
      const key = end - size;
      // Candidate starts j < key, newest first: history[j, j + size) equals the suffix.
      for (let j = key - 1; j >= low; j--) {
        if (same(history, j, key, size)) return { from: j + size, size };
      }
    }
    return undefined;
  }

  #take(history: readonly number[], from: number, max: number, cls: number): number[] {
    const end = history.length;
    this.#from = from;
    this.#at = end;
    this.#tail = history.slice(Math.max(0, end - TAIL), end);
    this.lastClass = cls;
    return history.slice(from, Math.min(end, from + max));
  }
}

/** Whether history[i, i + n) equals history[j, j + n). */
function same(history: readonly number[], i: number, j: number, n: number): boolean {
  for (let t = 0; t < n; t++) if (history[i + t] !== history[j + t]) return false;
  return true;
}

/**
 * The history's last k tokens (k from `most` down to 1) found again nearest
 * to source position q, within RESYNC_BACK before and RESYNC_AHEAD after,
 * not overlapping the suffix itself: where the copy picks up.
 */
function nearest(
  history: readonly number[],
  q: number,
  most: number,
): { from: number; k: number } | undefined {
  const end = history.length;
  // The match [j, j + k) ends before the suffix [end - k, end) starts.
  const fits = (j: number, k: number) => j >= 0 && j + 2 * k <= end && same(history, j, end - k, k);
  for (let k = most; k >= 1; k--) {
    // q, then q + 1, q - 1, q + 2, q - 2, ...: the nearest first, ahead before behind.
    for (let d = 0; d <= RESYNC_AHEAD; d++) {
      if (fits(q + d, k)) return { from: q + d + k, k };
      if (d > 0 && d <= RESYNC_BACK && fits(q - d, k)) return { from: q - d + k, k };
    }
  }
  return undefined;
}
