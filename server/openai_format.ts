/**
 * The OpenAI response objects the server sends: `chat.completion`,
 * `chat.completion.chunk`, `text_completion`, and their server-sent-event
 * framing.
 *
 * @module
 */

/**
 * Why a choice ended, as OpenAI names it.
 *
 * @example
 * ```ts
 * import type { FinishReason } from "./openai_format.ts";
 * const r: FinishReason = "length";
 * ```
 */
export type FinishReason = "stop" | "length";

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
 * A whole (non-streamed) chat completion.
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
): {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: "assistant"; content: string };
    finish_reason: FinishReason;
    logprobs: null;
  }[];
  usage: ReturnType<typeof usage>;
} {
  return {
    ...head,
    object: "chat.completion",
    choices: [{
      index: 0,
      message: { role: "assistant", content },
      finish_reason: finishReason,
      logprobs: null,
    }],
    usage: usage(promptTokens, completionTokens, cachedTokens),
  };
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
  delta: { role?: "assistant"; content?: string },
  finishReason: FinishReason | null = null,
): Record<string, unknown> {
  return {
    ...head,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
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
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ...head,
    object: "text_completion",
    choices: [{ index: 0, text, finish_reason: finishReason, logprobs: null }],
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
