/**
 * Typed access to GGUF metadata. Each getter returns the value of a key
 * when it has the expected type. A missing key returns the `fallback` when
 * one is given and otherwise throws; a key of another type always throws.
 * Errors are {@link FormatError}s naming the file, the key (as
 * `kv["llama.block_count"]`) and the offset of the key's value type field
 * (for a missing key: byte 24, where the metadata starts).
 *
 * @module
 */

import { FormatError } from "../errors.ts";
import { HEADER_BYTES, kvField } from "./_private.ts";
import {
  describeGgufType,
  type GgufArrayTypes,
  type GgufElementType,
  type GgufValue,
} from "./gguf_value.ts";
import type { GgufFile } from "./parse_gguf.ts";

function missing(file: GgufFile, key: string): FormatError {
  return new FormatError(file.name, kvField(key), HEADER_BYTES, "required key is missing");
}

function mistyped(file: GgufFile, key: string, v: GgufValue, expected: string): FormatError {
  return new FormatError(
    file.name,
    kvField(key),
    file.metadataOffsets.get(key) ?? HEADER_BYTES,
    `expected ${expected}, found ${describeGgufType(v)}`,
  );
}

/**
 * The value of a key, whatever its type; throws when the key is missing.
 *
 * @example
 * ```ts
 * import { getValue, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({ metadata: [["n", { type: "u16", value: 7 }]] })));
 * console.log(getValue(f, "n")); // { type: "u16", value: 7 }
 * ```
 */
export function getValue(file: GgufFile, key: string): GgufValue {
  const v = file.metadata.get(key);
  if (v === undefined) throw missing(file, key);
  return v;
}

function scalar<T>(
  file: GgufFile,
  key: string,
  expected: string,
  fallback: T | undefined,
  pick: (v: GgufValue) => T | undefined,
): T {
  const v = file.metadata.get(key);
  if (v === undefined) {
    if (fallback !== undefined) return fallback;
    throw missing(file, key);
  }
  const out = pick(v);
  if (out === undefined) throw mistyped(file, key, v, expected);
  return out;
}

/**
 * A `string` value.
 *
 * @example
 * ```ts
 * import { getString, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["general.architecture", { type: "string", value: "llama" }]],
 * })));
 * console.log(getString(f, "general.architecture")); // "llama"
 * console.log(getString(f, "general.name", "unnamed")); // "unnamed"
 * ```
 */
export function getString(file: GgufFile, key: string, fallback?: string): string {
  return scalar(file, key, "string", fallback, (v) => v.type === "string" ? v.value : undefined);
}

/**
 * A `u32` value.
 *
 * @example
 * ```ts
 * import { getU32, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["llama.block_count", { type: "u32", value: 30 }]],
 * })));
 * console.log(getU32(f, "llama.block_count")); // 30
 * ```
 */
export function getU32(file: GgufFile, key: string, fallback?: number): number {
  return scalar(file, key, "u32", fallback, (v) => v.type === "u32" ? v.value : undefined);
}

/**
 * An `i32` value.
 *
 * @example
 * ```ts
 * import { getI32, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({ metadata: [["x", { type: "i32", value: -1 }]] })));
 * console.log(getI32(f, "x")); // -1
 * ```
 */
export function getI32(file: GgufFile, key: string, fallback?: number): number {
  return scalar(file, key, "i32", fallback, (v) => v.type === "i32" ? v.value : undefined);
}

/**
 * A `u64` value, as a bigint.
 *
 * @example
 * ```ts
 * import { getU64, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({ metadata: [["x", { type: "u64", value: 1n << 40n }]] })));
 * console.log(getU64(f, "x")); // 1099511627776n
 * ```
 */
export function getU64(file: GgufFile, key: string, fallback?: bigint): bigint {
  return scalar(file, key, "u64", fallback, (v) => v.type === "u64" ? v.value : undefined);
}

/**
 * An `f32` value.
 *
 * @example
 * ```ts
 * import { getF32, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: 1e-5 }]],
 * })));
 * console.log(getF32(f, "llama.attention.layer_norm_rms_epsilon") === Math.fround(1e-5)); // true
 * ```
 */
export function getF32(file: GgufFile, key: string, fallback?: number): number {
  return scalar(file, key, "f32", fallback, (v) => v.type === "f32" ? v.value : undefined);
}

/**
 * A `bool` value.
 *
 * @example
 * ```ts
 * import { getBool, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["tokenizer.ggml.add_bos_token", { type: "bool", value: true }]],
 * })));
 * console.log(getBool(f, "tokenizer.ggml.add_bos_token")); // true
 * console.log(getBool(f, "tokenizer.ggml.add_eos_token", false)); // false
 * ```
 */
export function getBool(file: GgufFile, key: string, fallback?: boolean): boolean {
  return scalar(file, key, "bool", fallback, (v) => v.type === "bool" ? v.value : undefined);
}

/**
 * A value of any integer type (u8 … i64) as a number; throws when it is a
 * 64-bit value outside the safe-integer range. Converters disagree on u32
 * versus u64 (or i32) for sizes and token ids: this reads them all.
 *
 * @example
 * ```ts
 * import { getInt, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["a", { type: "u64", value: 2048n }], ["b", { type: "i32", value: -3 }]],
 * })));
 * console.log(getInt(f, "a"), getInt(f, "b")); // 2048 -3
 * ```
 */
export function getInt(file: GgufFile, key: string, fallback?: number): number {
  const v = file.metadata.get(key);
  if (v !== undefined && (v.type === "u64" || v.type === "i64")) {
    const n = Number(v.value);
    if (!Number.isSafeInteger(n)) {
      throw new FormatError(
        file.name,
        kvField(key),
        file.metadataOffsets.get(key) ?? HEADER_BYTES,
        `${v.type} value ${v.value} is outside the safe integer range`,
      );
    }
    return n;
  }
  return scalar(file, key, "an integer", fallback, (v) => {
    switch (v.type) {
      case "u8":
      case "i8":
      case "u16":
      case "i16":
      case "u32":
      case "i32":
        return v.value;
      default:
        return undefined;
    }
  });
}

/**
 * An `f32` or `f64` value as a number.
 *
 * @example
 * ```ts
 * import { getFloat, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({ metadata: [["x", { type: "f64", value: 0.1 }]] })));
 * console.log(getFloat(f, "x")); // 0.1
 * ```
 */
export function getFloat(file: GgufFile, key: string, fallback?: number): number {
  return scalar(
    file,
    key,
    "f32 or f64",
    fallback,
    (v) => v.type === "f32" || v.type === "f64" ? v.value : undefined,
  );
}

/**
 * The elements of an array value whose elements have type `elementType`:
 * a typed array for numbers (`Float32Array` for `"f32"`, `BigUint64Array`
 * for `"u64"` …), `string[]` or `boolean[]`.
 *
 * @example
 * ```ts
 * import { getArray, parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [
 *     ["tokenizer.ggml.tokens", { type: "array", elementType: "string", value: ["<s>", "hi"] }],
 *     ["tokenizer.ggml.scores", { type: "array", elementType: "f32", value: new Float32Array([0, -1]) }],
 *   ],
 * })));
 * const tokens: string[] = getArray(f, "tokenizer.ggml.tokens", "string");
 * const scores: Float32Array = getArray(f, "tokenizer.ggml.scores", "f32");
 * console.log(tokens[1], scores[1]); // "hi" -1
 * ```
 */
export function getArray<K extends GgufElementType>(
  file: GgufFile,
  key: string,
  elementType: K,
  fallback?: GgufArrayTypes[K],
): GgufArrayTypes[K] {
  return scalar(
    file,
    key,
    `array<${elementType}>`,
    fallback,
    (v) =>
      v.type === "array" && v.elementType === elementType
        ? v.value as GgufArrayTypes[K]
        : undefined,
  );
}
