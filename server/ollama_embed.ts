/**
 * {@link ollamaEmbed}: Ollama's `POST /api/embed` (texts to L2-normalised vectors, with Ollama's
 * counts and nanosecond durations) and its legacy `POST /api/embeddings` (one `prompt`, one
 * `embedding`), over the same slots and pooling as `/v1/embeddings` (embeddings.ts).
 *
 * @module
 */

import { jsonResponse } from "./api_error.ts";
import { embeddingTokens, embedOnSlot } from "./embeddings.ts";
import type { RequestInfo, ServerState } from "./handler.ts";
import { ignoredOf, needJson } from "./_route_util.ts";
import { nanoseconds } from "./ollama_format.ts";
import { readJsonBody } from "./read_json_body.ts";
import { validateOllamaEmbed } from "./validate_ollama_embed.ts";

/**
 * Answers `/api/embed` (`legacy` false) or `/api/embeddings` (`legacy` true). With
 * `truncate: true` (Ollama's default) an input longer than the context keeps its first
 * context-length tokens; with `false` it is a 400.
 *
 * @example
 * ```ts ignore
 * import { ollamaEmbed } from "./ollama_embed.ts";
 * const response = await ollamaEmbed(state, request, info, false);
 * ```
 */
export async function ollamaEmbed(
  state: ServerState,
  request: Request,
  info: RequestInfo,
  legacy: boolean,
): Promise<Response> {
  const start = performance.now();
  needJson(request, state.strict === true);
  const r = validateOllamaEmbed(
    await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs),
    state.limits,
    state.slots[0].model.config.hidden,
    legacy,
    ignoredOf(state, info),
  );
  const params = r.inputs.map((_, i) => r.inputs.length === 1 ? "input" : `input[${i}]`);
  const { ids, total } = embeddingTokens(state, r.inputs, params, r.truncate);
  info.promptTokens = total;
  const vectors = await embedOnSlot(state, request, ids);
  if (legacy) return jsonResponse({ embedding: Array.from(vectors[0]) });
  return jsonResponse({
    model: r.model,
    embeddings: vectors.map((v) => Array.from(v)),
    total_duration: nanoseconds(performance.now() - start),
    load_duration: 1,
    prompt_eval_count: total,
  });
}
