/**
 * The OpenAI response objects the server sends: `chat.completion`,
 * `chat.completion.chunk`, `text_completion`, and their server-sent-event
 * framing.
 *
 * @module
 */

import type { ToolCall } from "../chat/mod.ts";

/**
 * Why a choice ended, as OpenAI names it (`tool_calls`: the reply is function calls).
 *
 * @example
 * ```ts
 * import type { FinishReason } from "./openai_format.ts";
 * const r: FinishReason = "length";
 * ```
 */
export type FinishReason = "stop" | "length" | "tool_calls";

/**
 * Token counts of a completion; `cachedTokens` of the prompt tokens were
 * found in the slot's KV cache and not run again (OpenAI's
 * `prompt_tokens_details.cached_tokens`).
 *
 * @example
 * ```ts
 * import { usage } from "./openai_format.ts";
 * console.log(usage(3, 4).total_tokens); // 7
 * console.log(usage(3, 4, 2).prompt_tokens_details.cached_tokens); // 2
 * ```
 */
export function usage(
  promptTokens: number,
  completionTokens: number,
  cachedTokens = 0,
): {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
} {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/**
 * What every response object carries: id, creation time (s) and model.
 *
 * @example
 * ```ts
 * import type { ResponseHead } from "./openai_format.ts";
 * const h: ResponseHead = { id: "chatcmpl-1", created: 0, model: "m" };
 * ```
 */
export interface ResponseHead {
  id: string;
  created: number;
  model: string;
}

/**
 * A whole (non-streamed) chat completion; with `toolCalls`, the message carries them (and
 * `content` is null when the reply is only calls).
 *
 * @example
 * ```ts
 * import { chatCompletion } from "./openai_format.ts";
 * const c = chatCompletion({ id: "c", created: 0, model: "m" }, "Hi", "stop", 3, 1);
 * console.log(c.choices[0].message.content); // Hi
 * ```
 */
export function chatCompletion(
  head: ResponseHead,
  content: string,
  finishReason: FinishReason,
  promptTokens: number,
  completionTokens: number,
  cachedTokens = 0,
  logprobs: ChatLogprobs | null = null,
  toolCalls?: ToolCall[],
): {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: "assistant"; content: string | null; tool_calls?: ToolCall[] };
    finish_reason: FinishReason;
    logprobs: ChatLogprobs | null;
  }[];
  usage: ReturnType<typeof usage>;
} {
  return {
    ...head,
    object: "chat.completion",
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: toolCalls !== undefined && toolCalls.length > 0 && content === "" ? null : content,
        ...(toolCalls !== undefined && toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      },
      finish_reason: finishReason,
      logprobs,
    }],
    usage: usage(promptTokens, completionTokens, cachedTokens),
  };
}

/**
 * A streamed call, as OpenAI streams `delta.tool_calls`: the first piece has the call's index,
 * id, type, name and empty arguments; the next ones the index and fragments of the arguments.
 *
 * @example
 * ```ts
 * import type { ToolCallDelta } from "./openai_format.ts";
 * const d: ToolCallDelta = { index: 0, function: { arguments: '{"city":' } };
 * console.log(d.index);
 * ```
 */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/**
 * One streamed chat chunk: a delta, or (with `finishReason`) the last one.
 *
 * @example
 * ```ts
 * import { chatChunk } from "./openai_format.ts";
 * console.log(chatChunk({ id: "c", created: 0, model: "m" }, { content: "Hi" }).object);
 * // chat.completion.chunk
 * ```
 */
export function chatChunk(
  head: ResponseHead,
  delta: { role?: "assistant"; content?: string; tool_calls?: ToolCallDelta[] },
  finishReason: FinishReason | null = null,
  logprobs: ChatLogprobs | null = null,
): Record<string, unknown> {
  return {
    ...head,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs }],
  };
}

/**
 * A text completion (whole, or one streamed chunk when `finishReason` is null).
 *
 * @example
 * ```ts
 * import { textCompletion } from "./openai_format.ts";
 * console.log(textCompletion({ id: "c", created: 0, model: "m" }, "Hi", "stop").object);
 * // text_completion
 * ```
 */
export function textCompletion(
  head: ResponseHead,
  text: string,
  finishReason: FinishReason | null,
  counts?: { prompt: number; completion: number; cached?: number },
  logprobs: CompletionLogprobs | null = null,
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ...head,
    object: "text_completion",
    choices: [{ index: 0, text, finish_reason: finishReason, logprobs }],
  };
  if (counts !== undefined) out.usage = usage(counts.prompt, counts.completion, counts.cached);
  return out;
}

const enc = new TextEncoder();

/**
 * One server-sent event `data: <json>\n\n`, as bytes.
 *
 * @example
 * ```ts
 * import { sseData } from "./openai_format.ts";
 * console.log(new TextDecoder().decode(sseData({ a: 1 }))); // data: {"a":1}
 * ```
 */
export function sseData(value: unknown): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(value)}\n\n`);
}

/**
 * The event that ends an OpenAI stream: `data: [DONE]\n\n`.
 *
 * @example
 * ```ts
 * import { SSE_DONE } from "./openai_format.ts";
 * console.log(SSE_DONE.length); // 14
 * ```
 */
export const SSE_DONE: Uint8Array = enc.encode("data: [DONE]\n\n");

/** A token as OpenAI's log-probabilities name it: its text, and its bytes (UTF-8 may split). */
interface TokenInfo {
  token: string;
  logprob: number;
  bytes: number[];
}

/**
 * `choices[].logprobs` of a chat completion: one entry per generated token, each with its most
 * likely alternatives.
 *
 * @example
 * ```ts
 * import type { ChatLogprobs } from "./openai_format.ts";
 * const l: ChatLogprobs = { content: [] };
 * console.log(l.content.length); // 0
 * ```
 */
export interface ChatLogprobs {
  /** The generated tokens in order. */
  content: (TokenInfo & { top_logprobs: TokenInfo[] })[];
}

/**
 * `choices[].logprobs` of a legacy completion: parallel arrays, and for each token a map of its
 * most likely alternatives' texts to their log-probabilities.
 *
 * @example
 * ```ts
 * import type { CompletionLogprobs } from "./openai_format.ts";
 * const l: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
 * console.log(l.tokens.length); // 0
 * ```
 */
export interface CompletionLogprobs {
  /** Each generated token's text. */
  tokens: string[];
  /** Each token's natural-log probability under the model. */
  token_logprobs: number[];
  /** Each token's most likely alternatives (text to log-probability). */
  top_logprobs: Record<string, number>[];
  /** Each token's character offset in the generated text. */
  text_offset: number[];
}

/** What the formats need of the tokenizer: a token's bytes. */
interface TokenBytes {
  tokenBytes(id: number): Uint8Array;
}

const lossy = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

function info(tok: TokenBytes, id: number, logprob: number): TokenInfo {
  const bytes = tok.tokenBytes(id);
  return { token: lossy.decode(bytes), logprob, bytes: [...bytes] };
}

/**
 * The chat shape of generated tokens' log-probabilities.
 *
 * @example
 * ```ts
 * import { chatLogprobs } from "./openai_format.ts";
 * const tok = { tokenBytes: (id: number) => new Uint8Array([96 + id]) };
 * const l = chatLogprobs([{ id: 1, logprob: -0.5, top: [{ id: 1, logprob: -0.5 }] }], tok);
 * console.log(l.content[0].token, l.content[0].top_logprobs[0].bytes); // a [ 97 ]
 * ```
 */
export function chatLogprobs(
  entries: readonly { id: number; logprob: number; top: { id: number; logprob: number }[] }[],
  tok: TokenBytes,
): ChatLogprobs {
  return {
    content: entries.map((e) => ({
      ...info(tok, e.id, e.logprob),
      top_logprobs: e.top.map((t) => info(tok, t.id, t.logprob)),
    })),
  };
}

/**
 * The legacy completions shape of generated tokens' log-probabilities; `offset` is the
 * character offset of the first token in the generated text.
 *
 * @example
 * ```ts
 * import { completionLogprobs } from "./openai_format.ts";
 * const tok = { tokenBytes: (id: number) => new Uint8Array([96 + id]) };
 * const l = completionLogprobs([{ id: 2, logprob: -1, top: [] }], tok, 0);
 * console.log(l.tokens, l.text_offset); // [ "b" ] [ 0 ]
 * ```
 */
export function completionLogprobs(
  entries: readonly { id: number; logprob: number; top: { id: number; logprob: number }[] }[],
  tok: TokenBytes,
  offset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = {
    tokens: [],
    token_logprobs: [],
    top_logprobs: [],
    text_offset: [],
  };
  let at = offset;
  for (const e of entries) {
    const t = info(tok, e.id, e.logprob).token;
    out.tokens.push(t);
    out.token_logprobs.push(e.logprob);
    // No prototype: a token whose text is "__proto__" is a key like any other.
    const alts: Record<string, number> = Object.create(null);
    for (const a of e.top) {
      const key = info(tok, a.id, a.logprob).token;
      if (!Object.hasOwn(alts, key)) alts[key] = a.logprob;
    }
    out.top_logprobs.push(alts);
    out.text_offset.push(at);
    at += t.length;
  }
  return out;
}
