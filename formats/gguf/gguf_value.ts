/**
 * Metadata values of a GGUF file, represented faithfully: each value keeps
 * its GGUF type, so a u32 and an i32 with the same number stay apart and a
 * file written back out is the same file.
 *
 * | GGUF id | GGUF name | `type`     | `value`                            |
 * | ------- | --------- | ---------- | ---------------------------------- |
 * | 0       | UINT8     | `"u8"`     | number                             |
 * | 1       | INT8      | `"i8"`     | number                             |
 * | 2       | UINT16    | `"u16"`    | number                             |
 * | 3       | INT16     | `"i16"`    | number                             |
 * | 4       | UINT32    | `"u32"`    | number                             |
 * | 5       | INT32     | `"i32"`    | number                             |
 * | 6       | FLOAT32   | `"f32"`    | number (exactly the stored float)  |
 * | 7       | BOOL      | `"bool"`   | boolean (the byte must be 0 or 1)  |
 * | 8       | STRING    | `"string"` | string (strict UTF-8, BOM kept)    |
 * | 9       | ARRAY     | `"array"`  | see {@link GgufArray}              |
 * | 10      | UINT64    | `"u64"`    | bigint (always, even when small)   |
 * | 11      | INT64     | `"i64"`    | bigint (always, even when small)   |
 * | 12      | FLOAT64   | `"f64"`    | number                             |
 *
 * @module
 */

/**
 * Name of a GGUF metadata value type (see the table in the module docs).
 *
 * @example
 * ```ts
 * import type { GgufValueType } from "./gguf_value.ts";
 * const t: GgufValueType = "u32";
 * ```
 */
export type GgufValueType =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "f32"
  | "bool"
  | "string"
  | "array"
  | "u64"
  | "i64"
  | "f64";

/**
 * How the elements of each array element type are held: numbers in the
 * matching typed array (64-bit integers in bigint arrays), bools and
 * strings in plain arrays. Arrays of arrays are rejected by the reader.
 *
 * @example
 * ```ts
 * import type { GgufArrayTypes } from "./gguf_value.ts";
 * const scores: GgufArrayTypes["f32"] = new Float32Array([0, -1.5]);
 * ```
 */
export interface GgufArrayTypes {
  /** UINT8 elements. */
  u8: Uint8Array;
  /** INT8 elements. */
  i8: Int8Array;
  /** UINT16 elements. */
  u16: Uint16Array;
  /** INT16 elements. */
  i16: Int16Array;
  /** UINT32 elements. */
  u32: Uint32Array;
  /** INT32 elements. */
  i32: Int32Array;
  /** FLOAT32 elements. */
  f32: Float32Array;
  /** BOOL elements. */
  bool: boolean[];
  /** STRING elements. */
  string: string[];
  /** UINT64 elements. */
  u64: BigUint64Array;
  /** INT64 elements. */
  i64: BigInt64Array;
  /** FLOAT64 elements. */
  f64: Float64Array;
}

/**
 * Type of the elements of a GGUF array (every value type but `"array"`).
 *
 * @example
 * ```ts
 * import type { GgufElementType } from "./gguf_value.ts";
 * const t: GgufElementType = "string";
 * ```
 */
export type GgufElementType = keyof GgufArrayTypes;

/**
 * A GGUF array value: its element type and the elements.
 *
 * @example
 * ```ts
 * import type { GgufArray } from "./gguf_value.ts";
 * const tokens: GgufArray = { type: "array", elementType: "string", value: ["<s>", "a"] };
 * ```
 */
export type GgufArray = {
  [K in GgufElementType]: {
    readonly type: "array";
    readonly elementType: K;
    readonly value: GgufArrayTypes[K];
  };
}[GgufElementType];

/**
 * One metadata value with its GGUF type.
 *
 * @example
 * ```ts
 * import type { GgufValue } from "./gguf_value.ts";
 * const values: GgufValue[] = [
 *   { type: "u32", value: 30 },
 *   { type: "u64", value: 1n },
 *   { type: "string", value: "llama" },
 *   { type: "array", elementType: "f32", value: new Float32Array([0.5]) },
 * ];
 * ```
 */
export type GgufValue =
  | {
    readonly type: "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "f64";
    readonly value: number;
  }
  | { readonly type: "u64" | "i64"; readonly value: bigint }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | GgufArray;

/**
 * A short description of a value's type for messages: `u32`, `string`,
 * `array<f32>`.
 *
 * @example
 * ```ts
 * import { describeGgufType } from "./gguf_value.ts";
 * console.log(describeGgufType({ type: "array", elementType: "string", value: [] })); // "array<string>"
 * ```
 */
export function describeGgufType(v: GgufValue): string {
  return v.type === "array" ? `array<${v.elementType}>` : v.type;
}
