/**
 * A small safetensors writer, for tests and fixtures.
 *
 * @module
 */

import { encodeFromF32 } from "./_convert.ts";
import { type SafetensorsDtype, safetensorsDtype } from "./dtype.ts";

/**
 * One tensor to write: raw little-endian bytes, or f32 values to encode as
 * F32, F16 or BF16 (round to nearest, ties to even).
 *
 * @example
 * ```ts
 * import type { SafetensorsInput } from "./write_safetensors.ts";
 * const t: SafetensorsInput = { name: "w", dtype: "F16", shape: [2], data: new Float32Array([1, 2]) };
 * ```
 */
export interface SafetensorsInput {
  /** Tensor name (not `__metadata__`). */
  readonly name: string;
  /** Element type. */
  readonly dtype: SafetensorsDtype;
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Raw bytes (any dtype) or f32 values (F32, F16, BF16 only). */
  readonly data: Uint8Array | Float32Array;
}

/**
 * Serializes tensors into a safetensors file: the data in the given order,
 * back to back, and the header padded with spaces to a multiple of 8 bytes
 * (as the reference implementation does).
 *
 * @example
 * ```ts
 * import { writeSafetensors } from "./write_safetensors.ts";
 * const bytes = writeSafetensors([
 *   { name: "a", dtype: "F32", shape: [2], data: new Float32Array([1, 2]) },
 *   { name: "b", dtype: "U8", shape: [3], data: new Uint8Array([7, 8, 9]) },
 * ], { format: "pt" });
 * console.log(bytes.length % 8 === 3); // true: 8 + padded header + 8 + 3
 * ```
 *
 * @throws {TypeError} For an unknown dtype, a duplicate or reserved name, or
 *   f32 values for a dtype that is not F32, F16 or BF16.
 * @throws {RangeError} When a shape is invalid or does not match the data.
 */
export function writeSafetensors(
  tensors: readonly SafetensorsInput[],
  metadata?: Readonly<Record<string, string>>,
): Uint8Array<ArrayBuffer> {
  // Entries as [key, value] pairs, so that a tensor named "__proto__" stays a key.
  const header: [string, unknown][] = [];
  if (metadata !== undefined) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== "string") {
        throw new TypeError(`writeSafetensors: metadata ${k} is not a string`);
      }
    }
    header.push(["__metadata__", metadata]);
  }
  const blobs: Uint8Array[] = [];
  const seen = new Set<string>();
  let cursor = 0;
  for (const t of tensors) {
    const info = safetensorsDtype(t.dtype);
    if (info === undefined) throw new TypeError(`writeSafetensors: unknown dtype ${t.dtype}`);
    if (t.name === "__metadata__" || seen.has(t.name)) {
      throw new TypeError(
        `writeSafetensors: name ${JSON.stringify(t.name)} is reserved or repeated`,
      );
    }
    seen.add(t.name);
    let elements = 1;
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) {
        throw new RangeError(`writeSafetensors: ${t.name}: bad dim ${d}`);
      }
      elements *= d;
    }
    let blob: Uint8Array;
    if (t.data instanceof Float32Array) {
      if (!info.convertible) {
        throw new TypeError(
          `writeSafetensors: ${t.name}: f32 values cannot be encoded as ${t.dtype}`,
        );
      }
      blob = encodeFromF32(info.name as "F32" | "F16" | "BF16", t.data);
    } else {
      blob = t.data;
    }
    if (blob.length !== elements * info.bytes) {
      throw new RangeError(
        `writeSafetensors: ${t.name}: ${blob.length} bytes for ${t.dtype} [${t.shape.join(", ")}]`,
      );
    }
    header.push([t.name, {
      dtype: t.dtype,
      shape: [...t.shape],
      data_offsets: [cursor, cursor + blob.length],
    }]);
    cursor += blob.length;
    blobs.push(blob);
  }
  const text = `{${header.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",")}}`;
  let json = new TextEncoder().encode(text);
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.length + cursor);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const b of blobs) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}
