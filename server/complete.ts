/**
 * {@link complete}: one generation on a slot of the pool, for every generation route (OpenAI's
 * and Ollama's): the wait in the queue, the abort when the client leaves or the server closes,
 * the timings and metrics, and the answer streamed or whole. The routes differ only in the
 * {@link Framing}: what each streamed piece, the end of a stream, an error and the whole answer
 * look like.
 *
 * @module
 */

import { ApiError, jsonResponse } from "./api_error.ts";
import type { RequestInfo, ServerState } from "./handler.ts";
import { compileRequestConstraint } from "./request_constraint.ts";
import {
  type GenerationResult,
  type ModelSlot,
  runGeneration,
  type TokenLogprob,
} from "./run_generation.ts";
import type { SamplingRequest } from "./validate_request.ts";

/**
 * How a route writes its answer: one JSON value for the whole answer; for a stream, its
 * content type, its bytes before the first token, for each piece of text, at the end, and for
 * an error.
 *
 * @example
 * ```ts
 * import type { Framing } from "./complete.ts";
 * const enc = new TextEncoder();
 * const lines: Framing = {
 *   whole: (result) => ({ text: result.text }),
 *   contentType: "application/x-ndjson",
 *   start: [],
 *   emit: (text) => enc.encode(`${JSON.stringify({ text })}\n`),
 *   finish: () => [enc.encode(`{"done":true}\n`)],
 *   error: (e) => enc.encode(`${JSON.stringify({ error: e.message })}\n`),
 * };
 * console.log(lines.contentType);
 * ```
 */
export interface Framing {
  /** The request field a refused output constraint names (default: OpenAI's field). */
  constraintField?: string;
  /** Called once a slot is taken, before the generation starts. */
  acquired?: () => void;
  /** The JSON body of the whole (not streamed) answer. */
  whole: (result: GenerationResult) => unknown;
  /** The streamed response's content type. */
  contentType: string;
  /** Sent first on a stream, before any token. */
  start: Uint8Array[];
  /** The bytes of one streamed piece of text (with its tokens' log-probabilities, if asked). */
  emit: (text: string, logprobs?: TokenLogprob[]) => Uint8Array | Uint8Array[];
  /** The last bytes of a stream that ran to its end. */
  finish: (result: GenerationResult, promptTokens: number) => Uint8Array[];
  /** An error that ends a stream. */
  error: (e: ApiError) => Uint8Array;
  /** Sent after `finish`, and after the error of a stream the server's shutdown ended. */
  end?: Uint8Array;
}

/**
 * A generation the server's shutdown (or the drain timeout) ended.
 *
 * @example
 * ```ts
 * import { shutdownError } from "./complete.ts";
 * console.log(shutdownError().status); // 503
 * ```
 */
export function shutdownError(): ApiError {
  return new ApiError(503, "the server shut down before the generation finished", {
    code: "server_shutdown",
  });
}

/**
 * How well an idle instance suits `prompt`, from what its KV cache holds:
 * first an instance whose every cached token the prompt repeats (the previous
 * turn of this conversation, or a shared system prompt), the more the better;
 * then an empty one (nothing of anyone's is thrown away); then the longest
 * shared prefix. Equal scores go to the instance idle longest.
 *
 * @example
 * ```ts ignore
 * import { slotScore } from "./complete.ts";
 * const slot = await state.pool.acquire(signal, (s) => slotScore(s, prompt));
 * ```
 */
export function slotScore(slot: ModelSlot, prompt: readonly number[]): number {
  const cache = slot.cache;
  if (cache === undefined) return 0;
  const held = cache.tokens.length;
  if (held > 0 && cache.extendedBy(prompt)) return 2 ** 40 + held;
  if (held === 0) return 2 ** 39;
  return cache.reusable(prompt);
}

/**
 * Takes a slot (waiting in the queue) and generates, streamed or whole, as `framing` writes it.
 * A whole answer the client or the shutdown cancelled is a 499 or 503 error; a stream ends
 * with `framing.error` then.
 *
 * @example
 * ```ts ignore
 * import { complete } from "./complete.ts";
 * return await complete(state, request, info, prompt, sampling, maxTokens, framing);
 * ```
 */
export async function complete(
  state: ServerState,
  request: Request,
  info: RequestInfo,
  prompt: number[],
  r: SamplingRequest,
  maxTokens: number,
  framing: Framing,
): Promise<Response> {
  // The constraint compiled against the tokenizer first: a refused schema keyword is a 400 at
  // once.
  const constraint = compileRequestConstraint(state.tokenizer, r, framing.constraintField);
  const abort = new AbortController();
  const onGone = () => abort.abort(new DOMException("the client went away", "AbortError"));
  request.signal.addEventListener("abort", onGone, { once: true });
  const onShutdown = () => abort.abort(new DOMException("the server is closing", "AbortError"));
  state.shutdown.addEventListener("abort", onShutdown, { once: true });
  const cleanup = () => {
    request.signal.removeEventListener("abort", onGone);
    state.shutdown.removeEventListener("abort", onShutdown);
  };
  let slot: ModelSlot;
  try {
    slot = await state.pool.acquire(abort.signal, (s) => slotScore(s, prompt));
  } catch (error) {
    cleanup();
    throw error;
  }
  framing.acquired?.();
  info.promptTokens = prompt.length;
  const timing = { metrics: state.metrics, start: info.started };
  if (!r.stream) {
    try {
      const result = await runGeneration(
        slot,
        prompt,
        r,
        maxTokens,
        abort.signal,
        () => {},
        timing,
        constraint,
      );
      info.completionTokens = result.completionTokens;
      if (result.aborted && state.shutdown.aborted) throw shutdownError();
      if (result.aborted) {
        throw new ApiError(499, "the request was cancelled", { code: "cancelled" });
      }
      return jsonResponse(framing.whole(result));
    } finally {
      state.pool.release(slot);
      cleanup();
    }
  }
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      onGone();
    },
  });
  const send = (bytes: Uint8Array): void => {
    try {
      controller.enqueue(bytes);
    } catch {
      onGone(); // the stream is closed: the client left
    }
  };
  const end = () => {
    if (framing.end !== undefined) send(framing.end);
  };
  info.streamEnded = (async () => {
    try {
      for (const b of framing.start) send(b);
      const result = await runGeneration(
        slot,
        prompt,
        r,
        maxTokens,
        abort.signal,
        (text, logprobs) => {
          for (const b of [framing.emit(text, logprobs)].flat()) send(b);
        },
        timing,
        constraint,
      );
      info.completionTokens = result.completionTokens;
      if (!result.aborted) {
        for (const b of framing.finish(result, prompt.length)) send(b);
        end();
      } else if (state.shutdown.aborted) {
        // Ended by the drain timeout: say so, rather than a stream that just stops.
        send(framing.error(shutdownError()));
        end();
      }
    } catch (error) {
      const e = error instanceof ApiError
        ? error
        : new ApiError(500, `generation failed: ${(error as Error)?.message ?? error}`);
      send(framing.error(e));
    } finally {
      state.pool.release(slot);
      cleanup();
      try {
        controller.close();
      } catch { /* already closed or cancelled */ }
    }
  })();
  return new Response(body, {
    headers: { "content-type": framing.contentType, "cache-control": "no-cache" },
  });
}
