// Internals of formats/ggml: the Q4_1, Q5_0 and Q5_1 encoders, ports of ggml's C reference
// quantizers `quantize_row_q4_1_ref`, `quantize_row_q5_0_ref` and `quantize_row_q5_1_ref`
// (ggml/src/ggml-quants.c, llama.cpp commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f as vendored
// by PyPI llama_cpp_python 0.3.36). Not part of the public API: reach them through quantizeRow.
//
// Bit-exactness: as for the K-quants (see _kquant_encode.ts), every f32 operation of the C code
// is a double operation rounded with Math.fround, which gives the same f32 result for + - * / of
// f32 operands. f16 stores use f32ToF16Bits (round to nearest even, overflow to ±Infinity, like
// GGML_FP32_TO_FP16). The C casts `(int8_t)(v)` / `(uint8_t)(v)` of an f32 `v` compile on x86-64
// to cvttss2si (truncation toward zero to int32, 0x80000000 for NaN and out-of-range values)
// followed by taking the low byte; castLowByte does exactly that. For finite inputs the values
// cast always lie in [0, 33), so only the truncation matters; the tiny-magnitude edge where
// `1 / d` overflows to Infinity makes them ±Infinity or NaN, which become 0 (what ggml's scalar
// C code gives on x86 and gguf-py gives too; the stored d is then f16 ±0).

import { f32ToF16Bits } from "../../reference/f16.ts";

const fr = Math.fround;

/** ggml's QK4_1 = QK5_0 = QK5_1. */
const QK = 32;

/** FLT_MAX. */
const FLT_MAX = 3.4028234663852886e38;

/** `(int8_t)v` / `(uint8_t)v` on x86-64, as a signed byte (-128..127); `v` is an f32 value. */
function castLowByte(v: number): number {
  // cvttss2si: truncation toward zero; NaN and |v| >= 2^31 give 0x80000000 (low byte 0).
  if (!(v > -2147483649 && v < 2147483648)) return 0;
  return (Math.trunc(v) << 24) >> 24;
}

function putF16(out: Uint8Array, o: number, v: number): void {
  const h = f32ToF16Bits(v);
  out[o] = h & 0xff;
  out[o + 1] = h >>> 8;
}

function putU32(out: Uint8Array, o: number, v: number): void {
  out[o] = v & 0xff;
  out[o + 1] = (v >>> 8) & 0xff;
  out[o + 2] = (v >>> 16) & 0xff;
  out[o + 3] = v >>> 24;
}

/**
 * The block's min and max as ggml's loop finds them: starting from FLT_MAX / -FLT_MAX, an element
 * replaces them only when strictly smaller / larger, so among equal values (±0 included) the
 * first one is kept.
 */
function minMax(x: Float32Array, base: number, mm: Float64Array): void {
  let min = FLT_MAX;
  let max = -FLT_MAX;
  for (let j = 0; j < QK; j++) {
    const v = x[base + j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  mm[0] = min;
  mm[1] = max;
}

const MM = new Float64Array(2);

/**
 * `quantize_row_q4_1_ref`: per block of 32, `d = (max - min) / 15`, `id = d ? 1 / d : 0`,
 * `q = MIN(15, (int8_t)((x - min) * id + 0.5f))`; stored as `f16 d, f16 min, u8 qs[16]` with
 * element `j` in the low nibble of `qs[j]` and `j + 16` in the high nibble.
 */
export function encodeQ4_1(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
    const base = b * QK;
    minMax(x, base, MM);
    const min = MM[0];
    const max = MM[1];
    const d = fr(fr(max - min) / 15);
    const id = d !== 0 ? fr(1 / d) : 0;
    const o = b * 20;
    putF16(out, o, d);
    putF16(out, o + 2, min);
    for (let j = 0; j < QK / 2; j++) {
      const x0 = fr(fr(x[base + j] - min) * id);
      const x1 = fr(fr(x[base + QK / 2 + j] - min) * id);
      const c0 = castLowByte(fr(x0 + 0.5));
      const c1 = castLowByte(fr(x1 + 0.5));
      const xi0 = (c0 < 15 ? c0 : 15) & 0xff; // MIN(15, (int8_t)...) stored as uint8_t
      const xi1 = (c1 < 15 ? c1 : 15) & 0xff;
      out[o + 4 + j] = (xi0 | (xi1 << 4)) & 0xff;
    }
  }
}

/**
 * `quantize_row_q5_0_ref`: per block of 32, `max` is the first element whose `|x|` is strictly
 * larger than every earlier one (starting from `+0`), `d = max / -16`, `id = d ? 1 / d : 0`,
 * `q = MIN(31, (int8_t)(x * id + 16.5f))`; stored as `f16 d, u32 qh, u8 qs[16]`: the low four
 * bits of element `j` / `j + 16` in the low / high nibble of `qs[j]`, the fifth bit of element
 * `j` in bit `j` of `qh` (little-endian).
 */
export function encodeQ5_0(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
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
    const d = fr(max / -16);
    const id = d !== 0 ? fr(1 / d) : 0;
    const o = b * 22;
    putF16(out, o, d);
    let qh = 0;
    for (let j = 0; j < QK / 2; j++) {
      const c0 = castLowByte(fr(fr(x[base + j] * id) + 16.5));
      const c1 = castLowByte(fr(fr(x[base + QK / 2 + j] * id) + 16.5));
      const xi0 = (c0 < 31 ? c0 : 31) & 0xff; // MIN(31, (int8_t)...) stored as uint8_t
      const xi1 = (c1 < 31 ? c1 : 31) & 0xff;
      out[o + 6 + j] = (xi0 & 0x0f) | ((xi1 & 0x0f) << 4);
      qh |= ((xi0 & 0x10) >>> 4) << j;
      qh |= ((xi1 & 0x10) >>> 4) << (j + QK / 2);
    }
    putU32(out, o + 2, qh >>> 0);
  }
}

/**
 * `quantize_row_q5_1_ref`: per block of 32, `d = (max - min) / 31`, `id = d ? 1 / d : 0`,
 * `q = (uint8_t)((x - min) * id + 0.5f)` (no clamp in C; the value is at most 31 for finite
 * inputs); stored as `f16 d, f16 min, u32 qh, u8 qs[16]` with the Q5_0 bit layout.
 */
export function encodeQ5_1(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
    const base = b * QK;
    minMax(x, base, MM);
    const min = MM[0];
    const max = MM[1];
    const d = fr(fr(max - min) / 31);
    const id = d !== 0 ? fr(1 / d) : 0;
    const o = b * 24;
    putF16(out, o, d);
    putF16(out, o + 2, min);
    let qh = 0;
    for (let j = 0; j < QK / 2; j++) {
      const xi0 = castLowByte(fr(fr(fr(x[base + j] - min) * id) + 0.5)) & 0xff;
      const xi1 = castLowByte(fr(fr(fr(x[base + QK / 2 + j] - min) * id) + 0.5)) & 0xff;
      out[o + 8 + j] = (xi0 & 0x0f) | ((xi1 & 0x0f) << 4);
      qh |= ((xi0 & 0x10) >>> 4) << j;
      qh |= ((xi1 & 0x10) >>> 4) << (j + QK / 2);
    }
    putU32(out, o + 4, qh >>> 0);
  }
}
