/**
 * The library API: load a model (a `.cflow`/`.vflow` file, a GGUF file or a Hugging Face
 * folder, converted once into a cache) and generate from it in scripts and notebooks.
 *
 * @module
 */

import { type ChatMessage, chatTemplateFrom, renderChat } from "../chat/mod.ts";
import type { TargetQuant } from "../convert/mod.ts";
import { openKernels, prepareKernels } from "../ffi/mod.ts";
import type { ModelConfig, Transformer, TransformerOptions } from "../model/mod.ts";
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
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";

/**
 * Options of {@link loadModel}.
 *
 * @example
 * ```ts
 * import type { LoadModelOptions } from "./model.ts";
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

/** Where one generation runs, and what its KV cache holds. */
interface ModelSlot {
  model: GenerationModel;
  cache: PromptCache;
  idle?: () => void;
}

/**
 * Options of {@link Model.generate} and {@link Model.chat}: sampling (greedy when
 * `temperature` is 0), limits and cancellation.
 *
 * @example
 * ```ts
 * import type { ModelGenerateOptions } from "./model.ts";
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
 * import type { Token } from "./model.ts";
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
   * template (or `template`).
   */
  async *chat(
    messages: readonly ChatMessage[],
    options: ModelGenerateOptions & { template?: string } = {},
  ): AsyncGenerator<Token, GenerationStats> {
    const { template, ...rest } = options;
    const tok = this.#tokenizer;
    const choice = chatTemplateFrom({ "tokenizer.chat_template": tok.chatTemplate }, {
      override: template,
      model: this.path,
    });
    const text = renderChat(choice.template, messages, {
      bosToken: tok.bosId !== undefined ? tok.tokenText(tok.bosId) : "",
      eosToken: tok.eosId !== undefined ? tok.tokenText(tok.eosId) : "",
      addGenerationPrompt: true,
    });
    const ids = tok.encode(text, { addSpecial: true, parseSpecial: true });
    return yield* this.#run(ids, rest);
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
    if (this.#busy) throw new Error("Model: logits() is running");
    if (this.#slots.length === 1 && this.#running > 0) {
      throw new Error(
        "Model: one generation at a time (this one is running; load with sequences: N for more)",
      );
    }
    // Wait, in arrival order, for a free sequence.
    while (this.#free.length === 0) await new Promise<void>((r) => this.#waiting.push(r));
    const slot = this.#free.pop()!;
    this.#running++;
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
      slot.idle?.();
      this.#running--;
      this.#free.push(slot);
      this.#waiting.shift()?.();
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
 * converted once into the cache (later loads reuse the conversion).
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
