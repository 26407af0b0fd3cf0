/**
 * What the routes of handler.ts, _openai_routes.ts and the Ollama routes share when they read a
 * request: the JSON content-type check, the ignored-fields policy and the drain check. Private to
 * the server.
 *
 * @module
 */

import { ApiError } from "./api_error.ts";
import type { RequestInfo, ServerState } from "./handler.ts";

/**
 * Throws 415 unless the body is typed JSON (or, outside `strict`, untyped and not from a page).
 *
 * @example
 * ```ts
 * import { needJson } from "./_route_util.ts";
 * needJson(new Request("http://x/", { method: "POST", headers: { "content-type": "application/json" } }), true);
 * ```
 */
export function needJson(request: Request, strict: boolean): void {
  const type = request.headers.get("content-type") ?? "";
  if (/^application\/json\s*(;|$)/i.test(type)) return;
  // A JSON type makes a browser preflight a cross-site POST, which this server never answers.
  // Browsers send Origin with every POST, so a request without one is not a web page's: curl's
  // default (-d: application/x-www-form-urlencoded), a missing type or text/plain are read as
  // JSON then, as llama-server reads them (docs/SECURITY.md).
  const lenient = /^(application\/x-www-form-urlencoded|text\/plain)?\s*(;|$)/i.test(type);
  if (!strict && lenient && request.headers.get("origin") === null) return;
  throw new ApiError(415, "the request body must be application/json", {
    code: "unsupported_media_type",
  });
}

/**
 * The ignored-fields list of a request, or undefined (refuse them) under `strict`.
 *
 * @example
 * ```ts ignore
 * import { ignoredOf } from "./_route_util.ts";
 * validateChatRequest(body, state.limits, state.vocab, state.contextLength, ignoredOf(state, info));
 * ```
 */
export function ignoredOf(state: ServerState, info: RequestInfo): string[] | undefined {
  return state.strict ? undefined : info.ignored;
}

/**
 * The state, unless the server drains: then a 503 for a new generation (try another replica).
 *
 * @example
 * ```ts ignore
 * import { notDraining } from "./_route_util.ts";
 * await chatCompletions(notDraining(state), request, info);
 * ```
 */
export function notDraining(state: ServerState): ServerState {
  if (state.draining) {
    throw new ApiError(503, "the server is shutting down; retry on another replica", {
      code: "draining",
    });
  }
  return state;
}
