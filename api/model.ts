/**
 * The library API: load a model (a `.cflow`/`.vflow` file, a GGUF file or a Hugging Face
 * folder, converted once into a cache) and generate from it in scripts and notebooks.
 *
 * @module
 */

import {
  type ChatMessage,
  chatPromptIds,
  chatTemplateFrom,
  templateMessages,
  toolCallConstraint,
  toolCallFormat,
  ToolCallParser,
  type ToolChatMessage,
  type ToolChoice,
  type ToolDefinition,
} from "../chat/mod.ts";
import { openKernels, prepareKernels } from "../ffi/mod.ts";
import {
  embedTokens,
  type HiddenStateSource,
  type ModelConfig,
  poolingOf,
  type Transformer,
} from "../model/mod.ts";
import {
  generate as generateTokens,
  type GeneratedToken,
  type GenerationStats,
} from "../runtime/generate.ts";
import { compileConstraint, type ConstraintSpec, type TokenConstraint } from "../grammar/mod.ts";
import { BatchEngine } from "../runtime/batch_engine.ts";
import type { GenerationModel } from "../runtime/generate.ts";
import { resolveModel } from "../runtime/model_store.ts";
import { openModel } from "../runtime/open_model.ts";
import { PromptCache } from "../runtime/prompt_cache.ts";
import { checkDraftVocabulary, DraftModel } from "../runtime/draft_model.ts";
import { NgramLookup } from "../runtime/ngram_lookup.ts";
import type { Drafter } from "../runtime/speculative.ts";
import { Sampler } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type {
  ChatStats,
  Embeddings,
  EmbedOptions,
  LoadModelOptions,
  ModelChatOptions,
  ModelGenerateOptions,
  Token,
} from "./model_options.ts";

/** Where one generation runs, and what its KV cache holds. */
interface ModelSlot {
  model: GenerationModel & HiddenStateSource;
  cache: PromptCache;
  idle?: () => void;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * A loaded model and its tokenizer. One generation at a time (it holds one KV cache);
 * `close()` (or `using`) frees it.
 *
 * @example
 * ```ts ignore
 * import { loadModel } from "@cflow/run";
 * using model = await loadModel("smollm2.gguf");
 * for await (const t of model.generate("The sky is", { maxTokens: 16, temperature: 0 })) {
 *   console.log(t.text);
 * }
 * ```
 */
export class Model {
  /** The file the model runs from (the converted `.cflow` for GGUF and HF inputs). */
  readonly path: string;
  readonly #model: Transformer;
  readonly #tokenizer: Tokenizer;
  /**
   * Where generations run: the model itself, or with `sequences: N` each of
   * its sequences (run together by a batch engine), with what its KV cache
   * holds: a prompt that starts like that sequence's last one runs only the rest.
   */
  readonly #slots: ModelSlot[];
  readonly #free: ModelSlot[];
  readonly #waiting: (() => void)[] = [];
  #running = 0;
  #busy = false;
  /** As a draft: the target whose vocabulary was checked, and the drafter over sequence 0. */
  #checkedFor: Model | undefined;
  #draft: DraftModel | undefined;
  #draftMinP: number | undefined;

  /** @internal Use {@link loadModel}. */
  constructor(path: string, model: Transformer, tokenizer: Tokenizer) {
    this.path = path;
    this.#model = model;
    this.#tokenizer = tokenizer;
    if (model.sequences === 1) {
      this.#slots = [{ model, cache: new PromptCache(model) }];
    } else {
      const engine = new BatchEngine(model);
      this.#slots = engine.sequences.map((seq) => ({
        model: seq,
        cache: new PromptCache(seq),
        idle: () => seq.idle(),
      }));
    }
    this.#free = [...this.#slots].reverse();
  }

  /** The model's configuration (architecture, sizes, context). */
  get config(): ModelConfig {
    return this.#model.config;
  }

  /** Positions the KV cache holds. */
  get contextLength(): number {
    return this.#model.contextLength;
  }

  /** Token ids of `text` (with the model's BOS when it wants one, unless `addSpecial` is false). */
  tokenize(text: string, options: { addSpecial?: boolean; parseSpecial?: boolean } = {}): number[] {
    if (typeof text !== "string") throw new TypeError("tokenize: text must be a string");
    return this.#tokenizer.encode(text, {
      addSpecial: options.addSpecial ?? true,
      parseSpecial: options.parseSpecial ?? false,
    });
  }

  /** The text of token ids (special tokens left out). */
  detokenize(ids: readonly number[]): string {
    return this.#tokenizer.decode(ids);
  }

  /**
   * The logits after every position of `tokens` (teacher forcing), one Float32Array of
   * `config.vocab` values per token.
   */
  logits(tokens: readonly number[]): Float32Array[] {
    this.#checkTokens(tokens);
    return this.#exclusive(() => {
      // forward runs sequence 0, the first slot's.
      const cache = this.#slots[0].cache;
      cache.clear();
      const out = tokens.map((t, pos) => this.#model.forward(t, pos).slice());
      cache.append(tokens);
      return out;
    });
  }

  /**
   * Generates from a prompt (text, tokenized with the model's BOS, or token ids), yielding
   * tokens as they come; returns the statistics. Aborting `signal` ends it between tokens, or
   * while the prompt is read (the kernels stop before their next operation). The KV cache keeps
   * the last prompt and answer: a prompt that starts the same way runs only the rest
   * (`stats.cachedTokens`), with the same result as running it whole.
   *
   * A model loaded with `sequences: N` runs up to N generations at once, in
   * shared steps (one read of the weights gives every running generation its
   * next token), each with the output it would have alone; more wait their
   * turn. Otherwise one generation at a time.
   *
   * @example
   * ```ts ignore
   * using model = await loadModel("smollm2.gguf", { sequences: 4 });
   * const answers = await Promise.all(["Hi", "Bonjour", "Hola"].map(async (p) => {
   *   let text = "";
   *   for await (const t of model.generate(p, { maxTokens: 32, temperature: 0 })) text += t.text;
   *   return text;
   * }));
   * ```
   */
  async *generate(
    prompt: string | readonly number[],
    options: ModelGenerateOptions = {},
  ): AsyncGenerator<Token, GenerationStats> {
    const ids = typeof prompt === "string" ? this.tokenize(prompt) : [...prompt];
    return yield* this.#run(ids, options);
  }

  /**
   * Generates the assistant's answer to `messages`, rendered with the model's own chat
   * template (or `template`), yielding its tokens as they come (the raw text, call markup
   * included).
   *
   * With `tools`, the template shows them to the model (as transformers'
   * `apply_chat_template(messages, tools=...)`), and the returned {@link ChatStats} holds the
   * reply's `content` and `toolCalls`. Messages may be OpenAI's: an assistant turn with
   * `tool_calls` (arguments as a JSON string or an object; `content` null), then `tool` turns
   * with the results.
   *
   * @example Tool calls
   * ```ts ignore
   * using model = await loadModel("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
   * const tools = [{
   *   type: "function" as const,
   *   function: {
   *     name: "get_weather",
   *     parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
   *   },
   * }];
   * const messages: ToolChatMessage[] = [{ role: "user", content: "Weather in Paris?" }];
   * const it = model.chat(messages, { tools, temperature: 0 });
   * let r = await it.next();
   * while (!r.done) r = await it.next();
   * const calls = r.value.toolCalls ?? [];
   * // [{ id: "call_…", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }]
   * messages.push({ role: "assistant", content: r.value.content ?? null, tool_calls: calls });
   * for (const c of calls) messages.push({ role: "tool", tool_call_id: c.id, content: "22 °C, sunny" });
   * for await (const t of model.chat(messages, { tools, temperature: 0 })) console.log(t.text);
   * ```
   */
  async *chat(
    messages: readonly (ChatMessage | ToolChatMessage)[],
    options: ModelChatOptions = {},
  ): AsyncGenerator<Token, ChatStats> {
    const { template, tools, toolChoice, parallelToolCalls, ...rest } = options;
    const tok = this.#tokenizer;
    const choice = chatTemplateFrom({ "tokenizer.chat_template": tok.chatTemplate }, {
      override: template,
      model: this.path,
    });
    const offered = this.#offeredTools(choice.template, tools, toolChoice);
    // The messages' (and tools') text cannot spell the template's special tokens (chatPromptIds).
    const ids = chatPromptIds(
      tok,
      choice.template,
      templateMessages(messages as ToolChatMessage[]),
      {
        addGenerationPrompt: true,
        ...(offered === undefined ? {} : { extra: { tools: offered } }),
      },
    );
    if (offered === undefined) return yield* this.#run(ids, rest);
    // A forced call (required, or a named function): the reply is held to the call's JSON
    // (name and the function's parameter schema), so its arguments always validate.
    if (toolChoice !== undefined && toolChoice !== "auto" && toolChoice !== "none") {
      if (rest.jsonSchema !== undefined || rest.grammar !== undefined || rest.constraint) {
        throw new RangeError(
          "Model.chat: a forced toolChoice cannot be combined with a constraint",
        );
      }
      rest.constraint = toolCallConstraint(offered, toolChoice);
    }
    const parser = new ToolCallParser({
      names: new Set(offered.map((t) => t.function.name)),
      parallel: parallelToolCalls ?? true,
    });
    let content = "";
    const take = (events: ReturnType<ToolCallParser["push"]>) => {
      for (const e of events) if (e.kind === "content") content += e.text;
    };
    const it = this.#run(ids, rest);
    for (let r = await it.next();; r = await it.next()) {
      if (r.done) {
        take(parser.end());
        return {
          ...r.value,
          content: content === "" && parser.calls.length > 0 ? null : content,
          toolCalls: parser.calls,
        };
      }
      take(parser.push(r.value.text));
      yield r.value;
    }
  }

  /** The tools to show the model, checked; undefined when none are (or `toolChoice` is none). */
  #offeredTools(
    template: string,
    tools: readonly ToolDefinition[] | undefined,
    toolChoice: ToolChoice | undefined,
  ): ToolDefinition[] | undefined {
    if (tools === undefined) {
      if (toolChoice !== undefined && toolChoice !== "none") {
        throw new RangeError("Model.chat: toolChoice needs tools");
      }
      return undefined;
    }
    if (!Array.isArray(tools) || tools.length === 0) {
      throw new RangeError("Model.chat: tools must be a non-empty array");
    }
    const names = new Set<string>();
    for (const [i, t] of tools.entries()) {
      const name = t?.function?.name;
      if (t?.type !== "function" || typeof name !== "string" || !TOOL_NAME.test(name)) {
        throw new RangeError(
          `Model.chat: tools[${i}] must be { type: "function", function: { name } } with a ` +
            "name of 1 to 64 of a-z, A-Z, 0-9, _ and -",
        );
      }
      if (names.has(name)) throw new RangeError(`Model.chat: tool ${name} is given twice`);
      names.add(name);
    }
    if (typeof toolChoice === "object" && !names.has(toolChoice?.function?.name)) {
      throw new RangeError(`Model.chat: toolChoice names a function that is not in tools`);
    }
    if (
      toolChoice !== undefined && typeof toolChoice !== "object" &&
      !["none", "auto", "required"].includes(toolChoice)
    ) {
      throw new RangeError(`Model.chat: toolChoice must be none, auto, required or a function`);
    }
    if (toolChoice === "none") return undefined;
    if (toolCallFormat(template) === undefined) {
      throw new RangeError(
        `Model.chat: the chat template of ${this.path} does not render tools in the ` +
          "Hermes/Qwen2.5 <tool_call> format that cflow parses",
      );
    }
    return [...tools];
  }

  /**
   * Embeddings of a text or of several: each input is tokenized (with the model's BOS when it
   * wants one), run through the model, and its final hidden states (after the output norm, the
   * vectors the LM head reads) are pooled as the model declares (GGUF `pooling_type`: mean, cls
   * or last; mean when it declares nothing; a reranker's `rank` is refused) and L2-normalised, so
   * the dot product of two embeddings is their cosine similarity. An empty input, or one longer
   * than the context, is refused with a RangeError naming its index.
   *
   * An embedding runs on a generation's slot and overwrites the start of its KV cache: the next
   * generation there runs again what was overwritten (its answer is the same). With
   * `sequences: N` it waits for a free sequence, and runs a batch at a time between the
   * running generations' steps.
   *
   * @example
   * ```ts ignore
   * using model = await loadModel("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
   * const { embeddings } = await model.embed(["The cat sat on the mat.", "A kitten sat on the rug."]);
   * let cosine = 0;
   * for (let i = 0; i < embeddings[0].length; i++) cosine += embeddings[0][i] * embeddings[1][i];
   * console.log(cosine.toFixed(3));
   * ```
   */
  async embed(input: string | readonly string[], options: EmbedOptions = {}): Promise<Embeddings> {
    const texts = typeof input === "string" ? [input] : input;
    if (!Array.isArray(texts) || texts.length === 0) {
      throw new RangeError("Model.embed: input must be a string or a non-empty array of strings");
    }
    const ids = texts.map((text, i) => {
      if (typeof text !== "string") throw new TypeError(`Model.embed: input ${i} is not a string`);
      if (text.length === 0) throw new RangeError(`Model.embed: input ${i} is empty`);
      const tokens = this.tokenize(text);
      if (tokens.length === 0) throw new RangeError(`Model.embed: input ${i} has no tokens`);
      if (tokens.length > this.#model.contextLength) {
        throw new RangeError(
          `Model.embed: input ${i} has ${tokens.length} tokens; the context holds ${this.#model.contextLength}`,
        );
      }
      return tokens;
    });
    const pooling = options.pooling ?? poolingOf(this.#model.config);
    if (!["mean", "cls", "last"].includes(pooling)) {
      throw new RangeError(`Model.embed: pooling ${pooling} is not mean, cls or last`);
    }
    const slot = await this.#takeSlot();
    try {
      const embeddings: Float32Array[] = [];
      for (const tokens of ids) {
        options.signal?.throwIfAborted();
        // The positions from the first token this input does not share with the cache's record
        // on are about to hold this input's keys and values.
        slot.cache.truncate(slot.cache.reusable(tokens));
        embeddings.push(await embedTokens(slot.model, tokens, { pooling, signal: options.signal }));
      }
      return { embeddings, promptTokens: ids.reduce((n, t) => n + t.length, 0) };
    } finally {
      this.#giveBack(slot);
    }
  }

  /** A free slot, waiting in arrival order; refused while one-slot work runs. */
  async #takeSlot(): Promise<ModelSlot> {
    if (this.#busy) throw new Error("Model: logits() is running");
    if (this.#slots.length === 1 && this.#running > 0) {
      throw new Error(
        "Model: one generation at a time (this one is running; load with sequences: N for more)",
      );
    }
    while (this.#free.length === 0) await new Promise<void>((r) => this.#waiting.push(r));
    this.#running++;
    return this.#free.pop()!;
  }

  /** Returns a slot taken by {@link #takeSlot}. */
  #giveBack(slot: ModelSlot): void {
    slot.idle?.();
    this.#running--;
    this.#free.push(slot);
    this.#waiting.shift()?.();
  }

  async *#run(
    ids: number[],
    options: ModelGenerateOptions,
  ): AsyncGenerator<Token, GenerationStats> {
    this.#checkTokens(ids);
    const {
      maxTokens = 128,
      stop,
      signal,
      logprobs,
      draft,
      lookupNgram,
      draftMax = 16,
      draftMinP,
      jsonSchema,
      grammar,
      constraint: spec,
      ...sampling
    } = options;
    const constraint = this.#constraint(jsonSchema, grammar, spec);
    const speculation = draft !== undefined || lookupNgram !== undefined
      ? { drafter: this.#drafter(draft, lookupNgram, draftMinP), maxDraft: draftMax }
      : undefined;
    // Wait, in arrival order, for a free sequence.
    const slot = await this.#takeSlot();
    // The draft is busy too: its own generations would share its sequence 0.
    if (draft !== undefined) draft.#running++;
    try {
      const sampler = new Sampler(this.#model.config.vocab, sampling);
      const it = generateTokens(slot.model, this.#tokenizer, sampler, ids, {
        maxTokens,
        stop,
        signal,
        logprobs,
        cache: slot.cache,
        speculation,
        constraint,
      });
      for (let r = await it.next();; r = await it.next()) {
        if (r.done) return r.value;
        yield this.#token(r.value);
      }
    } finally {
      if (draft !== undefined) draft.#running--;
      this.#giveBack(slot);
    }
  }

  /** The compiled output constraint of a generation (at most one of the three ways to give it). */
  #constraint(
    jsonSchema: unknown,
    grammar: string | undefined,
    spec: ConstraintSpec | undefined,
  ): TokenConstraint | undefined {
    const given = [jsonSchema, grammar, spec].filter((x) => x !== undefined).length;
    if (given > 1) {
      throw new RangeError("Model: give at most one of jsonSchema, grammar, constraint");
    }
    if (jsonSchema !== undefined) spec = { kind: "json_schema", schema: jsonSchema };
    else if (grammar !== undefined) spec = { kind: "gbnf", grammar };
    return spec === undefined ? undefined : compileConstraint(spec, this.#tokenizer);
  }

  /** The drafter of a generation: prompt lookup, or `draft` checked against this vocabulary. */
  #drafter(draft: Model | undefined, lookupNgram: number | undefined, minP?: number): Drafter {
    if ((draft === undefined) === (lookupNgram === undefined)) {
      throw new RangeError("Model: give draft or lookupNgram, not both");
    }
    if (draft === undefined) return new NgramLookup(lookupNgram!);
    if (!(draft instanceof Model) || draft === this) {
      throw new RangeError("Model: draft must be another loaded Model");
    }
    return draft.#asDraft(this, minP);
  }

  /** This model as the drafter of `target` (its sequence 0, which keeps what it last read). */
  #asDraft(target: Model, minP?: number): Drafter {
    if (this.#busy || this.#running > 0) throw new Error("Model: the draft is generating");
    if (this.#checkedFor !== target) {
      checkDraftVocabulary(target.#tokenizer, this.#tokenizer, this.path);
      this.#checkedFor = target;
    }
    if (this.#draft === undefined || this.#draftMinP !== minP) {
      this.#draft = new DraftModel(this.#model, { minP });
      this.#draftMinP = minP;
    }
    return this.#draft;
  }

  #token(t: GeneratedToken): Token {
    const out: Token = { id: t.id, text: t.text };
    if (t.logprob !== undefined) out.logprob = t.logprob;
    if (t.top !== undefined) {
      out.top = t.top.map((a) => ({
        id: a.id,
        text: new TextDecoder().decode(this.#tokenizer.tokenBytes(a.id)),
        logprob: a.logprob,
      }));
    }
    return out;
  }

  #checkTokens(tokens: readonly number[]): void {
    if (!Array.isArray(tokens) || tokens.length === 0) {
      throw new RangeError("Model: at least one token is needed");
    }
    const vocab = this.#model.config.vocab;
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= vocab) {
        throw new RangeError(`Model: token ${t} is not in [0, ${vocab})`);
      }
    }
    if (tokens.length > this.#model.contextLength) {
      throw new RangeError(
        `Model: ${tokens.length} tokens exceed the context of ${this.#model.contextLength}`,
      );
    }
  }

  #exclusive<T>(fn: () => T): T {
    if (this.#busy || this.#running > 0) {
      throw new Error("Model: one generation at a time (this one is running)");
    }
    this.#busy = true;
    try {
      return fn();
    } finally {
      this.#busy = false;
    }
  }

  /** Frees the model (its weights, workspace and mapping). */
  close(): void {
    this.#model.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Loads a model: a `.cflow`/`.vflow` file as it is, a GGUF file or a Hugging Face folder
 * converted once into the cache (later loads reuse the conversion), or `ollama:NAME[:TAG]`, the
 * GGUF file of a model Ollama has pulled (`OLLAMA_MODELS`, else `~/.ollama/models`).
 *
 * @example
 * ```ts ignore
 * import { loadModel } from "@cflow/run";
 * using model = await loadModel("smollm2.gguf", { threads: 2 });
 * console.log(model.detokenize(model.tokenize("Hello")));
 * ```
 */
export async function loadModel(path: string, options: LoadModelOptions = {}): Promise<Model> {
  const { quant, cache, threads, ...modelOptions } = options;
  await prepareKernels();
  openKernels(threads === undefined ? undefined : { threads });
  const file = await resolveModel(path, { quant, cache });
  const { model, tokenizer } = openModel(file, modelOptions);
  return new Model(file, model, tokenizer);
}
