/**
 * ggml block quantization formats Q8_0 and Q4_0: bit-exact quantize (matching ggml's
 * `quantize_row_q8_0_ref` / `quantize_row_q4_0_ref` and gguf-py's `gguf.quants`) and
 * dequantize.
 *
 * Layouts (little-endian, blocks of {@link QK} = 32 elements):
 * - Q8_0, {@link Q8_0_BLOCK_BYTES} = 34 bytes: f16 scale `d`, then 32 × int8 `qs`;
 *   value `j` is `qs[j] * d`.
 * - Q4_0, {@link Q4_0_BLOCK_BYTES} = 18 bytes: f16 scale `d`, then 16 bytes `qs`; element
 *   `j` (0..15) is the low nibble of `qs[j]`, element `j + 16` the high nibble; value is
 *   `(nibble - 8) * d`.
 *
 * @module
 */

import { f16Decode, f32ToF16Bits } from "./f16.ts";
import { assertF32, assertInt, assertMinLength, assertU8 } from "./_validate.ts";

/**
 * Number of elements in one Q8_0 or Q4_0 block (ggml's `QK8_0` / `QK4_0`).
 *
 * @example
 * ```ts
 * import { QK } from "./quant.ts";
 * const nBlocks = 4096 / QK; // 128
 * ```
 */
export const QK = 32;

/**
 * Size in bytes of one Q8_0 block: 2-byte f16 scale + 32 int8 quants.
 *
 * @example
 * ```ts
 * import { Q8_0_BLOCK_BYTES, QK } from "./quant.ts";
 * const rowBytes = (4096 / QK) * Q8_0_BLOCK_BYTES; // 4352
 * ```
 */
export const Q8_0_BLOCK_BYTES = 34;

/**
 * Size in bytes of one Q4_0 block: 2-byte f16 scale + 16 bytes of packed nibbles.
 *
 * @example
 * ```ts
 * import { Q4_0_BLOCK_BYTES, QK } from "./quant.ts";
 * const rowBytes = (4096 / QK) * Q4_0_BLOCK_BYTES; // 2304
 * ```
 */
export const Q4_0_BLOCK_BYTES = 18;

const fr = Math.fround;

function checkQuantInput(fn: string, x: Float32Array): number {
  assertF32(fn, "x", x);
  if (x.length % QK !== 0) {
    throw new RangeError(`${fn}: length ${x.length} is not a multiple of ${QK}`);
  }
  return x.length / QK;
}

function checkFinite(fn: string, x: Float32Array, block: number): void {
  const base = block * QK;
  for (let j = 0; j < QK; j++) {
    const v = x[base + j];
    if (!Number.isFinite(v)) {
      throw new RangeError(
        `${fn}: block ${block} contains a non-finite value ${v} at index ${base + j}`,
      );
    }
  }
}

/** C's `roundf`: round half away from zero. `v` is an f32 value, so `|v| + 0.5` is exact. */
function roundHalfAwayFromZero(v: number): number {
  return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
}

/**
 * Quantizes `x` to Q8_0 into `out` (which must hold at least
 * `x.length / 32 * 34` bytes; only that prefix is written).
 *
 * Per block of 32, all arithmetic in f32 (ggml `quantize_row_q8_0_ref`):
 * `amax = max |x_j|`, `d = amax / 127`, `id = d !== 0 ? 1 / d : 0`,
 * `q_j = roundHalfAwayFromZero(x_j * id)`, stored as `f16(d)` then the int8 `q_j`.
 * `id` comes from the f32 `d`, not from the f16-rounded one.
 *
 * Degenerate edge: when `amax < ~3.7e-37`, `1 / d` overflows to Infinity and `x_j * id` is
 * ±Infinity or NaN; such `q_j` are stored as 0 (what gguf-py and ggml's scalar C code give on
 * x86; the stored `d` is then f16 zero anyway, so every value dequantizes to 0).
 *
 * @example
 * ```ts
 * import { quantizeQ8_0Into } from "./quant.ts";
 * const x = new Float32Array(64).fill(1);
 * const out = new Uint8Array(68);
 * quantizeQ8_0Into(x, out);
 * ```
 *
 * @param x Input values; length must be a multiple of 32.
 * @param out Destination bytes.
 * @returns `out`.
 * @throws {RangeError} If the length is not a multiple of 32, `out` is too short, or a block
 * contains NaN or ±Infinity (blocks before that one have already been written to `out`).
 */
export function quantizeQ8_0Into(x: Float32Array, out: Uint8Array): Uint8Array {
  const fn = "quantizeQ8_0Into";
  const nBlocks = checkQuantInput(fn, x);
  assertU8(fn, "out", out);
  assertMinLength(fn, "out", out, nBlocks * Q8_0_BLOCK_BYTES);
  encodeQ8_0(fn, x, out, nBlocks);
  return out;
}

/**
 * Quantizes `x` to a new Q8_0 byte array (`x.length / 32 * 34` bytes), bit-exact with ggml's
 * `quantize_row_q8_0_ref` and gguf-py. See {@link quantizeQ8_0Into} for the exact rule.
 *
 * @example
 * ```ts
 * import { quantizeQ8_0 } from "./quant.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new Float32Array(32);
 * x[0] = 127;
 * x[1] = -63.5;
 * const q = quantizeQ8_0(x);
 * assert.equal(q.length, 34);
 * assert.deepEqual([...q.subarray(0, 4)], [0x00, 0x3c, 127, 0xc0]); // d = 1.0, q = 127, -64
 * ```
 *
 * @param x Input values; length must be a multiple of 32.
 * @returns The Q8_0 blocks.
 * @throws {RangeError} If the length is not a multiple of 32 or a block contains NaN or
 * ±Infinity (the message names the block).
 */
export function quantizeQ8_0(x: Float32Array): Uint8Array {
  const fn = "quantizeQ8_0";
  const nBlocks = checkQuantInput(fn, x);
  const out = new Uint8Array(nBlocks * Q8_0_BLOCK_BYTES);
  encodeQ8_0(fn, x, out, nBlocks);
  return out;
}

function roundHalfToEven(v: number): number {
  const f = Math.floor(v);
  const diff = v - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Quantizes activations to Q8_0 as ggml's x86 `quantize_row_q8_0` does (what llama.cpp runs on
 * an x86 CPU before every quantized matrix product, and what the kernels' plans do): per block
 * of 32, in f32, `d = amax / 127` (stored as f16), `q_j = roundHalfToEven(x_j * (127 / amax))`,
 * clamped to [-127, 127]; a non-finite product (`127 / amax` overflowing) gives 0. It differs
 * from {@link quantizeQ8_0} (ggml's scalar `_ref`: `1 / d`, ties away from zero) only where
 * `x_j * id` lies within an ulp of a half: `x = 2.5` in a block whose `amax` is 127 becomes 2,
 * not 3.
 *
 * @example
 * ```ts
 * import { quantizeActivationsQ8_0 } from "./quant.ts";
 * const x = new Float32Array(32);
 * x[0] = 127;
 * x[1] = 2.5;
 * console.log(quantizeActivationsQ8_0(x)[3]); // 2
 * ```
 *
 * @param x Input values; length must be a multiple of 32.
 * @returns The Q8_0 blocks.
 * @throws {RangeError} If the length is not a multiple of 32 or a block is not finite.
 */
export function quantizeActivationsQ8_0(x: Float32Array): Uint8Array {
  const fn = "quantizeActivationsQ8_0";
  const nBlocks = checkQuantInput(fn, x);
  const out = new Uint8Array(nBlocks * Q8_0_BLOCK_BYTES);
  encodeQ8_0(fn, x, out, nBlocks, "x86");
  return out;
}

function encodeQ8_0(
  fn: string,
  x: Float32Array,
  out: Uint8Array,
  nBlocks: number,
  rule: "ref" | "x86" = "ref",
): void {
  for (let b = 0; b < nBlocks; b++) {
    checkFinite(fn, x, b);
    const base = b * QK;
    let amax = 0;
    for (let j = 0; j < QK; j++) {
      const a = Math.abs(x[base + j]);
      if (a > amax) amax = a;
    }
    const d = fr(amax / 127);
    const id = rule === "x86" ? (amax !== 0 ? fr(127 / amax) : 0) : d !== 0 ? fr(1 / d) : 0;
    const h = f32ToF16Bits(d);
    const o = b * Q8_0_BLOCK_BYTES;
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < QK; j++) {
      const v = fr(x[base + j] * id);
      const round = rule === "x86" ? roundHalfToEven : roundHalfAwayFromZero;
      let q = Number.isFinite(v) ? round(v) : 0;
      if (q > 127) q = 127;
      else if (q < -127) q = -127;
      out[o + 2 + j] = q & 0xff;
    }
  }
}

/**
 * Quantizes `x` to Q4_0 into `out` (which must hold at least `x.length / 32 * 18` bytes;
 * only that prefix is written).
 *
 * Per block of 32, all arithmetic in f32 (ggml `quantize_row_q4_0_ref`):
 * `max` is the first element whose `|x|` is strictly larger than every earlier one, starting
 * from `+0` (so it keeps its sign, and the first wins ties); `d = max / -8`;
 * `id = d !== 0 ? 1 / d : 0`; for `j` in 0..15,
 * `xi0 = min(15, trunc(x[j] * id + 8.5))`, `xi1 = min(15, trunc(x[j + 16] * id + 8.5))`,
 * `qs[j] = xi0 | (xi1 << 4)`. Both `x * id` and `+ 8.5` are rounded to f32 before the
 * truncation (so `x = 0.5 - 2^-25` with `id = 1` gives nibble 9, not 8, as in C and gguf-py).
 * Here `x * id + 8.5` is always in `[0.49, 16.5]`, so C's
 * `(int8_t)` truncation and gguf-py's `np.trunc(...).astype(uint8).clip(0, 15)` agree.
 *
 * Edges:
 * - All-zero block: `max` stays `+0`, so `d = -0` and is stored as f16 `0x8000` like ggml's
 *   C code. (gguf-py 0.19.0 takes `max` from the block's first element instead, so it stores
 *   `0x0000` when that element is `-0`; the quants, all 8, agree.)
 * - When `|max| < ~2.35e-38`, `1 / d` overflows to Infinity and `x * id + 8.5` is not finite;
 *   such nibbles are stored as 0, matching gguf-py and ggml's scalar C code on x86 (`d` is
 *   f16 ±0 then, so every value dequantizes to 0).
 *
 * @example
 * ```ts
 * import { quantizeQ4_0Into } from "./quant.ts";
 * const x = new Float32Array(32).fill(-8);
 * const out = new Uint8Array(18);
 * quantizeQ4_0Into(x, out); // d = 1.0, every nibble 0
 * ```
 *
 * @param x Input values; length must be a multiple of 32.
 * @param out Destination bytes.
 * @returns `out`.
 * @throws {RangeError} If the length is not a multiple of 32, `out` is too short, or a block
 * contains NaN or ±Infinity (blocks before that one have already been written to `out`).
 */
export function quantizeQ4_0Into(x: Float32Array, out: Uint8Array): Uint8Array {
  const fn = "quantizeQ4_0Into";
  const nBlocks = checkQuantInput(fn, x);
  assertU8(fn, "out", out);
  assertMinLength(fn, "out", out, nBlocks * Q4_0_BLOCK_BYTES);
  encodeQ4_0(fn, x, out, nBlocks);
  return out;
}

/**
 * Quantizes `x` to a new Q4_0 byte array (`x.length / 32 * 18` bytes), bit-exact with ggml's
 * `quantize_row_q4_0_ref`. See {@link quantizeQ4_0Into} for the exact rule and edge cases.
 *
 * @example
 * ```ts
 * import { quantizeQ4_0 } from "./quant.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new Float32Array(32);
 * x[0] = -8; // max: d = -8 / -8 = 1.0
 * x[16] = 7;
 * const q = quantizeQ4_0(x);
 * assert.equal(q.length, 18);
 * assert.deepEqual([...q.subarray(0, 3)], [0x00, 0x3c, 0xf0]); // nibbles 0 (-8) and 15 (+7)
 * ```
 *
 * @param x Input values; length must be a multiple of 32.
 * @returns The Q4_0 blocks.
 * @throws {RangeError} If the length is not a multiple of 32 or a block contains NaN or
 * ±Infinity (the message names the block).
 */
export function quantizeQ4_0(x: Float32Array): Uint8Array {
  const fn = "quantizeQ4_0";
  const nBlocks = checkQuantInput(fn, x);
  const out = new Uint8Array(nBlocks * Q4_0_BLOCK_BYTES);
  encodeQ4_0(fn, x, out, nBlocks);
  return out;
}

function nibble(v: number): number {
  // v = fround(x * id + 8.5); C: MIN(15, (int8_t)v). Non-finite -> 0 (x86 behaviour).
  if (!Number.isFinite(v)) return 0;
  const t = Math.trunc(v);
  return t > 15 ? 15 : t < 0 ? 0 : t;
}

function encodeQ4_0(fn: string, x: Float32Array, out: Uint8Array, nBlocks: number): void {
  const half = QK / 2;
  for (let b = 0; b < nBlocks; b++) {
    checkFinite(fn, x, b);
    const base = b * QK;
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK; j++) {
      const v = x[base + j];
      const a = Math.abs(v);
      if (amax < a) {
        amax = a;
        max = v;
      }
    }
    const d = fr(max / -8);
    const id = d !== 0 ? fr(1 / d) : 0;
    const h = f32ToF16Bits(d);
    const o = b * Q4_0_BLOCK_BYTES;
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < half; j++) {
      const x0 = fr(x[base + j] * id);
      const x1 = fr(x[base + half + j] * id);
      const xi0 = nibble(fr(x0 + 8.5));
      const xi1 = nibble(fr(x1 + 8.5));
      out[o + 2 + j] = xi0 | (xi1 << 4);
    }
  }
}

function checkDequant(
  fn: string,
  bytes: Uint8Array,
  n: number,
  blockBytes: number,
  out: Float32Array | undefined,
): Float32Array {
  assertU8(fn, "bytes", bytes);
  assertInt(fn, "n", n);
  if (n % QK !== 0) throw new RangeError(`${fn}: n ${n} is not a multiple of ${QK}`);
  assertMinLength(fn, "bytes", bytes, (n / QK) * blockBytes);
  if (out === undefined) return new Float32Array(n);
  assertF32(fn, "out", out);
  assertMinLength(fn, "out", out, n);
  return out;
}

/**
 * Dequantizes the first `n` values of Q8_0 data: `value = fround(q * f16(d))`.
 *
 * @example
 * ```ts
 * import { dequantizeQ8_0, quantizeQ8_0 } from "./quant.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new Float32Array(32).fill(0.5);
 * const y = dequantizeQ8_0(quantizeQ8_0(x), 32);
 * assert.ok(Math.abs(y[0] - 0.5) < 1e-3);
 * ```
 *
 * @param bytes Q8_0 blocks; at least `n / 32 * 34` bytes.
 * @param n Number of values; a multiple of 32.
 * @param out Optional destination (length >= `n`); allocated when omitted.
 * @returns The destination array holding the values in its first `n` entries.
 * @throws {RangeError} On a bad `n` or too-short `bytes` / `out`.
 */
export function dequantizeQ8_0(bytes: Uint8Array, n: number, out?: Float32Array): Float32Array {
  const y = checkDequant("dequantizeQ8_0", bytes, n, Q8_0_BLOCK_BYTES, out);
  const nBlocks = n / QK;
  for (let b = 0; b < nBlocks; b++) {
    const o = b * Q8_0_BLOCK_BYTES;
    const d = f16Decode(bytes[o] | (bytes[o + 1] << 8));
    for (let j = 0; j < QK; j++) {
      const q = (bytes[o + 2 + j] << 24) >> 24;
      y[b * QK + j] = fr(q * d);
    }
  }
  return y;
}

/**
 * Dequantizes the first `n` values of Q4_0 data: `value = fround((nibble - 8) * f16(d))`.
 *
 * @example
 * ```ts
 * import { dequantizeQ4_0, quantizeQ4_0 } from "./quant.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new Float32Array(32).fill(-8);
 * assert.equal(dequantizeQ4_0(quantizeQ4_0(x), 32)[5], -8);
 * ```
 *
 * @param bytes Q4_0 blocks; at least `n / 32 * 18` bytes.
 * @param n Number of values; a multiple of 32.
 * @param out Optional destination (length >= `n`); allocated when omitted.
 * @returns The destination array holding the values in its first `n` entries.
 * @throws {RangeError} On a bad `n` or too-short `bytes` / `out`.
 */
export function dequantizeQ4_0(bytes: Uint8Array, n: number, out?: Float32Array): Float32Array {
  const y = checkDequant("dequantizeQ4_0", bytes, n, Q4_0_BLOCK_BYTES, out);
  const nBlocks = n / QK;
  const half = QK / 2;
  for (let b = 0; b < nBlocks; b++) {
    const o = b * Q4_0_BLOCK_BYTES;
    const d = f16Decode(bytes[o] | (bytes[o + 1] << 8));
    for (let j = 0; j < half; j++) {
      const byte = bytes[o + 2 + j];
      y[b * QK + j] = fr(((byte & 0x0f) - 8) * d);
      y[b * QK + half + j] = fr(((byte >>> 4) - 8) * d);
    }
  }
  return y;
}
