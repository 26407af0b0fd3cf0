/**
 * The library API for scripts and notebooks: {@link loadModel} and the {@link Model} it
 * returns (generate, chat, embed, tokenize, detokenize, logits).
 *
 * ```ts ignore
 * import { loadModel } from "@cflow/run";
 *
 * using model = await loadModel("cache/models/smollm2-135m-instruct.Q4_1.gguf");
 * for await (const t of model.chat([{ role: "user", content: "Hi!" }], { maxTokens: 32 })) {
 *   console.log(t.text);
 * }
 * ```
 *
 * @module
 */

export { loadModel, Model } from "./model.ts";
export type {
  ChatStats,
  Embeddings,
  EmbedOptions,
  LoadModelOptions,
  ModelChatOptions,
  ModelGenerateOptions,
  Token,
} from "./model_options.ts";
export type { Pooling } from "../model/mod.ts";
export type { ToolCall, ToolChatMessage, ToolChoice, ToolDefinition } from "../chat/mod.ts";
