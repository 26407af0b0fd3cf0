/**
 * {@link ApiError}: a request the server refuses, and its OpenAI-style JSON body
 * `{ error: { message, type, param, code } }`.
 *
 * @module
 */

/**
 * A refused request: an HTTP status and an OpenAI-style error.
 *
 * @example
 * ```ts
 * import { ApiError } from "./api_error.ts";
 * const e = new ApiError(400, "n must be 1", { param: "n" });
 * console.log(e.status, e.param); // 400 n
 * ```
 */
export class ApiError extends Error {
  /** Always `"ApiError"`. */
  override name = "ApiError";
  /** HTTP status. */
  readonly status: number;
  /** The request field at fault, or null. */
  readonly param: string | null;
  /** OpenAI error type, e.g. `invalid_request_error`. */
  readonly type: string;
  /** A short machine-readable code, or null. */
  readonly code: string | null;

  /** A refused request with `status` and `message`. */
  constructor(
    status: number,
    message: string,
    options: { param?: string | null; type?: string; code?: string | null } = {},
  ) {
    super(message);
    this.status = status;
    this.param = options.param ?? null;
    this.type = options.type ?? (status >= 500 ? "server_error" : "invalid_request_error");
    this.code = options.code ?? null;
  }

  /** The JSON body OpenAI clients read. */
  toJSON(): {
    error: { message: string; type: string; param: string | null; code: string | null };
  } {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }
}

/**
 * A JSON response with `status`.
 *
 * @example
 * ```ts
 * import { jsonResponse } from "./api_error.ts";
 * console.log(jsonResponse({ ok: true }).status); // 200
 * ```
 */
export function jsonResponse(body: unknown, status = 200, headers: HeadersInit = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/**
 * The response for an {@link ApiError}.
 *
 * @example
 * ```ts
 * import { ApiError, errorResponse } from "./api_error.ts";
 * console.log(errorResponse(new ApiError(413, "too large")).status); // 413
 * ```
 */
export function errorResponse(error: ApiError): Response {
  const headers: Record<string, string> = {};
  if (error.status === 401) headers["www-authenticate"] = "Bearer";
  // A busy, loading or draining server: try again (another replica, or this one later).
  if (error.status === 503) headers["retry-after"] = "1";
  return jsonResponse(error.toJSON(), error.status, headers);
}
