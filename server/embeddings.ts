/**
 * `POST /v1/embeddings` in OpenAI's shape: the request validated and bounded, the inputs run on a
 * slot taken from the pool like a generation (its prompt cache cut to what the embedding leaves
 * in place, so the slot's next generation runs again what was overwritten), the vectors pooled
 * as the model declares and L2-normalised, returned as floats or base64.
 *
 * @module
 */

import { embedTokens, type HiddenStateSource, type Pooling, poolingOf } from "../model/mod.ts";
import { ApiError, jsonResponse } from "./api_error.ts";
import { bad, checkDimensions, checkInputCount, kind, object, onlyKeys } from "./_validate_util.ts";
import type { ServerState } from "./handler.ts";
import { readJsonBody } from "./read_json_body.ts";
import type { ModelSlot } from "./run_generation.ts";
import type { RequestLimits } from "./validate_request.ts";

/** Most inputs of one request (OpenAI's bound). */
export const MAX_EMBEDDING_INPUTS = 2048;

/**
 * A validated /v1/embeddings request: each input a text or token ids, and how to encode the
 * vectors.
 *
 * @example
 * ```ts
 * import type { EmbeddingsRequest } from "./embeddings.ts";
 * const r: EmbeddingsRequest = {
 *   inputs: ["hello", [9906]],
 *   params: ["input[0]", "input[1]"],
 *   encoding: "float",
 * };
 * ```
 */
export interface EmbeddingsRequest {
  /** Texts to tokenize, or token ids as they are. */
  inputs: (string | number[])[];
  /** The request field of each input, for errors: `input` or `input[i]`. */
  params: string[];
  /** `float`: arrays of numbers; `base64`: little-endian f32 bytes, base64. */
  encoding: "float" | "base64";
}

const KEYS: ReadonlySet<string> = new Set([
  "input",
  "model",
  "encoding_format",
  "dimensions",
  "user",
]);

/** Token ids of input `i` (`param` names it), each an integer below `vocab`. */
function tokenIds(v: unknown[], vocab: number, param: string): number[] {
  if (v.length === 0) throw bad(`${param} is empty`, param);
  return v.map((t) => {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocab) {
      throw bad(`${param} must hold integer token ids in [0, ${vocab})`, param);
    }
    return t;
  });
}

/**
 * Validates a /v1/embeddings body: `input` a string, an array of strings, an array of token
 * ids or an array of arrays of token ids (at most {@link MAX_EMBEDDING_INPUTS} inputs, none
 * empty, texts at most `limits.maxTextLength` long); `encoding_format` "float" (default) or
 * "base64"; `dimensions`, when given, the model's width (vectors are not shortened); `model` and
 * `user` accepted. Unknown fields are refused when `ignored` is undefined (`--strict`), else
 * named in it.
 *
 * @example
 * ```ts
 * import { validateEmbeddingsRequest } from "./embeddings.ts";
 * import { DEFAULT_LIMITS } from "./validate_request.ts";
 * const r = validateEmbeddingsRequest({ input: ["a", "b"] }, DEFAULT_LIMITS, 100, 64, []);
 * console.log(r.inputs.length, r.encoding); // 2 float
 * ```
 */
export function validateEmbeddingsRequest(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  hidden: number,
  ignored?: string[],
): EmbeddingsRequest {
  const o = object(body, null);
  onlyKeys(o, KEYS, "", ignored);
  if (o.model !== undefined && o.model !== null && typeof o.model !== "string") {
    throw bad(`model must be a string, got ${kind(o.model)}`, "model", "invalid_type");
  }
  if (o.user !== undefined && o.user !== null && typeof o.user !== "string") {
    throw bad(`user must be a string, got ${kind(o.user)}`, "user", "invalid_type");
  }
  const format = o.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") {
    throw bad(
      `encoding_format must be "float" or "base64", got ${
        typeof format === "string" ? JSON.stringify(format.slice(0, 32)) : kind(format)
      }`,
      "encoding_format",
    );
  }
  checkDimensions(o.dimensions, hidden);
  const input = o.input;
  let inputs: (string | number[])[];
  if (typeof input === "string") {
    inputs = [input];
  } else if (Array.isArray(input)) {
    checkInputCount(input, MAX_EMBEDDING_INPUTS);
    if (input.every((x) => typeof x === "number")) {
      inputs = [tokenIds(input, vocab, "input")];
    } else if (input.every((x) => typeof x === "string")) {
      inputs = input as string[];
    } else if (input.every((x) => Array.isArray(x))) {
      inputs = input.map((x, i) => tokenIds(x as unknown[], vocab, `input[${i}]`));
    } else {
      throw bad(
        "input must be a string, an array of strings, an array of token ids or an array of " +
          "arrays of token ids (not a mix)",
        "input",
        "invalid_type",
      );
    }
  } else {
    throw bad(
      `input must be a string or an array, got ${kind(input)}`,
      "input",
      input === undefined ? "missing_field" : "invalid_type",
    );
  }
  // One text, or one array of token ids, is `input`; the items of a list are `input[i]`.
  const single = typeof input === "string" || typeof input[0] === "number";
  const params = inputs.map((_, i) => single ? "input" : `input[${i}]`);
  inputs.forEach((x, i) => {
    if (typeof x !== "string") return;
    if (x.length === 0) throw bad(`${params[i]} is an empty string`, params[i]);
    if (x.length > limits.maxTextLength) {
      throw bad(`${params[i]} is longer than ${limits.maxTextLength} characters`, params[i]);
    }
  });
  return { inputs, params, encoding: format };
}

/** Little-endian f32 bytes of `v`, in base64 (OpenAI's `encoding_format: "base64"`). */
function base64F32(v: Float32Array): string {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  v.forEach((x, i) => view.setFloat32(4 * i, x, true));
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** The slot's model as a source of hidden states (a Transformer or an engine's sequence). */
function hiddenSource(slot: ModelSlot): HiddenStateSource {
  const m = slot.model as Partial<HiddenStateSource>;
  if (typeof m.hiddenStatesAsync !== "function") {
    throw new ApiError(501, "this server's model slots cannot compute embeddings", {
      code: "not_implemented",
    });
  }
  return m as HiddenStateSource;
}

/**
 * The token ids of each input (texts tokenized with the BOS, no special tokens parsed), each
 * within the context and all of them within `limits.maxTokens`; with `truncate`, an input longer
 * than the context keeps its first context-length tokens (Ollama's `truncate: true`) instead of
 * being refused.
 *
 * @example
 * ```ts ignore
 * import { embeddingTokens } from "./embeddings.ts";
 * const { ids, total } = embeddingTokens(state, ["hello"], ["input"]);
 * ```
 */
export function embeddingTokens(
  state: ServerState,
  inputs: readonly (string | number[])[],
  params: readonly string[],
  truncate = false,
): { ids: number[][]; total: number } {
  let total = 0;
  const ids = inputs.map((x, i) => {
    const param = params[i];
    let tokens = typeof x === "string"
      ? state.tokenizer.encode(x, { addSpecial: true, parseSpecial: false })
      : x;
    if (tokens.length === 0) throw bad(`${param} has no tokens`, param);
    if (tokens.length > state.contextLength) {
      if (!truncate) {
        throw new ApiError(
          400,
          `${param} has ${tokens.length} tokens; the context holds ${state.contextLength}`,
          { param, code: "context_length_exceeded" },
        );
      }
      tokens = tokens.slice(0, state.contextLength);
    }
    total += tokens.length;
    if (total > state.limits.maxTokens) {
      throw bad(`the inputs hold more than ${state.limits.maxTokens} tokens`, "input");
    }
    return tokens;
  });
  return { ids, total };
}

/**
 * Runs each input's tokens on a slot taken from the pool (the idle one whose cache loses least),
 * cutting the slot's prompt-cache record to what each embedding leaves in place, and returns the
 * pooled, L2-normalised vectors. Stops when the client leaves or the server closes.
 *
 * @example
 * ```ts ignore
 * import { embedOnSlot } from "./embeddings.ts";
 * const vectors = await embedOnSlot(state, request, ids);
 * ```
 */
export async function embedOnSlot(
  state: ServerState,
  request: Request,
  ids: readonly number[][],
): Promise<Float32Array[]> {
  let pooling: Pooling;
  try {
    pooling = poolingOf(state.slots[0].model.config);
  } catch (error) {
    throw new ApiError(400, (error as Error).message, { code: "embeddings_unsupported" });
  }
  const abort = new AbortController();
  const onGone = () => abort.abort(new DOMException("the client went away", "AbortError"));
  const onShutdown = () => abort.abort(new DOMException("the server is closing", "AbortError"));
  request.signal.addEventListener("abort", onGone, { once: true });
  state.shutdown.addEventListener("abort", onShutdown, { once: true });
  try {
    // The idle slot whose cache loses least: an empty one, else the one holding fewest tokens.
    const slot = await state.pool.acquire(
      abort.signal,
      (s) => -(s.cache?.tokens.length ?? 0),
    );
    try {
      const source = hiddenSource(slot);
      const vectors: Float32Array[] = [];
      for (const tokens of ids) {
        abort.signal.throwIfAborted();
        // Positions from the first token not shared with what the cache records are overwritten.
        slot.cache?.truncate(slot.cache.reusable(tokens));
        vectors.push(await embedTokens(source, tokens, { pooling, signal: abort.signal }));
      }
      return vectors;
    } finally {
      state.pool.release(slot);
    }
  } finally {
    request.signal.removeEventListener("abort", onGone);
    state.shutdown.removeEventListener("abort", onShutdown);
  }
}

/**
 * Answers `POST /v1/embeddings` (the route table in handler.ts calls it): `checkJson` is the
 * handler's content-type check, `info` the request's log record (its ignored fields, and the
 * prompt tokens once known).
 *
 * @example
 * ```ts ignore
 * import { embeddings } from "./embeddings.ts";
 * const response = await embeddings(state, request, info, needJson);
 * ```
 */
export async function embeddings(
  state: ServerState,
  request: Request,
  info: { ignored: string[]; promptTokens?: number },
  checkJson: (request: Request, strict: boolean) => void,
): Promise<Response> {
  checkJson(request, state.strict === true);
  const body = await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs);
  const r = validateEmbeddingsRequest(
    body,
    state.limits,
    state.vocab,
    state.slots[0].model.config.hidden,
    state.strict ? undefined : info.ignored,
  );
  const { ids, total } = embeddingTokens(state, r.inputs, r.params);
  info.promptTokens = total;
  const vectors = await embedOnSlot(state, request, ids);
  return jsonResponse({
    object: "list",
    data: vectors.map((v, index) => ({
      object: "embedding",
      index,
      embedding: r.encoding === "base64" ? base64F32(v) : Array.from(v),
    })),
    model: state.modelId,
    usage: { prompt_tokens: total, total_tokens: total },
  });
}
