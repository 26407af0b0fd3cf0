/**
 * The public types of {@link renderChat}: {@link ChatMessage}, one turn of the conversation it
 * renders, and {@link RenderChatOptions}, what it renders with. Types only.
 *
 * @module
 */

/**
 * One turn of a conversation. Other fields a template reads (`name`, `tool_calls` …) may be
 * added; they must be plain JSON data.
 *
 * @example
 * ```ts
 * import type { ChatMessage } from "./render_chat_options.ts";
 *
 * const turn: ChatMessage = { role: "user", content: "Hello!" };
 * console.log(turn.role);
 * ```
 */
export interface ChatMessage {
  /**
   * Who speaks: `"system"`, `"user"`, `"assistant"` or whatever else the template knows.
   *
   * @example
   * ```ts
   * import type { ChatMessage } from "./render_chat_options.ts";
   *
   * const m: ChatMessage = { role: "system", content: "Be terse." };
   * console.log(m.role);
   * ```
   */
  role: string;
  /**
   * The text of the turn.
   *
   * @example
   * ```ts
   * import type { ChatMessage } from "./render_chat_options.ts";
   *
   * const m: ChatMessage = { role: "user", content: "2+2?" };
   * console.log(m.content);
   * ```
   */
  content: string;
}

/**
 * Options of {@link renderChat}. Unknown keys are rejected.
 *
 * @example
 * ```ts
 * import type { RenderChatOptions } from "./render_chat_options.ts";
 *
 * const options: RenderChatOptions = { bosToken: "<s>", addGenerationPrompt: true };
 * console.log(options.addGenerationPrompt);
 * ```
 */
export interface RenderChatOptions {
  /**
   * The tokenizer's BOS token text, seen by the template as `bos_token` (undefined if omitted).
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { bosToken: "<bos>" };
   * console.log(o.bosToken);
   * ```
   */
  bosToken?: string;
  /**
   * The tokenizer's EOS token text, seen as `eos_token` (undefined if omitted).
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { eosToken: "<|im_end|>" };
   * console.log(o.eosToken);
   * ```
   */
  eosToken?: string;
  /**
   * Seen as `add_generation_prompt`: end with the header of an assistant turn. Default false.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { addGenerationPrompt: true };
   * console.log(o.addGenerationPrompt);
   * ```
   */
  addGenerationPrompt?: boolean;
  /**
   * More template variables (`tools`, `documents`, `enable_thinking`, other special tokens …),
   * as plain JSON data. `tools` and `documents` are `None` unless given here, as in
   * transformers. The names `messages`, `add_generation_prompt`, `bos_token`, `eos_token`,
   * `raise_exception`, `strftime_now`, `range`, `namespace` and the constants are reserved.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { extra: { enable_thinking: false } };
   * console.log(o.extra);
   * ```
   */
  extra?: Readonly<Record<string, unknown>>;
  /**
   * Where the template came from, for error messages (default `"chat template"`).
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { source: "tokenizer.chat_template of model.gguf" };
   * console.log(o.source);
   * ```
   */
  source?: string;
  /**
   * The clock seen by `strftime_now` (its local time is used, like Python's
   * `datetime.now()`). Default: the current time.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { now: new Date(2025, 6, 26) };
   * console.log(o.now);
   * ```
   */
  now?: Date;
  /**
   * Longest output accepted, in UTF-16 code units: an integer in
   * `[1, DEFAULT_CHAT_OUTPUT_LENGTH]`, default {@link DEFAULT_CHAT_OUTPUT_LENGTH}. Every string
   * the template builds is held to it.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { maxOutputLength: 65536 };
   * console.log(o.maxOutputLength);
   * ```
   */
  maxOutputLength?: number;
  /**
   * Most evaluation steps: an integer in `[1, DEFAULT_CHAT_MAX_STEPS]`, default
   * {@link DEFAULT_CHAT_MAX_STEPS}. Stops templates that loop for too long.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { maxSteps: 100_000 };
   * console.log(o.maxSteps);
   * ```
   */
  maxSteps?: number;
  /**
   * Applied to every string of the messages and of `extra` (values and keys; not to the
   * template, `bosToken` or `eosToken`) before the template sees them: `SpecialLiterals`'
   * `escape` (tokenizer/special_literals.ts), so that no message can spell a control token of
   * the prompt. {@link chatPromptIds} does that for a tokenizer.
   *
   * @example
   * ```ts
   * import type { RenderChatOptions } from "./render_chat_options.ts";
   *
   * const o: RenderChatOptions = { escape: (s) => s.replaceAll("<|", "< |") };
   * console.log(o.escape?.("<|im_start|>")); // "< |im_start|>"
   * ```
   */
  escape?: (text: string) => string;
}
