/**
 * {@link chatTemplateFrom}: a model's chat template, from GGUF metadata or a
 * `tokenizer_config.json` object.
 *
 * @module
 */

import { NoChatTemplateError } from "./errors.ts";

/**
 * Where a model's chat template may be found:
 * - GGUF metadata as `parseGguf` returns it (`GgufFile.metadata`, a map from key to
 *   `{ type, value }`), or a map/record from GGUF key to the bare value: the key
 *   `tokenizer.chat_template`, or `tokenizer.chat_template.NAME` for a named template;
 * - a parsed `tokenizer_config.json`: `chat_template` is either a string, or a list of
 *   `{ name, template }` (the multi-template form), or an object from name to template.
 *
 * @example
 * ```ts
 * import type { ChatTemplateMetadata } from "./chat_template_from.ts";
 *
 * const gguf: ChatTemplateMetadata = new Map([
 *   ["tokenizer.chat_template", { type: "string", value: "{{ messages[0].content }}" }],
 * ]);
 * const config: ChatTemplateMetadata = { chat_template: "{{ messages[0].content }}" };
 * console.log(gguf, config);
 * ```
 */
export type ChatTemplateMetadata =
  | ReadonlyMap<string, unknown>
  | Readonly<Record<string, unknown>>;

/**
 * Options of {@link chatTemplateFrom}. Unknown keys are rejected.
 *
 * @example
 * ```ts
 * import type { ChatTemplateFromOptions } from "./chat_template_from.ts";
 *
 * const options: ChatTemplateFromOptions = { model: "model.gguf", name: "tool_use" };
 * console.log(options.name);
 * ```
 */
export interface ChatTemplateFromOptions {
  /**
   * A template to use instead of the model's (e.g. from the command line); it wins, even when
   * the model has one.
   *
   * @example
   * ```ts
   * import type { ChatTemplateFromOptions } from "./chat_template_from.ts";
   *
   * const o: ChatTemplateFromOptions = { override: "{{ messages[-1].content }}" };
   * console.log(o.override);
   * ```
   */
  override?: string;
  /**
   * A named template (`tool_use`, `rag` …) instead of the default one. For the multi-template
   * `tokenizer_config.json` form, the default is the one named `"default"`.
   *
   * @example
   * ```ts
   * import type { ChatTemplateFromOptions } from "./chat_template_from.ts";
   *
   * const o: ChatTemplateFromOptions = { name: "tool_use" };
   * console.log(o.name);
   * ```
   */
  name?: string;
  /**
   * The model, for messages and the returned `source` (e.g. its file name). Default `"model"`.
   *
   * @example
   * ```ts
   * import type { ChatTemplateFromOptions } from "./chat_template_from.ts";
   *
   * const o: ChatTemplateFromOptions = { model: "smollm2-135m-instruct.Q4_1.gguf" };
   * console.log(o.model);
   * ```
   */
  model?: string;
}

/**
 * A chat template and where it came from (pass `source` on to `renderChat` for its errors).
 *
 * @example
 * ```ts
 * import type { ChatTemplateChoice } from "./chat_template_from.ts";
 *
 * const choice: ChatTemplateChoice = { template: "{{ 1 }}", source: "override" };
 * console.log(choice.source);
 * ```
 */
export interface ChatTemplateChoice {
  /**
   * The Jinja source.
   *
   * @example
   * ```ts
   * import { chatTemplateFrom } from "./chat_template_from.ts";
   *
   * console.log(chatTemplateFrom({ chat_template: "{{ 1 }}" }).template); // "{{ 1 }}"
   * ```
   */
  template: string;
  /**
   * Where the template came from: `"override"`, or the key and model, e.g.
   * `"tokenizer.chat_template of model.gguf"`.
   *
   * @example
   * ```ts
   * import { chatTemplateFrom } from "./chat_template_from.ts";
   *
   * console.log(chatTemplateFrom({ chat_template: "{{ 1 }}" }, { model: "m" }).source);
   * // "chat_template of m"
   * ```
   */
  source: string;
}

const GGUF_KEY = "tokenizer.chat_template";
const OPTION_KEYS: ReadonlySet<string> = new Set(["override", "name", "model"]);

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return value.constructor?.name ?? "an object";
  return typeof value;
}

function lookup(meta: ChatTemplateMetadata, key: string): unknown {
  if (meta instanceof Map) return meta.get(key);
  return Object.hasOwn(meta, key) ? (meta as Record<string, unknown>)[key] : undefined;
}

function keys(meta: ChatTemplateMetadata): string[] {
  return meta instanceof Map ? [...meta.keys()] : Object.keys(meta);
}

/** A GGUF value `{ type: "string", value }` or a bare string, else a TypeError. */
function ggufString(value: unknown, key: string): string {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && "value" in value) {
    const v = (value as { value: unknown }).value;
    if (typeof v === "string") return v;
  }
  throw new TypeError(`chatTemplateFrom: ${key} must be a string, got ${describe(value)}`);
}

function fromConfig(
  raw: unknown,
  name: string | undefined,
  model: string,
): ChatTemplateChoice | undefined {
  const src = (n?: string): string =>
    n === undefined
      ? `chat_template of ${model}`
      : `chat_template ${JSON.stringify(n)} of ${model}`;
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw === "string") {
    if (name === undefined || name === "default") return { template: raw, source: src() };
    throw new NoChatTemplateError(model, name, ["default"]);
  }
  const named = new Map<string, string>();
  if (Array.isArray(raw)) {
    raw.forEach((entry, i) => {
      const n = entry?.name, t = entry?.template;
      if (typeof n !== "string" || typeof t !== "string") {
        throw new TypeError(
          `chatTemplateFrom: chat_template[${i}] must be { name: string, template: string }`,
        );
      }
      named.set(n, t);
    });
  } else if (typeof raw === "object" && Object.getPrototypeOf(raw) === Object.prototype) {
    for (const [n, t] of Object.entries(raw)) {
      if (typeof t !== "string") {
        throw new TypeError(
          `chatTemplateFrom: chat_template.${n} must be a string, got ${describe(t)}`,
        );
      }
      named.set(n, t);
    }
  } else {
    throw new TypeError(
      `chatTemplateFrom: chat_template must be a string, a list or an object, got ${describe(raw)}`,
    );
  }
  const want = name ?? "default";
  const t = named.get(want);
  if (t === undefined) throw new NoChatTemplateError(model, name, [...named.keys()]);
  return { template: t, source: src(want) };
}

/**
 * The chat template to render a model's conversations with: `options.override` if given, else
 * the model's own, from GGUF metadata (`tokenizer.chat_template`, or
 * `tokenizer.chat_template.NAME` for `options.name`) or a `tokenizer_config.json` object
 * (`chat_template`: a string, a list of `{ name, template }`, or an object from name to
 * template; the `"default"` entry unless `options.name` says otherwise, as transformers picks).
 *
 * @example From GGUF metadata, as parseGguf returns it
 * ```ts
 * import { chatTemplateFrom } from "./chat_template_from.ts";
 * import assert from "node:assert/strict";
 *
 * const metadata = new Map([
 *   ["general.architecture", { type: "string", value: "llama" }],
 *   ["tokenizer.chat_template", { type: "string", value: "{{ messages[0].content }}" }],
 * ]);
 * const { template, source } = chatTemplateFrom(metadata, { model: "model.gguf" });
 * assert.equal(template, "{{ messages[0].content }}");
 * assert.equal(source, "tokenizer.chat_template of model.gguf");
 * ```
 *
 * @param meta GGUF metadata or a parsed `tokenizer_config.json`, see
 *   {@link ChatTemplateMetadata}.
 * @param options See {@link ChatTemplateFromOptions}.
 * @returns The template and where it came from.
 * @throws {NoChatTemplateError} If the model has no (such) template and no override is given.
 * @throws {TypeError} If an argument, option or the template entry has the wrong type.
 * @throws {RangeError} If an option is unknown or the override or name is empty.
 */
export function chatTemplateFrom(
  meta: ChatTemplateMetadata,
  options: ChatTemplateFromOptions = {},
): ChatTemplateChoice {
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) {
    throw new TypeError(`chatTemplateFrom: meta must be a Map or an object, got ${describe(meta)}`);
  }
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`chatTemplateFrom: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) throw new RangeError(`chatTemplateFrom: unknown option ${key}`);
  }
  const { override, name } = options;
  const model = options.model ?? "model";
  for (const [k, v] of [["override", override], ["name", name], ["model", model]] as const) {
    if (v !== undefined && typeof v !== "string") {
      throw new TypeError(`chatTemplateFrom: ${k} must be a string, got ${describe(v)}`);
    }
    if (v === "") throw new RangeError(`chatTemplateFrom: ${k} is empty`);
  }
  if (override !== undefined) return { template: override, source: "override" };

  const ggufKeys = name === undefined
    ? [GGUF_KEY]
    : name === "default"
    ? [`${GGUF_KEY}.default`, GGUF_KEY]
    : [`${GGUF_KEY}.${name}`];
  for (const key of ggufKeys) {
    const value = lookup(meta, key);
    if (value !== undefined) {
      return { template: ggufString(value, key), source: `${key} of ${model}` };
    }
  }
  const fromJson = fromConfig(lookup(meta, "chat_template"), name, model);
  if (fromJson !== undefined) return fromJson;
  const prefix = `${GGUF_KEY}.`;
  const available = keys(meta).filter((k) => k.startsWith(prefix)).map((k) =>
    k.slice(prefix.length)
  );
  if (lookup(meta, GGUF_KEY) !== undefined) available.unshift("default");
  throw new NoChatTemplateError(model, name, available);
}
