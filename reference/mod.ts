/**
 * Pure-TypeScript reference implementation of cflow's first kernels. It is the oracle the
 * native (Zig, SIMD) kernels are tested against, and the path used where the native library
 * is absent.
 *
 * - f16 conversion: {@link f32ToF16Bits}, {@link f16BitsToF32}.
 * - ggml Q8_0 / Q4_0 blocks, bit-exact with ggml and gguf-py: {@link quantizeQ8_0},
 *   {@link quantizeQ4_0}, {@link dequantizeQ8_0}, {@link dequantizeQ4_0}; activations as
 *   ggml's x86 code quantizes them (ties to even): {@link quantizeActivationsQ8_0}.
 * - Quantized dots: exact integer block sums ({@link blockDotsQ8_0Q8_0},
 *   {@link blockDotsQ4_0Q8_0}) and the f32 scalar accumulation order
 *   ({@link dotQ8_0Q8_0}, {@link dotQ4_0Q8_0}, {@link matvecQ8_0}, {@link matvecQ4_0}).
 * - f32 operators: {@link rmsNorm}, {@link softmax}, {@link ropeInvFreq}, {@link rope},
 *   {@link siluMul}, {@link geluMul}.
 *
 * Bad arguments throw `TypeError` (wrong kind of value) or `RangeError` (bad length, size or
 * value), with a message naming the function, the argument and its value.
 *
 * @example Quantize, then a Q8_0 matrix-vector product
 * ```ts
 * import { matvecQ8_0, quantizeQ8_0 } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const rows = 2, cols = 64;
 * const w = new Float32Array(rows * cols).map((_, i) => Math.sin(i));
 * const x = new Float32Array(cols).map((_, i) => Math.cos(i));
 * const y = matvecQ8_0(quantizeQ8_0(w), rows, cols, quantizeQ8_0(x));
 * assert.equal(y.length, rows);
 * ```
 *
 * @module
 */

export { f16BitsToF32, f32ToF16Bits } from "./f16.ts";
export {
  dequantizeQ4_0,
  dequantizeQ8_0,
  Q4_0_BLOCK_BYTES,
  Q8_0_BLOCK_BYTES,
  QK,
  quantizeActivationsQ8_0,
  quantizeQ4_0,
  quantizeQ4_0Into,
  quantizeQ8_0,
  quantizeQ8_0Into,
} from "./quant.ts";
export {
  blockDotsQ4_0Q8_0,
  blockDotsQ8_0Q8_0,
  dotQ4_0Q8_0,
  dotQ8_0Q8_0,
  matvecQ4_0,
  matvecQ8_0,
} from "./dot.ts";
export {
  geluMul,
  rmsNorm,
  rope,
  ROPE_MAX_POS,
  ropeInvFreq,
  type RopeMode,
  siluMul,
  softmax,
} from "./ops.ts";
