/**
 * Validation of Ollama's `/api/embed` and `/api/embeddings` bodies ({@link validateOllamaEmbed}),
 * with the field checks of the other Ollama routes (validate_ollama.ts): unknown fields are
 * ignored and named (or refused under `serve --strict`).
 *
 * @module
 */

import {
  absent,
  bad,
  boolean,
  checkDimensions,
  checkInputCount,
  keepAlive,
  kind,
  object,
  onlyKeys,
  text,
  unknownKey,
} from "./_validate_util.ts";
import type { RequestLimits } from "./validate_request.ts";

/**
 * A validated `/api/embed` or `/api/embeddings` request.
 *
 * @example
 * ```ts
 * import type { OllamaEmbedRequest } from "./validate_ollama_embed.ts";
 * const r: OllamaEmbedRequest = { model: "m", inputs: ["hi"], truncate: true, legacy: false };
 * console.log(r.inputs.length); // 1
 * ```
 */
export interface OllamaEmbedRequest {
  model: string;
  /** The texts to embed, in order (one for the legacy route). */
  inputs: string[];
  /** Cut an input longer than the context to its first context-length tokens (else a 400). */
  truncate: boolean;
  /** `/api/embeddings` (one `prompt`, one unlisted `embedding`) rather than `/api/embed`. */
  legacy: boolean;
}

const EMBED_KEYS: ReadonlySet<string> = new Set([
  "model",
  "input",
  "truncate",
  "options",
  "keep_alive",
  "dimensions",
]);

const LEGACY_EMBED_KEYS: ReadonlySet<string> = new Set([
  "model",
  "prompt",
  "options",
  "keep_alive",
]);

/** Most inputs of one `/api/embed` request (as `/v1/embeddings`). */
const MAX_EMBED_INPUTS = 2048;

/**
 * Validates an `/api/embed` body (`legacy` false: `input` a string or an array of strings,
 * `truncate`, `dimensions` only the model's width) or an `/api/embeddings` body (`legacy` true:
 * one `prompt`). `options` must be an object and has no effect on embeddings; `keep_alive` is
 * checked as for generations.
 *
 * @throws {ApiError} 400 naming the first field that is ill-typed, out of range or (under
 * `--strict`) unknown.
 *
 * @example
 * ```ts
 * import { validateOllamaEmbed } from "./validate_ollama_embed.ts";
 * import { DEFAULT_LIMITS } from "./validate_request.ts";
 * const r = validateOllamaEmbed({ model: "m", input: ["a", "b"] }, DEFAULT_LIMITS, 64, false, []);
 * console.log(r.inputs, r.truncate); // [ "a", "b" ] true
 * ```
 */
export function validateOllamaEmbed(
  body: unknown,
  limits: RequestLimits,
  hidden: number,
  legacy: boolean,
  ignored?: string[],
): OllamaEmbedRequest {
  const o = object(body, null);
  onlyKeys(o, legacy ? LEGACY_EMBED_KEYS : EMBED_KEYS, "", ignored, unknownKey);
  const model = text(o.model, "model", 256);
  if (model === "") throw bad("model is required", "model");
  keepAlive(o.keep_alive);
  if (!absent(o.options)) object(o.options, "options");
  if (legacy) {
    const prompt = text(o.prompt ?? "", "prompt", limits.maxTextLength);
    if (prompt === "") throw bad("prompt is required", "prompt");
    return { model, inputs: [prompt], truncate: true, legacy };
  }
  checkDimensions(o.dimensions, hidden);
  const input = o.input;
  let inputs: string[];
  if (typeof input === "string") {
    inputs = [input];
  } else if (Array.isArray(input)) {
    checkInputCount(input, MAX_EMBED_INPUTS);
    inputs = input.map((x, i) => text(x, `input[${i}]`, limits.maxTextLength));
  } else {
    throw bad(`input must be a string or an array of strings, got ${kind(input)}`, "input");
  }
  inputs.forEach((x, i) => {
    if (x === "") throw bad(`input${Array.isArray(input) ? `[${i}]` : ""} is empty`, "input");
    if (x.length > limits.maxTextLength) {
      throw bad(`input is longer than ${limits.maxTextLength} characters`, "input");
    }
  });
  return { model, inputs, truncate: boolean(o, "truncate", true), legacy };
}
