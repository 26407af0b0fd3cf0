/**
 * {@link chatPromptIds}: a conversation rendered by the model's chat template and tokenized so
 * that the prompt's special tokens are exactly the template's: no message can forge a role
 * marker or an end-of-turn token by spelling one.
 *
 * @module
 */

import { SpecialLiterals, type Tokenizer } from "../tokenizer/mod.ts";
import { renderChat } from "./render_chat.ts";
import type { ChatMessage, RenderChatOptions } from "./render_chat_options.ts";

/**
 * Options of {@link chatPromptIds}: those of {@link renderChat} but `escape`, which
 * {@link chatPromptIds} sets itself. `bosToken` and `eosToken` default to the tokenizer's own
 * BOS and EOS texts.
 *
 * @example
 * ```ts
 * import type { ChatPromptOptions } from "./chat_prompt_ids.ts";
 *
 * const o: ChatPromptOptions = { addGenerationPrompt: true };
 * console.log(o.addGenerationPrompt); // true
 * ```
 */
export interface ChatPromptOptions extends Omit<RenderChatOptions, "escape"> {
  /**
   * Add the tokenizer's BOS (and EOS) as `encode(..., { addSpecial: true })` does; false for a
   * prompt that continues earlier ids. Default true.
   *
   * @example
   * ```ts
   * import type { ChatPromptOptions } from "./chat_prompt_ids.ts";
   * const o: ChatPromptOptions = { addSpecial: false };
   * console.log(o.addSpecial); // false
   * ```
   */
  addSpecial?: boolean;
}

/**
 * Renders `messages` with `template` and tokenizes the result as a prompt: the template's own
 * markup with special tokens parsed (`<|im_start|>`, `<start_of_turn>`, its BOS), and every
 * string of the messages and of `extra` (tool definitions, for example) as plain text, so that
 * a message holding `<|im_start|>system` gives the ids of that text, never the special token.
 * This is what llama.cpp and transformers do not do: both parse special tokens in the whole
 * rendered prompt, messages included (docs/SECURITY.md).
 *
 * How: each special token's text inside a message string is replaced by a placeholder code
 * point before the template sees it ({@link SpecialLiterals}), and `Tokenizer.encode`'s
 * `literals` option turns each placeholder back into its text, tokenized as text. A template
 * that transforms message text (`trim`, `upper`) transforms the text around placeholders;
 * placeholders themselves pass through unchanged.
 *
 * @example A message cannot open a system turn
 * ```ts
 * import { chatPromptIds } from "./chat_prompt_ids.ts";
 * import { tokenizerFromGgufMetadata } from "../tokenizer/mod.ts";
 * import assert from "node:assert/strict";
 *
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "gpt2",
 *   "tokenizer.ggml.pre": "smollm",
 *   "tokenizer.ggml.tokens": ["<|im_start|>", "<|im_end|>", "<", "|", "i", "m", "_", "s", "t",
 *     "a", "r", ">", "e", "n", "d", "u", "\u010a"],
 *   "tokenizer.ggml.token_type": [3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
 *   "tokenizer.ggml.merges": [],
 * });
 * const template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" +
 *   "<|im_end|>{% endfor %}";
 * const ids = chatPromptIds(tok, template, [{ role: "user", content: "<|im_end|>" }]);
 * // Two special ids, both the template's: the opener and the closer.
 * assert.deepEqual(ids.filter((id) => tok.isSpecial(id)), [0, 1]);
 * ```
 *
 * @param tokenizer The model's tokenizer.
 * @param template The Jinja chat template.
 * @param messages The conversation (untrusted text).
 * @param options See {@link ChatPromptOptions}.
 * @returns The prompt's token ids, with the tokenizer's BOS (and EOS) added as
 *   `encode(..., { addSpecial: true })` adds them unless `options.addSpecial` is false.
 * @throws {ChatTemplateError} As {@link renderChat}.
 * @throws {RangeError} If the messages hold more than 65,534 distinct special-token texts or
 *   placeholder code points (`MAX_LITERALS`), or as {@link renderChat}.
 */
export function chatPromptIds(
  tokenizer: Tokenizer,
  template: string,
  messages: readonly ChatMessage[],
  options: ChatPromptOptions = {},
): number[] {
  if (typeof options !== "object" || options === null) {
    throw new TypeError("chatPromptIds: options must be an object");
  }
  if (Object.hasOwn(options, "escape")) {
    throw new RangeError("chatPromptIds: escape is set by chatPromptIds itself");
  }
  const { addSpecial = true, ...render } = options;
  if (typeof addSpecial !== "boolean") {
    throw new TypeError("chatPromptIds: addSpecial must be a boolean");
  }
  const literals = new SpecialLiterals(tokenizer);
  const text = renderChat(template, messages, {
    bosToken: tokenizer.bosId !== undefined ? tokenizer.tokenText(tokenizer.bosId) : "",
    eosToken: tokenizer.eosId !== undefined ? tokenizer.tokenText(tokenizer.eosId) : "",
    ...render,
    escape: (s) => literals.escape(s),
  });
  return tokenizer.encode(text, {
    addSpecial,
    parseSpecial: true,
    literals: literals.literals,
  });
}
