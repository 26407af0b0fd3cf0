/**
 * {@link PromptCache}: which tokens a model instance's KV cache holds, so that
 * the next prompt that starts the same way (the next turn of a chat, a
 * request that repeats a system prompt) runs only the tokens after the shared
 * prefix.
 *
 * @module
 */

import type { GenerationModel } from "./generate.ts";

/**
 * The token ids whose keys and values sit at positions 0..n-1 of one model
 * instance's KV cache. {@link generate} reads it to skip a prompt's shared
 * prefix and keeps it up to date; nothing else may run that instance's
 * forward pass while a cache is attached, or the record goes stale.
 *
 * Reuse is exact: a prompt run in pieces gives bit for bit the logits of the
 * whole prompt run at once (the positions' keys and values do not depend on
 * how the prompt was batched).
 *
 * @example
 * ```ts ignore
 * import { PromptCache } from "./prompt_cache.ts";
 * const cache = new PromptCache(model);
 * await drain(generate(model, tokenizer, sampler, turn1, { maxTokens: 64, cache }));
 * // turn2 starts with turn1 and the answer: only the new tokens are run.
 * await drain(generate(model, tokenizer, sampler, turn2, { maxTokens: 64, cache }));
 * ```
 */
export class PromptCache {
  /** The model instance whose KV cache this describes. */
  readonly model: GenerationModel;
  #tokens: number[] = [];

  /** An empty record for `model`'s KV cache. */
  constructor(model: GenerationModel) {
    this.model = model;
  }

  /** Tokens held, in position order. */
  get tokens(): readonly number[] {
    return this.#tokens;
  }

  /**
   * How many leading tokens of `prompt` are held already: the longest common
   * prefix, but never the whole prompt (its last token must run again to give
   * the logits for the next one).
   *
   * @example
   * ```ts ignore
   * cache.reusable([1, 2, 3]); // 2 when [1, 2, 3, ...] is held
   * ```
   */
  reusable(prompt: readonly number[]): number {
    const limit = Math.min(this.#tokens.length, prompt.length - 1);
    let n = 0;
    while (n < limit && this.#tokens[n] === prompt[n]) n++;
    return n;
  }

  /**
   * True when every held token is the prompt's at its position: running
   * `prompt` throws nothing away (the next turn of the conversation held
   * here, or an empty record).
   *
   * @example
   * ```ts ignore
   * cache.extendedBy([1, 2, 3, 4]); // true when [1, 2] or [1, 2, 3, 4] is held
   * ```
   */
  extendedBy(prompt: readonly number[]): boolean {
    if (this.#tokens.length > prompt.length) return false;
    for (let i = 0; i < this.#tokens.length; i++) if (this.#tokens[i] !== prompt[i]) return false;
    return true;
  }

  /**
   * Keeps the first `n` tokens: the positions after them are about to be
   * overwritten, or were left half-written.
   */
  truncate(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`PromptCache: bad length ${n}`);
    if (n < this.#tokens.length) this.#tokens.length = n;
  }

  /** Records tokens whose keys and values were just written after the held ones. */
  append(ids: readonly number[]): void {
    if (this.#tokens.length + ids.length > this.model.contextLength) {
      throw new RangeError(
        `PromptCache: ${
          this.#tokens.length + ids.length
        } tokens exceed the context of ${this.model.contextLength}`,
      );
    }
    for (const id of ids) this.#tokens.push(id);
  }

  /**
   * Records `tokens` as what the KV cache holds now, in place of the old
   * record: a prefix whose keys and values were just copied in from another
   * sequence (`BatchEngine.copyPrefix`).
   *
   * @example
   * ```ts ignore
   * await engine.copyPrefix(donor.index, seq.index, 120);
   * cache.adopt(prompt.slice(0, 120));
   * ```
   */
  adopt(tokens: readonly number[]): void {
    if (tokens.length > this.model.contextLength) {
      throw new RangeError(
        `PromptCache: ${tokens.length} tokens exceed the context of ${this.model.contextLength}`,
      );
    }
    this.#tokens = [...tokens];
  }

  /** Forgets everything (the next prompt runs in full). */
  clear(): void {
    this.#tokens.length = 0;
  }
}
