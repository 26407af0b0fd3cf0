/**
 * The JSON shapes of Ollama's API as `cflow serve` answers them: streamed pieces, the last
 * object of a generation with its counts and durations (nanoseconds, as Ollama reports them),
 * NDJSON lines, errors (`{"error": "..."}`) and the model listings.
 *
 * @module
 */

import type { ApiError } from "./api_error.ts";
import type { ModelDescription } from "./describe_model.ts";
import type { GenerationResult } from "./run_generation.ts";

const encoder = new TextEncoder();

/**
 * One NDJSON line: the value as JSON and a newline.
 *
 * @example
 * ```ts
 * import { ndjsonLine } from "./ollama_format.ts";
 * console.log(new TextDecoder().decode(ndjsonLine({ done: true }))); // {"done":true}\n
 * ```
 */
export function ndjsonLine(value: unknown): Uint8Array {
  return encoder.encode(`${JSON.stringify(value)}\n`);
}

/**
 * Ollama's error body: `{"error": "..."}`.
 *
 * @example
 * ```ts
 * import { ApiError } from "./api_error.ts";
 * import { ollamaError } from "./ollama_format.ts";
 * console.log(ollamaError(new ApiError(400, "model is required"))); // { error: "model is required" }
 * ```
 */
export function ollamaError(error: ApiError): { error: string } {
  return { error: error.message };
}

/**
 * The response for an {@link ApiError} on an Ollama route: the same status and headers as the
 * OpenAI routes' (`WWW-Authenticate` on 401, `Retry-After` on 503), Ollama's body.
 *
 * @example
 * ```ts
 * import { ApiError } from "./api_error.ts";
 * import { ollamaErrorResponse } from "./ollama_format.ts";
 * const r = ollamaErrorResponse(new ApiError(404, "no route /api/x"));
 * console.log(r.status, await r.json()); // 404 { error: "no route /api/x" }
 * ```
 */
export function ollamaErrorResponse(error: ApiError): Response {
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (error.status === 401) headers["www-authenticate"] = "Bearer";
  if (error.status === 503) headers["retry-after"] = "1";
  return new Response(JSON.stringify(ollamaError(error)), { status: error.status, headers });
}

/**
 * Milliseconds as Ollama's nanosecond durations: a positive integer (at least 1, so that a
 * client's tokens-per-second never divides by zero).
 *
 * @example
 * ```ts
 * import { nanoseconds } from "./ollama_format.ts";
 * console.log(nanoseconds(1.5), nanoseconds(0)); // 1500000 1
 * ```
 */
export function nanoseconds(ms: number): number {
  return Math.max(1, Math.round(ms * 1e6));
}

/**
 * When a generation's phases happened (performance.now() milliseconds).
 *
 * @example
 * ```ts
 * import type { OllamaClock } from "./ollama_format.ts";
 * const c: OllamaClock = { started: 0, acquired: 2, ended: 40 };
 * console.log(c.ended - c.started);
 * ```
 */
export interface OllamaClock {
  /** The request arrived. */
  started: number;
  /** It got a slot (the model is loaded once: this is the wait in the queue). */
  acquired: number;
  /** The generation ended. */
  ended: number;
}

/**
 * The last object's fields: `done`, `done_reason` and Ollama's counts and durations.
 * `prompt_eval_count` is the prompt's tokens (those found in the slot's KV cache included, as
 * OpenAI's `prompt_tokens`), `prompt_eval_duration` the time to run the rest; `eval_count` the
 * generated tokens; `load_duration` the wait for a slot.
 *
 * @example
 * ```ts
 * import { doneFields } from "./ollama_format.ts";
 * const f = doneFields(
 *   { text: "Hi", completionTokens: 2, cachedTokens: 0, finishReason: "stop", aborted: false },
 *   5,
 *   { started: 0, acquired: 1, ended: 30 },
 * );
 * console.log(f.done_reason, f.eval_count, f.total_duration); // stop 2 30000000
 * ```
 */
export function doneFields(
  result: GenerationResult,
  promptTokens: number,
  clock: OllamaClock,
): {
  done: true;
  done_reason: "stop" | "length";
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
} {
  const t = result.timings;
  // Without timings (never from runGeneration), the whole span after the slot counts as eval.
  const promptMs = t?.prompt_ms ?? 0;
  const evalMs = t?.predicted_ms ?? clock.ended - clock.acquired;
  return {
    done: true,
    done_reason: result.finishReason === "length" ? "length" : "stop",
    total_duration: nanoseconds(clock.ended - clock.started),
    load_duration: nanoseconds(clock.acquired - clock.started),
    prompt_eval_count: promptTokens,
    prompt_eval_duration: nanoseconds(promptMs),
    eval_count: result.completionTokens,
    eval_duration: nanoseconds(evalMs),
  };
}

/**
 * The `details` object of `/api/tags`, `/api/show` and `/api/ps`.
 *
 * @example
 * ```ts ignore
 * import { ollamaDetails } from "./ollama_format.ts";
 * console.log(ollamaDetails(description).quantization_level);
 * ```
 */
export function ollamaDetails(d: ModelDescription): {
  parent_model: string;
  format: string;
  family: string;
  families: string[];
  parameter_size: string;
  quantization_level: string;
} {
  return {
    parent_model: "",
    format: d.format,
    family: d.family,
    families: [d.family],
    parameter_size: d.parameterSize,
    quantization_level: d.quantizationLevel,
  };
}

/**
 * The defaults the Ollama routes sample with, as `/api/show` lists them (Modelfile
 * `PARAMETER` lines), and the context.
 *
 * @example
 * ```ts
 * import { ollamaParameters } from "./ollama_format.ts";
 * console.log(ollamaParameters(4096).split("\n")[0]); // temperature 0.8
 * ```
 */
export function ollamaParameters(contextLength: number): string {
  return [
    "temperature 0.8",
    "top_k 40",
    "top_p 0.9",
    "repeat_penalty 1.1",
    "repeat_last_n 64",
    `num_ctx ${contextLength}`,
  ].join("\n");
}

/**
 * A Modelfile that says where the model came from, its template (Jinja, not Ollama's Go
 * templates) and its parameters; for display, as Ollama's `/api/show` returns one.
 *
 * @example
 * ```ts
 * import { ollamaModelfile } from "./ollama_format.ts";
 * console.log(ollamaModelfile("m.cflow", undefined, 512).startsWith("# Modelfile")); // true
 * ```
 */
export function ollamaModelfile(
  modelId: string,
  template: string | undefined,
  contextLength: number,
): string {
  const lines = [
    "# Modelfile generated by cflow serve (the template is Jinja, as the model carries it)",
    `FROM ${modelId}`,
  ];
  if (template !== undefined) lines.push(`TEMPLATE """${template}"""`);
  for (const p of ollamaParameters(contextLength).split("\n")) lines.push(`PARAMETER ${p}`);
  return `${lines.join("\n")}\n`;
}
