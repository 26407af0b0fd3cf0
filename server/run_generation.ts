/**
 * {@link runGeneration}: one request's generation on one model instance, with
 * its own sampler and abort signal, yielding to the event loop between
 * tokens so other requests and disconnects are served.
 *
 * @module
 */

import type { Transformer } from "../model/mod.ts";
import { generate } from "../runtime/generate.ts";
import type { PromptCache } from "../runtime/prompt_cache.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { FinishReason } from "./openai_format.ts";
import type { SamplingRequest } from "./validate_request.ts";

/**
 * One model instance: a forward pass with its own KV cache, the record of
 * what that cache holds (a request that starts like the slot's previous one
 * runs only the rest), and the tokenizer.
 *
 * @example
 * ```ts
 * import type { ModelSlot } from "./run_generation.ts";
 * function ctx(s: ModelSlot): number {
 *   return s.model.contextLength;
 * }
 * ```
 */
export interface ModelSlot {
  model: Transformer;
  tokenizer: Tokenizer;
  /** What `model`'s KV cache holds; absent: every prompt runs in full. */
  cache?: PromptCache;
}

/**
 * What a generation produced.
 *
 * @example
 * ```ts
 * import type { GenerationResult } from "./run_generation.ts";
 * const r: GenerationResult = {
 *   text: "",
 *   completionTokens: 0,
 *   cachedTokens: 0,
 *   finishReason: "stop",
 *   aborted: true,
 * };
 * ```
 */
export interface GenerationResult {
  text: string;
  completionTokens: number;
  /** Prompt tokens found in the slot's KV cache (not run again). */
  cachedTokens: number;
  finishReason: FinishReason;
  /** The signal ended it. */
  aborted: boolean;
}

/**
 * The sampler settings of a request (OpenAI defaults: temperature 1, top_p 1).
 *
 * @example
 * ```ts
 * import { samplerOptions } from "./run_generation.ts";
 * const o = samplerOptions({
 *   temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0,
 *   repetitionPenalty: 1, stop: [], stream: false, includeUsage: false,
 * });
 * console.log(o.temperature); // 0
 * ```
 */
export function samplerOptions(r: SamplingRequest): SamplerOptions {
  const o: SamplerOptions = {
    temperature: r.temperature,
    topP: r.topP,
    topK: r.topK,
    minP: r.minP,
    presencePenalty: r.presencePenalty,
    frequencyPenalty: r.frequencyPenalty,
    repetitionPenalty: r.repetitionPenalty,
    seed: r.seed ?? crypto.getRandomValues(new Uint32Array(1))[0],
  };
  if (r.logitBias !== undefined) o.logitBias = r.logitBias;
  return o;
}

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Generates for `prompt` on `slot`, calling `onText` with each piece of text
 * (awaited: a slow reader slows its own generation only).
 *
 * @example
 * ```ts ignore
 * import { runGeneration } from "./run_generation.ts";
 * const r = await runGeneration(slot, prompt, request, 16, signal, (t) => console.log(t));
 * ```
 */
export async function runGeneration(
  slot: ModelSlot,
  prompt: readonly number[],
  request: SamplingRequest,
  maxTokens: number,
  signal: AbortSignal,
  onText: (text: string) => void | Promise<void>,
): Promise<GenerationResult> {
  const sampler = new Sampler(slot.model.config.vocab, samplerOptions(request));
  const it = generate(slot.model, slot.tokenizer, sampler, prompt, {
    maxTokens,
    stop: request.stop,
    signal,
    cache: slot.cache,
  });
  let text = "";
  while (true) {
    const r = await it.next();
    if (r.done) {
      const reason = r.value.stopReason;
      return {
        text,
        completionTokens: r.value.generatedTokens,
        cachedTokens: r.value.cachedTokens,
        finishReason: reason === "max_tokens" || reason === "context" ? "length" : "stop",
        aborted: reason === "aborted",
      };
    }
    if (r.value.text !== "") {
      text += r.value.text;
      await onText(r.value.text);
    }
    // A macrotask turn: lets other requests, socket closes and aborts through.
    await tick();
  }
}
