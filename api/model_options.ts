/**
 * The public types of a {@link Model}: {@link LoadModelOptions}, what {@link loadModel} is given;
 * {@link ModelGenerateOptions} and {@link ModelChatOptions}, what {@link Model.generate} and
 * {@link Model.chat} are given, and the {@link Token}s and {@link ChatStats} they give back;
 * {@link EmbedOptions} and {@link Embeddings}, the options and result of {@link Model.embed}.
 * Types only.
 *
 * @module
 */

import type { ToolCall, ToolChoice, ToolDefinition } from "../chat/mod.ts";
import type { TargetQuant } from "../convert/mod.ts";
import type { ConstraintSpec } from "../grammar/mod.ts";
import type { Pooling, TransformerOptions } from "../model/mod.ts";
import type { GenerationStats } from "../runtime/generate.ts";
import type { SamplerOptions } from "../sampling/mod.ts";
import type { Model } from "./model.ts";

/**
 * Options of {@link loadModel}.
 *
 * @example
 * ```ts
 * import type { LoadModelOptions } from "./model_options.ts";
 * const o: LoadModelOptions = { contextLength: 2048, threads: 2 };
 * ```
 */
export interface LoadModelOptions extends TransformerOptions {
  /** Weight type a GGUF or Hugging Face checkpoint is converted to (default q4_0). */
  quant?: TargetQuant;
  /**
   * Folder of converted models (default: `converted/` of the user-level cache, `CFLOW_CACHE`,
   * else `$XDG_CACHE_HOME/cflow`, else `~/.cache/cflow`).
   */
  cache?: string;
  /** Worker threads (default: one per physical core). */
  threads?: number;
}

/**
 * Options of {@link Model.generate} and {@link Model.chat}: sampling (greedy when
 * `temperature` is 0), limits and cancellation.
 *
 * @example
 * ```ts
 * import type { ModelGenerateOptions } from "./model_options.ts";
 * const o: ModelGenerateOptions = { maxTokens: 32, temperature: 0, logprobs: 3 };
 * ```
 */
export interface ModelGenerateOptions extends SamplerOptions {
  /** Most tokens to generate (default 128). */
  maxTokens?: number;
  /** Strings that end generation (not emitted). */
  stop?: readonly string[];
  /** Cancels generation between tokens. */
  signal?: AbortSignal;
  /** Each token's log-probability and this many alternatives (0-20). */
  logprobs?: number;
  /**
   * Speculative decoding with a smaller model of the same vocabulary (loaded with
   * {@link loadModel}; it must not be generating meanwhile): the same tokens, fewer steps of
   * this model. The draft's KV cache keeps the last history, so a chat's turns are not read
   * again.
   */
  draft?: Model;
  /** Speculative decoding by prompt lookup over the last N tokens (1-16) instead of a draft. */
  lookupNgram?: number;
  /** Most drafted tokens checked per step (1-32, default 16). */
  draftMax?: number;
  /** The draft's stopping probability (default 0.75). */
  draftMinP?: number;
  /**
   * Structured output: the text is JSON that validates against this JSON Schema (the supported
   * keywords are listed in grammar/json_schema_to_gbnf.ts; any other is refused with a
   * `SchemaError` naming it and its JSON pointer). Generation ends when the value is complete.
   *
   * @example
   * ```ts ignore
   * const it = model.generate("A person as JSON:", {
   *   jsonSchema: {
   *     type: "object",
   *     properties: { name: { type: "string", maxLength: 20 }, age: { type: "integer", minimum: 0 } },
   *     required: ["name", "age"],
   *   },
   * });
   * ```
   */
  jsonSchema?: unknown;
  /**
   * Structured output: the text matches this GBNF grammar (llama.cpp's format; the `root` rule).
   * A bad grammar is refused with a `GrammarError` naming its line and column.
   *
   * @example
   * ```ts ignore
   * const it = model.generate("2 + 2 =", { grammar: 'root ::= " " [0-9]+' });
   * ```
   */
  grammar?: string;
  /**
   * Structured output as the server's validators give it (`{ kind: "json_object" }` for any
   * JSON object, or a JSON Schema or GBNF grammar). Give at most one of `jsonSchema`, `grammar`
   * and `constraint`.
   *
   * @example
   * ```ts ignore
   * const it = model.generate("A JSON object:", { constraint: { kind: "json_object" } });
   * ```
   */
  constraint?: ConstraintSpec;
}

/**
 * One generated token: its id, the text it completes, and its log-probability and most
 * likely alternatives when asked for.
 *
 * @example
 * ```ts
 * import type { Token } from "./model_options.ts";
 * const t: Token = { id: 42, text: " the" };
 * ```
 */
export interface Token {
  /** Token id (-1 for text flushed at the end, such as a held-back stop-string prefix). */
  id: number;
  /** Text this token completes (may be "" while a UTF-8 sequence is incomplete). */
  text: string;
  /** Natural-log probability under the model (with `logprobs`). */
  logprob?: number;
  /** Most likely tokens at this step, best first (with `logprobs` > 0). */
  top?: { id: number; text: string; logprob: number }[];
}

/**
 * Options of {@link Model.embed}.
 *
 * @example
 * ```ts
 * import type { EmbedOptions } from "./model_options.ts";
 * const o: EmbedOptions = { pooling: "last" };
 * ```
 */
export interface EmbedOptions {
  /**
   * How each input's token vectors become one (default: what the model declares, GGUF
   * `<arch>.pooling_type` mean, cls or last; mean when it declares nothing).
   */
  pooling?: Pooling;
  /** Cancels between inputs and between batches of an input. */
  signal?: AbortSignal;
}

/**
 * What {@link Model.embed} returns: one L2-normalised vector of `config.hidden` values per
 * input, in input order, and the tokens read.
 *
 * @example
 * ```ts
 * import type { Embeddings } from "./model_options.ts";
 * const e: Embeddings = { embeddings: [new Float32Array(576)], promptTokens: 7 };
 * ```
 */
export interface Embeddings {
  /** One vector per input. */
  embeddings: Float32Array[];
  /** Tokens of all inputs together. */
  promptTokens: number;
}

/**
 * Options of {@link Model.chat}: those of {@link Model.generate}, another chat template, and
 * tools the model may call (OpenAI's shapes).
 *
 * @example
 * ```ts
 * import type { ModelChatOptions } from "./model_options.ts";
 * const o: ModelChatOptions = {
 *   maxTokens: 64,
 *   temperature: 0,
 *   tools: [{ type: "function", function: { name: "now", description: "The time" } }],
 *   toolChoice: "auto",
 * };
 * console.log(o.tools?.length); // 1
 * ```
 */
export interface ModelChatOptions extends ModelGenerateOptions {
  /** A Jinja chat template to use instead of the model's. */
  template?: string;
  /**
   * Functions the model may call, shown to it by its chat template (which must render tools in
   * the Hermes/Qwen2.5 `<tool_call>` format, as Qwen2.5's does; otherwise a RangeError). The
   * calls of the reply are in the returned {@link ChatStats}.
   */
  tools?: readonly ToolDefinition[];
  /**
   * `"auto"` (default with tools): calls are parsed when the model makes them; `"none"`: the
   * tools are not shown and nothing is parsed; `"required"` or a named function: the reply is
   * a call, generated under a constraint built from the functions' parameter schemas, so its
   * arguments always validate (not combinable with `jsonSchema`, `grammar` or `constraint`).
   */
  toolChoice?: ToolChoice;
  /** More than one call per reply (default true); when false, calls after the first are dropped. */
  parallelToolCalls?: boolean;
}

/**
 * What {@link Model.chat} returns: the generation's statistics, and with tools offered the reply
 * split into its content (null when it is only calls) and its calls (OpenAI's `tool_calls`
 * shape, arguments as a JSON string).
 *
 * @example
 * ```ts
 * import type { ChatStats } from "./model_options.ts";
 * function calls(s: ChatStats): string[] {
 *   return (s.toolCalls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
 * }
 * ```
 */
export type ChatStats = GenerationStats & {
  /** The reply without its calls (with tools offered). */
  content?: string | null;
  /** The reply's calls (with tools offered; empty when it made none). */
  toolCalls?: ToolCall[];
};
