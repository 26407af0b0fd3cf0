/**
 * Direct reads for a disk-resident expert tier: a file opened with O_DIRECT
 * by the kernel library, and staging areas whose slots cache experts by
 * (layer, expert) with least-recently-used eviction. The library's reader
 * threads do the reads; JavaScript only names handles and slots, and every
 * argument is checked here and again natively (kernels-zig/src/io.zig,
 * docs/KERNELS.md "Direct reads and staging").
 *
 * ```ts ignore
 * import { createStage, openDirect } from "./io.ts";
 * using file = openDirect("experts.bin");
 * using stage = createStage(file, 8 << 20, 16);
 * const { slot } = stage.fetch(3, 17, 123_456, 5_000_000);
 * stage.wait(slot);
 * const head = stage.read(slot, 0, 64);
 * stage.release(slot);
 * ```
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import { STATUS } from "./symbols.ts";

const MAX_PATH_BYTES = 4095;
const U32_MAX = 0xffff_ffff;

/** Most slots one stage may have (`io.max_slots_per_stage`). */
export const MAX_STAGE_SLOTS = 4096;
/** Largest slot (`io.max_slot_bytes`, 16 GiB). */
const MAX_SLOT_BYTES = 2 ** 34;

/** Why a file is read through the page cache (cf_io_open's reason word). */
const REASONS: Record<number, string> = {
  1: "the filesystem refused O_DIRECT (EINVAL)",
  2: "the filesystem reports no direct-I/O alignment",
  3: "its direct-I/O alignment exceeds 2 MiB",
};

/** Paths already warned about, so that the warning prints once per path. */
const warned = new Set<string>();

function checkU32(fn: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > U32_MAX) {
    throw new RangeError(`${fn}: ${name} ${v} is not an integer in [0, ${U32_MAX}]`);
  }
}

function checkSize(fn: string, name: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RangeError(`${fn}: ${name} ${v} is not an integer >= ${min}`);
  }
}

/** Options of {@link openDirect}. */
export interface OpenDirectOptions {
  /**
   * Where the one-line "reading through the page cache" warning goes
   * (default: stderr, once per path). Pass `() => {}` to silence it.
   */
  warn?: (message: string) => void;
}

/**
 * A file opened for direct reads by the kernel library.
 *
 * @example
 * ```ts ignore
 * import { openDirect } from "./io.ts";
 * using f = openDirect("experts.bin");
 * console.log(f.size, f.alignment, f.direct);
 * ```
 */
export class DirectFile {
  /** The path that was opened. */
  readonly path: string;
  /** Size in bytes when it was opened. */
  readonly size: number;
  /** Granularity of direct reads (offsets, lengths, memory); 1 when buffered. */
  readonly alignment: number;
  /** True when reads bypass the page cache (O_DIRECT). */
  readonly direct: boolean;
  /** Why reads go through the page cache; undefined when direct. */
  readonly reason: string | undefined;
  #handle: number;

  /** @internal Use {@link openDirect}. */
  constructor(path: string, handle: number, info: BigUint64Array) {
    if (info[0] > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new KernelError("cf_io_open", STATUS.OVERFLOW, path);
    }
    this.path = path;
    this.#handle = handle;
    this.size = Number(info[0]);
    this.alignment = Number(info[1]);
    this.direct = (info[2] & 1n) === 1n;
    const code = Number(info[3]);
    this.reason = this.direct ? undefined : REASONS[code] ?? `reason ${code}`;
  }

  /** @internal The library's handle (0 once closed); ffi/ only. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link close} ran. */
  get closed(): boolean {
    return this.#handle === 0;
  }

  /** Closes the file. Throws BUSY (and stays open) while a stage reads it. */
  close(): void {
    if (this.closed) return;
    const rc = openKernels().symbols.cf_io_close(this.#handle);
    if (rc === STATUS.BUSY) {
      throw new KernelError("cf_io_close", rc, `${this.path} (close its stages first)`);
    }
    this.#handle = 0;
    if (rc !== STATUS.OK) throw new KernelError("cf_io_close", rc, this.path);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Opens a regular file for direct reads. Where O_DIRECT is not available
 * (tmpfs, or a filesystem that refuses it) the file is read through the page
 * cache instead and one line says so on stderr. Throws a KernelError naming
 * the path and the errno when it cannot be opened.
 *
 * @example
 * ```ts ignore
 * import { openDirect } from "./io.ts";
 * const f = openDirect("/var/tmp/experts.bin");
 * f.close();
 * ```
 */
export function openDirect(path: string, options: OpenDirectOptions = {}): DirectFile {
  if (typeof path !== "string" || path.length === 0) {
    throw new TypeError("openDirect: path must be a non-empty string");
  }
  const encoded = new TextEncoder().encode(path);
  if (encoded.length > MAX_PATH_BYTES) {
    throw new RangeError(
      `openDirect: path is ${encoded.length} bytes, more than ${MAX_PATH_BYTES}`,
    );
  }
  if (encoded.includes(0)) throw new RangeError("openDirect: path contains a NUL byte");
  // Deno's own read permission gates what the native call may open.
  const permission = Deno.permissions.querySync({ name: "read", path });
  if (permission.state !== "granted") {
    throw new Deno.errors.NotCapable(`openDirect: read access to "${path}" was not granted`);
  }
  const k = openKernels();
  if (k.wasm !== undefined) throw new KernelError("cf_io_open", STATUS.UNSUPPORTED, path);
  const info = new BigUint64Array(4);
  const handle = k.symbols.cf_io_open(encoded, BigInt(encoded.length), info);
  if (handle <= 0) throw new KernelError("cf_io_open", handle, path);
  const file = new DirectFile(path, handle, info);
  if (!file.direct && (options.warn !== undefined || !warned.has(path))) {
    const message =
      `cflow: O_DIRECT is not available for ${path} (${file.reason}); reading through the page cache`;
    if (options.warn === undefined) {
      warned.add(path);
      console.error(message);
    } else {
      options.warn(message);
    }
  }
  return file;
}

/** What {@link Stage.fetch} reports. */
export interface FetchResult {
  /** The slot holding the expert (pinned until {@link Stage.release}). */
  slot: number;
  /** True when the expert was cached (read done or in flight). */
  hit: boolean;
}

/** Counters of a stage since it was created or last reset. */
export interface StageStats {
  /** Fetches served by a cached slot. */
  hits: number;
  /** Fetches that started a read. */
  misses: number;
  /** Bytes read from the file (aligned, so at least what was asked). */
  bytesRead: number;
  /** Nanoseconds spent blocked in {@link Stage.wait}. */
  stallNs: number;
}

/**
 * A staging area: slots of `slotBytes` bytes that hold experts read from
 * one {@link DirectFile}, least recently used first out.
 *
 * @example
 * ```ts ignore
 * import { createStage, openDirect } from "./io.ts";
 * using file = openDirect("experts.bin");
 * using stage = createStage(file, 1 << 20, 4);
 * const { slot, hit } = stage.fetch(0, 5, 4096, 100_000);
 * stage.wait(slot);
 * console.log(hit, stage.read(slot, 0, 16));
 * stage.release(slot);
 * ```
 */
export class Stage {
  /** The file the slots are read from. */
  readonly file: DirectFile;
  /** Usable bytes per slot (the requested size rounded up to the alignment and a page). */
  readonly slotBytes: number;
  /** Number of slots. */
  readonly slots: number;
  /** Alignment of direct reads (1 when buffered). */
  readonly alignment: number;
  #handle: number;
  /** Pins this object holds per slot, the length and the key fetched into it. */
  #pins: Uint32Array;
  #lengths: Float64Array;
  #keys: string[];

  /** @internal Use {@link createStage}. */
  constructor(file: DirectFile, handle: number, out: BigUint64Array) {
    this.file = file;
    this.#handle = handle;
    this.slotBytes = Number(out[0]);
    this.slots = Number(out[1]);
    this.alignment = Number(out[2]);
    this.#pins = new Uint32Array(this.slots);
    this.#lengths = new Float64Array(this.slots);
    this.#keys = new Array(this.slots).fill("");
  }

  /** @internal The library's handle (0 once closed); ffi/ only. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link close} ran. */
  get closed(): boolean {
    return this.#handle === 0;
  }

  #live(fn: string): number {
    if (this.closed) throw new KernelError(fn, STATUS.HANDLE, this.file.path);
    return this.#handle;
  }

  #checkSlot(fn: string, slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots) {
      throw new RangeError(`Stage.${fn}: slot ${slot} is not an integer in [0, ${this.slots})`);
    }
    if (this.#pins[slot] === 0) {
      throw new RangeError(`Stage.${fn}: slot ${slot} is not held (fetch it first)`);
    }
  }

  /**
   * Pins expert (layer, expert) whose bytes are [offset, offset + length) of
   * the file, starting its read unless it is cached. Throws LIMIT when every
   * slot is pinned or being read (release some), never waits for one.
   */
  fetch(layer: number, expert: number, offset: number, length: number): FetchResult {
    const handle = this.#live("cf_stage_fetch");
    checkU32("Stage.fetch", "layer", layer);
    checkU32("Stage.fetch", "expert", expert);
    checkSize("Stage.fetch", "offset", offset, 0);
    checkSize("Stage.fetch", "length", length, 1);
    if (offset + length > this.file.size) {
      throw new RangeError(
        `Stage.fetch: range [${offset}, ${
          offset + length
        }) exceeds the file size ${this.file.size}`,
      );
    }
    // The aligned superset the read covers must fit a slot (checked natively too).
    const a = this.alignment;
    const span = Math.ceil((offset + length) / a) * a - Math.floor(offset / a) * a;
    if (span > this.slotBytes) {
      throw new RangeError(
        `Stage.fetch: [${offset}, ${offset + length}) spans ${span} aligned bytes, ` +
          `more than the slot size ${this.slotBytes}`,
      );
    }
    const out = new Uint32Array(2);
    const rc = openKernels().symbols.cf_stage_fetch(
      handle,
      layer,
      expert,
      BigInt(offset),
      BigInt(length),
      out,
    );
    const key = `${this.file.path} layer ${layer} expert ${expert}`;
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_fetch", rc, key);
    const slot = out[0];
    this.#pins[slot] += 1;
    this.#lengths[slot] = length;
    this.#keys[slot] = key;
    return { slot, hit: out[1] === 1 };
  }

  /**
   * Blocks until the slot's read is complete. A failed read throws (CHANGED
   * when the file was truncated or rewritten since it was opened, RANGE when
   * it ends early, an errno otherwise); the slot is then emptied, so fetching
   * the key again reads it again.
   */
  wait(slot: number): void {
    const handle = this.#live("cf_stage_wait");
    this.#checkSlot("wait", slot);
    const rc = openKernels().symbols.cf_stage_wait(handle, slot);
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_wait", rc, this.#keys[slot]);
  }

  /**
   * Copies [offset, offset + length) of the expert in a held, read slot
   * (offsets relative to the fetched offset) into a new Uint8Array or `into`.
   */
  read(slot: number, offset = 0, length?: number, into?: Uint8Array): Uint8Array {
    const handle = this.#live("cf_stage_copy");
    this.#checkSlot("read", slot);
    const held = this.#lengths[slot];
    const n = length ?? held - offset;
    checkSize("Stage.read", "offset", offset, 0);
    checkSize("Stage.read", "length", n, 0);
    if (offset + n > held) {
      throw new RangeError(
        `Stage.read: range [${offset}, ${offset + n}) exceeds the expert's ${held} bytes`,
      );
    }
    const dst = into ?? new Uint8Array(n);
    if (!(dst instanceof Uint8Array)) throw new TypeError("Stage.read: into must be a Uint8Array");
    if (dst.length < n) {
      throw new RangeError(`Stage.read: into holds ${dst.length} bytes, needs ${n}`);
    }
    const rc = openKernels().symbols.cf_stage_copy(handle, slot, BigInt(offset), dst, BigInt(n));
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_copy", rc, this.#keys[slot]);
    return n === dst.length ? dst : dst.subarray(0, n);
  }

  /** Undoes one {@link fetch} of the slot. */
  release(slot: number): void {
    const handle = this.#live("cf_stage_release");
    this.#checkSlot("release", slot);
    const rc = openKernels().symbols.cf_stage_release(handle, slot);
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_release", rc, this.#keys[slot]);
    this.#pins[slot] -= 1;
  }

  /** Hits, misses, bytes read and time blocked since creation or {@link resetStats}. */
  stats(): StageStats {
    const handle = this.#live("cf_stage_stats");
    const out = new BigUint64Array(4);
    const rc = openKernels().symbols.cf_stage_stats(handle, out);
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_stats", rc, this.file.path);
    return {
      hits: Number(out[0]),
      misses: Number(out[1]),
      bytesRead: Number(out[2]),
      stallNs: Number(out[3]),
    };
  }

  /** Zeroes the counters. */
  resetStats(): void {
    const rc = openKernels().symbols.cf_stage_reset_stats(this.#live("cf_stage_reset_stats"));
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_reset_stats", rc, this.file.path);
  }

  /**
   * Releases the slots this object still holds, waits for the reads in
   * flight and frees the slots. Throws BUSY (and stays open) while a plan
   * holds the stage.
   */
  close(): void {
    if (this.closed) return;
    const s = openKernels().symbols;
    for (let slot = 0; slot < this.slots; slot++) {
      while (this.#pins[slot] > 0) {
        const rc = s.cf_stage_release(this.#handle, slot);
        if (rc !== STATUS.OK) throw new KernelError("cf_stage_release", rc, this.file.path);
        this.#pins[slot] -= 1;
      }
    }
    const rc = s.cf_stage_destroy(this.#handle);
    if (rc === STATUS.BUSY) throw new KernelError("cf_stage_destroy", rc, this.file.path);
    this.#handle = 0;
    if (rc !== STATUS.OK) throw new KernelError("cf_stage_destroy", rc, this.file.path);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Creates a staging area of `slots` slots of at least `slotBytes` bytes each
 * (one aligned allocation) for experts of `file`.
 *
 * @example
 * ```ts ignore
 * import { createStage, openDirect } from "./io.ts";
 * using file = openDirect("experts.bin");
 * using stage = createStage(file, 4 << 20, 8);
 * console.log(stage.slotBytes >= 4 << 20); // true
 * ```
 */
export function createStage(file: DirectFile, slotBytes: number, slots: number): Stage {
  if (!(file instanceof DirectFile)) throw new TypeError("createStage: file must be a DirectFile");
  if (file.closed) throw new KernelError("cf_stage_create", STATUS.HANDLE, file.path);
  checkSize("createStage", "slotBytes", slotBytes, 1);
  if (slotBytes > MAX_SLOT_BYTES) {
    throw new RangeError(`createStage: slotBytes ${slotBytes} exceeds ${MAX_SLOT_BYTES}`);
  }
  if (!Number.isInteger(slots) || slots < 1 || slots > MAX_STAGE_SLOTS) {
    throw new RangeError(
      `createStage: slots ${slots} is not an integer in [1, ${MAX_STAGE_SLOTS}]`,
    );
  }
  const out = new BigUint64Array(4);
  const handle = openKernels().symbols.cf_stage_create(file.handle, BigInt(slotBytes), slots, out);
  if (handle <= 0) throw new KernelError("cf_stage_create", handle, file.path);
  return new Stage(file, handle, out);
}
