/**
 * {@link renderChat}: a conversation to a prompt string through the model's own Jinja chat
 * template, the way Hugging Face transformers' `apply_chat_template` renders it.
 *
 * @module
 */

import { Environment, Interpreter, Template } from "@huggingface/jinja";
import { strftime } from "./_strftime.ts";
import { ChatTemplateError } from "./errors.ts";
import type { ChatMessage, RenderChatOptions } from "./render_chat_options.ts";

/**
 * The longest template accepted, in UTF-16 code units (1 MiB). Real chat templates are a few
 * KiB; the largest published ones are under 64 KiB.
 *
 * @example
 * ```ts
 * import { MAX_CHAT_TEMPLATE_LENGTH } from "./render_chat.ts";
 *
 * console.log(MAX_CHAT_TEMPLATE_LENGTH); // 1048576
 * ```
 */
export const MAX_CHAT_TEMPLATE_LENGTH = 1 << 20;

/**
 * The default and largest `maxOutputLength`: 4 Mi UTF-16 code units, far above any context
 * window a CPU serves (and under V8's string limit).
 *
 * @example
 * ```ts
 * import { DEFAULT_CHAT_OUTPUT_LENGTH } from "./render_chat.ts";
 *
 * console.log(DEFAULT_CHAT_OUTPUT_LENGTH); // 4194304
 * ```
 */
export const DEFAULT_CHAT_OUTPUT_LENGTH = 1 << 22;

/**
 * The default and largest `maxSteps`: template evaluation steps (one per expression or
 * statement evaluated, plus one per list item built). A chat template renders a conversation
 * in a few thousand; a million take about a second.
 *
 * @example
 * ```ts
 * import { DEFAULT_CHAT_MAX_STEPS } from "./render_chat.ts";
 *
 * console.log(DEFAULT_CHAT_MAX_STEPS); // 1000000
 * ```
 */
export const DEFAULT_CHAT_MAX_STEPS = 1_000_000;

/** Longest list (or `range`) a template may build. */
const MAX_ITEMS = 1 << 20;
/** Deepest nesting of messages/extra values. */
const MAX_DEPTH = 32;
/** At most this many templates stay parsed. */
const CACHE_SIZE = 16;

const OPTION_KEYS: ReadonlySet<string> = new Set([
  "bosToken",
  "eosToken",
  "addGenerationPrompt",
  "extra",
  "source",
  "now",
  "maxOutputLength",
  "maxSteps",
  "escape",
]);

const RESERVED: ReadonlySet<string> = new Set([
  "messages",
  "add_generation_prompt",
  "bos_token",
  "eos_token",
  "raise_exception",
  "strftime_now",
  "range",
  "namespace",
  "true",
  "false",
  "none",
  "True",
  "False",
  "None",
]);

/** Thrown by the template's `raise_exception`. */
class Raised extends Error {}
/** Thrown when a limit is passed. */
class LimitExceeded extends Error {}

type Statement = Parameters<Interpreter["evaluate"]>[0];
type Value = ReturnType<Interpreter["evaluate"]>;

/**
 * The shared budget of one rendering: evaluation steps (one per expression or statement, plus
 * one per list item built) and characters built; every runtime value is charged once.
 */
class Budget {
  steps = 0;
  chars = 0;
  readonly seen: WeakSet<object> = new WeakSet();
  readonly maxSteps: number;
  readonly maxLength: number;
  readonly maxChars: number;

  constructor(maxSteps: number, maxLength: number) {
    this.maxSteps = maxSteps;
    this.maxLength = maxLength;
    this.maxChars = 32 * maxLength;
  }

  step(n: number): void {
    this.steps += n;
    if (this.steps > this.maxSteps) {
      throw new LimitExceeded(`rendering took more than ${this.maxSteps} evaluation steps`);
    }
  }

  items(n: number): void {
    if (n > MAX_ITEMS) throw new LimitExceeded(`a list of ${n} items is longer than ${MAX_ITEMS}`);
    this.step(n);
  }

  string(n: number): void {
    if (n > this.maxLength) {
      throw new LimitExceeded(
        `a string of ${n} characters is longer than maxOutputLength ${this.maxLength}`,
      );
    }
    this.chars += n;
    if (this.chars > this.maxChars) {
      throw new LimitExceeded(`rendering built more than ${this.maxChars} characters in all`);
    }
  }
}

/** An interpreter that charges what it evaluates to a {@link Budget}. */
class BoundedInterpreter extends Interpreter {
  readonly #budget: Budget;

  constructor(env: Environment, budget: Budget) {
    super(env);
    this.#budget = budget;
  }

  override evaluate(statement: Statement, environment: Environment): Value {
    const budget = this.#budget;
    budget.step(1);
    const value = super.evaluate(statement, environment);
    if (
      (value.type === "StringValue" || value.type === "ArrayValue" ||
        value.type === "TupleValue") && !budget.seen.has(value)
    ) {
      budget.seen.add(value);
      if (value.type === "StringValue") budget.string((value.value as string).length);
      else budget.items((value.value as unknown[]).length);
    }
    return value;
  }
}

const cache = new Map<string, Template>();

function parsed(template: string, source: string): Template {
  const hit = cache.get(template);
  if (hit !== undefined) {
    cache.delete(template);
    cache.set(template, hit);
    return hit;
  }
  let t: Template;
  try {
    t = new Template(template);
  } catch (e) {
    throw new ChatTemplateError(source, "syntax", errorText(e), { cause: e });
  }
  cache.set(template, t);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return t;
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name === "Error" ? "" : `${e.name}: `}${e.message}` : String(e);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return value.constructor?.name ?? "an object";
  if (typeof value === "string") return `string ${JSON.stringify(value.slice(0, 40))}`;
  return `${typeof value} ${String(value)}`;
}

/**
 * Copies plain JSON data (strings, finite numbers, booleans, null, arrays, plain objects),
 * dropping object keys whose value is undefined; anything else (functions, class instances,
 * cycles, too deep nesting) is a TypeError or RangeError naming `path`.
 */
type Escape = (text: string) => string;

function plainData(value: unknown, path: string, depth: number, escape?: Escape): unknown {
  switch (typeof value) {
    case "string":
      return escape === undefined ? value : escape(value);
    case "boolean":
      return value;
    case "number":
      if (!Number.isFinite(value)) {
        throw new RangeError(`renderChat: ${path} ${value} is not a finite number`);
      }
      return value;
    case "object": {
      if (value === null) return null;
      if (depth >= MAX_DEPTH) {
        throw new RangeError(`renderChat: ${path} is nested deeper than ${MAX_DEPTH} levels`);
      }
      if (Array.isArray(value)) {
        if (value.length > MAX_ITEMS) {
          throw new RangeError(
            `renderChat: ${path} has ${value.length} items, more than ${MAX_ITEMS}`,
          );
        }
        return value.map((v, i) => plainData(v, `${path}[${i}]`, depth + 1, escape));
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`renderChat: ${path} must be plain JSON data, got ${describe(value)}`);
      }
      // No prototype: a "__proto__" key (JSON.parse makes those) stays an ordinary key.
      const out: Record<string, unknown> = Object.create(null);
      for (const [k, v] of Object.entries(value)) {
        if (v !== undefined) {
          out[escape === undefined ? k : escape(k)] = plainData(
            v,
            `${path}.${k}`,
            depth + 1,
            escape,
          );
        }
      }
      return out;
    }
    default:
      throw new TypeError(`renderChat: ${path} must be plain JSON data, got ${describe(value)}`);
  }
}

function positiveInt(name: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") {
    throw new TypeError(`renderChat: ${name} must be a number, got ${describe(value)}`);
  }
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`renderChat: ${name} ${value} is not an integer in [1, ${max}]`);
  }
  return value;
}

function optionalString(name: string, value: unknown): string | undefined {
  if (value !== undefined && typeof value !== "string") {
    throw new TypeError(`renderChat: ${name} must be a string, got ${describe(value)}`);
  }
  return value;
}

/** Python's `range` over integers, at most MAX_ITEMS long (the interpreter charges the list). */
function range(start: unknown, stop?: unknown, step?: unknown): number[] {
  const args = stop === undefined ? [0, start, 1] : [start, stop, step ?? 1];
  for (const a of args) {
    if (typeof a !== "number" || !Number.isSafeInteger(a)) {
      throw new TypeError(`range() arguments must be integers, got ${describe(a)}`);
    }
  }
  const [from, to, by] = args as number[];
  if (by === 0) throw new RangeError("range() arg 3 must not be zero");
  const count = Math.max(0, Math.ceil((to - from) / by));
  if (count > MAX_ITEMS) {
    throw new LimitExceeded(`range() of ${count} items is longer than ${MAX_ITEMS}`);
  }
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) out[i] = from + i * by;
  return out;
}

/**
 * Renders `messages` through a model's Jinja chat template, as transformers'
 * `apply_chat_template(messages, tokenize=False)` does: the template sees `messages`,
 * `add_generation_prompt`, `bos_token`, `eos_token`, `tools` and `documents` (`None` unless
 * given in `extra`), the other `extra` variables, and the globals `raise_exception(message)`,
 * `strftime_now(format)`, `range` and `namespace`; blocks are trimmed like jinja2 with
 * `trim_blocks=True, lstrip_blocks=True`.
 *
 * The template is data, not code: it is interpreted by npm `@huggingface/jinja`, which has no
 * file, network or host-object access (`include`/`import`/`extends` do not exist, attribute
 * lookups only see the template's own values and a fixed set of methods). Templates longer than
 * {@link MAX_CHAT_TEMPLATE_LENGTH} are refused; rendering is held to `maxOutputLength`
 * characters per string, `maxSteps` evaluation steps (list items built count as steps), lists
 * of 2^20 items, and 32 × `maxOutputLength` characters built in all. A single string operation may
 * still allocate up to V8's string limit before the check sees its result. Parsed templates are
 * cached (the last 16).
 *
 * @example ChatML (SmolLM2)
 * ```ts
 * import { renderChat } from "./render_chat.ts";
 * import assert from "node:assert/strict";
 *
 * const chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + " +
 *   "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}" +
 *   "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
 * const prompt = renderChat(chatml, [{ role: "user", content: "Hi" }], {
 *   addGenerationPrompt: true,
 * });
 * assert.equal(prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
 * ```
 *
 * @param template The Jinja source, e.g. from {@link chatTemplateFrom}.
 * @param messages The conversation; each message a plain object with string `role` and
 *   `content` (other plain-data fields are passed on).
 * @param options See {@link RenderChatOptions}.
 * @returns The rendered prompt.
 * @throws {ChatTemplateError} If the template does not parse, fails, calls
 *   `raise_exception`, or passes a limit.
 * @throws {TypeError} If an argument has the wrong type (messages or extra that are not plain
 *   JSON data).
 * @throws {RangeError} If the template is too long, an option is out of range or unknown, or an
 *   `extra` name is reserved.
 */
export function renderChat(
  template: string,
  messages: readonly ChatMessage[],
  options: RenderChatOptions = {},
): string {
  if (typeof template !== "string") {
    throw new TypeError(`renderChat: template must be a string, got ${describe(template)}`);
  }
  if (template.length > MAX_CHAT_TEMPLATE_LENGTH) {
    throw new RangeError(
      `renderChat: template length ${template.length} exceeds ${MAX_CHAT_TEMPLATE_LENGTH}`,
    );
  }
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`renderChat: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) throw new RangeError(`renderChat: unknown option ${key}`);
  }
  const bosToken = optionalString("bosToken", options.bosToken);
  const eosToken = optionalString("eosToken", options.eosToken);
  const source = optionalString("source", options.source) ?? "chat template";
  const agp = options.addGenerationPrompt ?? false;
  if (typeof agp !== "boolean") {
    throw new TypeError(`renderChat: addGenerationPrompt must be a boolean, got ${describe(agp)}`);
  }
  const now = options.now;
  if (now !== undefined && (!(now instanceof Date) || Number.isNaN(now.getTime()))) {
    throw new TypeError(`renderChat: now must be a valid Date, got ${describe(now)}`);
  }
  const maxOutputLength = positiveInt(
    "maxOutputLength",
    options.maxOutputLength,
    DEFAULT_CHAT_OUTPUT_LENGTH,
    DEFAULT_CHAT_OUTPUT_LENGTH,
  );
  const maxSteps = positiveInt(
    "maxSteps",
    options.maxSteps,
    DEFAULT_CHAT_MAX_STEPS,
    DEFAULT_CHAT_MAX_STEPS,
  );
  const escape = options.escape;
  if (escape !== undefined && typeof escape !== "function") {
    throw new TypeError(`renderChat: escape must be a function, got ${describe(escape)}`);
  }
  if (!Array.isArray(messages)) {
    throw new TypeError(`renderChat: messages must be an array, got ${describe(messages)}`);
  }
  const plainMessages = messages.map((m, i) => {
    const copy = plainData(m, `messages[${i}]`, 1, escape);
    if (typeof copy !== "object" || copy === null || Array.isArray(copy)) {
      throw new TypeError(`renderChat: messages[${i}] must be an object, got ${describe(m)}`);
    }
    // Like transformers, drop the keys whose value is null (an OpenAI-style `content: null`
    // would otherwise render as "None" in Python and "" here).
    const fields = copy as Record<string, unknown>;
    for (const k of Object.keys(fields)) if (fields[k] === null) delete fields[k];
    const { role, content } = fields;
    if (typeof role !== "string") {
      throw new TypeError(
        `renderChat: messages[${i}].role must be a string, got ${describe(role)}`,
      );
    }
    if (typeof content !== "string") {
      throw new TypeError(
        `renderChat: messages[${i}].content must be a string, got ${describe(content)}`,
      );
    }
    return copy;
  });
  const extra = options.extra === undefined
    ? {}
    : plainData(options.extra, "extra", 0, escape) as Record<string, unknown>;
  if (typeof extra !== "object" || extra === null || Array.isArray(extra)) {
    throw new TypeError(`renderChat: extra must be a plain object, got ${describe(options.extra)}`);
  }
  for (const key of Object.keys(extra)) {
    if (RESERVED.has(key)) {
      throw new RangeError(`renderChat: extra.${key} is reserved (use the option for it)`);
    }
  }

  const program = parsed(template, source);
  const env = new Environment();
  // The constants of @huggingface/jinja's setupGlobals (not exported), then ours.
  for (const [k, v] of [["false", false], ["true", true], ["none", null]] as const) {
    env.set(k, v);
    env.set(k[0].toUpperCase() + k.slice(1), v);
  }
  env.set("raise_exception", (message: unknown): never => {
    throw new Raised(typeof message === "string" ? message : String(message));
  });
  env.set("strftime_now", (format: unknown): string => {
    if (typeof format !== "string") {
      throw new TypeError(`strftime_now() format must be a string, got ${describe(format)}`);
    }
    return strftime(now ?? new Date(), format);
  });
  env.set("range", range);
  env.set("messages", plainMessages);
  env.set("add_generation_prompt", agp);
  if (bosToken !== undefined) env.set("bos_token", bosToken);
  if (eosToken !== undefined) env.set("eos_token", eosToken);
  if (!("tools" in extra)) env.set("tools", null);
  if (!("documents" in extra)) env.set("documents", null);
  for (const [k, v] of Object.entries(extra)) env.set(k, v);

  let out: Value;
  try {
    out = new BoundedInterpreter(env, new Budget(maxSteps, maxOutputLength)).run(program.parsed);
  } catch (e) {
    if (e instanceof Raised) throw new ChatTemplateError(source, "raised", e.message);
    if (e instanceof LimitExceeded) throw new ChatTemplateError(source, "limit", e.message);
    throw new ChatTemplateError(source, "render", errorText(e), { cause: e });
  }
  return out.value as string;
}
