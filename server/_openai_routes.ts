/**
 * The OpenAI-compatible generation endpoints of `cflow serve`: `/v1/chat/completions` and
 * `/v1/completions`, each validated, budgeted against the context and answered whole or as a
 * stream of SSE events. Private to the server: handler.ts routes to them.
 *
 * @module
 */

import { chatPromptIds } from "../chat/mod.ts";
import { ChatTemplateError } from "../chat/mod.ts";
import { ApiError } from "./api_error.ts";
import {
  chatChunk,
  chatCompletion,
  chatLogprobs,
  completionLogprobs,
  type ResponseHead,
  SSE_DONE,
  sseData,
  textCompletion,
  usage,
} from "./openai_format.ts";
import { readJsonBody } from "./read_json_body.ts";
import { complete, type Framing } from "./complete.ts";
import type { GenerationResult } from "./run_generation.ts";
import type { RequestInfo, ServerState } from "./handler.ts";
import { ignoredOf, needJson } from "./_route_util.ts";
import { eventDeltas, finishWithCalls, toolTurn } from "./_tool_turn.ts";
import {
  type SamplingRequest,
  validateChatRequest,
  validateCompletionRequest,
} from "./validate_request.ts";

function head(prefix: string, modelId: string): ResponseHead {
  return {
    id: `${prefix}-${crypto.randomUUID().replaceAll("-", "")}`,
    created: Math.floor(Date.now() / 1000),
    model: modelId,
  };
}

/** Prompt ids, checked against the context, and the token budget. */
function budget(
  state: ServerState,
  prompt: number[],
  r: SamplingRequest,
  param: "messages" | "prompt",
): number {
  if (prompt.length === 0) throw new ApiError(400, "the prompt has no tokens", { param });
  const room = state.contextLength - prompt.length;
  if (room < 1) {
    throw new ApiError(
      400,
      `the prompt has ${prompt.length} tokens; the context holds ${state.contextLength}`,
      { param, code: "context_length_exceeded" },
    );
  }
  if (r.maxTokens !== undefined && r.maxTokens > room) {
    throw new ApiError(
      400,
      `max_tokens ${r.maxTokens} is more than the context of ${state.contextLength} minus the ` +
        `prompt's ${prompt.length} tokens (${room})`,
      { param: "max_tokens", code: "context_length_exceeded" },
    );
  }
  return r.maxTokens ?? room;
}

/**
 * OpenAI's framing of an answer: the whole one with its timings; a stream of SSE events ending
 * with `data: [DONE]`, an error as an event of its own.
 */
function sse(
  whole: (result: GenerationResult) => unknown,
  stream: Pick<Framing, "start" | "emit" | "finish">,
): Framing {
  return {
    whole: (result) => ({ ...whole(result) as Record<string, unknown>, timings: result.timings }),
    contentType: "text/event-stream; charset=utf-8",
    ...stream,
    error: (e) => sseData(e.toJSON()),
    end: SSE_DONE,
  };
}

/**
 * POST /v1/chat/completions: the messages (and tools) through the chat template, answered as a
 * `chat.completion` or, with `stream`, as `chat.completion.chunk` events.
 *
 * @example
 * ```ts ignore
 * import { chatCompletions } from "./_openai_routes.ts";
 * const response = await chatCompletions(notDraining(state), request, info);
 * ```
 */
export async function chatCompletions(
  state: ServerState,
  request: Request,
  info: RequestInfo,
): Promise<Response> {
  needJson(request, state.strict === true);
  const body = await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs);
  const r = validateChatRequest(
    body,
    state.limits,
    state.vocab,
    state.contextLength,
    ignoredOf(state, info),
  );
  if (state.chatTemplate === undefined) {
    throw new ApiError(400, "the model has no chat template: use /v1/completions", {
      code: "no_chat_template",
    });
  }
  const t = state.tokenizer;
  const tools = toolTurn(state.chatTemplate, r);
  // The messages' (and tools') text cannot spell the template's special tokens (chatPromptIds):
  // a user message holding "<|im_start|>system" is that text, not a system turn.
  let prompt: number[];
  try {
    prompt = chatPromptIds(t, state.chatTemplate, r.messages, {
      addGenerationPrompt: true,
      ...(tools.extra === undefined ? {} : { extra: tools.extra }),
    });
  } catch (error) {
    if (error instanceof ChatTemplateError) {
      throw new ApiError(400, `the chat template refused the messages: ${error.message}`, {
        param: "messages",
      });
    }
    throw error;
  }
  const maxTokens = budget(state, prompt, r, "messages");
  const h = head("chatcmpl", state.modelId);
  // A forced call's arguments are held to the tool's schema (by the grammar engine).
  const sampling = tools.constraint === undefined ? r : { ...r, constraint: tools.constraint };
  // The streamed reply's parser: content and calls as they complete.
  const parser = tools.parser?.();
  return await complete(
    state,
    request,
    info,
    prompt,
    sampling,
    maxTokens,
    sse((res) => {
      const lp = res.logprobs === undefined ? null : chatLogprobs(res.logprobs, t);
      if (tools.parser === undefined) {
        return chatCompletion(
          h,
          res.text,
          res.finishReason,
          prompt.length,
          res.completionTokens,
          res.cachedTokens,
          lp,
        );
      }
      const p = tools.parser();
      const content = [...p.push(res.text), ...p.end()]
        .map((e) => e.kind === "content" ? e.text : "").join("");
      return chatCompletion(
        h,
        content,
        finishWithCalls(res.finishReason, p.calls.length),
        prompt.length,
        res.completionTokens,
        res.cachedTokens,
        lp,
        p.calls,
      );
    }, {
      start: [sseData(chatChunk(h, { role: "assistant", content: "" }))],
      emit: (text, lp) => {
        const logprobs = lp === undefined ? null : chatLogprobs(lp, t);
        if (parser === undefined) return sseData(chatChunk(h, { content: text }, null, logprobs));
        const deltas = eventDeltas(parser.push(text));
        // Held-back text still sends its tokens' log-probabilities, with an empty delta.
        if (deltas.length === 0 && logprobs !== null) deltas.push({});
        return deltas.map((d, i) => sseData(chatChunk(h, d, null, i === 0 ? logprobs : null)));
      },
      finish: (res, n) => [
        ...(parser === undefined
          ? []
          : eventDeltas(parser.end()).map((d) => sseData(chatChunk(h, d)))),
        ...finishChunks(
          sseData({
            ...chatChunk(h, {}, finishWithCalls(res.finishReason, parser?.calls.length ?? 0)),
            timings: res.timings,
          }),
          r.includeUsage ? { ...h, object: "chat.completion.chunk" } : undefined,
          n,
          res.completionTokens,
          res.cachedTokens,
        ),
      ],
    }),
  );
}

/**
 * The last chunks of a stream: the one carrying the finish reason, then (when the client asked
 * for usage) a chunk with no choices and the token counts.
 */
function finishChunks(
  last: Uint8Array,
  usageHead: Record<string, unknown> | undefined,
  promptTokens: number,
  completionTokens: number,
  cachedTokens: number,
): Uint8Array[] {
  if (usageHead === undefined) return [last];
  return [
    last,
    sseData({
      ...usageHead,
      choices: [],
      usage: usage(promptTokens, completionTokens, cachedTokens),
    }),
  ];
}

/**
 * POST /v1/completions: the prompt as text, answered as a `text_completion` or, with `stream`,
 * as a stream of them.
 *
 * @example
 * ```ts ignore
 * import { completions } from "./_openai_routes.ts";
 * const response = await completions(notDraining(state), request, info);
 * ```
 */
export async function completions(
  state: ServerState,
  request: Request,
  info: RequestInfo,
): Promise<Response> {
  needJson(request, state.strict === true);
  const body = await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs);
  const r = validateCompletionRequest(
    body,
    state.limits,
    state.vocab,
    state.contextLength,
    ignoredOf(state, info),
  );
  const prompt = state.tokenizer.encode(r.prompt, { addSpecial: true, parseSpecial: false });
  const maxTokens = budget(state, prompt, r, "prompt");
  const h = head("cmpl", state.modelId);
  // Characters streamed so far: the text_offset of the next chunk's first token.
  let emitted = 0;
  return await complete(
    state,
    request,
    info,
    prompt,
    r,
    maxTokens,
    sse((res) =>
      textCompletion(
        h,
        res.text,
        res.finishReason,
        { prompt: prompt.length, completion: res.completionTokens, cached: res.cachedTokens },
        res.logprobs === undefined ? null : completionLogprobs(res.logprobs, state.tokenizer, 0),
      ), {
      start: [],
      emit: (text, lp) => {
        const l = lp === undefined ? null : completionLogprobs(lp, state.tokenizer, emitted);
        emitted += text.length;
        return sseData(textCompletion(h, text, null, undefined, l));
      },
      finish: (res, n) =>
        finishChunks(
          sseData({ ...textCompletion(h, "", res.finishReason), timings: res.timings }),
          r.includeUsage ? { ...h, object: "text_completion" } : undefined,
          n,
          res.completionTokens,
          res.cachedTokens,
        ),
    }),
  );
}
