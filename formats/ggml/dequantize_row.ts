/**
 * Dequantization of ggml tensor data to f32, bit-exact with ggml's reference C code
 * (`dequantize_row_*` in `ggml-quants.c`, `ggml_fp16_to_fp32_row` and `ggml_bf16_to_fp32_row`
 * in `ggml.c`).
 *
 * Every f32 operation of the C code is done here as a double operation rounded with
 * `Math.fround`, in the C code's order, so results agree bit for bit. In these formats every
 * product is exact in f32 (an f16 scale times integers of at most 13 bits in all), so the only
 * rounding is the final `+ m` / `- min` of Q4_1, Q5_1, Q2_K, Q4_K and Q5_K, and Q8_K's f32
 * `d * q`: evaluating `a * b - c` with a fused multiply-add gives the same bits, and so do
 * ggml builds that contract it.
 *
 * @module
 */

import {
  assertF32,
  assertMinLength,
  assertU8,
  checkElementCount,
  f16At,
  f16ToF32BitsTable,
  f32At,
  HOST_LITTLE_ENDIAN,
  resolveType,
} from "./_private.ts";
import type { GgmlTypeInfo } from "./types.ts";

const fr = Math.fround;

type Kernel = (bytes: Uint8Array, nBlocks: number, out: Float32Array) => void;

/**
 * Tells whether {@link dequantizeRow} handles a type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K.
 *
 * @example
 * ```ts
 * import { dequantizeSupported } from "./dequantize_row.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dequantizeSupported(ggmlTypeByName("Q4_K")!), true);
 * assert.equal(dequantizeSupported(ggmlTypeByName("Q8_1")!), false);
 * ```
 *
 * @param type A type from `ggmlType` / `ggmlTypeByName`.
 * @returns `true` when `type` is ggml's entry for a supported type (a look-alike object with
 * other sizes gives `false`).
 */
export function dequantizeSupported(type: GgmlTypeInfo): boolean {
  try {
    return KERNELS.has(resolveType("dequantizeSupported", type).id);
  } catch {
    return false;
  }
}

/**
 * Converts `nElements` values of ggml type `type`, stored in `bytes`, to f32.
 *
 * The results are those of ggml's C code bit for bit, with one exception: where a scale of a
 * quantized block is Inf or NaN, the NaN results are NaN, but their sign and payload are not
 * specified (ggml's depend on the CPU). F32, F16 and BF16 are bit-exact for every input
 * pattern, NaNs included: F32 and BF16 keep every bit, and F16 NaNs come out as ggml's
 * `ggml_compute_fp16_to_fp32` gives them (sign and payload kept, quiet bit set).
 *
 * Block layouts (little-endian, per ggml-common.h; f16 fields are IEEE half):
 * - Q4_0 (32 values, 18 bytes): `f16 d, u8 qs[16]`; `(nibble - 8) * d`.
 * - Q4_1 (32, 20): `f16 d, f16 m, u8 qs[16]`; `nibble * d + m`.
 * - Q5_0 (32, 22): `f16 d, u32 qh, u8 qs[16]`; `((nibble | high bit << 4) - 16) * d`.
 * - Q5_1 (32, 24): `f16 d, f16 m, u32 qh, u8 qs[16]`; `q * d + m`.
 * - Q8_0 (32, 34): `f16 d, i8 qs[32]`; `q * d`.
 * - Q2_K (256, 84): `u8 scales[16], u8 qs[64], f16 d, f16 dmin`.
 * - Q3_K (256, 110): `u8 hmask[32], u8 qs[64], u8 scales[12], f16 d`.
 * - Q4_K (256, 144): `f16 d, f16 dmin, u8 scales[12], u8 qs[128]`.
 * - Q5_K (256, 176): `f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]`.
 * - Q6_K (256, 210): `u8 ql[128], u8 qh[64], i8 scales[16], f16 d`.
 * - Q8_K (256, 292): `f32 d, i8 qs[256], i16 bsums[16]`; `d * q`.
 *
 * @example Dequantize one Q8_0 block
 * ```ts
 * import { dequantizeRow } from "./dequantize_row.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const block = new Uint8Array(34);
 * block[0] = 0x00; // d = 0.5 (f16 0x3800)
 * block[1] = 0x38;
 * block[2] = 3; // q[0] = 3
 * block[3] = 0xfe; // q[1] = -2
 * const y = dequantizeRow(ggmlTypeByName("Q8_0")!, block, 32);
 * assert.deepEqual([...y.subarray(0, 3)], [1.5, -1, 0]);
 * ```
 *
 * @example Reuse an output buffer
 * ```ts
 * import { dequantizeRow } from "./dequantize_row.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const bf16 = ggmlTypeByName("BF16")!;
 * const out = new Float32Array(4).fill(7);
 * const bytes = new Uint8Array([0x80, 0x3f, 0x00, 0xc0]); // 1.0, -2.0
 * assert.equal(dequantizeRow(bf16, bytes, 2, out), out);
 * assert.deepEqual([...out], [1, -2, 7, 7]); // only the first 2 entries are written
 * ```
 *
 * @param type The ggml type of the data (from `ggmlType` / `ggmlTypeByName`); see
 * {@link dequantizeSupported}.
 * @param bytes The raw data, starting at the first block; extra trailing bytes are ignored.
 * @param nElements How many values to convert; a multiple of `type.blockSize`.
 * @param out Optional destination with length >= `nElements`, not overlapping `bytes`;
 * allocated when omitted. Only its first `nElements` entries are written.
 * @returns `out` (or the new array) holding the values in its first `nElements` entries.
 * @throws {TypeError} If `type` is not a type-info object, `bytes` not a Uint8Array, `out`
 * not a Float32Array or `nElements` not a number.
 * @throws {RangeError} If `type` is unknown, does not match ggml's table or is not supported,
 * `nElements` is not a whole number of blocks, or `bytes` or `out` is too short.
 */
export function dequantizeRow(
  type: GgmlTypeInfo,
  bytes: Uint8Array,
  nElements: number,
  out?: Float32Array,
): Float32Array {
  const fn = "dequantizeRow";
  const t = resolveType(fn, type);
  const kernel = KERNELS.get(t.id);
  if (kernel === undefined) {
    throw new RangeError(`${fn}: ggml type ${t.name} (id ${t.id}) is not supported`);
  }
  assertU8(fn, "bytes", bytes);
  const nBlocks = checkElementCount(fn, "nElements", nElements, t);
  assertMinLength(fn, "bytes", bytes, nBlocks * t.typeSize);
  let y: Float32Array;
  if (out === undefined) {
    y = new Float32Array(nElements);
  } else {
    assertF32(fn, "out", out);
    assertMinLength(fn, "out", out, nElements);
    y = out;
  }
  kernel(bytes, nBlocks, y);
  return y;
}

// ---- F32, F16, BF16: bit copies -------------------------------------------------------------

function dequantF32(bytes: Uint8Array, n: number, out: Float32Array): void {
  if (HOST_LITTLE_ENDIAN) {
    new Uint8Array(out.buffer, out.byteOffset, n * 4).set(bytes.subarray(0, n * 4));
    return;
  }
  const u = new Uint32Array(out.buffer, out.byteOffset, n);
  for (let i = 0; i < n; i++) {
    const o = i * 4;
    u[i] = bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24);
  }
}

function dequantF16(bytes: Uint8Array, n: number, out: Float32Array): void {
  const table = f16ToF32BitsTable();
  const u = new Uint32Array(out.buffer, out.byteOffset, n);
  for (let i = 0; i < n; i++) u[i] = table[bytes[2 * i] | (bytes[2 * i + 1] << 8)];
}

function dequantBF16(bytes: Uint8Array, n: number, out: Float32Array): void {
  const u = new Uint32Array(out.buffer, out.byteOffset, n);
  for (let i = 0; i < n; i++) u[i] = (bytes[2 * i] << 16) | (bytes[2 * i + 1] << 24);
}

// ---- legacy 32-value blocks -----------------------------------------------------------------

function dequantQ4_0(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 18;
    const y = b * 32;
    const d = f16At(bytes, o);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 2 + j];
      out[y + j] = fr(((q & 0x0f) - 8) * d);
      out[y + j + 16] = fr(((q >>> 4) - 8) * d);
    }
  }
}

function dequantQ4_1(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 20;
    const y = b * 32;
    const d = f16At(bytes, o);
    const m = f16At(bytes, o + 2);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 4 + j];
      out[y + j] = fr(fr((q & 0x0f) * d) + m);
      out[y + j + 16] = fr(fr((q >>> 4) * d) + m);
    }
  }
}

function u32At(bytes: Uint8Array, o: number): number {
  return (bytes[o] | (bytes[o + 1] << 8) | (bytes[o + 2] << 16) | (bytes[o + 3] << 24)) >>> 0;
}

function dequantQ5_0(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 22;
    const y = b * 32;
    const d = f16At(bytes, o);
    const qh = u32At(bytes, o + 2);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 6 + j];
      const h0 = ((qh >>> j) << 4) & 0x10;
      const h1 = (qh >>> (j + 12)) & 0x10;
      out[y + j] = fr((((q & 0x0f) | h0) - 16) * d);
      out[y + j + 16] = fr((((q >>> 4) | h1) - 16) * d);
    }
  }
}

function dequantQ5_1(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 24;
    const y = b * 32;
    const d = f16At(bytes, o);
    const m = f16At(bytes, o + 2);
    const qh = u32At(bytes, o + 4);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 8 + j];
      const h0 = ((qh >>> j) << 4) & 0x10;
      const h1 = (qh >>> (j + 12)) & 0x10;
      out[y + j] = fr(fr(((q & 0x0f) | h0) * d) + m);
      out[y + j + 16] = fr(fr(((q >>> 4) | h1) * d) + m);
    }
  }
}

function dequantQ8_0(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 34;
    const y = b * 32;
    const d = f16At(bytes, o);
    for (let j = 0; j < 32; j++) out[y + j] = fr(((bytes[o + 2 + j] << 24) >> 24) * d);
  }
}

// ---- K-quants: 256-value super-blocks -------------------------------------------------------

function dequantQ2_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 84;
    const d = f16At(bytes, o + 80);
    const min = f16At(bytes, o + 82);
    let y = b * 256;
    let is = 0;
    for (let n = 0; n < 256; n += 128) {
      const q = o + 16 + n / 4;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let half = 0; half < 32; half += 16) {
          const sc = bytes[o + is++];
          const dl = fr(d * (sc & 0x0f));
          const ml = fr(min * (sc >>> 4));
          for (let l = 0; l < 16; l++) {
            out[y++] = fr(fr(dl * ((bytes[q + half + l] >>> shift) & 3)) - ml);
          }
        }
      }
    }
  }
}

function dequantQ3_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  const scales = new Int32Array(16);
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 110;
    const s = o + 96;
    for (let j = 0; j < 16; j++) {
      const low = j < 8 ? bytes[s + j] & 0x0f : bytes[s + j - 8] >>> 4;
      const high = (bytes[s + 8 + (j & 3)] >>> (2 * (j >>> 2))) & 3;
      scales[j] = (low | (high << 4)) - 32;
    }
    const dAll = f16At(bytes, o + 108);
    let y = b * 256;
    let is = 0;
    let m = 1;
    for (let n = 0; n < 256; n += 128) {
      const q = o + 32 + n / 4;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let half = 0; half < 32; half += 16) {
          const dl = fr(dAll * scales[is++]);
          for (let l = 0; l < 16; l++) {
            const v = ((bytes[q + half + l] >>> shift) & 3) - ((bytes[o + half + l] & m) ? 0 : 4);
            out[y++] = fr(dl * v);
          }
        }
        m <<= 1;
      }
    }
  }
}

/** ggml's `get_scale_min_k4`: the 6-bit scale (`which` 0) or min (`which` 1) of sub-block j. */
function scaleMinK4(bytes: Uint8Array, s: number, j: number, which: 0 | 1): number {
  if (j < 4) return bytes[s + j + 4 * which] & 63;
  return which === 0
    ? (bytes[s + j + 4] & 0x0f) | ((bytes[s + j - 4] >>> 6) << 4)
    : (bytes[s + j + 4] >>> 4) | ((bytes[s + j] >>> 6) << 4);
}

function dequantQ4_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 144;
    const d = f16At(bytes, o);
    const min = f16At(bytes, o + 2);
    const y = b * 256;
    for (let j = 0; j < 256; j += 64) {
      const is = j / 32;
      const d1 = fr(d * scaleMinK4(bytes, o + 4, is, 0));
      const m1 = fr(min * scaleMinK4(bytes, o + 4, is, 1));
      const d2 = fr(d * scaleMinK4(bytes, o + 4, is + 1, 0));
      const m2 = fr(min * scaleMinK4(bytes, o + 4, is + 1, 1));
      const q = o + 16 + j / 2;
      for (let l = 0; l < 32; l++) out[y + j + l] = fr(fr(d1 * (bytes[q + l] & 0x0f)) - m1);
      for (let l = 0; l < 32; l++) out[y + j + 32 + l] = fr(fr(d2 * (bytes[q + l] >>> 4)) - m2);
    }
  }
}

function dequantQ5_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 176;
    const d = f16At(bytes, o);
    const min = f16At(bytes, o + 2);
    const qh = o + 16;
    const y = b * 256;
    for (let j = 0; j < 256; j += 64) {
      const is = j / 32;
      const d1 = fr(d * scaleMinK4(bytes, o + 4, is, 0));
      const m1 = fr(min * scaleMinK4(bytes, o + 4, is, 1));
      const d2 = fr(d * scaleMinK4(bytes, o + 4, is + 1, 0));
      const m2 = fr(min * scaleMinK4(bytes, o + 4, is + 1, 1));
      const u1 = 1 << is;
      const u2 = 2 << is;
      const ql = o + 48 + j / 2;
      for (let l = 0; l < 32; l++) {
        const q = (bytes[ql + l] & 0x0f) + ((bytes[qh + l] & u1) ? 16 : 0);
        out[y + j + l] = fr(fr(d1 * q) - m1);
      }
      for (let l = 0; l < 32; l++) {
        const q = (bytes[ql + l] >>> 4) + ((bytes[qh + l] & u2) ? 16 : 0);
        out[y + j + 32 + l] = fr(fr(d2 * q) - m2);
      }
    }
  }
}

function dequantQ6_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 210;
    const d = f16At(bytes, o + 208);
    for (let n = 0; n < 256; n += 128) {
      const ql = o + n / 2;
      const qh = o + 128 + n / 4;
      const sc = o + 192 + n / 16;
      const y = b * 256 + n;
      for (let l = 0; l < 32; l++) {
        const is = l >>> 4;
        const h = bytes[qh + l];
        const a = bytes[ql + l];
        const c = bytes[ql + l + 32];
        const q1 = ((a & 0x0f) | ((h & 3) << 4)) - 32;
        const q2 = ((c & 0x0f) | (((h >>> 2) & 3) << 4)) - 32;
        const q3 = ((a >>> 4) | (((h >>> 4) & 3) << 4)) - 32;
        const q4 = ((c >>> 4) | (((h >>> 6) & 3) << 4)) - 32;
        out[y + l] = fr(fr(d * ((bytes[sc + is] << 24) >> 24)) * q1);
        out[y + l + 32] = fr(fr(d * ((bytes[sc + is + 2] << 24) >> 24)) * q2);
        out[y + l + 64] = fr(fr(d * ((bytes[sc + is + 4] << 24) >> 24)) * q3);
        out[y + l + 96] = fr(fr(d * ((bytes[sc + is + 6] << 24) >> 24)) * q4);
      }
    }
  }
}

function dequantQ8_K(bytes: Uint8Array, nBlocks: number, out: Float32Array): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 292;
    const y = b * 256;
    const d = f32At(bytes, o);
    for (let j = 0; j < 256; j++) out[y + j] = fr(d * ((bytes[o + 4 + j] << 24) >> 24));
  }
}

const KERNELS: ReadonlyMap<number, Kernel> = new Map<number, Kernel>([
  [0, dequantF32],
  [1, dequantF16],
  [30, dequantBF16],
  [2, dequantQ4_0],
  [3, dequantQ4_1],
  [6, dequantQ5_0],
  [7, dequantQ5_1],
  [8, dequantQ8_0],
  [10, dequantQ2_K],
  [11, dequantQ3_K],
  [12, dequantQ4_K],
  [13, dequantQ5_K],
  [14, dequantQ6_K],
  [15, dequantQ8_K],
]);
