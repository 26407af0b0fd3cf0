/**
 * {@link runGeneration}: one request's generation on one model instance, with
 * its own sampler and abort signal, yielding to the event loop between
 * tokens so other requests and disconnects are served.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import {
  generate,
  type GenerationConstraint,
  type GenerationModel,
  type GenerationStats,
} from "../runtime/generate.ts";
import type { SpeculationOptions } from "../runtime/speculative.ts";
import type { PromptCache } from "../runtime/prompt_cache.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { FinishReason } from "./openai_format.ts";
import type { SamplingRequest } from "./validate_request.ts";
import type { Metrics } from "./metrics.ts";

/**
 * One model instance or one sequence of a shared engine: a forward pass with its own KV cache, the record of
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
  /** A model of its own, or one sequence of a shared `BatchEngine` (runtime/batch_engine.ts). */
  model: GenerationModel;
  /** Called when a generation on the slot ends (a batch engine's sequence stops being waited for). */
  idle?: () => void;
  /**
   * Called before a generation: may copy into the slot's KV cache a longer prefix of the
   * prompt that another slot holds, and record it in `cache`.
   */
  borrow?: (prompt: readonly number[]) => Promise<void>;
  tokenizer: Tokenizer;
  /** What `model`'s KV cache holds; absent: every prompt runs in full. */
  cache?: PromptCache;
  /** Speculative decoding on this slot (its drafter keeps its own state between requests). */
  speculation?: SpeculationOptions;
}

/**
 * llama-server's `timings` object: prompt and generated tokens, their
 * milliseconds and rates, and with speculation the drafted and accepted
 * tokens.
 *
 * @example
 * ```ts
 * import type { Timings } from "./run_generation.ts";
 * const t: Timings = {
 *   cache_n: 0, prompt_n: 3, prompt_ms: 5, prompt_per_token_ms: 1.7, prompt_per_second: 600,
 *   predicted_n: 4, predicted_ms: 30, predicted_per_token_ms: 7.5, predicted_per_second: 133,
 * };
 * ```
 */
export interface Timings {
  cache_n: number;
  prompt_n: number;
  prompt_ms: number;
  prompt_per_token_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_token_ms: number;
  predicted_per_second: number;
  draft_n?: number;
  draft_n_accepted?: number;
}

/** The timings of a generation's stats. */
export function timingsOf(s: GenerationStats): Timings {
  const run = s.promptTokens - s.cachedTokens;
  const promptMs = s.prefillMs ?? 0;
  const decodeMs = s.decodeMs ?? 0;
  // As llama-server: the decode rate counts the tokens after the first, over their time.
  const steps = Math.max(s.generatedTokens - 1, 0);
  return {
    cache_n: s.cachedTokens,
    prompt_n: run,
    prompt_ms: promptMs,
    prompt_per_token_ms: run > 0 ? promptMs / run : 0,
    prompt_per_second: s.prefillTokS,
    predicted_n: s.generatedTokens,
    predicted_ms: decodeMs,
    predicted_per_token_ms: steps > 0 ? decodeMs / steps : 0,
    predicted_per_second: s.decodeTokS,
    ...(s.speculation && {
      draft_n: s.speculation.drafted,
      draft_n_accepted: s.speculation.accepted,
    }),
  };
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
  /** Each generated token's log-probability (with `request.logprobs`). */
  logprobs?: TokenLogprob[];
  /** Prompt tokens found in the slot's KV cache (not run again). */
  cachedTokens: number;
  finishReason: FinishReason;
  /** The signal ended it. */
  aborted: boolean;
  /** Prompt and decode times and counts, as llama-server's `timings` (absent in test doubles). */
  timings?: Timings;
}

/**
 * One generated token's natural-log probability under the model and its most likely
 * alternatives, best first.
 *
 * @example
 * ```ts
 * import type { TokenLogprob } from "./run_generation.ts";
 * const t: TokenLogprob = { id: 9, logprob: -0.1, top: [{ id: 9, logprob: -0.1 }] };
 * console.log(t.top.length);
 * ```
 */
export interface TokenLogprob {
  id: number;
  logprob: number;
  top: { id: number; logprob: number }[];
}

/**
 * The sampler settings of a request (OpenAI defaults: temperature 1, top_p 1).
 *
 * @example
 * ```ts
 * import { samplerOptions } from "./run_generation.ts";
 * const o = samplerOptions({
 *   temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0,
 *   repetitionPenalty: 1, stop: [], stream: false, includeUsage: false, ignoreEos: false,
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
  if (r.penaltyLastN !== undefined) o.penaltyLastN = r.penaltyLastN;
  return o;
}

/**
 * One macrotask turn (I/O, aborts and other requests get through). Not
 * `setTimeout(0)`: timers chained from timers are clamped, and one cost
 * 2.3 ms per token here (against 9 us for setImmediate, AMD EPYC Zen 4).
 */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Generates for `prompt` on `slot`, calling `onText` with each piece of text
 * (awaited: a slow reader slows its own generation only) and, with
 * `request.logprobs`, the log-probabilities of the tokens since the last piece;
 * `constraint`: `request.constraint` compiled against the slot's tokenizer.
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
  onText: (text: string, logprobs?: TokenLogprob[]) => void | Promise<void>,
  timing?: { metrics: Metrics; start: number },
  constraint?: GenerationConstraint,
): Promise<GenerationResult> {
  let last = -1;
  try {
    await slot.borrow?.(prompt);
    const sampler = new Sampler(slot.model.config.vocab, samplerOptions(request));
    const it = generate(slot.model, slot.tokenizer, sampler, prompt, {
      maxTokens,
      stop: request.stop,
      signal,
      cache: slot.cache,
      logprobs: request.logprobs,
      ignoreEos: request.ignoreEos,
      speculation: slot.speculation,
      constraint,
    });
    let text = "";
    const all: TokenLogprob[] = [];
    let pending: TokenLogprob[] = [];
    while (true) {
      const r = await it.next();
      if (r.done) {
        const reason = r.value.stopReason;
        timing?.metrics.generation({
          promptTokens: prompt.length,
          cachedTokens: r.value.cachedTokens,
          generatedTokens: r.value.generatedTokens,
        });
        return {
          text,
          completionTokens: r.value.generatedTokens,
          cachedTokens: r.value.cachedTokens,
          finishReason: reason === "max_tokens" || reason === "context" ? "length" : "stop",
          aborted: reason === "aborted",
          timings: timingsOf(r.value),
          ...(request.logprobs === undefined ? {} : { logprobs: all }),
        };
      }
      const v = r.value;
      if (timing !== undefined && v.id >= 0) {
        // Time to the first token from the request's arrival, then between tokens.
        const now = performance.now();
        if (last < 0) timing.metrics.firstToken((now - timing.start) / 1000);
        else timing.metrics.interToken((now - last) / 1000);
        last = now;
      }
      if (request.logprobs !== undefined && v.id >= 0 && v.logprob !== undefined) {
        const entry = { id: v.id, logprob: v.logprob, top: v.top ?? [] };
        all.push(entry);
        pending.push(entry);
      }
      if (v.text !== "") {
        text += v.text;
        const sent = pending;
        pending = [];
        await onText(v.text, request.logprobs === undefined ? undefined : sent);
      }
      // A macrotask turn: lets other requests, socket closes and aborts through.
      await tick();
    }
  } finally {
    slot.idle?.();
  }
}
