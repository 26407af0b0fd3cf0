/**
 * Bounded random access to the bytes of a file. Format readers take a
 * {@link ByteSource} and never see the whole file at once: a mapped file
 * (through the kernel library) or, in tests, an in-memory array.
 *
 * @module
 */

import { FormatError } from "./errors.ts";
import type { MappedFile } from "../ffi/mod.ts";

/**
 * Something readers can copy byte ranges out of.
 *
 * @example
 * ```ts
 * import { bytesSource } from "./byte_source.ts";
 * const src = bytesSource("mem", new Uint8Array([1, 2, 3]));
 * console.log(src.read(1, 2)); // Uint8Array [2, 3]
 * ```
 */
export interface ByteSource {
  /** Name used in error messages (usually the path). */
  readonly name: string;
  /** Size in bytes. */
  readonly size: number;
  /**
   * Copies [offset, offset + length). Throws a {@link FormatError} naming
   * `field` when the range is not inside the source.
   */
  read(offset: number, length: number, field?: string): Uint8Array;
}

function checkRange(name: string, size: number, offset: number, length: number, field: string) {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
    throw new FormatError(
      name,
      field,
      Math.max(0, offset | 0),
      `invalid range ${offset}+${length}`,
    );
  }
  if (offset > size || length > size - offset) {
    throw new FormatError(
      name,
      field,
      offset,
      `needs ${length} bytes but the file ends at byte ${size} (truncated?)`,
    );
  }
}

/**
 * A source over bytes already in memory.
 *
 * @example
 * ```ts
 * import { bytesSource } from "./byte_source.ts";
 * const src = bytesSource("test.gguf", new TextEncoder().encode("GGUF"));
 * console.log(src.size); // 4
 * ```
 */
export function bytesSource(name: string, bytes: Uint8Array): ByteSource {
  return {
    name,
    size: bytes.length,
    read(offset: number, length: number, field = "data"): Uint8Array {
      checkRange(name, bytes.length, offset, length, field);
      return bytes.slice(offset, offset + length);
    },
  };
}

/**
 * A source over a file mapped by the kernel library (bounded native copies;
 * works under an FFI grant scoped to the library).
 *
 * @example
 * ```ts ignore
 * import { mapFile } from "../ffi/mod.ts";
 * import { mappedSource } from "./byte_source.ts";
 * using file = mapFile("model.gguf");
 * const src = mappedSource(file);
 * ```
 */
export function mappedSource(file: MappedFile): ByteSource {
  return {
    name: file.path,
    size: file.size,
    read(offset: number, length: number, field = "data"): Uint8Array {
      checkRange(file.path, file.size, offset, length, field);
      return file.read(offset, length);
    },
  };
}
