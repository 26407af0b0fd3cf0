/**
 * HTTP helpers shared by the sources: URL policy (https, or http on
 * loopback), bounded manual redirects that send the token to one origin
 * only, bounded JSON bodies, and header parsing.
 *
 * @module
 */

import { VERSION } from "../version.ts";
import { HttpError } from "./errors.ts";

/** Most redirects followed for one request. */
export const MAX_REDIRECTS = 5;
/** Largest JSON document read from an API (a listing of a big repository). */
export const MAX_JSON_BYTES = 32 << 20;
/** Largest file accepted from any source: 1 TiB. */
export const MAX_FILE_BYTES = 2 ** 40;

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Throws unless `url` is https, or http to a loopback address (tests, local mirrors). */
export function checkUrl(url: URL, what: string): void {
  if (url.username || url.password) {
    throw new HttpError(`pull: ${what}: credentials in URLs are refused`, 0);
  }
  if (url.protocol === "https:") return;
  if (url.protocol === "http:" && LOOPBACK.has(url.hostname)) return;
  throw new HttpError(
    `pull: ${what}: ${url.origin} is refused (only https, or http on loopback)`,
    0,
  );
}

/** Options of {@linkcode fetchFollow}. */
export interface FetchFollowOptions {
  /** Extra request headers (sent on every hop). */
  headers?: Record<string, string>;
  /** Bearer token, sent only to `tokenOrigin`. */
  token?: string;
  /** The only origin that receives the token. */
  tokenOrigin?: string;
  /** Called with every response, redirects included, before it is followed. */
  onResponse?: (response: Response, url: URL) => void;
  /** Cancels the request. */
  signal?: AbortSignal;
}

/** Fetches `url`, following at most {@linkcode MAX_REDIRECTS} redirects by hand. */
export async function fetchFollow(
  url: URL,
  what: string,
  options: FetchFollowOptions = {},
): Promise<{ response: Response; url: URL }> {
  let current = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    checkUrl(current, what);
    const headers = new Headers({ "user-agent": `cflow/${VERSION}`, ...options.headers });
    if (options.token && current.origin === options.tokenOrigin) {
      headers.set("authorization", `Bearer ${options.token}`);
    }
    let response: Response;
    try {
      response = await fetch(current, { headers, redirect: "manual", signal: options.signal });
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) {
        throw new HttpError(
          `pull: ${what}: ${current.host} is not among the hosts this command may reach (${
            (error as Error).message
          })`,
          0,
          { cause: error },
        );
      }
      throw new HttpError(
        `pull: ${what}: cannot reach ${current.host} (${(error as Error).message})`,
        0,
        {
          cause: error,
        },
      );
    }
    try {
      options.onResponse?.(response, current);
    } catch (error) {
      await response.body?.cancel();
      throw error;
    }
    if ([301, 302, 303, 307, 308].includes(response.status)) {
      const location = response.headers.get("location");
      await response.body?.cancel();
      if (!location) {
        throw new HttpError(`pull: ${what}: redirect without a Location`, response.status);
      }
      try {
        current = new URL(location, current);
      } catch {
        throw new HttpError(
          `pull: ${what}: bad redirect target "${clean(location)}"`,
          response.status,
        );
      }
      continue;
    }
    return { response, url: current };
  }
  throw new HttpError(`pull: ${what}: more than ${MAX_REDIRECTS} redirects`, 0);
}

/** Strips control characters and bounds the length of server-provided text. */
export function clean(text: string, max = 200): string {
  // deno-lint-ignore no-control-regex
  const t = text.replace(/[\u0000-\u001f\u007f]/g, " ");
  return t.length > max ? `${t.slice(0, max)}...` : t;
}

/** An {@linkcode HttpError} for a non-success response, with the hub's error message if any. */
export async function statusError(response: Response, what: string): Promise<HttpError> {
  const code = response.headers.get("x-error-code");
  const message = response.headers.get("x-error-message");
  await response.body?.cancel();
  let hint = "";
  if (response.status === 401 || response.status === 403) {
    hint = code === "GatedRepo"
      ? " (a gated repository: accept its terms on the hub and set HF_TOKEN)"
      : " (not found, private or gated: check the name, or set HF_TOKEN)";
  } else if (response.status === 404) hint = " (not found)";
  return new HttpError(
    `pull: ${what}: HTTP ${response.status}${code ? ` ${clean(code, 40)}` : ""}${
      message ? `: ${clean(message)}` : ""
    }${hint}`,
    response.status,
  );
}

/** Reads a JSON body of at most {@linkcode MAX_JSON_BYTES}. */
export async function readJson(response: Response, what: string): Promise<unknown> {
  const length = Number(response.headers.get("content-length") ?? "0");
  if (length > MAX_JSON_BYTES) {
    await response.body?.cancel();
    throw new HttpError(`pull: ${what}: ${length} bytes of JSON is too large`, response.status);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body ?? []) {
    total += chunk.length;
    if (total > MAX_JSON_BYTES) {
      throw new HttpError(`pull: ${what}: JSON too large`, response.status);
    }
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) (bytes.set(c, at), at += c.length);
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw new HttpError(`pull: ${what}: not valid JSON`, response.status, { cause: error });
  }
}

/** Parses a non-negative integer header; undefined when absent; throws when malformed or beyond `max`. */
export function intHeader(
  response: Response,
  name: string,
  what: string,
  max = MAX_FILE_BYTES,
): number | undefined {
  const text = response.headers.get(name);
  if (text === null) return undefined;
  if (!/^[0-9]{1,16}$/.test(text.trim()) || Number(text) > max) {
    throw new HttpError(`pull: ${what}: bad ${name} header "${clean(text, 40)}"`, response.status);
  }
  return Number(text);
}

/** The value of an ETag-like header without `W/` and quotes. */
export function etag(value: string | null): string | undefined {
  if (value === null) return undefined;
  return value.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}
