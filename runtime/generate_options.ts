/**
 * The public types of {@link generate}: what it runs ({@link GenerationModel}) with which
 * tokenizer and sampler operations ({@link GenerationTokenizer}, {@link GenerationSampler}),
 * its options ({@link GenerateOptions}), what it yields ({@link GeneratedToken}) and what it
 * returns ({@link GenerationStats}). Types only.
 *
 * @module
 */

import type { Transformer } from "../model/mod.ts";
import type { MemoryUsage } from "./memory_usage.ts";
import type { PromptCache } from "./prompt_cache.ts";
import type { GenerationConstraint, GenerationConstraintMatcher } from "./generation_constraint.ts";
import type { SpeculationOptions, SpeculationStats } from "./speculative.ts";

/**
 * The tokenizer operations generation needs.
 *
 * @example
 * ```ts
 * import type { GenerationTokenizer } from "./generate_options.ts";
 * function size(t: GenerationTokenizer): number {
 *   return t.encode("hi").length;
 * }
 * ```
 */
export interface GenerationTokenizer {
  /** Text to token ids. */
  encode(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): number[];
  /** True for end-of-generation tokens. */
  isEog(id: number): boolean;
  /** The bytes a token stands for. */
  tokenBytes(id: number): Uint8Array;
}

/**
 * The sampler operations generation needs.
 *
 * @example
 * ```ts
 * import type { GenerationSampler } from "./generate_options.ts";
 * const greedy: GenerationSampler = {
 *   sample: (logits) => logits.indexOf(Math.max(...logits)),
 *   accept: () => {},
 * };
 * ```
 */
export interface GenerationSampler {
  /** Picks the next token from the logits. */
  sample(logits: Float32Array): number;
  /**
   * Picks the next token among those `constraint` allows (needed for
   * {@link GenerateOptions.constraint}; `Sampler.sampleConstrained`).
   */
  sampleConstrained?(logits: Float32Array, constraint: GenerationConstraintMatcher): number;
  /** Records a token (prompt or generated) for penalties. */
  accept(id: number): void;
}

/**
 * One generated token.
 *
 * @example
 * ```ts
 * import type { GeneratedToken } from "./generate_options.ts";
 * const t: GeneratedToken = { id: 42, text: "the" };
 * ```
 */
export interface GeneratedToken {
  /** Token id. */
  id: number;
  /** Text this token completes (may be "" while a UTF-8 sequence is incomplete). */
  text: string;
  /** Natural-log probability of the token under the model (with `logprobs`). */
  logprob?: number;
  /** The most likely tokens at this step, best first (with `logprobs` > 0). */
  top?: { id: number; logprob: number }[];
}

/**
 * What a generation measured.
 *
 * @example
 * ```ts
 * import type { GenerationStats } from "./generate_options.ts";
 * function line(s: GenerationStats): string {
 *   return `${s.decodeTokS.toFixed(1)} tok/s`;
 * }
 * ```
 */
export interface GenerationStats {
  /** Prompt tokens (all of them, cached or not). */
  promptTokens: number;
  /** Leading prompt tokens whose keys and values were reused from the {@link PromptCache}. */
  cachedTokens: number;
  /** Prompt tokens run per second of prefill (the tokens after the cached ones). */
  prefillTokS: number;
  /** Milliseconds of the prefill (the tokens after the cached ones). */
  prefillMs?: number;
  /** Milliseconds from the start to the first generated token. */
  ttftMs: number;
  /** Generated tokens. */
  generatedTokens: number;
  /** Generated tokens per second, timed from the first to the last token. */
  decodeTokS: number;
  /** Milliseconds from the first generated token to the last. */
  decodeMs?: number;
  /**
   * Why generation stopped; "grammar": the output is complete under the
   * {@link GenerateOptions.constraint} and nothing more may follow.
   */
  stopReason: "eog" | "max_tokens" | "stop_string" | "aborted" | "context" | "grammar";
  /**
   * Memory (RSS, PSS and its file and anonymous parts, from
   * /proc/self/smaps_rollup) before the prompt, after it (and after the
   * phase-boundary eviction, if chosen) and at the end; absent where it
   * cannot be read.
   */
  memory?: { afterLoad: MemoryUsage; afterPrefill: MemoryUsage; afterDecode: MemoryUsage };
  /**
   * Mixture-of-experts models: the expert weight bytes read (only the
   * router-selected experts' spans), in the prefill and per decoded token,
   * in total and per layer; and per layer what reading every expert would
   * cost. Absent for dense models.
   */
  expertBytes?: {
    prefill: number;
    decodePerToken: number;
    decodePerLayerPerToken: number[];
    bankPerLayer: readonly number[];
    /**
     * The disk tier, over the decode: bytes read from the file per token,
     * milliseconds per token spent waiting for reads, the share of selected
     * experts found in a staging slot, and whether reads were direct.
     */
    tier?: { readBytesPerToken: number; stallMsPerToken: number; hitRate: number; direct: boolean };
  };
  /** Milliseconds per decoded token of each pass (layer) of the schedule, waits included. */
  passMsPerToken?: number[];
  /** With `speculation`: what was drafted and kept. */
  speculation?: SpeculationStats;
}

/**
 * Options of {@link generate}.
 *
 * @example
 * ```ts
 * import type { GenerateOptions } from "./generate_options.ts";
 * const o: GenerateOptions = { maxTokens: 32 };
 * ```
 */
export interface GenerateOptions {
  /** Most tokens to generate. */
  maxTokens: number;
  /** Strings that end generation (not emitted). */
  stop?: readonly string[];
  /** Cancels generation between tokens. */
  signal?: AbortSignal;
  /**
   * Report each token's log-probability under the model's own distribution
   * (the logits before sampling settings), and this many most likely
   * alternatives (0-20). Off when absent.
   */
  logprobs?: number;
  /**
   * Keep generating after an end-of-generation token (it is yielded like any other token), so
   * exactly `maxTokens` tokens come out unless a stop string, the context or the signal ends
   * generation first: llama-bench's tg128 convention, for benchmarks. Default false.
   */
  ignoreEos?: boolean;
  /**
   * What the model's KV cache holds: the prompt's leading tokens found there
   * are not run again, and the record is updated as tokens are run. Must
   * belong to `model`. Without it the prompt runs from position 0.
   */
  cache?: PromptCache;
  /**
   * Speculative decoding: a drafter proposes tokens and the model checks
   * them in one step ({@link GenerationModel.forwardAll}). The output is
   * the same, token for token, as without it (speculative.ts).
   */
  speculation?: SpeculationOptions;
  /**
   * Holds the output to a grammar (structured outputs): each token is drawn
   * among those that can continue a valid output (`sampleConstrained`, the
   * check-first strategy); end-of-generation tokens only where the output is
   * complete; generation ends (stop reason "grammar") when the output is
   * complete and nothing may follow. `maxTokens` may still cut it first
   * ("max_tokens"). Works with `speculation`: each drafted token is checked
   * against the constrained draw, so the output is the same as without it.
   * Not with `ignoreEos`.
   */
  constraint?: GenerationConstraint;
}

/**
 * What {@link generate} runs: a {@link Transformer}, or one sequence of a
 * {@link BatchEngine} (whose steps run together with the other sequences').
 * `forward` may return the logits or a promise of them.
 *
 * @example
 * ```ts ignore
 * import type { GenerationModel } from "./generate_options.ts";
 * const m: GenerationModel = model; // a Transformer
 * ```
 */
export interface GenerationModel extends
  Pick<
    Transformer,
    | "config"
    | "contextLength"
    | "schedule"
    | "expertBytes"
    | "expertBankBytes"
    | "expertTierStats"
    | "passTimes"
    | "endPrefill"
    | "prefillAsync"
  > {
  /** The logits after `token` at `pos` (a buffer the next call may reuse). */
  forward(token: number, pos: number): Float32Array | Promise<Float32Array>;
  /** The logits after each of `tokens` from `pos`, into `into[i]`, in one step (speculation). */
  forwardAll(
    tokens: readonly number[],
    pos: number,
    into: readonly Float32Array[],
  ): void | Promise<void>;
}
