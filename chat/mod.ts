/**
 * Chat prompts from a model's own Jinja chat template.
 *
 * - {@link chatTemplateFrom}: the template of a model, from GGUF metadata
 *   (`tokenizer.chat_template`) or a `tokenizer_config.json` object (`chat_template`), or an
 *   override; {@link NoChatTemplateError} when there is none.
 * - {@link renderChat}: messages to a prompt string, as transformers' `apply_chat_template`
 *   renders them (jinja2 with `trim_blocks`, `lstrip_blocks`, `raise_exception`,
 *   `strftime_now`), interpreted by npm `@huggingface/jinja` within limits;
 *   {@link ChatTemplateError} for templates that fail.
 * - {@link chatPromptIds}: messages to prompt token ids whose special tokens are exactly the
 *   template's (a message cannot forge a role marker).
 * - Tools: {@link ToolCallParser} and {@link parseToolCalls} split a reply into content and
 *   OpenAI-shaped calls (the Hermes/Qwen2.5 `<tool_call>` format); {@link templateMessages},
 *   {@link toolCallFormat} and {@link toolCallConstraint} prepare a conversation with tools.
 *
 * @example
 * ```ts
 * import { chatTemplateFrom, renderChat } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const config = {
 *   chat_template: "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}" +
 *     "{% if add_generation_prompt %}<assistant>{% endif %}",
 * };
 * const { template, source } = chatTemplateFrom(config, { model: "tokenizer_config.json" });
 * const prompt = renderChat(template, [{ role: "user", content: "Hi" }], {
 *   addGenerationPrompt: true,
 *   source,
 * });
 * assert.equal(prompt, "<user>Hi\n<assistant>");
 * ```
 *
 * @module
 */

export { chatPromptIds, type ChatPromptOptions } from "./chat_prompt_ids.ts";
export {
  type ChatTemplateChoice,
  chatTemplateFrom,
  type ChatTemplateFromOptions,
  type ChatTemplateMetadata,
} from "./chat_template_from.ts";
export { ChatTemplateError, type ChatTemplateErrorKind, NoChatTemplateError } from "./errors.ts";
export {
  DEFAULT_CHAT_MAX_STEPS,
  DEFAULT_CHAT_OUTPUT_LENGTH,
  MAX_CHAT_TEMPLATE_LENGTH,
  renderChat,
} from "./render_chat.ts";
export type { ChatMessage, RenderChatOptions } from "./render_chat_options.ts";
export type { ConstraintSpec } from "../grammar/constraint_spec.ts";
export {
  templateMessages,
  toolCallConstraint,
  type ToolCallFormat,
  toolCallFormat,
  type ToolChatMessage,
  type ToolChoice,
  type ToolDefinition,
} from "./chat_tools.ts";
export {
  MAX_TOOL_CALL_LENGTH,
  MAX_TOOL_CALLS,
  newToolCallId,
  parseToolCalls,
  type ToolCall,
  type ToolCallEvent,
  ToolCallParser,
  type ToolCallParserOptions,
} from "./tool_call_parser.ts";
