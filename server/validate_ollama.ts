/**
 * Validation of Ollama's `/api/chat`, `/api/generate` and `/api/show` bodies: every field is
 * type-checked and bounded, Ollama's `options` are mapped onto cflow's sampling settings (with
 * Ollama's defaults), what cflow cannot honour (images, tools, thinking, `suffix`, Go
 * `template`s, mirostat...) is refused with a 400 naming it, and unknown fields are ignored and
 * named (or refused under `serve --strict`), as on the OpenAI routes.
 *
 * @module
 */

import type { ConstraintSpec } from "../grammar/constraint_spec.ts";
import {
  absent,
  bad,
  boolean,
  keepAlive,
  kind,
  type Obj,
  object,
  onlyKeys,
  text,
  unknownKey,
} from "./_validate_util.ts";
import type { RequestLimits, SamplingRequest } from "./validate_request.ts";

/**
 * A validated `/api/generate` body.
 *
 * @example
 * ```ts
 * import type { OllamaGenerateRequest } from "./validate_ollama.ts";
 * function isLoad(r: OllamaGenerateRequest): boolean {
 *   return r.load;
 * }
 * ```
 */
export interface OllamaGenerateRequest {
  /** The model name the client asked for (echoed back; the loaded model answers). */
  model: string;
  /** The prompt text (may be empty with `context`). */
  prompt: string;
  /** A system prompt for the chat template. */
  system?: string;
  /** The prompt goes to the tokenizer as it is, without the chat template. */
  raw: boolean;
  /** Token ids of an earlier answer's `context`, put before the prompt. */
  context?: number[];
  /** No prompt, system or context: Ollama's "load the model" request. */
  load: boolean;
  /** `options.num_ctx`: the request's prompt and answer must fit in this many tokens. */
  numCtx?: number;
  sampling: SamplingRequest;
}

/**
 * A validated `/api/chat` body.
 *
 * @example
 * ```ts
 * import type { OllamaChatRequest } from "./validate_ollama.ts";
 * function turns(r: OllamaChatRequest): number {
 *   return r.messages.length;
 * }
 * ```
 */
export interface OllamaChatRequest {
  /** The model name the client asked for (echoed back; the loaded model answers). */
  model: string;
  messages: { role: "system" | "user" | "assistant"; content: string }[];
  /** No messages: Ollama's "load the model" request. */
  load: boolean;
  /** `options.num_ctx`: the request's prompt and answer must fit in this many tokens. */
  numCtx?: number;
  sampling: SamplingRequest;
}

/** Deepest nesting of a `format` schema. */
const MAX_SCHEMA_DEPTH = 32;
/** Most values (objects, arrays, scalars) in a `format` schema. */
const MAX_SCHEMA_NODES = 10_000;

function optionalText(o: Obj, key: string, max: number): string | undefined {
  return absent(o[key]) ? undefined : text(o[key], key, max);
}

/** A number in [lo, hi] (lo excluded when `openLo`), or `fallback` when absent. */
function number(
  o: Obj,
  key: string,
  lo: number,
  hi: number,
  fallback: number,
  openLo = false,
): number {
  const v = o[key];
  const name = `options.${key}`;
  if (absent(v)) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw bad(`${name} must be a number, got ${kind(v)}`, name);
  }
  if (v > hi || (openLo ? v <= lo : v < lo)) {
    throw bad(`${name} ${v} is not in ${openLo ? "(" : "["}${lo}, ${hi}]`, name);
  }
  return v;
}

function integer(o: Obj, key: string, lo: number, hi: number, name = key): number | undefined {
  const v = o[key];
  if (absent(v)) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v)) {
    throw bad(`${name} must be an integer, got ${typeof v === "number" ? v : kind(v)}`, name);
  }
  if (v < lo || v > hi) throw bad(`${name} ${v} is not in [${lo}, ${hi}]`, name);
  return v;
}

/** `think`: only "off" is possible (no model cflow serves has a thinking mode it can parse). */
function think(v: unknown): void {
  if (absent(v) || v === false) return;
  if (v === true || v === "high" || v === "medium" || v === "low") {
    throw bad("the model does not support thinking", "think");
  }
  throw bad(`think must be a boolean or "high", "medium", "low", got ${kind(v)}`, "think");
}

/** Refuses a non-empty list (images, tools, tool_calls) that cflow cannot honour. */
function noneOf(v: unknown, param: string, message: string): void {
  if (absent(v)) return;
  if (!Array.isArray(v)) throw bad(`${param} must be an array, got ${kind(v)}`, param);
  if (v.length > 0) throw bad(message, param);
}

/** Checks a JSON schema's shape: an object, bounded in depth and size, `type` well formed. */
function schemaShape(schema: Obj): void {
  let nodes = 0;
  const walk = (v: unknown, depth: number, path: string): void => {
    if (++nodes > MAX_SCHEMA_NODES) {
      throw bad(`format has more than ${MAX_SCHEMA_NODES} values`, "format");
    }
    if (depth > MAX_SCHEMA_DEPTH) {
      throw bad(`format is nested deeper than ${MAX_SCHEMA_DEPTH}`, "format");
    }
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, depth + 1, `${path}[${i}]`));
      return;
    }
    if (typeof v !== "object" || v === null) return;
    const o = v as Obj;
    const t = o.type;
    if (
      t !== undefined && typeof t !== "string" &&
      !(Array.isArray(t) && t.every((x) => typeof x === "string"))
    ) {
      throw bad(`format${path}.type must be a string or an array of strings`, "format");
    }
    for (const [k, x] of Object.entries(o)) walk(x, depth + 1, `${path}.${k.slice(0, 32)}`);
  };
  walk(schema, 0, "");
}

/**
 * Ollama's `format`: `"json"` (any JSON object) or a JSON schema object, as a
 * {@link ConstraintSpec}; `""` or absent: none.
 *
 * @example
 * ```ts
 * import { ollamaFormat } from "./validate_ollama.ts";
 * console.log(ollamaFormat("json")); // { kind: "json_object" }
 * ```
 */
export function ollamaFormat(v: unknown): ConstraintSpec | undefined {
  if (absent(v) || v === "") return undefined;
  if (v === "json") return { kind: "json_object" };
  if (typeof v === "object" && !Array.isArray(v)) {
    schemaShape(v as Obj);
    return { kind: "json_schema", schema: v };
  }
  throw bad(`format must be "json" or a JSON schema object, got ${kind(v)}`, "format");
}

/** Ollama's options cflow maps onto its sampler. */
const SAMPLING_OPTIONS: ReadonlySet<string> = new Set([
  "temperature",
  "top_k",
  "top_p",
  "min_p",
  "seed",
  "num_predict",
  "repeat_penalty",
  "repeat_last_n",
  "presence_penalty",
  "frequency_penalty",
  "stop",
  "num_ctx",
]);

/** Sampling options cflow does not have: accepted only at their "off" value. */
const OFF_VALUES: Readonly<Record<string, unknown>> = { mirostat: 0, typical_p: 1, tfs_z: 1 };

/**
 * The sampling settings of Ollama's `options`, with Ollama's defaults (temperature 0.8,
 * top_k 40, top_p 0.9, repeat_penalty 1.1 over the last 64 tokens, unlimited num_predict).
 */
function options(
  raw: unknown,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored: string[] | undefined,
  stream: boolean,
  constraint: ConstraintSpec | undefined,
): { sampling: SamplingRequest; numCtx?: number } {
  const o = absent(raw) ? {} : object(raw, "options");
  for (const [k, off] of Object.entries(OFF_VALUES)) {
    if (!absent(o[k]) && o[k] !== off) {
      throw bad(`options.${k} is not supported (only ${off}, its off value)`, `options.${k}`);
    }
  }
  const allowed = new Set([...SAMPLING_OPTIONS, ...Object.keys(OFF_VALUES)]);
  // mirostat_tau and mirostat_eta do nothing without mirostat: named as ignored (below).
  onlyKeys(o, allowed, "options.", ignored, unknownKey);
  const numCtx = integer(o, "num_ctx", 1, contextLength, "options.num_ctx");
  const numPredict = integer(o, "num_predict", -2, 1 << 30, "options.num_predict");
  if (numPredict === 0) {
    throw bad("options.num_predict must be -1 (no limit), -2 (fill the context) or >= 1");
  }
  const lastN = integer(o, "repeat_last_n", -1, 1 << 20, "options.repeat_last_n");
  const seed = integer(o, "seed", -(2 ** 31), 0xffffffff, "options.seed");
  let stop: string[] = [];
  if (!absent(o.stop)) {
    const list = typeof o.stop === "string" ? [o.stop] : o.stop;
    if (!Array.isArray(list)) {
      throw bad("options.stop must be an array of strings", "options.stop");
    }
    if (list.length > limits.maxStop) {
      throw bad(`options.stop has more than ${limits.maxStop} strings`, "options.stop");
    }
    stop = list.map((s) => text(s, "options.stop", limits.maxStopLength));
    if (stop.some((s) => s === "")) throw bad("options.stop strings must not be empty");
  }
  const window = numCtx ?? contextLength;
  return {
    sampling: {
      maxTokens: numPredict === undefined || numPredict < 0 ? undefined : numPredict,
      temperature: number(o, "temperature", 0, 100, 0.8),
      topP: number(o, "top_p", 0, 1, 0.9, true),
      topK: integer(o, "top_k", 0, vocab, "options.top_k") ?? Math.min(40, vocab),
      minP: number(o, "min_p", 0, 1, 0),
      seed: seed === undefined || seed < 0 ? undefined : seed,
      presencePenalty: number(o, "presence_penalty", -2, 2, 0),
      frequencyPenalty: number(o, "frequency_penalty", -2, 2, 0),
      repetitionPenalty: number(o, "repeat_penalty", 0, 10, 1.1, true),
      penaltyLastN: lastN === undefined ? 64 : lastN < 0 ? Math.min(window, 1 << 20) : lastN,
      stop,
      stream,
      includeUsage: false,
      ignoreEos: false,
      ...(constraint === undefined ? {} : { constraint }),
    },
    ...(numCtx === undefined ? {} : { numCtx }),
  };
}

/** The fields both generation routes share. */
function common(
  o: Obj,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored: string[] | undefined,
): { model: string; sampling: SamplingRequest; numCtx?: number } {
  const model = text(o.model, "model", 256);
  if (model === "") throw bad("model is required", "model");
  keepAlive(o.keep_alive);
  think(o.think);
  const constraint = ollamaFormat(o.format);
  const stream = boolean(o, "stream", true);
  return {
    model,
    ...options(o.options, limits, vocab, contextLength, ignored, stream, constraint),
  };
}

const GENERATE_KEYS: ReadonlySet<string> = new Set([
  "model",
  "prompt",
  "suffix",
  "images",
  "format",
  "options",
  "system",
  "template",
  "context",
  "stream",
  "raw",
  "keep_alive",
  "think",
]);

/**
 * Validates an `/api/generate` body.
 *
 * @throws {ApiError} 400 naming the first field that is ill-typed, out of range, not
 * supported (`suffix`, `images`, a `template`, thinking) or (under `--strict`) unknown.
 *
 * @example
 * ```ts
 * import { validateOllamaGenerate } from "./validate_ollama.ts";
 * import { DEFAULT_LIMITS } from "./validate_request.ts";
 * const r = validateOllamaGenerate({ model: "m", prompt: "Hi" }, DEFAULT_LIMITS, 100, 64, []);
 * console.log(r.prompt, r.sampling.stream, r.sampling.temperature); // Hi true 0.8
 * ```
 */
export function validateOllamaGenerate(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored?: string[],
): OllamaGenerateRequest {
  const o = object(body, null);
  onlyKeys(o, GENERATE_KEYS, "", ignored, unknownKey);
  const c = common(o, limits, vocab, contextLength, ignored);
  const prompt = optionalText(o, "prompt", limits.maxTextLength) ?? "";
  const system = optionalText(o, "system", limits.maxTextLength);
  const raw = boolean(o, "raw", false);
  if ((optionalText(o, "suffix", limits.maxTextLength) ?? "") !== "") {
    throw bad("the model does not support insert (suffix)", "suffix");
  }
  noneOf(o.images, "images", "the model does not support images (no vision model is served)");
  const template = optionalText(o, "template", limits.maxTextLength) ?? "";
  if (template !== "" && !raw) {
    throw bad(
      "template (a Go template) is not supported: send the formatted prompt with raw: true, " +
        "or start serve with --template (Jinja)",
      "template",
    );
  }
  let context: number[] | undefined;
  if (!absent(o.context)) {
    if (!Array.isArray(o.context)) {
      throw bad(`context must be an array of token ids, got ${kind(o.context)}`, "context");
    }
    if (o.context.length > Math.min(limits.maxTokens, contextLength)) {
      throw bad(`context has more than ${Math.min(limits.maxTokens, contextLength)} ids`);
    }
    context = o.context.map((t: unknown) => {
      if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocab) {
        throw bad(`context must hold token ids in [0, ${vocab})`, "context");
      }
      return t;
    });
  }
  if (raw && system !== undefined && system !== "") {
    throw bad("system has no place in a raw prompt: put it in the prompt", "system");
  }
  const load = prompt === "" && (system ?? "") === "" && (context?.length ?? 0) === 0;
  return {
    model: c.model,
    prompt,
    ...(system === undefined || system === "" ? {} : { system }),
    raw,
    ...(context === undefined || context.length === 0 ? {} : { context }),
    load,
    ...(c.numCtx === undefined ? {} : { numCtx: c.numCtx }),
    sampling: c.sampling,
  };
}

const CHAT_KEYS: ReadonlySet<string> = new Set([
  "model",
  "messages",
  "tools",
  "format",
  "options",
  "stream",
  "keep_alive",
  "think",
]);
const MESSAGE_KEYS: ReadonlySet<string> = new Set([
  "role",
  "content",
  "images",
  "tool_calls",
  "thinking",
]);
const ROLES: ReadonlySet<string> = new Set(["system", "user", "assistant"]);

/**
 * Validates an `/api/chat` body.
 *
 * @throws {ApiError} 400 naming the first field that is ill-typed, out of range, not
 * supported (images, tools, the `tool` role, thinking) or (under `--strict`) unknown.
 *
 * @example
 * ```ts
 * import { validateOllamaChat } from "./validate_ollama.ts";
 * import { DEFAULT_LIMITS } from "./validate_request.ts";
 * const r = validateOllamaChat(
 *   { model: "m", messages: [{ role: "user", content: "Hi" }], stream: false },
 *   DEFAULT_LIMITS, 100, 64, [],
 * );
 * console.log(r.messages.length, r.sampling.stream); // 1 false
 * ```
 */
export function validateOllamaChat(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored?: string[],
): OllamaChatRequest {
  const o = object(body, null);
  onlyKeys(o, CHAT_KEYS, "", ignored, unknownKey);
  const c = common(o, limits, vocab, contextLength, ignored);
  noneOf(o.tools, "tools", `${c.model} does not support tools`);
  const list = absent(o.messages) ? [] : o.messages;
  if (!Array.isArray(list)) {
    throw bad(`messages must be an array, got ${kind(list)}`, "messages");
  }
  if (list.length > limits.maxMessages) {
    throw bad(`messages has more than ${limits.maxMessages} entries`, "messages");
  }
  let total = 0;
  const messages = list.map((m: unknown, i: number) => {
    const p = `messages[${i}]`;
    const mo = object(m, p);
    onlyKeys(mo, MESSAGE_KEYS, `${p}.`, ignored, unknownKey);
    const role = text(mo.role, `${p}.role`, 16);
    if (!ROLES.has(role)) {
      throw bad(`${p}.role must be system, user or assistant`, `${p}.role`);
    }
    noneOf(mo.images, `${p}.images`, "the model does not support images (no vision model)");
    noneOf(mo.tool_calls, `${p}.tool_calls`, `${c.model} does not support tools`);
    if (!absent(mo.thinking)) text(mo.thinking, `${p}.thinking`, limits.maxTextLength);
    const content = absent(mo.content)
      ? ""
      : text(mo.content, `${p}.content`, limits.maxTextLength);
    total += content.length;
    if (total > limits.maxTextLength) {
      throw bad(`the messages are longer than ${limits.maxTextLength} characters`, "messages");
    }
    return { role: role as "system" | "user" | "assistant", content };
  });
  return {
    model: c.model,
    messages,
    load: messages.length === 0,
    ...(c.numCtx === undefined ? {} : { numCtx: c.numCtx }),
    sampling: c.sampling,
  };
}

/**
 * Validates an `/api/show` body: `{ model }` (or the older `name`), `verbose` optional.
 *
 * @example
 * ```ts
 * import { validateOllamaShow } from "./validate_ollama.ts";
 * console.log(validateOllamaShow({ model: "smollm2" }, []).model); // smollm2
 * ```
 */
export function validateOllamaShow(
  body: unknown,
  ignored?: string[],
): { model: string; verbose: boolean } {
  const o = object(body, null);
  onlyKeys(o, new Set(["model", "name", "verbose"]), "", ignored, unknownKey);
  const model = optionalText(o, "model", 256) ?? optionalText(o, "name", 256) ?? "";
  if (model === "") throw bad("model is required", "model");
  return { model, verbose: boolean(o, "verbose", false) };
}
