/**
 * Validation of the OpenAI request bodies: every field is type-checked and
 * bounded, unknown fields are refused, and the result is a plain typed object.
 *
 * @module
 */

import type { ConstraintSpec } from "../grammar/constraint_spec.ts";
import { bad, kind, type Obj, object, onlyKeys } from "./_validate_util.ts";
import type {
  ChatRequest,
  ChatRequestMessage,
  CompletionRequest,
  RequestLimits,
  SamplingRequest,
} from "./request_types.ts";
import {
  type MessageToolCall,
  validateMessageToolCalls,
  validateParallelToolCalls,
  validateToolCallId,
  validateToolChoice,
  validateTools,
} from "./validate_tools.ts";

export {
  type ChatRequest,
  type ChatRequestMessage,
  type CompletionRequest,
  DEFAULT_LIMITS,
  type RequestLimits,
  type SamplingRequest,
} from "./request_types.ts";

/** A number field in [lo, hi] (lo excluded when `openLo`), or `fallback` when absent/null. */
function number(
  o: Obj,
  key: string,
  lo: number,
  hi: number,
  fallback: number,
  openLo = false,
  name = key,
): number {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw bad(`${name} must be a number, got ${kind(v)}`, name, "invalid_type");
  }
  if (v > hi || (openLo ? v <= lo : v < lo)) {
    throw bad(`${name} ${v} is not in ${openLo ? "(" : "["}${lo}, ${hi}]`, name);
  }
  return v;
}

function integer(o: Obj, key: string, lo: number, hi: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v)) {
    throw bad(
      `${key} must be an integer, got ${typeof v === "number" ? v : kind(v)}`,
      key,
      "invalid_type",
    );
  }
  if (v < lo || v > hi) throw bad(`${key} ${v} is not in [${lo}, ${hi}]`, key);
  return v;
}

function boolean(o: Obj, key: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") {
    throw bad(`${key} must be a boolean, got ${kind(v)}`, key, "invalid_type");
  }
  return v;
}

function text(v: unknown, param: string, max: number): string {
  if (typeof v !== "string") {
    throw bad(`${param} must be a string, got ${kind(v)}`, param, "invalid_type");
  }
  if (v.length > max) throw bad(`${param} is longer than ${max} characters`, param);
  return v;
}

const SAMPLING_KEYS = [
  "model",
  "stream",
  "stream_options",
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "presence_penalty",
  "frequency_penalty",
  "repeat_penalty",
  "logit_bias",
  "stop",
  "n",
  "user",
  "logprobs",
  "ignore_eos",
  "response_format",
  "grammar",
  "json_schema",
];

/** A JSON Schema value: an object or a boolean. */
function schemaValue(v: unknown, param: string): unknown {
  if (typeof v === "boolean") return v;
  object(v, param);
  return v;
}

/**
 * The output constraint of a request: OpenAI's `response_format` or llama-server's `grammar` or
 * `json_schema` (at most one of them).
 */
function constraintOf(
  o: Obj,
  limits: RequestLimits,
  ignored: string[] | undefined,
): ConstraintSpec | undefined {
  const given = ["response_format", "grammar", "json_schema"].filter((k) =>
    o[k] !== undefined && o[k] !== null
  );
  if (given.length > 1) {
    throw bad(`give at most one of response_format, grammar and json_schema`, given[1]);
  }
  if (given.length === 0) return undefined;
  if (given[0] === "grammar") {
    const g = text(o.grammar, "grammar", limits.maxTextLength);
    return g === "" ? undefined : { kind: "gbnf", grammar: g };
  }
  if (given[0] === "json_schema") {
    return { kind: "json_schema", schema: schemaValue(o.json_schema, "json_schema") };
  }
  const rf = object(o.response_format, "response_format");
  const type = text(rf.type, "response_format.type", 32);
  switch (type) {
    case "text":
      onlyKeys(rf, new Set(["type"]), "response_format.", ignored);
      return undefined;
    case "json_object":
      // llama-server also takes a schema here.
      onlyKeys(rf, new Set(["type", "schema"]), "response_format.", ignored);
      return rf.schema === undefined || rf.schema === null
        ? { kind: "json_object" }
        : { kind: "json_schema", schema: schemaValue(rf.schema, "response_format.schema") };
    case "json_schema": {
      onlyKeys(rf, new Set(["type", "json_schema"]), "response_format.", ignored);
      const js = object(rf.json_schema, "response_format.json_schema");
      onlyKeys(
        js,
        new Set(["name", "schema", "strict", "description"]),
        "response_format.json_schema.",
        ignored,
      );
      if (js.name !== undefined) text(js.name, "response_format.json_schema.name", 64);
      if (js.description !== undefined) {
        text(js.description, "response_format.json_schema.description", limits.maxTextLength);
      }
      if (js.strict !== undefined && js.strict !== null && typeof js.strict !== "boolean") {
        throw bad(
          `response_format.json_schema.strict must be a boolean, got ${kind(js.strict)}`,
          "response_format.json_schema.strict",
          "invalid_type",
        );
      }
      if (js.schema === undefined || js.schema === null) {
        throw bad(
          "response_format.json_schema.schema is required",
          "response_format.json_schema.schema",
        );
      }
      return {
        kind: "json_schema",
        schema: schemaValue(js.schema, "response_format.json_schema.schema"),
      };
    }
    default:
      throw bad(
        `response_format.type must be text, json_object or json_schema, got ${
          JSON.stringify(type)
        }`,
        "response_format.type",
      );
  }
}

function sampling(
  o: Obj,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored: string[] | undefined,
  endpoint: "chat" | "completions",
): SamplingRequest {
  if (o.model !== undefined && o.model !== null) text(o.model, "model", 256);
  if (o.user !== undefined && o.user !== null) text(o.user, "user", 256);
  const n = integer(o, "n", 1, 1 << 20);
  if (n !== undefined && n !== 1) throw bad(`n must be 1, got ${n}`, "n");
  // OpenAI's two shapes: chat takes logprobs: true and top_logprobs 0..20, the legacy
  // completions endpoint logprobs: N (0..5) alternatives.
  let logprobs: number | undefined;
  if (endpoint === "chat") {
    const top = integer(o, "top_logprobs", 0, 20);
    if (boolean(o, "logprobs")) logprobs = top ?? 0;
    else if (top !== undefined) throw bad("top_logprobs needs logprobs: true", "top_logprobs");
  } else {
    logprobs = integer(o, "logprobs", 0, 5);
  }
  const maxTokens = integer(o, "max_tokens", 1, contextLength) ??
    integer(o, "max_completion_tokens", 1, contextLength);
  const seed = integer(o, "seed", 0, 0xffffffff);
  const stream = boolean(o, "stream");
  let includeUsage = false;
  if (o.stream_options !== undefined && o.stream_options !== null) {
    if (!stream) throw bad("stream_options needs stream: true", "stream_options");
    const so = object(o.stream_options, "stream_options");
    onlyKeys(so, new Set(["include_usage"]), "stream_options.", ignored);
    includeUsage = boolean(so, "include_usage");
  }
  let stop: string[] = [];
  if (o.stop !== undefined && o.stop !== null) {
    const list = typeof o.stop === "string" ? [o.stop] : o.stop;
    if (!Array.isArray(list)) {
      throw bad(`stop must be a string or an array of strings`, "stop", "invalid_type");
    }
    if (list.length > limits.maxStop) {
      throw bad(`stop has more than ${limits.maxStop} strings`, "stop");
    }
    stop = list.map((s) => text(s, "stop", limits.maxStopLength));
    if (stop.some((s) => s === "")) throw bad("stop strings must not be empty", "stop");
  }
  let logitBias: Record<string, number> | undefined;
  if (o.logit_bias !== undefined && o.logit_bias !== null) {
    const lb = object(o.logit_bias, "logit_bias");
    const keys = Object.keys(lb);
    if (keys.length > limits.maxLogitBias) {
      throw bad(`logit_bias has more than ${limits.maxLogitBias} entries`, "logit_bias");
    }
    logitBias = {};
    for (const k of keys) {
      if (!/^(0|[1-9][0-9]{0,8})$/.test(k) || Number(k) >= vocab) {
        throw bad(
          `logit_bias key '${k.slice(0, 32)}' is not a token id below ${vocab}`,
          "logit_bias",
        );
      }
      logitBias[k] = number(lb, k, -100, 100, 0, false, `logit_bias.${k}`);
    }
  }
  const constraint = constraintOf(o, limits, ignored);
  if (constraint !== undefined && boolean(o, "ignore_eos")) {
    throw bad("ignore_eos cannot go with an output constraint", "ignore_eos");
  }
  return {
    maxTokens,
    temperature: number(o, "temperature", 0, 2, 1),
    topP: number(o, "top_p", 0, 1, 1, true),
    topK: integer(o, "top_k", 0, vocab) ?? 0,
    minP: number(o, "min_p", 0, 1, 0),
    seed,
    presencePenalty: number(o, "presence_penalty", -2, 2, 0),
    frequencyPenalty: number(o, "frequency_penalty", -2, 2, 0),
    repetitionPenalty: number(o, "repeat_penalty", 0, 10, 1, true),
    logitBias,
    stop,
    stream,
    includeUsage,
    ...(logprobs === undefined ? {} : { logprobs }),
    ignoreEos: boolean(o, "ignore_eos"),
    ...(constraint === undefined ? {} : { constraint }),
  };
}

const CHAT_KEYS: ReadonlySet<string> = new Set([
  ...SAMPLING_KEYS,
  "messages",
  "max_completion_tokens",
  "top_logprobs",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
]);
const COMPLETION_KEYS: ReadonlySet<string> = new Set([...SAMPLING_KEYS, "prompt"]);
const ROLES: ReadonlySet<string> = new Set(["system", "user", "assistant", "tool"]);

/**
 * Validates a /v1/chat/completions body.
 *
 * Unknown fields are refused, or, when `ignored` is given, listed there and ignored.
 *
 * @throws {ApiError} 400 naming the first field that is ill-typed, out of range or (without
 * `ignored`) unknown.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS, validateChatRequest } from "./validate_request.ts";
 * const r = validateChatRequest({ messages: [{ role: "user", content: "Hi" }] }, DEFAULT_LIMITS, 100, 64);
 * console.log(r.messages.length, r.temperature); // 1 1
 * ```
 */
export function validateChatRequest(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored?: string[],
): ChatRequest {
  const o = object(body, null);
  onlyKeys(o, CHAT_KEYS, "", ignored);
  if (o.max_tokens !== undefined && o.max_completion_tokens !== undefined) {
    throw bad("give max_tokens or max_completion_tokens, not both", "max_tokens");
  }
  const s = sampling(o, limits, vocab, contextLength, ignored, "chat");
  if (!Array.isArray(o.messages)) {
    throw bad(`messages must be an array, got ${kind(o.messages)}`, "messages", "invalid_type");
  }
  if (o.messages.length === 0) throw bad("messages must not be empty", "messages");
  if (o.messages.length > limits.maxMessages) {
    throw bad(`messages has more than ${limits.maxMessages} entries`, "messages");
  }
  let total = 0;
  const messages = o.messages.map((m: unknown, i: number) => {
    const p = `messages[${i}]`;
    const mo = object(m, p);
    onlyKeys(
      mo,
      new Set(["role", "content", "name", "tool_calls", "tool_call_id"]),
      `${p}.`,
      ignored,
    );
    const role = text(mo.role, `${p}.role`, 16);
    if (!ROLES.has(role)) {
      throw bad(`${p}.role must be system, user, assistant or tool`, `${p}.role`);
    }
    if (mo.name !== undefined) text(mo.name, `${p}.name`, 64);
    const tools: { tool_calls?: MessageToolCall[]; tool_call_id?: string } = {};
    if (mo.tool_calls !== undefined && mo.tool_calls !== null) {
      if (role !== "assistant") {
        throw bad(`${p}.tool_calls is for assistant messages`, `${p}.tool_calls`);
      }
      const v = validateMessageToolCalls(
        mo.tool_calls,
        `${p}.tool_calls`,
        limits.maxTextLength - total,
        ignored,
      );
      tools.tool_calls = v.calls;
      total += v.length;
    }
    if (role === "tool") {
      tools.tool_call_id = validateToolCallId(mo.tool_call_id, `${p}.tool_call_id`);
    } else if (mo.tool_call_id !== undefined) {
      throw bad(`${p}.tool_call_id is for tool messages`, `${p}.tool_call_id`);
    }
    let content: string;
    if ((mo.content === null || mo.content === undefined) && tools.tool_calls !== undefined) {
      // An assistant message of calls only.
      content = "";
    } else if (Array.isArray(mo.content)) {
      // OpenAI's content parts: text parts only.
      if (mo.content.length > limits.maxMessages) {
        throw bad(`${p}.content has too many parts`, `${p}.content`);
      }
      content = mo.content.map((part: unknown, j: number) => {
        const q = `${p}.content[${j}]`;
        const po = object(part, q);
        if (po.type !== "text") {
          throw bad(
            `${q}.type must be "text" (images and other inputs are not supported)`,
            `${q}.type`,
            "unsupported_field",
          );
        }
        onlyKeys(po, new Set(["type", "text"]), `${q}.`, ignored);
        return text(po.text, `${q}.text`, limits.maxTextLength);
      }).join("");
    } else {
      content = text(mo.content, `${p}.content`, limits.maxTextLength);
    }
    total += content.length;
    if (total > limits.maxTextLength) {
      throw bad(`the messages are longer than ${limits.maxTextLength} characters`, "messages");
    }
    return { role: role as ChatRequestMessage["role"], content, ...tools };
  });
  const tools = o.tools === undefined || o.tools === null
    ? undefined
    : validateTools(o.tools, ignored);
  const toolChoice = o.tool_choice === undefined || o.tool_choice === null
    ? undefined
    : validateToolChoice(o.tool_choice, tools, ignored);
  const parallelToolCalls = validateParallelToolCalls(o.parallel_tool_calls);
  return {
    ...s,
    messages,
    ...(tools === undefined ? {} : { tools }),
    ...(toolChoice === undefined ? {} : { toolChoice }),
    parallelToolCalls,
  };
}

/**
 * Validates a /v1/completions body (`prompt` is one string).
 *
 * Unknown fields are refused, or, when `ignored` is given, listed there and ignored.
 *
 * @throws {ApiError} 400 naming the first field that is ill-typed, out of range or (without
 * `ignored`) unknown.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS, validateCompletionRequest } from "./validate_request.ts";
 * const r = validateCompletionRequest({ prompt: "Once", max_tokens: 8 }, DEFAULT_LIMITS, 100, 64);
 * console.log(r.prompt, r.maxTokens); // Once 8
 * ```
 */
export function validateCompletionRequest(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  contextLength: number,
  ignored?: string[],
): CompletionRequest {
  const o = object(body, null);
  onlyKeys(o, COMPLETION_KEYS, "", ignored);
  const s = sampling(o, limits, vocab, contextLength, ignored, "completions");
  const prompt = text(o.prompt, "prompt", limits.maxTextLength);
  return { ...s, prompt };
}

/**
 * Validates a /tokenize body: `{ content: string, add_special?: boolean }`.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS, validateTokenizeRequest } from "./validate_request.ts";
 * console.log(validateTokenizeRequest({ content: "hi" }, DEFAULT_LIMITS).content); // hi
 * ```
 */
export function validateTokenizeRequest(
  body: unknown,
  limits: RequestLimits,
  ignored?: string[],
): { content: string; addSpecial: boolean } {
  const o = object(body, null);
  onlyKeys(o, new Set(["content", "add_special"]), "", ignored);
  return {
    content: text(o.content, "content", limits.maxTextLength),
    addSpecial: boolean(o, "add_special"),
  };
}

/**
 * Validates a /detokenize body: `{ tokens: number[] }`, every id below `vocab`.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS, validateDetokenizeRequest } from "./validate_request.ts";
 * console.log(validateDetokenizeRequest({ tokens: [1, 2] }, DEFAULT_LIMITS, 10)); // [ 1, 2 ]
 * ```
 */
export function validateDetokenizeRequest(
  body: unknown,
  limits: RequestLimits,
  vocab: number,
  ignored?: string[],
): number[] {
  const o = object(body, null);
  onlyKeys(o, new Set(["tokens"]), "", ignored);
  if (!Array.isArray(o.tokens)) {
    throw bad(`tokens must be an array, got ${kind(o.tokens)}`, "tokens", "invalid_type");
  }
  if (o.tokens.length > limits.maxTokens) {
    throw bad(`tokens has more than ${limits.maxTokens} ids`, "tokens");
  }
  return o.tokens.map((t: unknown) => {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocab) {
      throw bad(`tokens must be integers in [0, ${vocab})`, "tokens");
    }
    return t;
  });
}
