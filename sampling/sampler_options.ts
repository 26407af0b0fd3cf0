/**
 * The public types of a {@link Sampler}: {@link SamplerOptions}, what it is built with, and
 * {@link TokenLogprob}, what {@link Sampler.logprobs} returns. Types only.
 *
 * @module
 */

/**
 * Options of a {@link Sampler}. Every field is optional; the defaults sample from the plain
 * softmax of the logits. Unknown keys are rejected.
 *
 * @example
 * ```ts
 * import type { SamplerOptions } from "./sampler_options.ts";
 *
 * const options: SamplerOptions = { temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05, seed: 1 };
 * console.log(options.temperature);
 * ```
 */
export interface SamplerOptions {
  /**
   * Softmax temperature, a finite number >= 0 (default 1). 0 is greedy: the highest logit after
   * penalties and bias, ties to the lowest token id, without drawing a random number.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const greedy: SamplerOptions = { temperature: 0 };
   * console.log(greedy.temperature);
   * ```
   */
  temperature?: number;
  /**
   * Keep only the `topK` most likely tokens (ties to the lower id); an integer >= 0, 0 (the
   * default) keeps all.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { topK: 40 };
   * console.log(o.topK);
   * ```
   */
  topK?: number;
  /**
   * Nucleus sampling: keep the most likely tokens until their probabilities (at temperature 1,
   * over what top-k kept) add up to at least `topP`; a number in (0, 1], 1 (the default) keeps
   * all.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { topP: 0.9 };
   * console.log(o.topP);
   * ```
   */
  topP?: number;
  /**
   * Keep the tokens whose probability is at least `minP` times the most likely one's; a number
   * in [0, 1], 0 (the default) keeps all.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { minP: 0.05 };
   * console.log(o.minP);
   * ```
   */
  minP?: number;
  /**
   * llama.cpp's repetition penalty on every token seen in the last `penaltyLastN` accepted
   * tokens: a positive logit is divided by it, a logit <= 0 multiplied. A finite number > 0;
   * 1 (the default) is off.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { repetitionPenalty: 1.1 };
   * console.log(o.repetitionPenalty);
   * ```
   */
  repetitionPenalty?: number;
  /**
   * How many of the last accepted tokens the penalties look at: an integer in [0, 2^20],
   * default 64. 0 turns the penalties off.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { repetitionPenalty: 1.1, penaltyLastN: 256 };
   * console.log(o.penaltyLastN);
   * ```
   */
  penaltyLastN?: number;
  /**
   * OpenAI's presence penalty: subtracted from the logit of every token seen in the window. A
   * finite number (OpenAI allows [-2, 2]); 0 (the default) is off.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { presencePenalty: 0.5 };
   * console.log(o.presencePenalty);
   * ```
   */
  presencePenalty?: number;
  /**
   * OpenAI's frequency penalty: times the number of times a token occurs in the window,
   * subtracted from its logit. A finite number; 0 (the default) is off.
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { frequencyPenalty: 0.2 };
   * console.log(o.frequencyPenalty);
   * ```
   */
  frequencyPenalty?: number;
  /**
   * Added to the logits of the given token ids (integers in [0, vocabSize)): a finite number,
   * or `-Infinity` to ban the token. A `Map` or a record keyed by decimal ids (OpenAI's JSON
   * `logit_bias`).
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { logitBias: { "2": -Infinity, "17": 5 } };
   * console.log(o.logitBias);
   * ```
   */
  logitBias?: ReadonlyMap<number, number> | Readonly<Record<string, number>>;
  /**
   * Seed of the random generator, an integer in [0, 2^32). The same seed, options and inputs
   * give the same tokens on every run and machine. Default: a random seed (read it back from
   * {@link Sampler.seed}).
   *
   * @example
   * ```ts
   * import type { SamplerOptions } from "./sampler_options.ts";
   *
   * const o: SamplerOptions = { seed: 1234 };
   * console.log(o.seed);
   * ```
   */
  seed?: number;
}

/**
 * A token and its log-probability, from {@link Sampler.logprobs}.
 *
 * @example
 * ```ts
 * import type { TokenLogprob } from "./sampler_options.ts";
 *
 * const t: TokenLogprob = { id: 7, logprob: -0.25 };
 * console.log(Math.exp(t.logprob));
 * ```
 */
export interface TokenLogprob {
  /**
   * The token id.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const [best] = new Sampler(3).logprobs(new Float32Array([0, 2, 1]), 1);
   * console.log(best.id); // 1
   * ```
   */
  id: number;
  /**
   * Its natural-log probability under the softmax of the logits, <= 0.
   *
   * @example
   * ```ts
   * import { Sampler } from "./sampler.ts";
   *
   * const [t] = new Sampler(2).logprobs(new Float32Array([0, 0]), 1);
   * console.log(t.logprob); // -0.6931471805599453 (ln 1/2)
   * ```
   */
  logprob: number;
}
