/**
 * {@link StopMatcher}: cuts streamed text at the first stop string, without ever emitting text
 * that might turn out to be the start of one.
 *
 * @module
 */

/** Most stop strings accepted. */
const MAX_STOPS = 64;
/** Longest stop string accepted, in UTF-16 code units. */
const MAX_STOP_LENGTH = 4096;

/**
 * What {@link StopMatcher.push} lets through.
 *
 * @example
 * ```ts
 * import type { StopMatchResult } from "./stop_matcher.ts";
 *
 * const r: StopMatchResult = { emit: "Hello", stopped: false };
 * console.log(r.emit);
 * ```
 */
export interface StopMatchResult {
  /**
   * Text that is safe to send on: it contains no stop string and cannot be the start of one.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * console.log(new StopMatcher(["\n\n"]).push("one\n").emit); // "one"
   * ```
   */
  emit: string;
  /**
   * True once a stop string has been seen: `emit` ends right before it, and generation should
   * end. Every later push emits nothing.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * console.log(new StopMatcher(["END"]).push("doneEND").stopped); // true
   * ```
   */
  stopped: boolean;
}

/**
 * Cuts a stream of text at the first occurrence of any of the stop strings. Each
 * {@link StopMatcher.push} emits what is certainly before any stop: a suffix that is a proper
 * prefix of some stop string is held back until later text settles it, and nothing at or after
 * a stop is ever emitted. The text ends right before the stop string that is completed first
 * (on a tie, the longest), which does not depend on how the text is split: with stops `"bc"` and
 * `"abcd"`, `"xabcd"` ends as `"xa"`. At the end of generation, {@link StopMatcher.flush}
 * releases the held text. Matching is by UTF-16 code units with a KMP automaton per stop
 * string, so each push costs O(text length × number of stops), however the text is split.
 *
 * Limits: at most 64 stop strings, each 1 to 4096 UTF-16 code units.
 *
 * @example
 * ```ts
 * import { StopMatcher } from "./stop_matcher.ts";
 * import assert from "node:assert/strict";
 *
 * const m = new StopMatcher(["<|im_end|>", "\nUser:"]);
 * assert.deepEqual(m.push("Hi there<|im_"), { emit: "Hi there", stopped: false });
 * assert.deepEqual(m.push("end|>more"), { emit: "", stopped: true });
 * assert.equal(m.matched, "<|im_end|>");
 * assert.deepEqual(m.push("ignored"), { emit: "", stopped: true });
 * ```
 */
export class StopMatcher {
  readonly #stops: readonly string[];
  /** KMP failure function of each stop: `fail[q]` for a matched prefix of length q + 1. */
  readonly #fail: readonly Int32Array[];
  /** Per stop: the length of the longest prefix of it that the stream now ends with. */
  readonly #state: Int32Array;
  #held = "";
  #matched: string | undefined = undefined;

  /**
   * Prepares a matcher (one KMP automaton per distinct stop string).
   *
   * @param stops The stop strings (duplicates are fine), each non-empty.
   * @throws {TypeError} If `stops` is not an array of strings.
   * @throws {RangeError} If there are too many, or one is empty or too long.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["</s>"]);
   * console.log(m.stopped); // false
   * ```
   */
  constructor(stops: readonly string[]) {
    if (!Array.isArray(stops)) {
      throw new TypeError(`StopMatcher: stops must be an array of strings, got ${typeof stops}`);
    }
    if (stops.length > MAX_STOPS) {
      throw new RangeError(`StopMatcher: ${stops.length} stop strings, more than ${MAX_STOPS}`);
    }
    stops.forEach((s, i) => {
      if (typeof s !== "string") {
        throw new TypeError(`StopMatcher: stops[${i}] must be a string, got ${typeof s}`);
      }
      if (s.length === 0 || s.length > MAX_STOP_LENGTH) {
        throw new RangeError(
          `StopMatcher: stops[${i}] length ${s.length} is not in [1, ${MAX_STOP_LENGTH}]`,
        );
      }
    });
    this.#stops = [...new Set(stops)];
    this.#fail = this.#stops.map((p) => {
      const fail = new Int32Array(p.length);
      for (let i = 1, k = 0; i < p.length; i++) {
        while (k > 0 && p.charCodeAt(i) !== p.charCodeAt(k)) k = fail[k - 1];
        if (p.charCodeAt(i) === p.charCodeAt(k)) k++;
        fail[i] = k;
      }
      return fail;
    });
    this.#state = new Int32Array(this.#stops.length);
  }

  /**
   * Whether a stop string has been seen.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["x"]);
   * m.push("abx");
   * console.log(m.stopped); // true
   * ```
   */
  get stopped(): boolean {
    return this.#matched !== undefined;
  }

  /**
   * The stop string that ended the text, or `undefined` while none has.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["a", "bc"]);
   * m.push("xbc");
   * console.log(m.matched); // "bc"
   * ```
   */
  get matched(): string | undefined {
    return this.#matched;
  }

  /**
   * Adds the next piece of text.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["###"]);
   * console.log(m.push("a#")); // { emit: "a", stopped: false }
   * console.log(m.push("#b")); // { emit: "##b", stopped: false }
   * ```
   *
   * @param text The next piece of generated text (may be empty).
   * @returns What can be emitted now, and whether the text has stopped.
   * @throws {TypeError} If `text` is not a string.
   */
  push(text: string): StopMatchResult {
    if (typeof text !== "string") {
      throw new TypeError(`StopMatcher.push: text must be a string, got ${typeof text}`);
    }
    if (this.#matched !== undefined) return { emit: "", stopped: true };
    const buf = this.#held + text;
    const offset = this.#held.length;
    // Run each stop's KMP automaton over the new text only; the states carry over from earlier
    // pushes. The stop that is completed first wins (on a tie, the longest): that does not
    // depend on how the text is split into pieces.
    let at = -1, end = -1, which = "", hold = 0;
    const stops = this.#stops, state = this.#state;
    for (let j = 0; j < stops.length; j++) {
      const p = stops[j], fail = this.#fail[j];
      let q = state[j];
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        while (q > 0 && c !== p.charCodeAt(q)) q = fail[q - 1];
        if (c === p.charCodeAt(q)) q++;
        if (q === p.length) {
          const e = offset + i + 1;
          if (end < 0 || e < end || (e === end && p.length > which.length)) {
            end = e;
            at = e - p.length;
            which = p;
          }
          break;
        }
      }
      state[j] = q;
      if (q > hold) hold = q;
    }
    if (at >= 0) {
      this.#held = "";
      this.#matched = which;
      return { emit: buf.slice(0, at), stopped: true };
    }
    this.#held = buf.slice(buf.length - hold);
    return { emit: buf.slice(0, buf.length - hold), stopped: false };
  }

  /**
   * Ends the text: returns what was held back (nothing once stopped) and clears it.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["<|end|>"]);
   * console.log(m.push("bye<|e").emit, m.flush()); // "bye" "<|e"
   * ```
   *
   * @returns The held-back text.
   */
  flush(): string {
    const held = this.#held;
    this.#held = "";
    this.#state.fill(0);
    return held;
  }

  /**
   * Starts over for a new text: clears the held text and the stop.
   *
   * @example
   * ```ts
   * import { StopMatcher } from "./stop_matcher.ts";
   *
   * const m = new StopMatcher(["."]);
   * m.push("a.");
   * m.reset();
   * console.log(m.stopped, m.push("b").emit); // false "b"
   * ```
   */
  reset(): void {
    this.#held = "";
    this.#matched = undefined;
    this.#state.fill(0);
  }
}
