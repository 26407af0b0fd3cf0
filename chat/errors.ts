/**
 * Errors of the chat module: {@link ChatTemplateError} (a template that cannot be parsed or
 * rendered, or that called `raise_exception`) and {@link NoChatTemplateError} (a model without a
 * chat template, and no override given).
 *
 * @module
 */

/**
 * Why a chat template failed:
 * - `"syntax"`: the template does not parse;
 * - `"render"`: rendering failed (a type error, an unknown filter, a stack overflow …);
 * - `"raised"`: the template called `raise_exception(message)`, usually to reject a conversation
 *   it does not support (a system turn, roles that do not alternate);
 * - `"limit"`: rendering went past a limit (output length, evaluation steps, list size).
 *
 * @example
 * ```ts
 * import type { ChatTemplateErrorKind } from "./errors.ts";
 *
 * const kind: ChatTemplateErrorKind = "raised";
 * console.log(kind);
 * ```
 */
export type ChatTemplateErrorKind = "syntax" | "render" | "raised" | "limit";

/**
 * A chat template that could not be parsed or rendered. The message starts with the template's
 * source (where it came from, e.g. `tokenizer.chat_template of model.gguf`) and the kind.
 *
 * @example
 * ```ts
 * import { ChatTemplateError } from "./errors.ts";
 * import { renderChat } from "./render_chat.ts";
 * import assert from "node:assert/strict";
 *
 * try {
 *   renderChat("{{ raise_exception('no system turns') }}", [], { source: "demo" });
 *   assert.fail("should throw");
 * } catch (e) {
 *   assert.ok(e instanceof ChatTemplateError);
 *   assert.equal(e.kind, "raised");
 *   assert.equal(e.detail, "no system turns");
 *   assert.equal(e.message, "demo: raise_exception: no system turns");
 * }
 * ```
 */
export class ChatTemplateError extends Error {
  /**
   * Always `"ChatTemplateError"`.
   *
   * @example
   * ```ts
   * import { ChatTemplateError } from "./errors.ts";
   *
   * console.log(new ChatTemplateError("t", "render", "boom").name); // "ChatTemplateError"
   * ```
   */
  override name = "ChatTemplateError";
  /**
   * Where the template came from, as given to `renderChat` (`options.source`).
   *
   * @example
   * ```ts
   * import { ChatTemplateError } from "./errors.ts";
   *
   * console.log(new ChatTemplateError("tokenizer_config.json", "syntax", "x").source);
   * ```
   */
  readonly source: string;
  /**
   * What went wrong, see {@link ChatTemplateErrorKind}.
   *
   * @example
   * ```ts
   * import { ChatTemplateError } from "./errors.ts";
   *
   * console.log(new ChatTemplateError("t", "limit", "too long").kind); // "limit"
   * ```
   */
  readonly kind: ChatTemplateErrorKind;
  /**
   * The message without the source prefix; for `"raised"`, exactly the template's message.
   *
   * @example
   * ```ts
   * import { ChatTemplateError } from "./errors.ts";
   *
   * console.log(new ChatTemplateError("t", "raised", "System role not supported").detail);
   * ```
   */
  readonly detail: string;

  /**
   * Makes the error; the message is `source: detail` (`source: raise_exception: detail` for
   * `"raised"`).
   *
   * @param source Where the template came from.
   * @param kind What went wrong.
   * @param detail The message, without the source.
   * @param options `cause`: the underlying error, if any.
   *
   * @example
   * ```ts
   * import { ChatTemplateError } from "./errors.ts";
   *
   * const e = new ChatTemplateError("t", "render", "boom", { cause: new Error("inner") });
   * console.log(e.message); // "t: boom"
   * ```
   */
  constructor(
    source: string,
    kind: ChatTemplateErrorKind,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${source}: ${kind === "raised" ? "raise_exception: " : ""}${detail}`, options);
    this.source = source;
    this.kind = kind;
    this.detail = detail;
  }
}

/**
 * A model that has no chat template (none in its metadata, none by the requested name), when
 * no override was given. Serve it with an explicit template or as plain completion.
 *
 * @example
 * ```ts
 * import { chatTemplateFrom } from "./chat_template_from.ts";
 * import { NoChatTemplateError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(
 *   () => chatTemplateFrom(new Map(), { model: "base.gguf" }),
 *   NoChatTemplateError,
 * );
 * ```
 */
export class NoChatTemplateError extends Error {
  /**
   * Always `"NoChatTemplateError"`.
   *
   * @example
   * ```ts
   * import { NoChatTemplateError } from "./errors.ts";
   *
   * console.log(new NoChatTemplateError("m.gguf").name); // "NoChatTemplateError"
   * ```
   */
  override name = "NoChatTemplateError";
  /**
   * The model named in the message (`options.model` of `chatTemplateFrom`).
   *
   * @example
   * ```ts
   * import { NoChatTemplateError } from "./errors.ts";
   *
   * console.log(new NoChatTemplateError("m.gguf").model); // "m.gguf"
   * ```
   */
  readonly model: string;
  /**
   * The template name that was asked for, or `undefined` for the default template.
   *
   * @example
   * ```ts
   * import { NoChatTemplateError } from "./errors.ts";
   *
   * console.log(new NoChatTemplateError("m.gguf", "tool_use").templateName); // "tool_use"
   * ```
   */
  readonly templateName: string | undefined;
  /**
   * The names of the templates the model does have (for named-template sets), else empty.
   *
   * @example
   * ```ts
   * import { NoChatTemplateError } from "./errors.ts";
   *
   * const e = new NoChatTemplateError("m", "x", ["default", "rag"]);
   * console.log(e.available); // ["default", "rag"]
   * ```
   */
  readonly available: readonly string[];

  /**
   * Makes the error, with a message naming the model, the template name and what it has.
   *
   * @param model The model, for the message.
   * @param templateName The template name asked for, if any.
   * @param available The template names the model has.
   *
   * @example
   * ```ts
   * import { NoChatTemplateError } from "./errors.ts";
   *
   * console.log(new NoChatTemplateError("m.gguf").message);
   * ```
   */
  constructor(model: string, templateName?: string, available: readonly string[] = []) {
    const what = templateName === undefined
      ? "no chat template"
      : `no chat template named ${JSON.stringify(templateName)}`;
    const has = available.length > 0
      ? ` (it has ${available.map((n) => JSON.stringify(n)).join(", ")})`
      : "";
    super(`${model} has ${what}${has}; give a template explicitly`);
    this.model = model;
    this.templateName = templateName;
    this.available = Object.freeze([...available]);
  }
}
