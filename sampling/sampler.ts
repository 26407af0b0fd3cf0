/**
 * {@link Sampler}: the next token from a vector of logits, with llama.cpp's truncation samplers,
 * repetition/presence/frequency penalties, logit bias and a seeded generator.
 *
 * @module
 */

import { openedKernels } from "../ffi/open_kernels.ts";
import { clampF32, PenaltyWindow } from "./_penalty_window.ts";
import { Xoshiro128ss } from "./_prng.ts";
import { argmax, before, logNormalizer, selectTop, topPCut } from "./_select.ts";
import {
  describe,
  MAX_PENALTY_LAST_N,
  MAX_VOCAB,
  num,
  OPTION_KEYS,
  readBias,
} from "./_validate.ts";
import type { SamplerOptions, TokenLogprob } from "./sampler_options.ts";

const fr = Math.fround;

/**
 * Chooses the next token from a model's logits. The vocabulary size is fixed at construction,
 * when all scratch memory is allocated: {@link Sampler.sample} and {@link Sampler.accept}
 * allocate nothing.
 *
 * {@link Sampler.sample} applies, in this order (llama.cpp's default chain, except that llama.cpp
 * adds the logit bias before the penalties; here the bias is added last, so it is exactly what
 * reaches the truncation samplers):
 * 1. penalties, to each distinct token among the last `penaltyLastN` accepted ones, with count
 *    `c` in that window, in f32 as llama.cpp does: `l = l <= 0 ? l * repetitionPenalty :
 *    l / repetitionPenalty`, then `l -= c * frequencyPenalty + presencePenalty`;
 * 2. logit bias (`-Infinity` bans);
 * 3. temperature 0: the argmax (ties to the lowest id), done;
 * 4. top-k, 5. top-p, 6. min-p, all on the distribution at temperature 1, each keeping at least
 *    one token (top-p: the fewest best tokens whose mass `Σ exp(l - max)` reaches `topP` times
 *    the mass of what top-k kept; min-p: `l >= max + ln(minP)`);
 * 7. temperature: weights `exp((l - max) / temperature)` over the kept tokens;
 * 8. one draw: `u` = a 53-bit uniform double from the seeded generator (xoshiro128** seeded
 *    through splitmix32) times the total weight; the kept tokens are walked in increasing id
 *    order, subtracting each weight from `u`, until it goes negative.
 *
 * Tokens are ranked by logit, ties to the lower id. Top-k uses a bounded heap, top-p a
 * quickselect by probability mass (expected linear time even on flat distributions), so a
 * step costs O(vocabSize) plus O(k log k).
 *
 * Penalized and biased logits are clamped to the finite f32 range. Logits may hold `-Infinity`
 * (masked tokens) but not NaN or `+Infinity`.
 *
 * @example Greedy, then seeded sampling
 * ```ts
 * import { Sampler } from "./sampler.ts";
 * import assert from "node:assert/strict";
 *
 * const logits = new Float32Array([1, 3, 2, 3]);
 * assert.equal(new Sampler(4, { temperature: 0 }).sample(logits), 1); // a tie: the lower id
 *
 * const a = new Sampler(4, { temperature: 0.8, topK: 3, seed: 7 });
 * const b = new Sampler(4, { temperature: 0.8, topK: 3, seed: 7 });
 * for (let i = 0; i < 8; i++) {
 *   const t = a.sample(logits);
 *   assert.equal(b.sample(logits), t);
 *   a.accept(t);
 *   b.accept(t);
 * }
 * ```
 */
export class Sampler {
  /**
   * Number of logits per call.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * console.log(new Sampler(49152).vocabSize); // 49152
   * ```
   */
  readonly vocabSize: number;
  /**
   * The seed in use: `options.seed`, or the random one chosen when none was given.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * console.log(new Sampler(10, { seed: 42 }).seed); // 42
   * ```
   */
  readonly seed: number;

  readonly #temperature: number;
  readonly #topK: number;
  readonly #topP: number;
  readonly #minP: number;
  /** The penalties' window; absent when no penalty is on. */
  readonly #penalties?: PenaltyWindow;
  readonly #biasIds: Int32Array;
  readonly #biasValues: Float64Array;
  readonly #rng: Xoshiro128ss;

  // Scratch of vocabSize entries each, allocated on first use: plain greedy picks through the
  // kernels need none of it (16 bytes a token, 4 MB for a 262,144-token vocabulary).
  #workBuf?: Float32Array;
  #candBuf?: Int32Array;
  #weightBuf?: Float64Array;
  /** The worst-ranked candidate kept by the last #truncate. */
  #last = 0;

  /**
   * Validates the options and allocates the penalties' memory (the rest on first use).
   *
   * @param vocabSize Number of logits, an integer in [1, 2^24].
   * @param options See {@link SamplerOptions}.
   * @throws {TypeError} If an option has the wrong type.
   * @throws {RangeError} If `vocabSize` or an option is out of range, or an option is unknown.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const s = new Sampler(32000, { temperature: 0.7, topP: 0.9, seed: 3 });
   * console.log(s.vocabSize, s.seed); // 32000 3
   * ```
   */
  constructor(vocabSize: number, options: SamplerOptions = {}) {
    if (typeof vocabSize !== "number") {
      throw new TypeError(`Sampler: vocabSize must be a number, got ${describe(vocabSize)}`);
    }
    if (!Number.isInteger(vocabSize) || vocabSize < 1 || vocabSize > MAX_VOCAB) {
      throw new RangeError(
        `Sampler: vocabSize ${vocabSize} is not an integer in [1, ${MAX_VOCAB}]`,
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new TypeError(`Sampler: options must be an object, got ${describe(options)}`);
    }
    for (const key of Object.keys(options)) {
      if (!OPTION_KEYS.has(key)) throw new RangeError(`Sampler: unknown option ${key}`);
    }
    this.vocabSize = vocabSize;

    const temperature = num("temperature", options.temperature, 1);
    if (temperature < 0) throw new RangeError(`Sampler: temperature ${temperature} is negative`);
    const topK = num("topK", options.topK, 0);
    if (!Number.isInteger(topK) || topK < 0) {
      throw new RangeError(`Sampler: topK ${topK} is not an integer >= 0`);
    }
    const topP = num("topP", options.topP, 1);
    if (!(topP > 0 && topP <= 1)) throw new RangeError(`Sampler: topP ${topP} is not in (0, 1]`);
    const minP = num("minP", options.minP, 0);
    if (!(minP >= 0 && minP <= 1)) throw new RangeError(`Sampler: minP ${minP} is not in [0, 1]`);
    const repeat = num("repetitionPenalty", options.repetitionPenalty, 1);
    if (!(repeat > 0)) {
      throw new RangeError(`Sampler: repetitionPenalty ${repeat} is not > 0`);
    }
    const lastN = num("penaltyLastN", options.penaltyLastN, 64);
    if (!Number.isInteger(lastN) || lastN < 0 || lastN > MAX_PENALTY_LAST_N) {
      throw new RangeError(
        `Sampler: penaltyLastN ${lastN} is not an integer in [0, ${MAX_PENALTY_LAST_N}]`,
      );
    }
    const presence = num("presencePenalty", options.presencePenalty, 0);
    const frequency = num("frequencyPenalty", options.frequencyPenalty, 0);
    let seed: number;
    if (options.seed === undefined) {
      seed = crypto.getRandomValues(new Uint32Array(1))[0];
    } else {
      seed = num("seed", options.seed, 0);
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
        throw new RangeError(`Sampler: seed ${seed} is not an integer in [0, 2^32)`);
      }
    }

    this.#temperature = temperature;
    this.#topK = topK;
    this.#topP = topP;
    this.#minP = minP;
    // llama.cpp keeps these as f32.
    if (lastN > 0 && (fr(repeat) !== 1 || fr(presence) !== 0 || fr(frequency) !== 0)) {
      this.#penalties = new PenaltyWindow(
        vocabSize,
        lastN,
        fr(repeat),
        fr(presence),
        fr(frequency),
      );
    }
    this.seed = seed;
    this.#rng = new Xoshiro128ss(seed);

    const bias = readBias(options.logitBias, vocabSize);
    this.#biasIds = Int32Array.from(bias.keys());
    this.#biasValues = Float64Array.from(bias.values());
  }

  get #work(): Float32Array {
    return this.#workBuf ??= new Float32Array(this.vocabSize);
  }

  get #cand(): Int32Array {
    return this.#candBuf ??= new Int32Array(this.vocabSize);
  }

  get #weight(): Float64Array {
    return this.#weightBuf ??= new Float64Array(this.vocabSize);
  }

  /** Whether #prepare changes any logit: a penalty over recent tokens or a bias. */
  #adjusts(): boolean {
    return this.#penalties?.active === true || this.#biasIds.length > 0;
  }

  /** Copies logits into the scratch vector, checked; then penalties and bias. */
  #prepare(fn: string, logits: Float32Array, adjust: boolean): Float32Array {
    if (!(logits instanceof Float32Array)) {
      throw new TypeError(`Sampler.${fn}: logits must be a Float32Array, got ${describe(logits)}`);
    }
    if (logits.length !== this.vocabSize) {
      throw new RangeError(
        `Sampler.${fn}: logits length ${logits.length} is not vocabSize ${this.vocabSize}`,
      );
    }
    const w = this.#work;
    const n = this.vocabSize;
    for (let i = 0; i < n; i++) {
      const v = logits[i];
      if (v !== v || v === Infinity) {
        throw new RangeError(`Sampler.${fn}: logits[${i}] is ${v}`);
      }
      w[i] = v;
    }
    if (!adjust) return w;
    if (this.#penalties?.active) this.#penalties.apply(w);
    const ids = this.#biasIds, values = this.#biasValues;
    for (let j = 0; j < ids.length; j++) {
      const t = ids[j], b = values[j];
      w[t] = b === -Infinity ? -Infinity : w[t] === -Infinity ? -Infinity : clampF32(w[t] + b);
    }
    return w;
  }

  /**
   * The next token for `logits` (not changed). Does not record it: call {@link Sampler.accept}
   * with the token that is actually used.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const s = new Sampler(3, { seed: 1, logitBias: new Map([[0, -Infinity]]) });
   * const t = s.sample(new Float32Array([5, 1, 1]));
   * console.log(t === 1 || t === 2); // true: token 0 is banned
   * ```
   *
   * @param logits The model's output, length `vocabSize`; `-Infinity` masks a token.
   * @returns The token id.
   * @throws {TypeError} If `logits` is not a Float32Array.
   * @throws {RangeError} If `logits` has the wrong length, holds NaN or `+Infinity`, or every
   *   token is masked or banned.
   */
  sample(logits: Float32Array): number {
    if (this.#temperature === 0 && !this.#adjusts()) {
      // Plain greedy, nothing to add to the logits: the kernels' argmax when they are loaded
      // (a JavaScript pass over a vocabulary of 49,152 took ~120 us a token, 262,144 ~520 us).
      // Whatever it refuses (a NaN or +Infinity, kernels shut down) falls through to #prepare
      // and the JavaScript loop, which name it or pick the same token.
      const k = openedKernels();
      if (k !== undefined && logits instanceof Float32Array && logits.length === this.vocabSize) {
        let best: number | undefined;
        try {
          best = k.argmax(logits);
        } catch {
          best = undefined;
        }
        if (best !== undefined) {
          if (best < 0) throw new RangeError("Sampler.sample: every token is masked or banned");
          return best;
        }
      }
    }
    const w = this.#prepare("sample", logits, true);
    if (this.#temperature === 0) {
      const best = argmax(w, null);
      if (best < 0) throw new RangeError("Sampler.sample: every token is masked or banned");
      return best;
    }
    const n = this.#truncate(w);
    if (n === 0) throw new RangeError("Sampler.sample: every token is masked or banned");
    return this.#draw(w, n);
  }

  /**
   * The next token for `logits` under a constraint (e.g. a grammar's
   * {@link https://github.com/ggml-org/llama.cpp | llama.cpp}-style token matcher): the
   * check-first strategy. Draws from the candidates left by the truncations (top-k, min-p,
   * top-p) as {@link Sampler.sample} does; if `constraint.allows` the draw it is the result;
   * otherwise it draws again from the allowed candidates in proportion to their weights
   * (together exactly `p(t) / Z` over the allowed candidates; docs/CORRECTNESS.md); when no
   * candidate is allowed, the truncations are redone over the allowed tokens of the whole
   * vocabulary (`constraint.mask()`). Greedy (temperature 0): the most likely allowed token.
   * Does not record the token.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const s = new Sampler(4, { temperature: 0 });
   * const odd = { allows: (id: number) => id % 2 === 1, mask: () => new Uint8Array([0, 1, 0, 1]) };
   * console.log(s.sampleConstrained(new Float32Array([9, 1, 8, 2]), odd)); // 3
   * ```
   *
   * @param logits The model's output, length `vocabSize`.
   * @param constraint `allows(id)`: token `id` may come next; `mask()`: 1 for every token that
   *   may (length `vocabSize`; not modified).
   * @returns The token id.
   * @throws {RangeError} As {@link Sampler.sample}, and when the constraint allows no token that
   *   the logits and bias leave possible.
   */
  sampleConstrained(
    logits: Float32Array,
    constraint: { allows(id: number): boolean; mask(): Uint8Array },
  ): number {
    const w = this.#prepare("sampleConstrained", logits, true);
    const none = "Sampler.sampleConstrained: the constraint allows no token that is possible";
    if (this.#temperature === 0) {
      const best = argmax(w, null);
      if (best < 0) {
        throw new RangeError("Sampler.sampleConstrained: every token is masked or banned");
      }
      if (constraint.allows(best)) return best;
      const allowed = argmax(w, constraint.mask());
      if (allowed < 0) throw new RangeError(none);
      return allowed;
    }
    let n = this.#truncate(w);
    if (n === 0) throw new RangeError("Sampler.sampleConstrained: every token is masked or banned");
    const pick = this.#draw(w, n);
    if (constraint.allows(pick)) return pick;
    // Rejected: keep the allowed candidates (checked one by one when few, else by the mask).
    const cand = this.#cand, mass = this.#weight;
    const mask = n > 64 ? constraint.mask() : null;
    let k = 0, total = 0;
    for (let i = 0; i < n; i++) {
      const id = cand[i];
      if (id === pick) continue;
      if (mask !== null ? mask[id] === 1 : constraint.allows(id)) {
        cand[k++] = id;
        total += mass[id];
      }
    }
    if (k > 0 && total > 0) {
      let u = this.#rng.nextDouble() * total;
      for (let i = 0; i < k; i++) {
        u -= mass[cand[i]];
        if (u < 0) return cand[i];
      }
      return cand[k - 1];
    }
    // No candidate is allowed: the truncations again, over the allowed tokens only.
    const full = mask ?? constraint.mask();
    for (let i = 0; i < w.length; i++) if (full[i] !== 1) w[i] = -Infinity;
    n = this.#truncate(w);
    if (n === 0) throw new RangeError(none);
    return this.#draw(w, n);
  }

  /**
   * The truncations: leaves the kept candidates in `#cand[0, n)` with their temperature
   * weights in `#weight` and the worst kept one in `#last`; returns n (0: every token masked).
   */
  #truncate(w: Float32Array): number {
    const n0 = this.vocabSize;
    const cand = this.#cand;
    let n = 0, lmax = -Infinity;
    for (let i = 0; i < n0; i++) {
      const v = w[i];
      if (v > -Infinity) {
        cand[n++] = i;
        if (v > lmax) lmax = v;
      }
    }
    if (n === 0) return 0;

    // Each truncation keeps a best-ranked prefix of the candidates (rank: logit, then id), so
    // their result is the shortest of the prefixes: cand[0, n) holds it, sorted best first
    // only when `sorted`.
    let sorted = false;
    if (this.#topK > 0 && this.#topK < n) {
      selectTop(cand, w, 0, n, this.#topK);
      n = this.#topK;
      sorted = true;
    }
    const mass = this.#weight;
    const topP = this.#topP;
    let target = 0;
    if (topP < 1 && n > 1) {
      // Probability mass at temperature 1, over what top-k kept.
      let z = 0;
      for (let i = 0; i < n; i++) {
        const id = cand[i];
        const m = Math.exp(w[id] - lmax);
        mass[id] = m;
        z += m;
      }
      target = topP * z;
    }
    const minP = this.#minP;
    if (minP > 0 && n > 1) {
      const threshold = lmax + Math.log(minP);
      if (sorted) {
        let k = 1;
        while (k < n && w[cand[k]] >= threshold) k++;
        n = k;
      } else {
        let k = 0;
        for (let i = 0; i < n; i++) {
          const id = cand[i];
          if (w[id] >= threshold) {
            cand[i] = cand[k];
            cand[k++] = id;
          }
        }
        n = k;
      }
    }
    if (target > 0 && n > 1) {
      if (sorted) {
        let acc = 0, k = 0;
        while (k < n) {
          acc += mass[cand[k++]];
          if (acc >= target) break;
        }
        n = k;
      } else {
        n = topPCut(cand, w, mass, n, target);
      }
    }

    // The kept tokens are those ranked no lower than the worst kept one, `last`.
    const temperature = this.#temperature;
    let last = cand[0];
    for (let i = 0; i < n; i++) {
      const id = cand[i];
      mass[id] = Math.exp((w[id] - lmax) / temperature);
      if (before(w, last, id)) last = id;
    }
    this.#last = last;
    return n;
  }

  /** Draws one of the `n` kept candidates by inverting the cumulative distribution in id order. */
  #draw(w: Float32Array, n: number): number {
    const cand = this.#cand, mass = this.#weight;
    let total = 0;
    for (let i = 0; i < n; i++) total += mass[cand[i]];
    const last = this.#last;
    const lastLogit = w[last];
    let u = this.#rng.nextDouble() * total;
    let pick = -1;
    for (let id = 0; id < this.vocabSize; id++) {
      const v = w[id];
      if (v > lastLogit || (v === lastLogit && id <= last)) {
        const p = mass[id];
        if (p > 0) {
          pick = id;
          u -= p;
          if (u < 0) break;
        }
      }
    }
    return pick;
  }

  /**
   * Records a token as generated (or as part of the prompt, if the penalties should see it), for
   * the penalties' window of the last `penaltyLastN` tokens.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const s = new Sampler(3, { temperature: 0, repetitionPenalty: 4 });
   * s.accept(0);
   * console.log(s.sample(new Float32Array([2, 1, 0]))); // 1: token 0's logit 2 became 0.5
   * ```
   *
   * @param token A token id in [0, vocabSize).
   * @throws {RangeError} If `token` is not an integer in range.
   */
  accept(token: number): void {
    if (!Number.isInteger(token) || token < 0 || token >= this.vocabSize) {
      throw new RangeError(
        `Sampler.accept: token ${token} is not an integer in [0, ${this.vocabSize})`,
      );
    }
    this.#penalties?.accept(token);
  }

  /**
   * Forgets the accepted tokens and restarts the random sequence of the seed: the sampler is
   * again as constructed.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   * import assert from "node:assert/strict";
   *
   * const s = new Sampler(4, { seed: 9 });
   * const logits = new Float32Array([1, 1, 1, 1]);
   * const first = [s.sample(logits), s.sample(logits), s.sample(logits)];
   * s.reset();
   * assert.deepEqual([s.sample(logits), s.sample(logits), s.sample(logits)], first);
   * ```
   */
  reset(): void {
    this.#penalties?.reset();
    this.#rng.seed(this.seed);
  }

  /**
   * The `n` most likely tokens under the softmax of `logits` as given (the model's own
   * distribution: no penalties, bias or temperature), most likely first (ties to the lower id),
   * with their natural-log probabilities computed in f64. Tokens with logit `-Infinity` are never
   * listed, so fewer than `n` may come back.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const top = new Sampler(4).logprobs(new Float32Array([0, Math.log(3), -Infinity, 0]), 3);
   * // ≈ [[1, 0.6], [0, 0.2], [3, 0.2]]
   * console.log(top.map((t) => [t.id, Math.exp(t.logprob)]));
   * ```
   *
   * @param logits The model's output, length `vocabSize`.
   * @param n How many, an integer in [0, vocabSize].
   * @returns Up to `n` tokens with their log-probabilities.
   * @throws {TypeError} If `logits` is not a Float32Array.
   * @throws {RangeError} If `logits` has the wrong length or holds NaN or `+Infinity`, or `n` is
   *   out of range.
   */
  logprobs(logits: Float32Array, n: number): TokenLogprob[] {
    if (!Number.isInteger(n) || n < 0 || n > this.vocabSize) {
      throw new RangeError(
        `Sampler.logprobs: n ${n} is not an integer in [0, ${this.vocabSize}]`,
      );
    }
    const w = this.#prepare("logprobs", logits, false);
    const [max, logSum] = logNormalizer(w);
    const cand = this.#cand;
    let count = 0;
    for (let i = 0; i < w.length; i++) if (w[i] > -Infinity) cand[count++] = i;
    const m = Math.min(n, count);
    if (m === 0) return [];
    selectTop(cand, w, 0, count, m);
    const out: TokenLogprob[] = new Array(m);
    for (let i = 0; i < m; i++) out[i] = { id: cand[i], logprob: w[cand[i]] - max - logSum };
    return out;
  }

  /**
   * The natural-log probability of one token under the softmax of `logits` as given (as in
   * {@link Sampler.logprobs}), e.g. for the token that was sampled.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * console.log(new Sampler(2).logprobOf(new Float32Array([0, 0]), 1)); // -0.6931471805599453
   * ```
   *
   * @param logits The model's output, length `vocabSize`.
   * @param token A token id in [0, vocabSize).
   * @returns Its log-probability, `-Infinity` for a masked token.
   * @throws {TypeError} If `logits` is not a Float32Array.
   * @throws {RangeError} If `logits` or `token` is invalid.
   */
  logprobOf(logits: Float32Array, token: number): number {
    if (!Number.isInteger(token) || token < 0 || token >= this.vocabSize) {
      throw new RangeError(
        `Sampler.logprobOf: token ${token} is not an integer in [0, ${this.vocabSize})`,
      );
    }
    const w = this.#prepare("logprobOf", logits, false);
    const v = w[token];
    if (v === -Infinity) return -Infinity;
    const [max, logSum] = logNormalizer(w);
    return v - max - logSum;
  }
}
