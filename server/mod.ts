/**
 * `cflow serve`: an OpenAI-compatible HTTP server over a converted model, which also speaks
 * Ollama's API.
 *
 * Endpoints: `POST /v1/chat/completions` and `POST /v1/completions` (streamed as
 * server-sent events or whole), `POST /v1/embeddings` (embeddings.ts), `GET /v1/models`,
 * `GET /health`, `GET /slots`, `POST /tokenize`, `POST /detokenize`; Ollama's `POST /api/chat` and `POST /api/generate`
 * (streamed as NDJSON or whole), `GET /api/tags`, `POST /api/show`, `GET /api/ps` and
 * `GET /api/version` (server/ollama.ts). Every request body is capped in size,
 * strict UTF-8 JSON, and validated field by field (unknown fields are ignored and named in the
 * `x-cflow-ignored-fields` header, or refused with `strict`).
 *
 * The model is loaded once. `parallel` slots each run one generation at a
 * time, and requests beyond them wait in a FIFO queue; with more than one
 * slot the model's KV cache holds one sequence per slot and a batch engine
 * (runtime/batch_engine.ts) runs the slots' steps together: one read of the
 * weights per step serves every running generation (continuous batching),
 * prompts run in chunks beside the decoding streams, and each generation's
 * output is what it would be alone. A client that disconnects cancels only
 * its own generation.
 *
 * @example
 * ```ts ignore
 * import { startServer } from "./mod.ts";
 * const server = await startServer({ model: "smollm2.cflow", port: 8080 });
 * console.log(server.url); // http://127.0.0.1:8080
 * await server.close();
 * ```
 *
 * @module
 */

import { chatTemplateFrom } from "../chat/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { BatchEngine } from "../runtime/batch_engine.ts";
import { openModelAsync } from "../runtime/open_model.ts";
import { checkDraftVocabulary, DraftModel } from "../runtime/draft_model.ts";
import { NgramLookup } from "../runtime/ngram_lookup.ts";
import { checkSpeculation, type Drafter } from "../runtime/speculative.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { PromptCache } from "../runtime/prompt_cache.ts";
import { createHandler, type RequestLogEntry, type ServerState, sha256 } from "./handler.ts";
import type { ModelSlot } from "./run_generation.ts";
import { kvBytesPerPosition, type KvCacheType, type Transformer } from "../model/mod.ts";
import { ApiError, errorResponse, jsonResponse } from "./api_error.ts";
import { Metrics } from "./metrics.ts";
import { describeModel } from "./describe_model.ts";
import { ollamaErrorResponse } from "./ollama_format.ts";
import { SlotPool } from "./slot_pool.ts";
import { DEFAULT_LIMITS, type RequestLimits } from "./validate_request.ts";

export { ApiError } from "./api_error.ts";
export type { RequestLogEntry } from "./handler.ts";
export { DEFAULT_LIMITS, type RequestLimits } from "./validate_request.ts";
export { SlotPool } from "./slot_pool.ts";

/** Fewest prompt tokens worth copying from another slot's KV cache instead of running them. */
const BORROW_MIN_TOKENS = 16;

/**
 * Options of {@link startServer}.
 *
 * @example
 * ```ts
 * import type { ServerOptions } from "./mod.ts";
 * const o: ServerOptions = { model: "m.cflow", port: 0, parallel: 2, apiKey: "secret" };
 * console.log(o.parallel);
 * ```
 */
export interface ServerOptions {
  /** A `.cflow` or `.vflow` file (convert GGUF/HF first, e.g. with resolveModel). */
  model: string;
  /** The model id /v1/models lists (default: the file name). */
  modelId?: string;
  /** Address to bind (default 127.0.0.1). */
  host?: string;
  /** Port (default 8080; 0 picks a free one). */
  port?: number;
  /** Generations at a time (default 1): slots sharing one copy of the weights. */
  parallel?: number;
  /** Requests that may wait for an instance (default 64 per instance; beyond: 503). */
  maxQueue?: number;
  /** Require `Authorization: Bearer <apiKey>` on every route but /health. */
  apiKey?: string;
  /** Context length of each slot (default: the model's, at most 4096). */
  contextLength?: number;
  /** KV cache type (default f16). */
  kvCache?: KvCacheType;
  /** Repack weights into panels at load (default "auto"; `TransformerOptions.packed`). */
  packed?: boolean | "auto";
  /** A Jinja chat template to use instead of the model's own. */
  template?: string;
  /**
   * Speculative decoding on every slot: a draft model (a `.cflow` file of the same vocabulary,
   * loaded with one sequence per slot) or prompt lookup; `draftMax` (default 16) and `minP`
   * (draft model, default 0.75) as on the command line. Answers are the same either way;
   * responses' `timings` say what was drafted and accepted.
   */
  speculation?: { draftModel?: string; lookupNgram?: number; draftMax?: number; minP?: number };
  /** Request bounds (default {@link DEFAULT_LIMITS}). */
  limits?: Partial<RequestLimits>;
  /**
   * Refuse unknown fields (400) and bodies not typed `application/json` (415). Default false:
   * unknown fields are ignored and named in the `x-cflow-ignored-fields` header, and a body
   * without a JSON type is read as JSON unless it comes from a web page (an `Origin` header).
   */
  strict?: boolean;
  /** Called once per request when its response is complete (`cflow serve` prints a line). */
  log?: (entry: RequestLogEntry) => void;
  /**
   * Called once the address is bound, before the model loads (awaited): from then on `/health`
   * answers 503 `{"status": "loading"}` and `/health/live` 200 until the model is ready.
   */
  onListen?: (url: string) => void | Promise<void>;
}

/**
 * A running server.
 *
 * @example
 * ```ts ignore
 * import { startServer } from "./mod.ts";
 * const server = await startServer({ model: "m.cflow", port: 0 });
 * await fetch(`${server.url}/health`);
 * await server.close();
 * ```
 */
export interface Server {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /** The port bound. */
  readonly port: number;
  /** Cancels running generations, stops listening and closes the models. */
  close(): Promise<void>;
  /**
   * Graceful shutdown: new generations get 503 (with `Retry-After`) and `/health` 503
   * `{"status": "draining"}`, while the running and queued ones go on for up to `timeoutMs`;
   * those still running then end with a `server_shutdown` error. Then {@link close}. Resolves
   * with how many generations the timeout ended.
   */
  drain(timeoutMs: number): Promise<{ ended: number }>;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
}

/**
 * Checks that `hostname:port` can be listened on now (port 0 always can),
 * and returns it as `host:port`; a port already taken throws
 * `Deno.errors.AddrInUse` naming the address. `cflow serve` calls it before
 * converting or loading anything.
 *
 * @example
 * ```ts
 * import { checkAddress } from "./mod.ts";
 * console.log(checkAddress("127.0.0.1", 0)); // "127.0.0.1:0"
 * ```
 */
export function checkAddress(hostname: string, port: number): string {
  const where = `${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`;
  if (port === 0) return where;
  try {
    Deno.listen({ hostname, port }).close();
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) {
      throw new Deno.errors.AddrInUse(
        `serve: ${where} is already in use (another server?); choose another --port`,
      );
    }
    if (error instanceof Deno.errors.AddrNotAvailable) {
      throw new Deno.errors.AddrNotAvailable(`serve: cannot listen on ${where}: ${error.message}`);
    }
    throw error;
  }
  return where;
}

/** The answer to every request while the model loads. */
function loading(request: Request): Response {
  const { pathname } = new URL(request.url);
  if (pathname === "/health/live") return jsonResponse({ status: "live" });
  if (pathname === "/health") {
    return jsonResponse({ status: "loading" }, 503, { "retry-after": "1" });
  }
  const e = new ApiError(503, "the model is loading; retry shortly", { code: "loading" });
  return pathname.startsWith("/api/") ? ollamaErrorResponse(e) : errorResponse(e);
}

/**
 * Loads the model once, with `parallel` slots over it, and serves the
 * OpenAI API on `host:port`.
 *
 * @example
 * ```ts ignore
 * import { startServer } from "./mod.ts";
 * const server = await startServer({ model: "smollm2.cflow", port: 0, parallel: 2 });
 * const r = await fetch(`${server.url}/v1/models`);
 * console.log((await r.json()).data[0].id);
 * await server.close();
 * ```
 */
export async function startServer(options: ServerOptions): Promise<Server> {
  const parallel = options.parallel ?? 1;
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 256) {
    throw new RangeError(`serve: parallel ${parallel} is not an integer in [1, 256]`);
  }
  const port = options.port ?? 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`serve: port ${port} is not in [0, 65535]`);
  }
  if (options.apiKey !== undefined && options.apiKey.length === 0) {
    throw new RangeError("serve: the API key is empty");
  }
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1 || value > 0x7fff_ffff) {
      throw new RangeError(`serve: limits.${name} ${value} is not an integer in [1, 2^31)`);
    }
  }
  // The address is checked before the models load (seconds for a large
  // one): a port already taken is said at once, with the address.
  const hostname = options.host ?? "127.0.0.1";
  const where = checkAddress(hostname, port);
  // Listen first: while the model loads, /health says so (503) and /health/live answers 200.
  const serving: { handler?: (request: Request) => Promise<Response> } = {};
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve(
      {
        hostname,
        port,
        onListen: () => {},
        onError: (error) => {
          console.error(`cflow serve: ${(error as Error)?.stack ?? error}`);
          return new Response(
            JSON.stringify({
              error: {
                message: "internal error",
                type: "server_error",
                param: null,
                code: "internal_error",
              },
            }),
            { status: 500, headers: { "content-type": "application/json" } },
          );
        },
      },
      (request) =>
        serving.handler === undefined
          ? Promise.resolve(loading(request))
          : serving.handler(request),
    );
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) {
      throw new Deno.errors.AddrInUse(`serve: ${where} is already in use`);
    }
    throw error;
  }
  const addr = server.addr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  const url = `http://${host}:${addr.port}`;
  const shutdown = new AbortController();
  let loaded: Awaited<ReturnType<typeof loadState>>;
  try {
    await options.onListen?.(url);
    loaded = await loadState(options, parallel, limits, shutdown.signal);
  } catch (error) {
    await server.shutdown();
    throw error;
  }
  const { state, model, engine, closeDraft } = loaded;
  serving.handler = createHandler(state);
  let closing: Promise<void> | undefined;
  const finished = server.finished.then(() => {});
  const close = (): Promise<void> => {
    closing ??= (async () => {
      shutdown.abort();
      await server.shutdown();
      // A step may still run on a blocking thread after the last request ended.
      await engine?.close();
      await closeDraft();
      model.close();
    })();
    return closing;
  };
  return {
    url,
    port: addr.port,
    finished,
    close,
    async drain(timeoutMs: number): Promise<{ ended: number }> {
      if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
        throw new RangeError(`serve: drain timeout ${timeoutMs} ms is not a number >= 0`);
      }
      state.draining = true;
      const deadline = performance.now() + timeoutMs;
      const busy = () => state.pool.size - state.pool.idle + state.pool.queued;
      while (busy() > 0 && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const ended = busy();
      // What is still running ends now, with a server_shutdown error (handler.ts).
      await close();
      return { ended };
    },
  };
}

/**
 * The drafter of each slot: prompt lookup, or a draft model with one sequence per slot (a
 * batch engine runs the slots' draft steps together, as the target's).
 */
async function loadDrafters(
  options: ServerOptions,
  target: Transformer,
  tokenizer: Tokenizer,
  parallel: number,
): Promise<{ drafters: (() => Drafter)[]; close: () => Promise<void> }> {
  const o = options.speculation;
  const none = () => Promise.resolve();
  if (o === undefined) return { drafters: [], close: none };
  checkSpeculation({ drafter: { kind: "lookup", propose: () => [] }, maxDraft: o.draftMax ?? 16 });
  if ((o.draftModel === undefined) === (o.lookupNgram === undefined)) {
    throw new RangeError("serve: speculation needs a draft model or a lookup n-gram, not both");
  }
  if (o.lookupNgram !== undefined) {
    const n = o.lookupNgram;
    new NgramLookup(n); // checks n
    return {
      drafters: Array.from({ length: parallel }, () => () => new NgramLookup(n)),
      close: none,
    };
  }
  const opened = await openModelAsync(o.draftModel!, {
    contextLength: target.contextLength,
    kvCache: options.kvCache ?? "f16",
    packed: options.packed ?? "auto",
    sequences: parallel,
  });
  const draft = opened.model;
  try {
    checkDraftVocabulary(tokenizer, opened.tokenizer, o.draftModel!);
    const engine = parallel === 1 ? undefined : new BatchEngine(draft);
    const runners = engine === undefined ? [draft] : engine.sequences;
    // One drafter per slot for the server's life: it keeps what its sequence holds.
    const made = runners.map((r) => new DraftModel(r, { minP: o.minP }));
    return {
      drafters: made.map((d) => () => d),
      close: async () => {
        await engine?.close();
        draft.close();
      },
    };
  } catch (error) {
    draft.close();
    throw error;
  }
}

/** Loads the model once, with `parallel` slots over it, and the state the routes share. */
async function loadState(
  options: ServerOptions,
  parallel: number,
  limits: RequestLimits,
  shutdown: AbortSignal,
): Promise<{
  state: ServerState;
  model: Transformer;
  engine: BatchEngine | undefined;
  closeDraft: () => Promise<void>;
}> {
  openKernels();
  // One copy of the weights. With `parallel` > 1 its KV cache holds that many
  // sequences, and a batch engine runs their steps together (continuous
  // batching); each slot is one sequence, with its own prompt cache.
  const loadStart = performance.now();
  const opened = await openModelAsync(options.model, {
    contextLength: options.contextLength,
    kvCache: options.kvCache ?? "f16",
    packed: options.packed ?? "auto",
    sequences: parallel,
  });
  const model = opened.model;
  const slots: ModelSlot[] = [];
  let engine: BatchEngine | undefined;
  let drafters: (() => Drafter)[] = [];
  let closeDraft = () => Promise.resolve();
  try {
    ({ drafters, close: closeDraft } = await loadDrafters(
      options,
      model,
      opened.tokenizer,
      parallel,
    ));
  } catch (error) {
    model.close();
    throw error;
  }
  const maxDraft = options.speculation?.draftMax ?? 16;
  const speculation = (i: number) =>
    drafters.length === 0 ? undefined : { drafter: drafters[i](), maxDraft };
  if (parallel === 1) {
    slots.push({
      model,
      tokenizer: opened.tokenizer,
      cache: new PromptCache(model),
      speculation: speculation(0),
    });
  } else {
    engine = new BatchEngine(model);
    const caches = engine.sequences.map((seq) => new PromptCache(seq));
    for (const seq of engine.sequences) {
      const cache = caches[seq.index];
      slots.push({
        model: seq,
        tokenizer: opened.tokenizer,
        cache,
        speculation: speculation(seq.index),
        idle: () => seq.idle(),
        // A prompt another slot holds a longer prefix of (a shared system prompt, a
        // conversation that moved) starts from a copy of that prefix instead of running it.
        borrow: async (prompt) => {
          const own = cache.reusable(prompt);
          let best = own;
          let donor = -1;
          caches.forEach((c, i) => {
            if (i === seq.index) return;
            const n = c.reusable(prompt);
            if (n > best) [best, donor] = [n, i];
          });
          if (donor < 0 || best - own < BORROW_MIN_TOKENS) return;
          try {
            await engine!.copyPrefix(donor, seq.index, best);
          } catch (error) {
            // Another copy in the same gap went into the donor first and left it holding
            // fewer positions (a RangeError, checked before anything is written): this
            // slot's own rows and record are untouched, so it runs from its own prefix.
            if (error instanceof RangeError) return;
            throw error;
          }
          // The copy waits for its turn between steps; meanwhile the donor may have
          // started another request and overwritten rows of that prefix. Keep the copy
          // only if the donor still holds the prefix; otherwise this slot's own rows
          // were overwritten too, so it starts from nothing.
          if (caches[donor].reusable(prompt) < best) {
            cache.truncate(0);
            return;
          }
          cache.adopt(prompt.slice(0, best));
        },
      });
    }
  }
  const first = slots[0];
  let chatTemplate: string | undefined;
  if (options.template !== undefined || first.tokenizer.chatTemplate !== undefined) {
    chatTemplate = chatTemplateFrom({ "tokenizer.chat_template": first.tokenizer.chatTemplate }, {
      override: options.template,
      model: options.model,
    }).template;
  }
  const state: ServerState = {
    pool: new SlotPool(slots, options.maxQueue ?? 64 * parallel),
    slots,
    tokenizer: first.tokenizer,
    vocab: first.model.config.vocab,
    contextLength: first.model.contextLength,
    modelId: options.modelId ?? options.model.split("/").pop()!,
    kv: {
      type: options.kvCache ?? "f16",
      bytesPerToken: kvBytesPerPosition(first.model.config, options.kvCache ?? "f16"),
    },
    chatTemplate,
    limits,
    apiKeyHash: options.apiKey === undefined ? undefined : await sha256(options.apiKey),
    shutdown,
    strict: options.strict === true,
    log: options.log,
    metrics: new Metrics(),
    description: await describeModel(opened.file, options.model),
  };
  state.metrics.modelLoadSeconds = (performance.now() - loadStart) / 1000;
  return { state, model, engine, closeDraft };
}
