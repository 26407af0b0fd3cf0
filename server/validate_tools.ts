/**
 * Validation of the tool fields of a /v1/chat/completions body: `tools`, `tool_choice`,
 * `parallel_tool_calls`, and the `tool_calls` and `tool_call_id` of messages. Every field is
 * type-checked and bounded; the errors are 400s naming the field.
 *
 * @module
 */

import type { ToolChoice, ToolDefinition } from "../chat/mod.ts";
import { ApiError } from "./api_error.ts";

/**
 * Bounds on the tools of a request.
 *
 * @example
 * ```ts
 * import { TOOL_LIMITS } from "./validate_tools.ts";
 * console.log(TOOL_LIMITS.maxTools); // 128
 * ```
 */
export const TOOL_LIMITS: Readonly<{
  /** Most entries of `tools`. */
  maxTools: number;
  /** Longest `description`, in UTF-16 code units. */
  maxDescription: number;
  /** Longest `parameters` schema, as JSON text (UTF-16 code units). */
  maxSchemaLength: number;
  /** Deepest nesting of objects and arrays in a `parameters` schema. */
  maxSchemaDepth: number;
  /** Most calls in one assistant message. */
  maxCalls: number;
  /** Longest call id or tool_call_id. */
  maxIdLength: number;
}> = Object.freeze({
  maxTools: 128,
  maxDescription: 8192,
  maxSchemaLength: 65536,
  maxSchemaDepth: 16,
  maxCalls: 64,
  maxIdLength: 256,
});

/** OpenAI's function names. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

type Obj = Record<string, unknown>;

function bad(message: string, param: string, code = "invalid_value"): ApiError {
  return new ApiError(400, message, { param, code });
}

function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v}`;
}

function object(v: unknown, param: string): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw bad(`${param} must be a JSON object, got ${kind(v)}`, param, "invalid_type");
  }
  return v as Obj;
}

/** At most this many ignored field names are kept (as validate_request.ts). */
const MAX_IGNORED = 16;

function onlyKeys(o: Obj, allowed: readonly string[], prefix: string, ignored?: string[]): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    if (ignored === undefined) {
      throw bad(`unknown or unsupported field '${prefix}${k}'`, `${prefix}${k}`, "unknown_field");
    }
    if (ignored.length < MAX_IGNORED) ignored.push(`${prefix}${k}`.slice(0, 64));
  }
}

function text(v: unknown, param: string, max: number): string {
  if (typeof v !== "string") {
    throw bad(`${param} must be a string, got ${kind(v)}`, param, "invalid_type");
  }
  if (v.length > max) throw bad(`${param} is longer than ${max} characters`, param);
  return v;
}

function functionName(v: unknown, param: string): string {
  const name = text(v, param, 64);
  if (!NAME.test(name)) {
    throw bad(`${param} must be 1 to 64 of a-z, A-Z, 0-9, _ and -`, param);
  }
  return name;
}

/**
 * The depth of a JSON value's nesting, stopping (with `limit + 1`) past `limit`; the value came
 * from JSON.parse, so it has no cycles.
 */
function depth(v: unknown, limit: number): number {
  if (typeof v !== "object" || v === null) return 0;
  if (limit === 0) return 1;
  let most = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) {
    most = Math.max(most, depth(x, limit - 1));
    if (most >= limit) break;
  }
  return most + 1;
}

/**
 * Validates `tools`: 1 to {@link TOOL_LIMITS}.maxTools function tools with unique names, each
 * `parameters` a JSON object of bounded size and depth.
 *
 * @throws {ApiError} 400 naming the first bad field.
 *
 * @example
 * ```ts
 * import { validateTools } from "./validate_tools.ts";
 * const tools = validateTools([{ type: "function", function: { name: "now" } }]);
 * console.log(tools[0].function.name); // now
 * ```
 */
export function validateTools(v: unknown, ignored?: string[]): ToolDefinition[] {
  if (!Array.isArray(v)) {
    throw bad(`tools must be an array, got ${kind(v)}`, "tools", "invalid_type");
  }
  if (v.length === 0) throw bad("tools must have at least one entry", "tools");
  if (v.length > TOOL_LIMITS.maxTools) {
    throw bad(`tools has more than ${TOOL_LIMITS.maxTools} entries`, "tools");
  }
  const seen = new Set<string>();
  return v.map((t: unknown, i: number) => {
    const p = `tools[${i}]`;
    const to = object(t, p);
    onlyKeys(to, ["type", "function"], `${p}.`, ignored);
    if (to.type !== "function") {
      throw bad(`${p}.type must be "function"`, `${p}.type`, "unsupported_value");
    }
    const fo = object(to.function, `${p}.function`);
    onlyKeys(fo, ["name", "description", "parameters", "strict"], `${p}.function.`, ignored);
    const name = functionName(fo.name, `${p}.function.name`);
    if (seen.has(name)) {
      throw bad(`${p}.function.name ${name} is given twice`, `${p}.function.name`);
    }
    seen.add(name);
    const fields: Record<string, unknown> = { name };
    if (fo.description !== undefined && fo.description !== null) {
      fields.description = text(
        fo.description,
        `${p}.function.description`,
        TOOL_LIMITS.maxDescription,
      );
    }
    if (fo.parameters !== undefined && fo.parameters !== null) {
      const q = `${p}.function.parameters`;
      const schema = object(fo.parameters, q);
      if (depth(schema, TOOL_LIMITS.maxSchemaDepth) > TOOL_LIMITS.maxSchemaDepth) {
        throw bad(`${q} is nested deeper than ${TOOL_LIMITS.maxSchemaDepth} levels`, q);
      }
      if (JSON.stringify(schema).length > TOOL_LIMITS.maxSchemaLength) {
        throw bad(`${q} is longer than ${TOOL_LIMITS.maxSchemaLength} characters as JSON`, q);
      }
      fields.parameters = schema;
    }
    if (fo.strict !== undefined && fo.strict !== null) {
      if (typeof fo.strict !== "boolean") {
        throw bad(`${p}.function.strict must be a boolean`, `${p}.function.strict`, "invalid_type");
      }
      fields.strict = fo.strict;
    }
    // In the client's key order: the template writes the tool with tojson, as transformers does.
    const fn: Record<string, unknown> = {};
    for (const k of Object.keys(fo)) if (Object.hasOwn(fields, k)) fn[k] = fields[k];
    return inOrder(to, { type: "function", function: fn }) as unknown as ToolDefinition;
  });
}

/** `fields` in the key order of `given` (the keys `given` lacks last). */
function inOrder(given: Obj, fields: Obj): Obj {
  const out: Obj = {};
  for (const k of Object.keys(given)) if (Object.hasOwn(fields, k)) out[k] = fields[k];
  for (const k of Object.keys(fields)) if (!Object.hasOwn(out, k)) out[k] = fields[k];
  return out;
}

/**
 * Validates `tool_choice` against the validated `tools` (undefined when absent): a named
 * function must be one of them, and any choice but `"none"` needs tools.
 *
 * @throws {ApiError} 400 on `tool_choice`.
 *
 * @example
 * ```ts
 * import { validateToolChoice } from "./validate_tools.ts";
 * console.log(validateToolChoice("auto", [{ type: "function", function: { name: "now" } }]));
 * // auto
 * ```
 */
export function validateToolChoice(
  v: unknown,
  tools: readonly ToolDefinition[] | undefined,
  ignored?: string[],
): ToolChoice {
  const param = "tool_choice";
  let choice: ToolChoice;
  if (typeof v === "string") {
    if (v !== "none" && v !== "auto" && v !== "required") {
      throw bad(`tool_choice must be "none", "auto", "required" or a function`, param);
    }
    choice = v;
  } else {
    const o = object(v, param);
    onlyKeys(o, ["type", "function"], "tool_choice.", ignored);
    if (o.type !== "function") {
      throw bad(`tool_choice.type must be "function"`, "tool_choice.type", "unsupported_value");
    }
    const fo = object(o.function, "tool_choice.function");
    onlyKeys(fo, ["name"], "tool_choice.function.", ignored);
    const name = functionName(fo.name, "tool_choice.function.name");
    if (!tools?.some((t) => t.function.name === name)) {
      throw bad(`tool_choice names ${name}, which is not in tools`, "tool_choice.function.name");
    }
    choice = { type: "function", function: { name } };
  }
  if (choice !== "none" && tools === undefined) {
    throw bad(`tool_choice ${typeof choice === "string" ? choice : "function"} needs tools`, param);
  }
  return choice;
}

/**
 * A validated message call: OpenAI's shape, `arguments` parsed (it must be a JSON object).
 *
 * @example
 * ```ts
 * import type { MessageToolCall } from "./validate_tools.ts";
 * const c: MessageToolCall = { id: "call_1", type: "function", function: { name: "f", arguments: {} } };
 * console.log(c.function.name);
 * ```
 */
export interface MessageToolCall {
  id?: string;
  type: "function";
  function: { name: string; arguments: Record<string, unknown> };
}

/**
 * Validates the `tool_calls` of assistant message `param` (1 to
 * {@link TOOL_LIMITS}.maxCalls function calls, `arguments` a string of a JSON object, at most
 * `maxText` characters): the calls with their arguments parsed, and their total length.
 *
 * @throws {ApiError} 400 naming the first bad field.
 *
 * @example
 * ```ts
 * import { validateMessageToolCalls } from "./validate_tools.ts";
 * const { calls } = validateMessageToolCalls(
 *   [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"x":1}' } }],
 *   "messages[1].tool_calls",
 *   1 << 20,
 * );
 * console.log(calls[0].function.arguments); // { x: 1 }
 * ```
 */
export function validateMessageToolCalls(
  v: unknown,
  param: string,
  maxText: number,
  ignored?: string[],
): { calls: MessageToolCall[]; length: number } {
  if (!Array.isArray(v)) {
    throw bad(`${param} must be an array, got ${kind(v)}`, param, "invalid_type");
  }
  if (v.length === 0) throw bad(`${param} must have at least one entry`, param);
  if (v.length > TOOL_LIMITS.maxCalls) {
    throw bad(`${param} has more than ${TOOL_LIMITS.maxCalls} calls`, param);
  }
  let length = 0;
  const calls = v.map((c: unknown, j: number) => {
    const p = `${param}[${j}]`;
    const co = object(c, p);
    onlyKeys(co, ["id", "type", "function"], `${p}.`, ignored);
    if (co.type !== undefined && co.type !== "function") {
      throw bad(`${p}.type must be "function"`, `${p}.type`, "unsupported_value");
    }
    const fo = object(co.function, `${p}.function`);
    onlyKeys(fo, ["name", "arguments"], `${p}.function.`, ignored);
    const name = functionName(fo.name, `${p}.function.name`);
    const q = `${p}.function.arguments`;
    const raw = text(fo.arguments, q, maxText);
    length += raw.length;
    if (length > maxText) throw bad(`${param} is longer than ${maxText} characters`, param);
    let args: unknown;
    try {
      args = JSON.parse(raw);
    } catch {
      throw bad(`${q} must be a JSON object as a string: it is not JSON`, q);
    }
    if (typeof args !== "object" || args === null || Array.isArray(args)) {
      throw bad(`${q} must be a JSON object as a string, got ${kind(args)}`, q);
    }
    // As deep as a tool's parameters may be, so that the chat template's depth bound holds.
    if (depth(args, TOOL_LIMITS.maxSchemaDepth) > TOOL_LIMITS.maxSchemaDepth) {
      throw bad(`${q} is nested deeper than ${TOOL_LIMITS.maxSchemaDepth} levels`, q);
    }
    const fields: Obj = {
      type: "function",
      function: inOrder(fo, { name, arguments: args }),
    };
    if (co.id !== undefined && co.id !== null) {
      fields.id = text(co.id, `${p}.id`, TOOL_LIMITS.maxIdLength);
    }
    // In the client's key order, as transformers would see the message.
    return inOrder(co, fields) as unknown as MessageToolCall;
  });
  return { calls, length };
}

/**
 * Validates a `tool` message's `tool_call_id` (a non-empty string of at most
 * {@link TOOL_LIMITS}.maxIdLength characters).
 *
 * @throws {ApiError} 400 on `param`.
 *
 * @example
 * ```ts
 * import { validateToolCallId } from "./validate_tools.ts";
 * console.log(validateToolCallId("call_1", "messages[2].tool_call_id")); // call_1
 * ```
 */
export function validateToolCallId(v: unknown, param: string): string {
  const id = text(v, param, TOOL_LIMITS.maxIdLength);
  if (id === "") throw bad(`${param} must not be empty`, param);
  return id;
}

/**
 * Validates `parallel_tool_calls` (default true).
 *
 * @throws {ApiError} 400 on `parallel_tool_calls`.
 *
 * @example
 * ```ts
 * import { validateParallelToolCalls } from "./validate_tools.ts";
 * console.log(validateParallelToolCalls(undefined)); // true
 * ```
 */
export function validateParallelToolCalls(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof v !== "boolean") {
    throw bad(
      `parallel_tool_calls must be a boolean, got ${kind(v)}`,
      "parallel_tool_calls",
      "invalid_type",
    );
  }
  return v;
}
