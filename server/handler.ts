/**
 * {@link createHandler}: the HTTP routes of `cflow serve`, over a pool of model
 * instances. Every request is validated before it takes a slot; each error
 * becomes a JSON response and never reaches the server loop.
 *
 * @module
 */

import type { Tokenizer } from "../tokenizer/mod.ts";
import { ApiError, errorResponse, jsonResponse } from "./api_error.ts";
import { embeddings } from "./embeddings.ts";
import { readJsonBody } from "./read_json_body.ts";
import { shutdownError } from "./complete.ts";
import type { ModelSlot } from "./run_generation.ts";
import type { Metrics, MetricsGauges } from "./metrics.ts";
import type { ModelDescription } from "./describe_model.ts";
import { ollamaRoutes } from "./ollama.ts";
import { ollamaErrorResponse } from "./ollama_format.ts";
import { PAGE_CSS, PAGE_HTML, PAGE_JS } from "./page/page.ts";
import type { SlotPool } from "./slot_pool.ts";
import { chatCompletions, completions } from "./_openai_routes.ts";
import { ignoredOf, needJson, notDraining } from "./_route_util.ts";
import {
  type RequestLimits,
  validateDetokenizeRequest,
  validateTokenizeRequest,
} from "./validate_request.ts";

/**
 * What the routes share.
 *
 * @example
 * ```ts ignore
 * import { createHandler, type ServerState } from "./handler.ts";
 * const handler = createHandler(state);
 * ```
 */
export interface ServerState {
  pool: SlotPool<ModelSlot>;
  /** Every slot of the pool, idle or not, in id order (GET /slots). */
  slots: readonly ModelSlot[];
  /** Tokenizer for validation and /tokenize (stateless, shared). */
  tokenizer: Tokenizer;
  vocab: number;
  contextLength: number;
  /** The id /v1/models lists. */
  modelId: string;
  /** The KV cache's element type and bytes per position (GET /health, /slots). */
  kv?: { type: string; bytesPerToken: number };
  /** Counters and histograms (GET /metrics). */
  metrics: Metrics;
  /** Set while the server drains: new generations get 503, /health says "draining". */
  draining?: boolean;
  /** The chat template, or undefined when the model has none. */
  chatTemplate?: string;
  limits: RequestLimits;
  /** SHA-256 of the API key, when one is required. */
  apiKeyHash?: Uint8Array;
  /** Aborted by close(): ends every generation. */
  shutdown: AbortSignal;
  /**
   * Refuse what llama-server accepts: unknown fields (400) and bodies without an
   * `application/json` type (415). Default false: they are ignored and accepted.
   */
  strict?: boolean;
  /** Called once per request when its response is complete (streams: when they end). */
  log?: (entry: RequestLogEntry) => void;
  /** The served model as the Ollama routes list it (computed once at load). */
  description?: ModelDescription;
}

/**
 * One request as `cflow serve` logs it.
 *
 * @example
 * ```ts
 * import type { RequestLogEntry } from "./handler.ts";
 * const e: RequestLogEntry = { method: "POST", path: "/v1/completions", status: 200, ms: 12, ignored: [] };
 * console.log(e.status);
 * ```
 */
export interface RequestLogEntry {
  /** The HTTP method. */
  method: string;
  /** The URL path (at most 200 characters). */
  path: string;
  /** The response status. */
  status: number;
  /** Milliseconds from the request to its last byte. */
  ms: number;
  /** Prompt tokens, for a request that reached generation. */
  promptTokens?: number;
  /** Generated tokens, for a request that reached generation. */
  completionTokens?: number;
  /** Unknown fields of the body that were ignored. */
  ignored: string[];
}

/**
 * What one request's handlers learn, for its log line and headers.
 *
 * @example
 * ```ts
 * import type { RequestInfo } from "./handler.ts";
 * const info: RequestInfo = { ignored: [], started: performance.now() };
 * console.log(info.ignored.length); // 0
 * ```
 */
export interface RequestInfo {
  ignored: string[];
  /** performance.now() when the request arrived. */
  started: number;
  promptTokens?: number;
  completionTokens?: number;
  /** Set by a streamed response: resolves when the stream has ended. */
  streamEnded?: Promise<void>;
}

/**
 * SHA-256 of a string.
 *
 * @example
 * ```ts
 * import { sha256 } from "./handler.ts";
 * console.log((await sha256("k")).length); // 32
 * ```
 */
export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}

async function authorized(request: Request, expected: Uint8Array): Promise<boolean> {
  const header = request.headers.get("authorization") ?? "";
  const m = /^Bearer (.+)$/.exec(header);
  const got = await sha256(m === null ? "" : m[1]);
  let diff = m === null ? 1 : 0;
  for (let i = 0; i < expected.length; i++) diff |= got[i] ^ expected[i];
  return diff === 0;
}

/** A file of the chat page, with a policy that lets it load and call nothing but this server. */
function pageResponse(body: string, type: string): Response {
  return new Response(body, {
    headers: {
      "content-type": `${type}; charset=utf-8`,
      "content-security-policy":
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      "x-content-type-options": "nosniff",
      "cache-control": "no-cache",
    },
  });
}

/** The gauges /metrics reports: what the server holds now. */
function gauges(state: ServerState): MetricsGauges {
  const held = state.slots.reduce((n, slot) => n + (slot.cache?.tokens.length ?? 0), 0);
  return {
    slotsBusy: state.pool.size - state.pool.idle,
    slotsTotal: state.pool.size,
    queued: state.pool.queued,
    kvTokens: held,
    kvBytes: held * (state.kv?.bytesPerToken ?? 0),
    kvCapacityTokens: state.slots.length * state.contextLength,
    ready: state.draining ? 0 : 1,
    draining: state.draining ? 1 : 0,
  };
}

/** Routes that need no API key: health probes and the page's static files. */
const OPEN_ROUTES: ReadonlySet<string> = new Set([
  "/health",
  "/health/live",
  "/",
  "/page.js",
  "/page.css",
]);

async function route(state: ServerState, request: Request, info: RequestInfo): Promise<Response> {
  const { pathname } = new URL(request.url);
  const routes: Record<string, [string, () => Promise<Response> | Response]> = {
    // The chat page: static, the same for everyone, and allowed to talk to this server only.
    "/": ["GET", () => pageResponse(PAGE_HTML, "text/html")],
    "/page.js": ["GET", () => pageResponse(PAGE_JS, "text/javascript")],
    "/page.css": ["GET", () => pageResponse(PAGE_CSS, "text/css")],
    // Liveness: 200 while the process serves at all (loading and draining included).
    "/health/live": ["GET", () => jsonResponse({ status: "live" })],
    "/metrics": ["GET", () =>
      new Response(state.metrics.render(gauges(state)), {
        headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
      })],
    // Readiness: 200 when requests are taken, 503 while draining (and while loading: mod.ts).
    "/health": ["GET", () => {
      // KV use: the positions every slot's cache holds, against what all of them can hold.
      const held = state.slots.reduce((n, slot) => n + (slot.cache?.tokens.length ?? 0), 0);
      const per = state.kv?.bytesPerToken ?? 0;
      return jsonResponse(
        {
          status: state.draining ? "draining" : "ok",
          slots_idle: state.pool.idle,
          slots_total: state.pool.size,
          queued: state.pool.queued,
          kv_cache: {
            type: state.kv?.type ?? "f16",
            tokens: held,
            bytes: held * per,
            capacity_tokens: state.slots.length * state.contextLength,
            capacity_bytes: state.slots.length * state.contextLength * per,
          },
        },
        state.draining ? 503 : 200,
        state.draining ? { "retry-after": "1" } : {},
      );
    }],
    // llama-server's shape: one entry per slot; `cached_tokens` is the KV cache it holds.
    "/slots": ["GET", () =>
      jsonResponse(
        state.slots.map((slot, id) => ({
          id,
          n_ctx: slot.model.contextLength,
          is_processing: !state.pool.isIdle(slot),
          cached_tokens: slot.cache?.tokens.length ?? 0,
          kv_bytes: (slot.cache?.tokens.length ?? 0) * (state.kv?.bytesPerToken ?? 0),
        })),
      )],
    "/v1/models": ["GET", () =>
      jsonResponse({
        object: "list",
        data: [{ id: state.modelId, object: "model", created: 0, owned_by: "cflow" }],
      })],
    "/v1/chat/completions": ["POST", () => chatCompletions(notDraining(state), request, info)],
    "/v1/completions": ["POST", () => completions(notDraining(state), request, info)],
    "/v1/embeddings": ["POST", () => embeddings(notDraining(state), request, info, needJson)],
    "/tokenize": ["POST", async () => {
      needJson(request, state.strict === true);
      const r = validateTokenizeRequest(
        await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs),
        state.limits,
        ignoredOf(state, info),
      );
      return jsonResponse({
        tokens: state.tokenizer.encode(r.content, {
          addSpecial: r.addSpecial,
          parseSpecial: false,
        }),
      });
    }],
    "/detokenize": ["POST", async () => {
      needJson(request, state.strict === true);
      const ids = validateDetokenizeRequest(
        await readJsonBody(request, state.limits.maxBodyBytes, state.limits.bodyTimeoutMs),
        state.limits,
        state.tokenizer.vocabSize,
        ignoredOf(state, info),
      );
      return jsonResponse({ content: state.tokenizer.decode(ids) });
    }],
    ...ollamaRoutes(state, request, info),
  };
  const entry = Object.hasOwn(routes, pathname) ? routes[pathname] : undefined;
  if (entry === undefined) {
    throw new ApiError(404, `no route ${pathname.slice(0, 200)}`, { code: "not_found" });
  }
  if (request.method !== entry[0]) {
    throw new ApiError(405, `${pathname} takes ${entry[0]}`, { code: "method_not_allowed" });
  }
  if (state.apiKeyHash !== undefined && !OPEN_ROUTES.has(pathname)) {
    if (!(await authorized(request, state.apiKeyHash))) {
      throw new ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", {
        type: "authentication_error",
        code: "invalid_api_key",
      });
    }
  }
  return await entry[1]();
}

/** Ollama's routes (and any other path under /api/) answer errors in Ollama's shape. */
function isOllama(request: Request): boolean {
  return new URL(request.url).pathname.startsWith("/api/");
}

/**
 * The request handler for `Deno.serve`: routes, validates, and turns every
 * error into an OpenAI-style JSON response (500 for unexpected ones).
 *
 * @example
 * ```ts ignore
 * import { createHandler } from "./handler.ts";
 * Deno.serve({ hostname: "127.0.0.1", port: 0 }, createHandler(state));
 * ```
 */
export function createHandler(state: ServerState): (request: Request) => Promise<Response> {
  return async (request) => {
    const started = performance.now();
    const info: RequestInfo = { ignored: [], started };
    let response: Response;
    try {
      response = await route(state, request, info);
    } catch (error) {
      if (error instanceof ApiError) {
        response = isOllama(request) ? ollamaErrorResponse(error) : errorResponse(error);
      } else if (error instanceof DOMException && error.name === "AbortError") {
        const e = state.shutdown.aborted
          ? shutdownError()
          : new ApiError(499, "the request was cancelled", { code: "cancelled" });
        response = isOllama(request) ? ollamaErrorResponse(e) : errorResponse(e);
      } else {
        console.error(`cflow serve: ${(error as Error)?.stack ?? error}`);
        const e = new ApiError(500, "internal error", { code: "internal_error" });
        response = isOllama(request) ? ollamaErrorResponse(e) : errorResponse(e);
      }
    }
    if (info.ignored.length > 0) {
      // Names only (at most 16, 64 characters each), so the header stays small.
      response.headers.set("x-cflow-ignored-fields", info.ignored.join(", "));
    }
    const log = state.log;
    const path = new URL(request.url).pathname;
    const count = () =>
      state.metrics.request(path, response.status, (performance.now() - started) / 1000);
    if (info.streamEnded === undefined) count();
    else void info.streamEnded.then(count);
    if (log !== undefined) {
      const entry = (): RequestLogEntry => ({
        method: request.method,
        path: new URL(request.url).pathname.slice(0, 200),
        status: response.status,
        ms: Math.round(performance.now() - started),
        promptTokens: info.promptTokens,
        completionTokens: info.completionTokens,
        ignored: info.ignored,
      });
      if (info.streamEnded === undefined) log(entry());
      else void info.streamEnded.then(() => log(entry()));
    }
    return response;
  };
}
