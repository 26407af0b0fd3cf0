/**
 * A small GGUF writer, for tests and fixtures. It lays a file out the way
 * ggml and gguf-py do (metadata, tensor infos, padding to the alignment,
 * then each tensor's data padded to the alignment) but checks only what it
 * needs to encode: tests use it to build valid files and, through the
 * `offset` and `dims` escape hatches, files that break the rules.
 *
 * @module
 */

import type { GgmlTypeInfo } from "../ggml/types.ts";
import { LITTLE_ENDIAN, VALUE_TYPE_IDS } from "./_private.ts";
import type { GgufValue } from "./gguf_value.ts";

/**
 * One tensor to write.
 *
 * @example
 * ```ts
 * import type { GgufWriteTensor } from "./write_gguf.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const t: GgufWriteTensor = {
 *   name: "blk.0.ffn_up.weight",
 *   dims: [64, 2],
 *   type: ggmlTypeByName("Q4_0")!,
 *   data: new Uint8Array(2 * 2 * 18),
 * };
 * ```
 */
export interface GgufWriteTensor {
  /** Tensor name. */
  readonly name: string;
  /** Dimensions, ne[0] first. Bigints let tests write values beyond 2^53. */
  readonly dims: readonly (number | bigint)[];
  /** The ggml type, or a raw type id (tests write unknown ids). */
  readonly type: GgmlTypeInfo | number;
  /** The tensor's bytes. Its length drives the layout; it is not checked against dims. */
  readonly data: Uint8Array;
  /**
   * Offset to record in the tensor info, relative to the data section,
   * instead of the one the layout gives. The data is still written where
   * the layout puts it. For writing broken files.
   */
  readonly offset?: number | bigint;
}

/**
 * What {@link writeGguf} writes.
 *
 * @example
 * ```ts
 * import type { GgufWriteParts } from "./write_gguf.ts";
 * const parts: GgufWriteParts = {
 *   version: 3,
 *   alignment: 64,
 *   metadata: [["general.architecture", { type: "string", value: "llama" }]],
 * };
 * ```
 */
export interface GgufWriteParts {
  /** Version field; default 3. Any u32 is written as given. */
  readonly version?: number;
  /**
   * Alignment of the data section and of each tensor. Default: the
   * `general.alignment` u32 in `metadata` when it is a power of two, else 32
   * (so a file can claim a bad alignment). At most 2^20. When given and
   * `metadata` has no `general.alignment`, the key is appended as a u32.
   */
  readonly alignment?: number;
  /** Key/value pairs in file order (a Map, or entries; entries may repeat a key). */
  readonly metadata?: Iterable<readonly [string, GgufValue]>;
  /** Tensors in file order. */
  readonly tensors?: readonly GgufWriteTensor[];
}

class Builder {
  #buf = new Uint8Array(1024);
  #view = new DataView(this.#buf.buffer);
  length = 0;

  #grow(n: number): number {
    const at = this.length;
    if (at + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, at + n));
      next.set(this.#buf.subarray(0, at));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    this.length += n;
    return at;
  }

  bytes(b: Uint8Array): void {
    const at = this.#grow(b.length);
    this.#buf.set(b, at);
  }

  zeros(n: number): void {
    const at = this.#grow(n);
    this.#buf.fill(0, at, this.length);
  }

  u8(v: number): void {
    const at = this.#grow(1);
    this.#view.setUint8(at, int(v, 0, 0xff));
  }
  i8(v: number): void {
    const at = this.#grow(1);
    this.#view.setInt8(at, int(v, -0x80, 0x7f));
  }
  u16(v: number): void {
    const at = this.#grow(2);
    this.#view.setUint16(at, int(v, 0, 0xffff), true);
  }
  i16(v: number): void {
    const at = this.#grow(2);
    this.#view.setInt16(at, int(v, -0x8000, 0x7fff), true);
  }
  u32(v: number): void {
    const at = this.#grow(4);
    this.#view.setUint32(at, int(v, 0, 0xffffffff), true);
  }
  i32(v: number): void {
    const at = this.#grow(4);
    this.#view.setInt32(at, int(v, -0x80000000, 0x7fffffff), true);
  }
  f32(v: number): void {
    const at = this.#grow(4);
    this.#view.setFloat32(at, v, true);
  }
  f64(v: number): void {
    const at = this.#grow(8);
    this.#view.setFloat64(at, v, true);
  }
  u64(v: number | bigint): void {
    const b = BigInt(v);
    if (b < 0n || b >= 1n << 64n) throw new RangeError(`writeGguf: ${v} is not a u64`);
    const at = this.#grow(8);
    this.#view.setBigUint64(at, b, true);
  }
  i64(v: bigint): void {
    if (v < -(1n << 63n) || v >= 1n << 63n) throw new RangeError(`writeGguf: ${v} is not an i64`);
    const at = this.#grow(8);
    this.#view.setBigInt64(at, v, true);
  }
  string(s: string): void {
    const b = ENCODER.encode(s);
    this.u64(b.length);
    this.bytes(b);
  }

  done(): Uint8Array {
    return this.#buf.slice(0, this.length);
  }
}

const ENCODER = new TextEncoder();
/** Largest alignment the writer lays data out with (it writes the padding). */
const MAX_LAYOUT_ALIGNMENT = 1 << 20;

function isPowerOfTwo(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0;
}

function int(v: number, lo: number, hi: number): number {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw new RangeError(`writeGguf: ${v} is not an integer in [${lo}, ${hi}]`);
  }
  return v;
}

function typeId(name: string): number {
  return VALUE_TYPE_IDS.get(name as never)!;
}

function writeValue(w: Builder, v: GgufValue): void {
  switch (v.type) {
    case "u8":
      return w.u8(v.value);
    case "i8":
      return w.i8(v.value);
    case "u16":
      return w.u16(v.value);
    case "i16":
      return w.i16(v.value);
    case "u32":
      return w.u32(v.value);
    case "i32":
      return w.i32(v.value);
    case "f32":
      return w.f32(v.value);
    case "f64":
      return w.f64(v.value);
    case "u64":
      return w.u64(v.value);
    case "i64":
      return w.i64(v.value);
    case "bool":
      return w.u8(v.value ? 1 : 0);
    case "string":
      return w.string(v.value);
    case "array": {
      w.u32(typeId(v.elementType));
      w.u64(v.value.length);
      if (v.elementType === "string") {
        for (const s of v.value) w.string(s);
      } else if (v.elementType === "bool") {
        for (const b of v.value) w.u8(b ? 1 : 0);
      } else if (LITTLE_ENDIAN) {
        const a = v.value;
        w.bytes(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      } else {
        for (const x of v.value) writeValue(w, { type: v.elementType, value: x } as GgufValue);
      }
      return;
    }
  }
}

/**
 * Encodes a GGUF file (little-endian). Tensor data is laid out in order,
 * each tensor at a multiple of the alignment and padded with zeros to the
 * next one, as ggml and gguf-py do. Throws a RangeError for a value that
 * does not fit its type or an alignment above 2^20.
 *
 * @example
 * ```ts
 * import { parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const bytes = writeGguf({
 *   metadata: [["general.architecture", { type: "string", value: "llama" }]],
 *   tensors: [{ name: "w", dims: [32], type: ggmlTypeByName("Q8_0")!, data: new Uint8Array(34) }],
 * });
 * const f = parseGguf(bytesSource("w.gguf", bytes));
 * console.log(f.tensors[0].offset % 32, bytes.length); // 0 192
 * ```
 */
export function writeGguf(parts: GgufWriteParts): Uint8Array {
  const metadata = [...(parts.metadata ?? [])];
  const tensors = parts.tensors ?? [];
  const given = metadata.find(([k]) => k === "general.alignment")?.[1];
  if (parts.alignment !== undefined && given === undefined) {
    metadata.push(["general.alignment", { type: "u32", value: parts.alignment }]);
  }
  const alignment = parts.alignment ??
    (given?.type === "u32" && isPowerOfTwo(given.value) ? given.value : 32);
  if (!Number.isInteger(alignment) || alignment < 1 || alignment > MAX_LAYOUT_ALIGNMENT) {
    throw new RangeError(
      `writeGguf: alignment ${alignment} is not an integer in [1, ${MAX_LAYOUT_ALIGNMENT}]`,
    );
  }
  const pad = (n: number) => (alignment - (n % alignment)) % alignment;

  const w = new Builder();
  w.bytes(new Uint8Array([0x47, 0x47, 0x55, 0x46]));
  w.u32(parts.version ?? 3);
  w.u64(tensors.length);
  w.u64(metadata.length);
  for (const [key, value] of metadata) {
    w.string(key);
    w.u32(value.type === "array" ? typeId("array") : typeId(value.type));
    writeValue(w, value);
  }
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(typeof t.type === "number" ? t.type : t.type.id);
    w.u64(t.offset ?? offset);
    offset += t.data.length + pad(t.data.length);
  }
  w.zeros(pad(w.length));
  for (const t of tensors) {
    w.bytes(t.data);
    w.zeros(pad(t.data.length));
  }
  return w.done();
}
