/**
 * A tokenizer and a sampler for tests of {@link generate} that need no real vocabulary: every
 * token's text is "a", and the sampler is greedy (the first largest logit).
 *
 * @module
 */

import type { GenerationSampler, GenerationTokenizer } from "../../runtime/generate.ts";

/**
 * A tokenizer whose every token is "a" and for which `eog` decides what ends generation.
 *
 * @example
 * ```ts
 * import { letterTokenizer } from "./generation.ts";
 * console.log(letterTokenizer(() => false).isEog(0)); // false
 * ```
 */
export function letterTokenizer(eog: (id: number) => boolean): GenerationTokenizer {
  return {
    encode: () => [],
    isEog: eog,
    tokenBytes: () => new Uint8Array([0x61]),
  };
}

/**
 * Greedy sampling: the lowest id among the largest logits; remembers nothing.
 *
 * @example
 * ```ts
 * import { greedySampler } from "./generation.ts";
 * console.log(greedySampler.sample(new Float32Array([0, 2, 1]))); // 1
 * ```
 */
export const greedySampler: GenerationSampler = {
  sample(logits) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    return best;
  },
  accept() {},
};
