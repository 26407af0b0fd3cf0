/**
 * Memory owned by the kernel library: read-only file mappings and aligned
 * allocations. JS has no mmap; the library maps and tracks each region by a
 * handle. TypeScript reaches the bytes two ways:
 *
 * - `read(offset, length)`: a bounded copy, checked natively against the
 *   region. Works with `--allow-ffi` scoped to the kernel library, which is
 *   how `./cflow` runs.
 * - `bytes`: a zero-copy `Uint8Array` view. Deno only builds views of
 *   native memory with unscoped `--allow-ffi` (measured: 2.9.6 refuses
 *   `UnsafePointer.create`/`UnsafePointerView` under a path-scoped grant), so
 *   it is for scripts and notebooks that grant that. Views are detached
 *   (length 0) when the region is closed, so a stale view cannot touch
 *   unmapped memory.
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import { ADVICE, type Advice, STATUS } from "./symbols.ts";

const MAX_PATH_BYTES = 4095;

function viewOf(address: bigint, length: bigint): ArrayBuffer {
  if (length === 0n) return new ArrayBuffer(0);
  const ptr = Deno.UnsafePointer.create(address);
  if (ptr === null) throw new KernelError("view", STATUS.INVALID_ARG);
  if (length > BigInt(Number.MAX_SAFE_INTEGER)) throw new KernelError("view", STATUS.OVERFLOW);
  return Deno.UnsafePointerView.getArrayBuffer(ptr, Number(length));
}

function checkRange(fn: string, size: number, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`${fn}: offset ${offset} is not an integer >= 0`);
  }
  if (!Number.isSafeInteger(length) || length < 0) {
    throw new RangeError(`${fn}: length ${length} is not an integer >= 0`);
  }
  if (offset + length > size) {
    throw new RangeError(`${fn}: range [${offset}, ${offset + length}) exceeds the size ${size}`);
  }
}

/**
 * What mappings and allocations share: a handle held by the kernel library,
 * bounded reads, hints, and an optional zero-copy view.
 *
 * @example
 * ```ts ignore
 * import { type MemoryRegion, mapFile } from "./memory.ts";
 * const region: MemoryRegion = mapFile("weights.bin");
 * console.log(region.read(0, 16));
 * region.close();
 * ```
 */
export abstract class MemoryRegion {
  #handle: number;
  #address: bigint;
  #buffer: ArrayBuffer | undefined;
  /** Size in bytes. */
  readonly size: number;

  /** @internal Built by {@link mapFile} and {@link allocAligned}. */
  constructor(handle: number, address: bigint, size: bigint) {
    if (size > BigInt(Number.MAX_SAFE_INTEGER)) throw new KernelError("region", STATUS.OVERFLOW);
    this.#handle = handle;
    this.#address = address;
    this.size = Number(size);
  }

  /**
   * A zero-copy view of the bytes (needs unscoped `--allow-ffi`); empty once
   * the region is closed. With the WebAssembly kernels it is a view of
   * linear memory (no FFI needed), made afresh on each access: it stays
   * valid only until the next kernel call that allocates (growing memory
   * detaches it, to length 0), and is not detached when the region closes.
   */
  get bytes(): Uint8Array {
    if (this.closed) return new Uint8Array(0);
    const wasm = openKernels().wasm;
    if (wasm !== undefined) return wasm.view(this.#address, this.size);
    return new Uint8Array(this.buffer);
  }

  /**
   * The underlying ArrayBuffer (detached once closed). Not available with
   * the WebAssembly kernels (the region is part of one linear memory): use
   * {@link bytes} or {@link read}.
   */
  get buffer(): ArrayBuffer {
    if (this.closed) return new ArrayBuffer(0);
    if (openKernels().wasm !== undefined) {
      throw new TypeError(
        `${this.constructor.name}.buffer: the WebAssembly kernels have no per-region buffer; ` +
          "use bytes (a view of wasm memory) or read(offset, length)",
      );
    }
    if (this.#buffer === undefined) {
      if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
        throw new Deno.errors.NotCapable(
          `${this.constructor.name}: a zero-copy view needs unscoped --allow-ffi; ` +
            "use read(offset, length) under a scoped grant",
        );
      }
      this.#buffer = viewOf(this.#address, BigInt(this.size));
    }
    return this.#buffer;
  }

  /** What error messages call this region (a mapped file's path). */
  protected get label(): string | undefined {
    return undefined;
  }

  /** Copies [offset, offset + length) into a new Uint8Array (or into `into`). */
  read(offset: number, length: number, into?: Uint8Array): Uint8Array {
    const fn = `${this.constructor.name}.read`;
    if (this.closed) throw new KernelError("cf_copy", STATUS.HANDLE);
    checkRange(fn, this.size, offset, length);
    const dst = into ?? new Uint8Array(length);
    if (!(dst instanceof Uint8Array)) throw new TypeError(`${fn}: into must be a Uint8Array`);
    if (dst.length < length) {
      throw new RangeError(`${fn}: into holds ${dst.length} bytes, needs ${length}`);
    }
    const rc = openKernels().symbols.cf_copy(this.#handle, BigInt(offset), dst, BigInt(length));
    if (rc !== STATUS.OK) throw new KernelError("cf_copy", rc, this.label);
    return length === dst.length ? dst : dst.subarray(0, length);
  }

  /**
   * Copies `src` into [offset, offset + src.length) of an allocation (file
   * mappings are read-only and refuse).
   */
  write(offset: number, src: Uint8Array): void {
    const fn = `${this.constructor.name}.write`;
    if (this.closed) throw new KernelError("cf_write", STATUS.HANDLE);
    if (!(src instanceof Uint8Array)) throw new TypeError(`${fn}: src must be a Uint8Array`);
    checkRange(fn, this.size, offset, src.length);
    if (src.length === 0) return;
    const rc = openKernels().symbols.cf_write(
      this.#handle,
      BigInt(offset),
      src,
      BigInt(src.length),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_write", rc);
  }

  /** @internal The library's handle for this region (0 once closed); ffi/ only. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link close} ran. */
  get closed(): boolean {
    return this.#handle === 0;
  }

  /**
   * Gives the kernel a hint about pages covering [offset, offset + length):
   * "willneed" prefetches, "dontneed" drops them (a file mapping re-reads
   * them from the file on the next access; an allocation reads zeros),
   * "sequential"/"random"/"normal" tune read-ahead.
   */
  advise(advice: Advice, offset = 0, length: number = this.size - offset): void {
    const fn = `${this.constructor.name}.advise`;
    if (this.closed) throw new KernelError("cf_madvise", STATUS.HANDLE);
    if (!Object.hasOwn(ADVICE, advice)) throw new RangeError(`${fn}: unknown advice "${advice}"`);
    checkRange(fn, this.size, offset, length);
    const rc = openKernels().symbols.cf_madvise(
      this.#handle,
      BigInt(offset),
      BigInt(length),
      ADVICE[advice],
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_madvise", rc);
  }

  /** Releases the memory; every view made from it becomes empty. */
  close(): void {
    if (this.closed) return;
    // Detach first so that no view can touch the memory after it is gone.
    if (this.#buffer !== undefined && this.#buffer.byteLength > 0) this.#buffer.transfer(0);
    this.#buffer = undefined;
    const rc = openKernels().symbols.cf_release(this.#handle);
    // Still in use by a plan: the region stays open (and usable).
    if (rc === STATUS.BUSY) throw new KernelError("cf_release", rc);
    this.#handle = 0;
    if (rc !== STATUS.OK) throw new KernelError("cf_release", rc);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * A file mapped read-only by the kernel library.
 *
 * @example
 * ```ts ignore
 * import { mapFile } from "./memory.ts";
 * using file = mapFile("model.gguf");
 * const magic = file.read(0, 4); // bounded copy, works under a scoped FFI grant
 * console.log(file.size, file.bytes[0]); // zero-copy view, needs unscoped --allow-ffi
 * file.advise("willneed", 0, 4096);
 * ```
 */
export class MappedFile extends MemoryRegion {
  /** The path that was mapped. */
  readonly path: string;

  /** @internal Use {@link mapFile}. */
  constructor(path: string, handle: number, address: bigint, size: bigint) {
    super(handle, address, size);
    this.path = path;
  }

  /** The path, for error messages. */
  protected override get label(): string {
    return this.path;
  }
}

/**
 * Maps a regular file read-only. Throws a KernelError naming the path and
 * the errno when it cannot be opened or mapped. With the WebAssembly
 * kernels the file is copied into wasm memory instead (it costs its size in
 * memory, and later changes to the file are not seen).
 *
 * @example
 * ```ts ignore
 * import { mapFile } from "./memory.ts";
 * const f = mapFile("/etc/hostname");
 * console.log(new TextDecoder().decode(f.read(0, f.size)));
 * f.close();
 * ```
 */
export function mapFile(path: string): MappedFile {
  if (typeof path !== "string" || path.length === 0) {
    throw new TypeError("mapFile: path must be a non-empty string");
  }
  const encoded = new TextEncoder().encode(path);
  if (encoded.length > MAX_PATH_BYTES) {
    throw new RangeError(`mapFile: path is ${encoded.length} bytes, more than ${MAX_PATH_BYTES}`);
  }
  if (encoded.includes(0)) throw new RangeError("mapFile: path contains a NUL byte");
  // Deno's own read permission gates what the native call may open.
  const permission = Deno.permissions.querySync({ name: "read", path });
  if (permission.state !== "granted") {
    throw new Deno.errors.NotCapable(`mapFile: read access to "${path}" was not granted`);
  }
  const k = openKernels();
  if (k.wasm !== undefined) {
    // No mmap in WebAssembly: a private copy, read in bounded chunks.
    const m = k.wasm.mapFile(path);
    return new MappedFile(path, m.handle, m.address, m.size);
  }
  const out = new BigUint64Array(2);
  const handle = k.symbols.cf_map_file(encoded, BigInt(encoded.length), out);
  if (handle <= 0) throw new KernelError("cf_map_file", handle, path);
  return new MappedFile(path, handle, out[0], out[1]);
}

/**
 * Zeroed memory from the kernel library, aligned for O_DIRECT reads and SIMD.
 *
 * @example
 * ```ts ignore
 * import { allocAligned } from "./memory.ts";
 * using buf = allocAligned(1 << 20, 4096);
 * buf.bytes.fill(1);
 * ```
 */
export class AlignedBuffer extends MemoryRegion {
  /** Alignment of the first byte. */
  readonly alignment: number;

  /** @internal Use {@link allocAligned}. */
  constructor(handle: number, address: bigint, size: bigint, alignment: number) {
    super(handle, address, size);
    this.alignment = alignment;
  }
}

/**
 * Allocates `size` zeroed bytes aligned to `alignment` (a power of two up to
 * 2 MiB).
 *
 * @example
 * ```ts ignore
 * import { allocAligned } from "./memory.ts";
 * const buf = allocAligned(8192, 4096);
 * console.log(buf.size); // 8192
 * buf.close();
 * ```
 */
export function allocAligned(size: number, alignment = 64): AlignedBuffer {
  if (!Number.isSafeInteger(size) || size < 1) {
    throw new RangeError(`allocAligned: size ${size} is not an integer >= 1`);
  }
  if (!Number.isSafeInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) {
    throw new RangeError(`allocAligned: alignment ${alignment} is not a power of two`);
  }
  const out = new BigUint64Array(2);
  const handle = openKernels().symbols.cf_alloc(BigInt(size), BigInt(alignment), out);
  if (handle <= 0) throw new KernelError("cf_alloc", handle, `${size} bytes`);
  return new AlignedBuffer(handle, out[0], out[1], alignment);
}
