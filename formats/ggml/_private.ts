// Internals of formats/ggml: argument checks, type resolution and f16/f32 bit helpers.
// Not part of the public API.

import { f16BitsToF32 } from "../../reference/f16.ts";
import { ggmlType, type GgmlTypeInfo } from "./types.ts";

/** True on little-endian hosts (every platform Deno ships for), where typed arrays are LE. */
export const HOST_LITTLE_ENDIAN: boolean = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Short description of a value for error messages. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return value.constructor?.name ?? "object";
  return `${typeof value} ${String(value)}`;
}

/**
 * Returns ggml's table entry for `type`, checking that `type` is a type-info object whose
 * id, name, block size and type size all match that entry.
 *
 * @throws {TypeError} If `type` is not an object with a numeric `id`.
 * @throws {RangeError} If the id is unknown or the other fields disagree with the table.
 */
export function resolveType(fn: string, type: unknown): GgmlTypeInfo {
  if (typeof type !== "object" || type === null || typeof (type as GgmlTypeInfo).id !== "number") {
    throw new TypeError(`${fn}: type must be a GgmlTypeInfo, got ${describe(type)}`);
  }
  const t = type as GgmlTypeInfo;
  const known = ggmlType(t.id);
  if (known === undefined) {
    throw new RangeError(`${fn}: unknown ggml type id ${t.id}`);
  }
  if (
    t.name !== known.name || t.blockSize !== known.blockSize || t.typeSize !== known.typeSize
  ) {
    throw new RangeError(
      `${fn}: type {id ${t.id}, name ${t.name}, blockSize ${t.blockSize}, typeSize ${t.typeSize}}` +
        ` does not match ggml's ${known.name} {blockSize ${known.blockSize}, typeSize ${known.typeSize}}`,
    );
  }
  return known;
}

/** Throws a TypeError unless `value` is a Uint8Array. */
export function assertU8(fn: string, name: string, value: unknown): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array)) {
    throw new TypeError(`${fn}: ${name} must be a Uint8Array, got ${describe(value)}`);
  }
}

/** Throws a TypeError unless `value` is a Float32Array. */
export function assertF32(fn: string, name: string, value: unknown): asserts value is Float32Array {
  if (!(value instanceof Float32Array)) {
    throw new TypeError(`${fn}: ${name} must be a Float32Array, got ${describe(value)}`);
  }
}

/**
 * Checks that `n` is a safe integer >= 0 and a whole number of blocks of `type`, and returns
 * the number of blocks.
 *
 * @throws {TypeError} If `n` is not a number.
 * @throws {RangeError} Otherwise on a bad value.
 */
export function checkElementCount(
  fn: string,
  name: string,
  n: unknown,
  type: GgmlTypeInfo,
): number {
  if (typeof n !== "number") {
    throw new TypeError(`${fn}: ${name} must be a number, got ${describe(n)}`);
  }
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new RangeError(`${fn}: ${name} ${n} is not an integer >= 0`);
  }
  if (n % type.blockSize !== 0) {
    throw new RangeError(
      `${fn}: ${name} ${n} is not a multiple of ${type.name}'s block size ${type.blockSize}`,
    );
  }
  return n / type.blockSize;
}

/** Throws a RangeError unless `array.length >= needed`. */
export function assertMinLength(
  fn: string,
  name: string,
  array: ArrayLike<unknown>,
  needed: number,
): void {
  if (array.length < needed) {
    throw new RangeError(`${fn}: ${name} length ${array.length} is less than required ${needed}`);
  }
}

/** The f16 at byte `o` of `bytes` (little-endian), decoded to its exact value. */
export function f16At(bytes: Uint8Array, o: number): number {
  return f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** The f32 at byte `o` of `bytes` (little-endian). NaN payloads are not preserved. */
export function f32At(bytes: Uint8Array, o: number): number {
  u32Scratch[0] = bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24);
  return f32Scratch[0];
}

let f16Table: Uint32Array | undefined;

/**
 * For each f16 bit pattern, the f32 bit pattern ggml's `ggml_compute_fp16_to_fp32` returns:
 * the exact value for every non-NaN; for NaN, the sign and the 10-bit payload shifted into
 * place with the quiet bit (f32 bit 22) set, because ggml's conversion multiplies by 2^-112 in
 * f32, and that quiets a signalling NaN.
 */
export function f16ToF32BitsTable(): Uint32Array {
  if (f16Table !== undefined) return f16Table;
  const table = new Uint32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const mant = h & 0x3ff;
    if ((h & 0x7c00) === 0x7c00 && mant !== 0) {
      table[h] = ((h & 0x8000) << 16) | 0x7fc00000 | (mant << 13);
    } else {
      f32Scratch[0] = f16BitsToF32(h);
      table[h] = u32Scratch[0];
    }
  }
  f16Table = table;
  return table;
}
