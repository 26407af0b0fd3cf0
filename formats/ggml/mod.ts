/**
 * ggml tensor types and their conversion to and from f32, bit-exact with ggml's C code.
 *
 * - Type table: {@link ggmlType}, {@link ggmlTypeByName}, {@link ggmlBytes},
 *   {@link GgmlTypeInfo}.
 * - Dequantization of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
 *   Q6_K and Q8_K: {@link dequantizeRow}, {@link dequantizeSupported}.
 * - Encoding f32 to F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K (the K-quants as
 *   llama.cpp's quantizer writes them without an importance matrix): {@link quantizeRow},
 *   {@link quantizeSupported}.
 *
 * Bad arguments throw `TypeError` (wrong kind of value) or `RangeError` (unsupported type, bad
 * length or count), with a message naming the function and the argument.
 *
 * @example Dequantize a tensor described by a GGUF tensor info
 * ```ts
 * import { dequantizeRow, ggmlBytes, ggmlType } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const type = ggmlType(12)!; // Q4_K, as stored in a GGUF tensor info
 * const nElements = 512;
 * const bytes = new Uint8Array(ggmlBytes(type, nElements)!); // all-zero blocks: d = 0
 * const values = dequantizeRow(type, bytes, nElements);
 * assert.equal(values.length, 512);
 * assert.ok(values.every((v) => v === 0));
 * ```
 *
 * @module
 */

export { ggmlBytes, ggmlType, ggmlTypeByName, type GgmlTypeInfo } from "./types.ts";
export { dequantizeRow, dequantizeSupported } from "./dequantize_row.ts";
export { quantizeRow, quantizeSupported } from "./quantize_row.ts";
