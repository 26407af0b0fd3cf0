/**
 * Typed errors for failures reported by the kernel library.
 *
 * @module
 */

import { IO_BASE, STATUS } from "./symbols.ts";

const STATUS_TEXT: Record<number, string> = {
  [STATUS.INVALID_ARG]: "an argument is outside its domain",
  [STATUS.LENGTH]: "a buffer is shorter than its sizes require",
  [STATUS.ALIGNMENT]: "a pointer or offset is misaligned",
  [STATUS.RANGE]: "an index or range is out of bounds",
  [STATUS.UNSUPPORTED]: "the kernel variant cannot run on this CPU",
  [STATUS.NOT_INITIALIZED]: "the kernel library is not initialized",
  [STATUS.NONFINITE]: "the input holds NaN or an infinity",
  [STATUS.NO_MEMORY]: "out of memory",
  [STATUS.HANDLE]: "the handle is unknown or already released",
  [STATUS.OVERFLOW]: "a size computation overflowed",
  [STATUS.LIMIT]: "a fixed limit would be exceeded",
  [STATUS.BUSY]: "in use (a region a plan still reads, or a plan already running)",
  [STATUS.CANCELLED]: "cancelled",
  [STATUS.CHANGED]:
    "the mapped file was truncated or rewritten on disk since it was opened (reopen the model)",
};

const ERRNO_NAMES: Record<number, string> = {
  1: "EPERM",
  2: "ENOENT",
  5: "EIO",
  9: "EBADF",
  12: "ENOMEM",
  13: "EACCES",
  19: "ENODEV",
  20: "ENOTDIR",
  21: "EISDIR",
  22: "EINVAL",
  23: "ENFILE",
  24: "EMFILE",
  27: "EFBIG",
  28: "ENOSPC",
  36: "ENAMETOOLONG",
  40: "ELOOP",
  75: "EOVERFLOW",
};

/**
 * Describes a library status code in words.
 *
 * @example
 * ```ts
 * import { describeStatus } from "./errors.ts";
 * console.log(describeStatus(-1002)); // "I/O error ENOENT (errno 2)"
 * ```
 */
export function describeStatus(status: number): string {
  if (status <= IO_BASE) {
    const errno = IO_BASE - status;
    return `I/O error ${ERRNO_NAMES[errno] ?? "errno"} (errno ${errno})`;
  }
  return STATUS_TEXT[status] ?? `unknown status ${status}`;
}

/**
 * A failure reported by the kernel library: which operation, the raw status
 * code, and for I/O failures the errno.
 *
 * @example
 * ```ts
 * import { KernelError } from "./errors.ts";
 * const e = new KernelError("cf_map_file", -1002, "model.gguf");
 * console.log(e.message); // "cf_map_file failed for model.gguf: I/O error ENOENT (errno 2)"
 * console.log(e.errno); // 2
 * ```
 */
export class KernelError extends Error {
  /** The library call that failed. */
  readonly operation: string;
  /** The status code it returned. */
  readonly status: number;
  /** The errno of an I/O failure, else undefined. */
  readonly errno: number | undefined;

  /** Builds the error; `subject` names what the call was about (a path, a tensor). */
  constructor(operation: string, status: number, subject?: string) {
    const about = subject === undefined ? "" : ` for ${subject}`;
    super(`${operation} failed${about}: ${describeStatus(status)}`);
    this.name = "KernelError";
    this.operation = operation;
    this.status = status;
    this.errno = status <= IO_BASE ? IO_BASE - status : undefined;
  }
}

/**
 * The kernel library could not be found, loaded or initialized. The message
 * names every path tried.
 *
 * @example
 * ```ts
 * import { KernelLoadError } from "./errors.ts";
 * const e = new KernelLoadError("no kernel library", ["/a.so", "/b.so"]);
 * console.log(e.tried.length); // 2
 * ```
 */
export class KernelLoadError extends Error {
  /** Every library path that was tried, in order. */
  readonly tried: readonly string[];

  /** Builds the error; the message lists `tried`. */
  constructor(message: string, tried: readonly string[], options?: ErrorOptions) {
    const list = tried.length === 0 ? "" : `\n  tried:\n${tried.map((p) => `    ${p}`).join("\n")}`;
    super(message + list, options);
    this.name = "KernelLoadError";
    this.tried = tried;
  }
}
