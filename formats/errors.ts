/**
 * The error every format reader throws for a malformed file: it names the
 * file, the field and the byte offset where the problem was found.
 *
 * @module
 */

/**
 * A file that does not follow its format.
 *
 * @example
 * ```ts
 * import { FormatError } from "./errors.ts";
 * const e = new FormatError("model.gguf", "tensor_count", 8, "2^63 tensors cannot fit in 1024 bytes");
 * console.log(e.message);
 * // "model.gguf: tensor_count at byte 8: 2^63 tensors cannot fit in 1024 bytes"
 * ```
 */
export class FormatError extends SyntaxError {
  /** The file (or other source) being read. */
  readonly file: string;
  /** The field being read, e.g. `tensor_infos[3].offset`. */
  readonly field: string;
  /** Byte offset of the field in the file. */
  readonly offset: number;

  /** Builds the error; the message is `file: field at byte offset: detail`. */
  constructor(file: string, field: string, offset: number, detail: string, options?: ErrorOptions) {
    super(`${file}: ${field} at byte ${offset}: ${detail}`, options);
    this.name = "FormatError";
    this.file = file;
    this.field = field;
    this.offset = offset;
  }
}
