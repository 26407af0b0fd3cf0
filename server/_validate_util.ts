/**
 * What the request validators share (validate_request.ts, validate_ollama.ts,
 * validate_ollama_embed.ts, embeddings.ts): the 400 error, the name of a value's type, the
 * object check, the unknown-field policy, the embedding requests' common bounds, and the
 * Ollama validators' string, boolean and `keep_alive` checks. Private to the server.
 *
 * @module
 */

import { ApiError } from "./api_error.ts";

/** A JSON object, as parsed. */
export type Obj = Record<string, unknown>;

/** At most this many ignored field names are kept (for the response header and the log). */
export const MAX_IGNORED = 16;

/**
 * A 400 naming the request field `param` (null: the body), with `code` (default
 * `invalid_value`).
 *
 * @example
 * ```ts
 * import { bad } from "./_validate_util.ts";
 * console.log(bad("model must be a string", "model").status); // 400
 * ```
 */
export function bad(
  message: string,
  param: string | null = null,
  code = "invalid_value",
): ApiError {
  return new ApiError(400, message, { param, code });
}

/**
 * The type of a JSON value as an error message names it: `null`, `an array`, `a string`...
 *
 * @example
 * ```ts
 * import { kind } from "./_validate_util.ts";
 * console.log(kind([1]), kind(2)); // an array a number
 * ```
 */
export function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v}`;
}

/**
 * `v` as a JSON object, or a 400 naming `param` (null: the request body).
 *
 * @example
 * ```ts
 * import { object } from "./_validate_util.ts";
 * console.log(Object.keys(object({ a: 1 }, null))); // [ "a" ]
 * ```
 */
export function object(v: unknown, param: string | null): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw bad(`${param ?? "the request body"} must be a JSON object, got ${kind(v)}`, param);
  }
  return v as Obj;
}

/**
 * Whether a field is absent: undefined or null.
 *
 * @example
 * ```ts
 * import { absent } from "./_validate_util.ts";
 * console.log(absent(null), absent(0)); // true false
 * ```
 */
export function absent(v: unknown): boolean {
  return v === undefined || v === null;
}

/**
 * The error for an unknown field `path` (`prefix` and `key`) under `--strict`: OpenAI's routes
 * name the whole path with code `unknown_field`.
 *
 * @example
 * ```ts
 * import { unknownField } from "./_validate_util.ts";
 * console.log(unknownField("options.x", "x").code); // unknown_field
 * ```
 */
export function unknownField(path: string, _key: string): ApiError {
  return bad(`unknown or unsupported field '${path}'`, path, "unknown_field");
}

/**
 * The error for an unknown field `path` under `--strict` on Ollama's routes: it names the key
 * alone (not its path), with code `invalid_value`.
 *
 * @example
 * ```ts
 * import { unknownKey } from "./_validate_util.ts";
 * console.log(unknownKey("options.x", "x").param); // x
 * ```
 */
export function unknownKey(path: string, key: string): ApiError {
  return bad(`unknown or unsupported field '${path}'`, key);
}

/**
 * Unknown fields of `o`: refused (`refuse`'s 400) when `ignored` is undefined (`serve
 * --strict`), else their names (`prefix` first, at most {@link MAX_IGNORED}, 64 characters
 * each) are added to it and they are ignored, as llama-server ignores what it does not know.
 *
 * @example
 * ```ts
 * import { onlyKeys } from "./_validate_util.ts";
 * const ignored: string[] = [];
 * onlyKeys({ a: 1, b: 2 }, new Set(["a"]), "", ignored);
 * console.log(ignored); // [ "b" ]
 * ```
 */
export function onlyKeys(
  o: Obj,
  allowed: ReadonlySet<string>,
  prefix: string,
  ignored: string[] | undefined,
  refuse: (path: string, key: string) => ApiError = unknownField,
): void {
  for (const k of Object.keys(o)) {
    if (allowed.has(k)) continue;
    if (ignored === undefined) throw refuse(`${prefix}${k}`, k);
    if (ignored.length < MAX_IGNORED) ignored.push(`${prefix}${k}`.slice(0, 64));
  }
}

/**
 * Checks an embedding request's `dimensions`: absent, or the model's width `hidden` (vectors
 * are not shortened).
 *
 * @example
 * ```ts
 * import { checkDimensions } from "./_validate_util.ts";
 * checkDimensions(64, 64);
 * ```
 */
export function checkDimensions(dims: unknown, hidden: number): void {
  if (dims !== undefined && dims !== null && dims !== hidden) {
    throw bad(
      `dimensions ${
        typeof dims === "number" ? dims : kind(dims)
      } is not supported: this model's embeddings have ${hidden}`,
      "dimensions",
    );
  }
}

/**
 * Checks the length of an embedding request's `input` array: not empty, at most `max` items.
 *
 * @example
 * ```ts
 * import { checkInputCount } from "./_validate_util.ts";
 * checkInputCount(["a", "b"], 2048);
 * ```
 */
export function checkInputCount(input: readonly unknown[], max: number): void {
  if (input.length === 0) throw bad("input is an empty array", "input");
  if (input.length > max) throw bad(`input has more than ${max} items`, "input");
}

/**
 * `v` as a string of at most `max` UTF-16 code units, or a 400 (code `invalid_value`) naming
 * `param`: the Ollama validators' string check.
 *
 * @example
 * ```ts
 * import { text } from "./_validate_util.ts";
 * console.log(text("smollm2", "model", 256)); // smollm2
 * ```
 */
export function text(v: unknown, param: string, max: number): string {
  if (typeof v !== "string") throw bad(`${param} must be a string, got ${kind(v)}`, param);
  if (v.length > max) throw bad(`${param} is longer than ${max} characters`, param);
  return v;
}

/**
 * The boolean field `key` of `o`, or `fallback` when absent; else a 400 (code `invalid_value`)
 * naming `name`: the Ollama validators' boolean check.
 *
 * @example
 * ```ts
 * import { boolean } from "./_validate_util.ts";
 * console.log(boolean({}, "truncate", true)); // true
 * ```
 */
export function boolean(o: Obj, key: string, fallback: boolean, name = key): boolean {
  const v = o[key];
  if (absent(v)) return fallback;
  if (typeof v !== "boolean") throw bad(`${name} must be a boolean, got ${kind(v)}`, name);
  return v;
}

/**
 * Checks Ollama's `keep_alive`: seconds (a number) or a Go duration ("5m", "1h30m", "-1s",
 * "0"). It has no effect (the model stays loaded).
 *
 * @example
 * ```ts
 * import { keepAlive } from "./_validate_util.ts";
 * keepAlive("5m");
 * ```
 */
export function keepAlive(v: unknown): void {
  if (absent(v)) return;
  if (typeof v === "number" && Number.isFinite(v)) return;
  if (
    typeof v === "string" && v.length <= 64 &&
    /^(0|[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))*)$/
      .test(v)
  ) return;
  throw bad(
    `keep_alive must be a number of seconds or a duration such as "5m", got ${
      typeof v === "string" ? JSON.stringify(v.slice(0, 32)) : kind(v)
    }`,
    "keep_alive",
  );
}
