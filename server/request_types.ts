/**
 * The validated shapes of the OpenAI request bodies (chat, completions, their shared
 * sampling settings) and the bounds on what a request may ask for, with their defaults.
 * validate_request.ts produces these and re-exports them.
 *
 * @module
 */

import type { ToolChoice, ToolDefinition } from "../chat/mod.ts";
import type { ConstraintSpec } from "../grammar/constraint_spec.ts";
import type { MessageToolCall } from "./validate_tools.ts";

/**
 * Bounds on what a request may ask for.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS, type RequestLimits } from "./request_types.ts";
 * const l: RequestLimits = { ...DEFAULT_LIMITS, maxMessages: 16 };
 * console.log(l.maxMessages);
 * ```
 */
export interface RequestLimits {
  /** Largest request body in bytes. */
  maxBodyBytes: number;
  /**
   * Milliseconds a client has to send its whole body once the headers are in
   * (408 beyond): a client trickling a body holds a connection, not forever.
   */
  bodyTimeoutMs: number;
  /** Most chat messages. */
  maxMessages: number;
  /** Longest message content or prompt, in UTF-16 code units. */
  maxTextLength: number;
  /** Most stop strings. */
  maxStop: number;
  /** Longest stop string. */
  maxStopLength: number;
  /** Most logit_bias entries. */
  maxLogitBias: number;
  /** Most token ids in a /detokenize request. */
  maxTokens: number;
}

/**
 * The default {@link RequestLimits}: 1 MiB bodies, 256 messages, 4 stop strings.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS } from "./request_types.ts";
 * console.log(DEFAULT_LIMITS.maxBodyBytes); // 1048576
 * ```
 */
export const DEFAULT_LIMITS: Readonly<RequestLimits> = Object.freeze({
  maxBodyBytes: 1 << 20,
  bodyTimeoutMs: 30_000,
  maxMessages: 256,
  maxTextLength: 1 << 20,
  maxStop: 4,
  maxStopLength: 256,
  maxLogitBias: 300,
  maxTokens: 1 << 17,
});

/**
 * Sampling and stopping settings common to both completion endpoints.
 *
 * @example
 * ```ts
 * import type { SamplingRequest } from "./request_types.ts";
 * const s: Partial<SamplingRequest> = { temperature: 0 };
 * console.log(s.temperature);
 * ```
 */
export interface SamplingRequest {
  /** Tokens to generate at most; undefined: up to the end of the context. */
  maxTokens?: number;
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  seed?: number;
  presencePenalty: number;
  frequencyPenalty: number;
  repetitionPenalty: number;
  logitBias?: Record<string, number>;
  stop: string[];
  stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage. */
  includeUsage: boolean;
  /**
   * Log-probabilities of the generated tokens, with this many most likely alternatives each
   * (chat: `logprobs: true` and `top_logprobs` 0-20; completions: `logprobs` 0-5); undefined:
   * none.
   */
  logprobs?: number;
  /**
   * llama-server's `ignore_eos`: end-of-generation tokens do not end the
   * generation (only `max_tokens`, a stop string or the context do), as
   * benchmarks want.
   */
  ignoreEos: boolean;
  /**
   * How many of the last tokens the repetition, presence and frequency penalties look at
   * (Ollama's `repeat_last_n`); undefined: the sampler's default, 64.
   */
  penaltyLastN?: number;
  /**
   * What the output must match: OpenAI's `response_format` (`json_object`, or `json_schema`
   * with its `schema`), or llama-server's `grammar` (GBNF) or `json_schema`; undefined: free
   * text. Not compiled yet: the handler compiles it against the tokenizer (a refused schema
   * keyword or a bad grammar is a 400 there).
   */
  constraint?: ConstraintSpec;
}

/**
 * A validated /v1/chat/completions request.
 *
 * @example
 * ```ts
 * import type { ChatRequest } from "./request_types.ts";
 * function turns(r: ChatRequest): number {
 *   return r.messages.length;
 * }
 * ```
 */
export interface ChatRequest extends SamplingRequest {
  messages: ChatRequestMessage[];
  /** The functions the model may call (`tools`). */
  tools?: ToolDefinition[];
  /** `tool_choice`; absent: `"auto"` with tools, `"none"` without. */
  toolChoice?: ToolChoice;
  /** `parallel_tool_calls` (default true): more than one call per reply. */
  parallelToolCalls: boolean;
}

/**
 * A validated chat message: its text (content parts joined; `""` for an assistant message of
 * calls only), an assistant's calls with their arguments parsed, a `tool` message's call id.
 *
 * @example
 * ```ts
 * import type { ChatRequestMessage } from "./request_types.ts";
 * const m: ChatRequestMessage = { role: "tool", content: "21 °C", tool_call_id: "call_1" };
 * console.log(m.role);
 * ```
 */
export interface ChatRequestMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  tool_calls?: MessageToolCall[];
  tool_call_id?: string;
}

/**
 * A validated /v1/completions request.
 *
 * @example
 * ```ts
 * import type { CompletionRequest } from "./request_types.ts";
 * function size(r: CompletionRequest): number {
 *   return r.prompt.length;
 * }
 * ```
 */
export interface CompletionRequest extends SamplingRequest {
  prompt: string;
}
