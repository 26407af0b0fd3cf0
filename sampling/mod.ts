/**
 * Choosing tokens from logits, and cutting the generated text at stop strings.
 *
 * - {@link Sampler}: greedy or seeded sampling over a fixed vocabulary with top-k, top-p, min-p,
 *   temperature, llama.cpp's repetition penalty, OpenAI's presence and frequency penalties and
 *   logit bias; {@link Sampler.logprobs} for the top tokens' log-probabilities. No allocation
 *   per token.
 * - {@link StopMatcher}: streams text up to the first stop string, holding back what could
 *   still become one.
 *
 * @example A generation loop
 * ```ts
 * import { Sampler, StopMatcher } from "./mod.ts";
 *
 * const vocab = ["a", "b", "<END>"];
 * const sampler = new Sampler(vocab.length, { temperature: 0.7, topK: 2, seed: 42 });
 * const stop = new StopMatcher(["<END>"]);
 * const logits = new Float32Array([1, 0.5, 0.8]); // a model would compute these per step
 * let text = "";
 * for (let step = 0; step < 20 && !stop.stopped; step++) {
 *   const token = sampler.sample(logits);
 *   sampler.accept(token);
 *   text += stop.push(vocab[token]).emit;
 * }
 * text += stop.flush();
 * console.log(text);
 * ```
 *
 * @module
 */

export { Sampler } from "./sampler.ts";
export type { SamplerOptions, TokenLogprob } from "./sampler_options.ts";
export { StopMatcher, type StopMatchResult } from "./stop_matcher.ts";
