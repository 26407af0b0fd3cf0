/**
 * Loads a `.cflow` or `.vflow` file for a model: maps it through the kernel
 * library, validates every header, table, directory and tile header against
 * each other (and the checksums, on request) before anything is used, and
 * hands out the bytes of entries and experts: zero-copy views when the
 * process holds unscoped FFI permission, bounded copies otherwise.
 *
 * @module
 */

import { mapFile, type MappedFile } from "../../ffi/mod.ts";
import { type ByteSource, mappedSource } from "../byte_source.ts";
import type { EntryDescriptor } from "./container.ts";
import { readTiledFile, type TiledFile } from "./reader.ts";

/**
 * A validated, mapped tiled file.
 *
 * @example
 * ```ts ignore
 * import { loadTiledFile } from "./loader.ts";
 * using model = loadTiledFile("smollm2.cflow");
 * console.log(model.file.geometry.hidden, model.zeroCopy);
 * ```
 */
export class LoadedTiledFile {
  /** The validated structure. */
  readonly file: TiledFile;
  /** Bounded reads over the mapping. */
  readonly source: ByteSource;
  /** True when {@link bytes} returns views instead of copies. */
  readonly zeroCopy: boolean;
  readonly #mapped: MappedFile;

  /** @internal Use {@link loadTiledFile}. */
  constructor(mapped: MappedFile, file: TiledFile, source: ByteSource, zeroCopy: boolean) {
    this.#mapped = mapped;
    this.file = file;
    this.source = source;
    this.zeroCopy = zeroCopy;
  }

  /** The path the file was loaded from. */
  get path(): string {
    return this.#mapped.path;
  }

  /** Bytes [offset, offset + length) of the file (a view when zero-copy). */
  bytes(offset: number, length: number): Uint8Array {
    if (
      !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 ||
      offset + length > this.file.size
    ) {
      throw new RangeError(`${this.#mapped.path}: range ${offset}+${length} is outside the file`);
    }
    if (this.zeroCopy) return this.#mapped.bytes.subarray(offset, offset + length);
    return this.source.read(offset, length);
  }

  /**
   * Copies [offset, offset + length) into `into` (no allocation): the
   * per-token path when views are not available.
   */
  readInto(offset: number, length: number, into: Uint8Array): Uint8Array {
    if (
      !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 ||
      offset + length > this.file.size
    ) {
      throw new RangeError(`${this.#mapped.path}: range ${offset}+${length} is outside the file`);
    }
    if (this.zeroCopy) {
      into.set(this.#mapped.bytes.subarray(offset, offset + length));
      return into.subarray(0, length);
    }
    return this.#mapped.read(offset, length, into);
  }

  /** The data of an entry (all tiles of its run, or its f32 values). */
  entryBytes(entry: EntryDescriptor): Uint8Array {
    return this.bytes(entry.offset, entry.length);
  }

  /** The tiles of expert `expert` of layer `layer`: one table lookup. */
  expertBytes(layer: number, expert: number): Uint8Array {
    const bank = this.file.experts.get(layer);
    const span = bank?.spans[expert];
    if (span === undefined) {
      throw new RangeError(`${this.#mapped.path}: layer ${layer} has no expert ${expert}`);
    }
    return this.bytes(span.offset, span.length);
  }

  /** The mapped region (for kernels that read tiles in place). */
  get region(): MappedFile {
    return this.#mapped;
  }

  /** Unmaps the file; views become empty. */
  close(): void {
    this.#mapped.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/** Pages a validation pass may leave behind before they are dropped. */
const EVICT_EVERY_BYTES = 8 << 20;

/** A source that drops the mapping's pages below its reads every few MiB. */
function evictBehind(source: ByteSource, mapped: MappedFile): ByteSource {
  let evicted = 0;
  return {
    name: source.name,
    size: source.size,
    read(offset: number, length: number, field?: string): Uint8Array {
      const bytes = source.read(offset, length, field);
      if (offset - evicted >= EVICT_EVERY_BYTES) {
        mapped.advise("dontneed", evicted, offset - evicted);
        evicted = offset;
      }
      return bytes;
    },
  };
}

/**
 * Maps and validates a `.cflow` or `.vflow` file.
 *
 * @example
 * ```ts ignore
 * import { loadTiledFile } from "./loader.ts";
 * const m = loadTiledFile("model.vflow", { verifyChecksums: true });
 * m.close();
 * ```
 */
export function loadTiledFile(
  path: string,
  options: { verifyChecksums?: boolean } = {},
): LoadedTiledFile {
  const mapped = mapFile(path);
  try {
    const source = mappedSource(mapped);
    // Validation reads every tile header: one small read per tile, which
    // page fault-around turns into the whole file resident. Drop the pages
    // behind the reads as it goes, and all of them at the end, so that
    // opening a file never costs its size in memory (the kernels read the
    // pages back when they need them).
    const file = readTiledFile(evictBehind(source, mapped), options);
    mapped.advise("dontneed");
    const zeroCopy = Deno.permissions.querySync({ name: "ffi" }).state === "granted";
    return new LoadedTiledFile(mapped, file, source, zeroCopy);
  } catch (error) {
    mapped.close();
    throw error;
  }
}
