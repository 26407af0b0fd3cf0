/**
 * Errors of `cflow pull`. Every failure is a {@linkcode PullError} (or a
 * subclass), so callers can tell a refused input, a failed check, a missing
 * cache entry and a transport failure apart.
 *
 * @module
 */

/**
 * Base class of every error `pull` throws on purpose. Messages start with
 * `pull:` so the command line prints them without a stack trace.
 *
 * @example
 * ```ts
 * import { PullError } from "./errors.ts";
 * const e = new PullError("pull: something went wrong");
 * console.log(e instanceof Error, e.name); // true "PullError"
 * ```
 */
export class PullError extends Error {
  /** Builds the error; `options.cause` keeps the underlying failure. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "PullError";
  }
}

/**
 * A model reference, repository name, file name or option that is refused
 * before anything is fetched (bad syntax, `..`, absolute paths, ambiguity).
 *
 * @example
 * ```ts
 * import { SpecError } from "./errors.ts";
 * console.log(new SpecError("pull: bad name").name); // "SpecError"
 * ```
 */
export class SpecError extends PullError {
  /** Builds the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "SpecError";
  }
}

/**
 * A download whose size or sha256 does not match what the source promised.
 * The bad bytes have been deleted when this is thrown.
 *
 * @example
 * ```ts
 * import { IntegrityError } from "./errors.ts";
 * const e = new IntegrityError("pull: sha256 mismatch", "aa", "bb");
 * console.log(e.expected, e.actual); // "aa" "bb"
 * ```
 */
export class IntegrityError extends PullError {
  /** What the source promised (a sha256 in hex or a byte count). */
  readonly expected: string;
  /** What arrived. */
  readonly actual: string;
  /** Builds the error. */
  constructor(message: string, expected: string, actual: string) {
    super(message);
    this.name = "IntegrityError";
    this.expected = expected;
    this.actual = actual;
  }
}

/**
 * Offline mode was asked for and the cache does not hold the model.
 *
 * @example
 * ```ts
 * import { NotCachedError } from "./errors.ts";
 * console.log(new NotCachedError("pull: not cached").name); // "NotCachedError"
 * ```
 */
export class NotCachedError extends PullError {
  /** Builds the error. */
  constructor(message: string) {
    super(message);
    this.name = "NotCachedError";
  }
}

/**
 * An HTTP exchange that failed: an error status, a refused redirect, a
 * malformed header, or a connection dropped after every retry.
 *
 * @example
 * ```ts
 * import { HttpError } from "./errors.ts";
 * const e = new HttpError("pull: 404 Not Found", 404);
 * console.log(e.status); // 404
 * ```
 */
export class HttpError extends PullError {
  /** The HTTP status, or 0 when no response came back. */
  readonly status: number;
  /** Builds the error. */
  constructor(message: string, status: number, options?: ErrorOptions) {
    super(message, options);
    this.name = "HttpError";
    this.status = status;
  }
}

/**
 * A zip archive (a Python wheel) that cannot be read: truncated, corrupt,
 * out-of-range offsets, a CRC-32 or size mismatch, or an unsupported feature.
 *
 * @example
 * ```ts
 * import { ZipError } from "./errors.ts";
 * const e = new ZipError("zip: bad signature", 42);
 * console.log(e.offset); // 42
 * ```
 */
export class ZipError extends PullError {
  /** Byte offset in the archive where the problem was found (-1: unknown). */
  readonly offset: number;
  /** Builds the error. */
  constructor(message: string, offset = -1, options?: ErrorOptions) {
    super(message, options);
    this.name = "ZipError";
    this.offset = offset;
  }
}
