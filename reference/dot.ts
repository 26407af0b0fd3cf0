/**
 * Quantized dot products and matrix-vector products: Q8_0 or Q4_0 weights against Q8_0
 * activations. The per-block integer sums are exact; the f32 accumulation order below is the
 * scalar reference that the native kernels are compared with.
 *
 * @module
 */

import { f16Decode } from "./f16.ts";
import { Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK } from "./quant.ts";
import { assertF32, assertInt, assertMinLength, assertU8 } from "./_validate.ts";

const fr = Math.fround;

function i8View(a: Uint8Array): Int8Array {
  return new Int8Array(a.buffer, a.byteOffset, a.length);
}

function checkBlocks(
  fn: string,
  w: Uint8Array,
  x: Uint8Array,
  nBlocks: number,
  wBlockBytes: number,
): void {
  assertU8(fn, "w", w);
  assertU8(fn, "x", x);
  assertInt(fn, "nBlocks", nBlocks);
  assertMinLength(fn, "w", w, nBlocks * wBlockBytes);
  assertMinLength(fn, "x", x, nBlocks * Q8_0_BLOCK_BYTES);
}

function checkN(fn: string, n: number): number {
  assertInt(fn, "n", n);
  if (n % QK !== 0) throw new RangeError(`${fn}: n ${n} is not a multiple of ${QK}`);
  return n / QK;
}

function outInt32(fn: string, n: number, out: Int32Array | undefined): Int32Array {
  if (out === undefined) return new Int32Array(n);
  if (!(out instanceof Int32Array)) {
    throw new TypeError(`${fn}: out must be an Int32Array`);
  }
  assertMinLength(fn, "out", out, n);
  return out;
}

function isumQ8_0(w8: Int8Array, wo: number, x8: Int8Array, xo: number): number {
  let s = 0;
  for (let j = 0; j < QK; j++) s += w8[wo + j] * x8[xo + j];
  return s;
}

function isumQ4_0(w: Uint8Array, wo: number, x8: Int8Array, xo: number): number {
  let s = 0;
  for (let j = 0; j < QK / 2; j++) {
    const byte = w[wo + j];
    s += ((byte & 0x0f) - 8) * x8[xo + j] + ((byte >>> 4) - 8) * x8[xo + QK / 2 + j];
  }
  return s;
}

/**
 * Per-block integer dot products of Q8_0 weights and Q8_0 activations:
 * `out[b] = Σ_j w.qs[j] * x.qs[j]` over the 32 signed int8 quants of block `b` (scales are
 * ignored). Exact; `|out[b]| <= 32 * 128 * 128`.
 *
 * @example
 * ```ts
 * import { blockDotsQ8_0Q8_0, quantizeQ8_0 } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const q = quantizeQ8_0(new Float32Array(32).fill(1)); // every quant is 127
 * assert.equal(blockDotsQ8_0Q8_0(q, q, 1)[0], 32 * 127 * 127);
 * ```
 *
 * @param w Q8_0 weight blocks (at least `nBlocks * 34` bytes).
 * @param x Q8_0 activation blocks (at least `nBlocks * 34` bytes).
 * @param nBlocks Number of blocks.
 * @param out Optional destination (length >= `nBlocks`); allocated when omitted.
 * @returns The per-block sums.
 * @throws {RangeError} On a bad `nBlocks` or too-short arrays.
 */
export function blockDotsQ8_0Q8_0(
  w: Uint8Array,
  x: Uint8Array,
  nBlocks: number,
  out?: Int32Array,
): Int32Array {
  const fn = "blockDotsQ8_0Q8_0";
  checkBlocks(fn, w, x, nBlocks, Q8_0_BLOCK_BYTES);
  const r = outInt32(fn, nBlocks, out);
  const w8 = i8View(w);
  const x8 = i8View(x);
  for (let b = 0; b < nBlocks; b++) {
    const o = b * Q8_0_BLOCK_BYTES + 2;
    r[b] = isumQ8_0(w8, o, x8, o);
  }
  return r;
}

/**
 * Per-block integer dot products of Q4_0 weights and Q8_0 activations:
 * `out[b] = Σ_j (nibble_j - 8) * x.qs[j]` over the 32 elements of block `b` (scales are
 * ignored). Exact.
 *
 * @example
 * ```ts
 * import { blockDotsQ4_0Q8_0, quantizeQ4_0, quantizeQ8_0 } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const w = quantizeQ4_0(new Float32Array(32).fill(-8)); // every nibble 0, i.e. -8
 * const x = quantizeQ8_0(new Float32Array(32).fill(1)); // every quant 127
 * assert.equal(blockDotsQ4_0Q8_0(w, x, 1)[0], 32 * -8 * 127);
 * ```
 *
 * @param w Q4_0 weight blocks (at least `nBlocks * 18` bytes).
 * @param x Q8_0 activation blocks (at least `nBlocks * 34` bytes).
 * @param nBlocks Number of blocks.
 * @param out Optional destination (length >= `nBlocks`); allocated when omitted.
 * @returns The per-block sums.
 * @throws {RangeError} On a bad `nBlocks` or too-short arrays.
 */
export function blockDotsQ4_0Q8_0(
  w: Uint8Array,
  x: Uint8Array,
  nBlocks: number,
  out?: Int32Array,
): Int32Array {
  const fn = "blockDotsQ4_0Q8_0";
  checkBlocks(fn, w, x, nBlocks, Q4_0_BLOCK_BYTES);
  const r = outInt32(fn, nBlocks, out);
  const x8 = i8View(x);
  for (let b = 0; b < nBlocks; b++) {
    r[b] = isumQ4_0(w, b * Q4_0_BLOCK_BYTES + 2, x8, b * Q8_0_BLOCK_BYTES + 2);
  }
  return r;
}

function scale(a: Uint8Array, o: number): number {
  return f16Decode(a[o] | (a[o + 1] << 8));
}

function dotQ8Raw(
  w: Uint8Array,
  w8: Int8Array,
  wo: number,
  x: Uint8Array,
  x8: Int8Array,
  nb: number,
): number {
  let acc = 0;
  for (let b = 0; b < nb; b++) {
    const wb = wo + b * Q8_0_BLOCK_BYTES;
    const xb = b * Q8_0_BLOCK_BYTES;
    const isum = isumQ8_0(w8, wb + 2, x8, xb + 2);
    acc = fr(acc + fr(isum * fr(scale(w, wb) * scale(x, xb))));
  }
  return acc;
}

function dotQ4Raw(w: Uint8Array, wo: number, x: Uint8Array, x8: Int8Array, nb: number): number {
  let acc = 0;
  for (let b = 0; b < nb; b++) {
    const wb = wo + b * Q4_0_BLOCK_BYTES;
    const xb = b * Q8_0_BLOCK_BYTES;
    const isum = isumQ4_0(w, wb + 2, x8, xb + 2);
    acc = fr(acc + fr(isum * fr(scale(w, wb) * scale(x, xb))));
  }
  return acc;
}

/**
 * Dot product of `n` Q8_0 weights with `n` Q8_0 activations, in f32, blocks in order:
 * `acc = 0; for each block b: acc = fround(acc + fround(isum_b * fround(dw_b * dx_b)))`,
 * where `isum_b` is the exact integer block sum and `dw_b`, `dx_b` the f16 scales (their
 * product is exact in f32). This is ggml's scalar `ggml_vec_dot_q8_0_q8_0` order.
 *
 * @example
 * ```ts
 * import { dotQ8_0Q8_0, quantizeQ8_0 } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const q = quantizeQ8_0(new Float32Array(64).fill(1));
 * assert.ok(Math.abs(dotQ8_0Q8_0(q, q, 64) - 64) < 0.1);
 * ```
 *
 * @param w Q8_0 weight blocks (at least `n / 32 * 34` bytes).
 * @param x Q8_0 activation blocks (at least `n / 32 * 34` bytes).
 * @param n Number of elements; a multiple of 32.
 * @returns The f32 dot product.
 * @throws {RangeError} On a bad `n` or too-short arrays.
 */
export function dotQ8_0Q8_0(w: Uint8Array, x: Uint8Array, n: number): number {
  const fn = "dotQ8_0Q8_0";
  const nb = checkN(fn, n);
  checkBlocks(fn, w, x, nb, Q8_0_BLOCK_BYTES);
  return dotQ8Raw(w, i8View(w), 0, x, i8View(x), nb);
}

/**
 * Dot product of `n` Q4_0 weights with `n` Q8_0 activations, in f32, blocks in order:
 * `acc = 0; for each block b: acc = fround(acc + fround(isum_b * fround(dw_b * dx_b)))`.
 *
 * Note: ggml's scalar `ggml_vec_dot_q4_0_q8_0` evaluates `(isum_b * dw_b) * dx_b` instead
 * (two roundings); this reference uses the same single-rounding order as
 * {@link dotQ8_0Q8_0}, so results may differ from that ggml loop in the last bit.
 *
 * @example
 * ```ts
 * import { dotQ4_0Q8_0, quantizeQ4_0, quantizeQ8_0 } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const w = quantizeQ4_0(new Float32Array(32).fill(-8));
 * const x = quantizeQ8_0(new Float32Array(32).fill(1));
 * assert.ok(Math.abs(dotQ4_0Q8_0(w, x, 32) - -256) < 0.5);
 * ```
 *
 * @param w Q4_0 weight blocks (at least `n / 32 * 18` bytes).
 * @param x Q8_0 activation blocks (at least `n / 32 * 34` bytes).
 * @param n Number of elements; a multiple of 32.
 * @returns The f32 dot product.
 * @throws {RangeError} On a bad `n` or too-short arrays.
 */
export function dotQ4_0Q8_0(w: Uint8Array, x: Uint8Array, n: number): number {
  const fn = "dotQ4_0Q8_0";
  const nb = checkN(fn, n);
  checkBlocks(fn, w, x, nb, Q4_0_BLOCK_BYTES);
  return dotQ4Raw(w, 0, x, i8View(x), nb);
}

function checkMatvec(
  fn: string,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Uint8Array,
  out: Float32Array | undefined,
  blockBytes: number,
): { nb: number; rowBytes: number; y: Float32Array } {
  assertU8(fn, "w", w);
  assertU8(fn, "x", x);
  assertInt(fn, "rows", rows);
  assertInt(fn, "cols", cols);
  if (cols % QK !== 0) throw new RangeError(`${fn}: cols ${cols} is not a multiple of ${QK}`);
  const nb = cols / QK;
  const rowBytes = nb * blockBytes;
  assertMinLength(fn, "w", w, rows * rowBytes);
  assertMinLength(fn, "x", x, nb * Q8_0_BLOCK_BYTES);
  let y: Float32Array;
  if (out === undefined) {
    y = new Float32Array(rows);
  } else {
    assertF32(fn, "out", out);
    assertMinLength(fn, "out", out, rows);
    y = out;
  }
  return { nb, rowBytes, y };
}

/**
 * Matrix-vector product with a row-major Q8_0 weight matrix (`rows` × `cols`; row `r`
 * starts at byte `r * (cols / 32) * 34`) and a Q8_0-quantized activation vector of `cols`
 * elements: `y[r] = dotQ8_0Q8_0(row r, x, cols)`.
 *
 * @example
 * ```ts
 * import { matvecQ8_0, quantizeQ8_0 } from "./mod.ts";
 *
 * const w = quantizeQ8_0(new Float32Array(3 * 64).fill(0.5)); // 3 rows x 64 cols
 * const x = quantizeQ8_0(new Float32Array(64).fill(2));
 * const y = matvecQ8_0(w, 3, 64, x); // each ≈ 64
 * ```
 *
 * @param w Weights, at least `rows * (cols / 32) * 34` bytes.
 * @param rows Number of rows (outputs).
 * @param cols Number of columns; a multiple of 32.
 * @param x Q8_0 activations, at least `cols / 32 * 34` bytes.
 * @param out Optional destination (length >= `rows`); allocated when omitted.
 * @returns The destination holding `y` in its first `rows` entries.
 * @throws {RangeError} On bad dimensions or too-short arrays.
 */
export function matvecQ8_0(
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Uint8Array,
  out?: Float32Array,
): Float32Array {
  const { nb, rowBytes, y } = checkMatvec(
    "matvecQ8_0",
    w,
    rows,
    cols,
    x,
    out,
    Q8_0_BLOCK_BYTES,
  );
  const w8 = i8View(w);
  const x8 = i8View(x);
  for (let r = 0; r < rows; r++) y[r] = dotQ8Raw(w, w8, r * rowBytes, x, x8, nb);
  return y;
}

/**
 * Matrix-vector product with a row-major Q4_0 weight matrix (`rows` × `cols`; row `r`
 * starts at byte `r * (cols / 32) * 18`) and a Q8_0-quantized activation vector of `cols`
 * elements: `y[r] = dotQ4_0Q8_0(row r, x, cols)`.
 *
 * @example
 * ```ts
 * import { matvecQ4_0, quantizeQ4_0, quantizeQ8_0 } from "./mod.ts";
 *
 * const w = quantizeQ4_0(new Float32Array(2 * 32).fill(-1)); // 2 rows x 32 cols
 * const x = quantizeQ8_0(new Float32Array(32).fill(1));
 * const y = matvecQ4_0(w, 2, 32, x); // each ≈ -32
 * ```
 *
 * @param w Weights, at least `rows * (cols / 32) * 18` bytes.
 * @param rows Number of rows (outputs).
 * @param cols Number of columns; a multiple of 32.
 * @param x Q8_0 activations, at least `cols / 32 * 34` bytes.
 * @param out Optional destination (length >= `rows`); allocated when omitted.
 * @returns The destination holding `y` in its first `rows` entries.
 * @throws {RangeError} On bad dimensions or too-short arrays.
 */
export function matvecQ4_0(
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Uint8Array,
  out?: Float32Array,
): Float32Array {
  const { nb, rowBytes, y } = checkMatvec(
    "matvecQ4_0",
    w,
    rows,
    cols,
    x,
    out,
    Q4_0_BLOCK_BYTES,
  );
  const x8 = i8View(x);
  for (let r = 0; r < rows; r++) y[r] = dotQ4Raw(w, r * rowBytes, x, x8, nb);
  return y;
}
