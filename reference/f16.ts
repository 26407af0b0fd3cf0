/**
 * IEEE 754 binary16 ("half", ggml's `ggml_fp16_t`) conversions done with integer bit
 * manipulation, independent of `Float16Array`.
 *
 * @module
 */

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);
const f64Scratch = new Float64Array(1);
const u32Of64Scratch = new Uint32Array(f64Scratch.buffer);

/**
 * Converts a number to the bit pattern of the nearest IEEE binary16 value, as a C `float`
 * argument would be: `x` is first rounded to f32 (`Math.fround`), then to f16 with
 * round-to-nearest, ties-to-even.
 *
 * - Magnitudes that round above 65504 become ±Infinity (`0x7c00` / `0xfc00`).
 * - Results below the normal range are encoded as subnormals (down to 2^-24), and smaller
 *   magnitudes round to ±0; the sign of zero is kept.
 * - NaN becomes the quiet NaN `0x7e00`, with the sign bit set when the engine exposes a
 *   negative NaN (this matches ggml's `ggml_compute_fp32_to_fp16`).
 *
 * @example Encode a few values
 * ```ts
 * import { f32ToF16Bits } from "./f16.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(f32ToF16Bits(1), 0x3c00);
 * assert.equal(f32ToF16Bits(-2), 0xc000);
 * assert.equal(f32ToF16Bits(65520), 0x7c00); // rounds up to +Infinity
 * assert.equal(f32ToF16Bits(NaN), 0x7e00);
 * ```
 *
 * @param x The value to convert.
 * @returns The 16-bit pattern, an integer in `[0, 65535]`.
 * @throws {TypeError} If `x` is not a number.
 */
export function f32ToF16Bits(x: number): number {
  if (typeof x !== "number") {
    throw new TypeError(`f32ToF16Bits: x must be a number, got ${typeof x}`);
  }
  f32Scratch[0] = x;
  const bits = u32Scratch[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;

  if (exp === 0xff) {
    if (mant === 0) return sign | 0x7c00;
    // V8 may canonicalise NaN when storing to a Float32Array; read the sign from the f64.
    f64Scratch[0] = x;
    return ((u32Of64Scratch[1] >>> 16) & 0x8000) | 0x7e00;
  }
  if (exp >= 113) {
    // Normal f16 range or above (f32 exponent >= -14). Round the 23-bit mantissa to 10 bits;
    // a carry out of the mantissa correctly bumps the exponent, up to 0x7c00 (Infinity).
    if (exp > 142) return sign | 0x7c00; // >= 2^16: Infinity after rounding.
    let half = ((exp - 112) << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (half & 1) !== 0)) half++;
    return sign | half;
  }
  // Subnormal f16 (or zero): value = m * 2^-24 with m = M * 2^(exp - 126), M = 1.mant.
  // exp 102 is 2^-25 (half the smallest subnormal); anything below rounds to zero.
  if (exp < 102) return sign;
  const full = mant | 0x800000;
  const shift = 126 - exp; // 14..24
  let half = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && (half & 1) !== 0)) half++;
  return sign | half;
}

let decodeTable: Float32Array | undefined;

function buildDecodeTable(): Float32Array {
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) table[h] = decodeBits(h);
  return table;
}

function decodeBits(h: number): number {
  const sign = (h & 0x8000) !== 0 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

/**
 * Decodes an IEEE binary16 bit pattern to its exact value (every f16 value is exactly
 * representable as f32). NaN patterns decode to NaN (payload and sign are not preserved).
 *
 * @example Decode a few patterns
 * ```ts
 * import { f16BitsToF32 } from "./f16.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(f16BitsToF32(0x3c00), 1);
 * assert.equal(f16BitsToF32(0x0001), 2 ** -24); // smallest subnormal
 * assert.equal(f16BitsToF32(0xfc00), -Infinity);
 * assert.ok(Object.is(f16BitsToF32(0x8000), -0));
 * ```
 *
 * @param h The 16-bit pattern, an integer in `[0, 65535]`.
 * @returns The decoded value.
 * @throws {RangeError} If `h` is not an integer in `[0, 65535]`.
 */
export function f16BitsToF32(h: number): number {
  if (!Number.isInteger(h) || h < 0 || h > 0xffff) {
    throw new RangeError(`f16BitsToF32: h ${h} is not an integer in [0, 65535]`);
  }
  decodeTable ??= buildDecodeTable();
  return decodeTable[h];
}

/**
 * Internal fast path: decodes without argument checks. `h` must be in `[0, 65535]`.
 * @internal
 */
export function f16Decode(h: number): number {
  decodeTable ??= buildDecodeTable();
  return decodeTable[h];
}
