/**
 * Conversion of f32 values to the ggml types cflow can write bit-exactly like ggml: F32, F16,
 * BF16, Q8_0 and Q4_0 (through cflow's reference quantizers), Q4_1, Q5_0 and Q5_1 (ports of
 * ggml's `quantize_row_q4_1_ref` / `quantize_row_q5_0_ref` / `quantize_row_q5_1_ref`), and the
 * K-quants Q4_K, Q5_K and Q6_K (ports of ggml's `quantize_row_q4_K_ref` /
 * `quantize_row_q5_K_ref` / `quantize_row_q6_K_ref`, what llama.cpp's quantizer runs without an
 * importance matrix).
 *
 * @module
 */

import { f32ToF16Bits } from "../../reference/f16.ts";
import { quantizeQ4_0Into, quantizeQ8_0Into } from "../../reference/quant.ts";
import { encodeQ4_K, encodeQ5_K, encodeQ6_K } from "./_kquant_encode.ts";
import { encodeQ4_1, encodeQ5_0, encodeQ5_1 } from "./_legacy_encode.ts";
import {
  assertF32,
  assertMinLength,
  assertU8,
  checkElementCount,
  HOST_LITTLE_ENDIAN,
  resolveType,
} from "./_private.ts";
import type { GgmlTypeInfo } from "./types.ts";

type Encoder = (x: Float32Array, out: Uint8Array) => void;

/**
 * Tells whether {@link quantizeRow} handles a type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K and Q6_K.
 *
 * @example
 * ```ts
 * import { quantizeSupported } from "./quantize_row.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(quantizeSupported(ggmlTypeByName("Q8_0")!), true);
 * assert.equal(quantizeSupported(ggmlTypeByName("Q5_1")!), true);
 * assert.equal(quantizeSupported(ggmlTypeByName("Q4_K")!), true);
 * assert.equal(quantizeSupported(ggmlTypeByName("Q3_K")!), false); // dequantize only
 * ```
 *
 * @param type A type from `ggmlType` / `ggmlTypeByName`.
 * @returns `true` when `type` is ggml's entry for a supported type.
 */
export function quantizeSupported(type: GgmlTypeInfo): boolean {
  try {
    return ENCODERS.has(resolveType("quantizeSupported", type).id);
  } catch {
    return false;
  }
}

/**
 * Converts f32 values to ggml type `type`, bit-exactly like ggml's C code:
 * - F32: the bits, unchanged (NaN payloads included).
 * - F16: `ggml_compute_fp32_to_fp16`: round to nearest even, overflow to ±Infinity,
 *   subnormals kept; every NaN becomes `0x7e00` with the input's sign.
 * - BF16: `ggml_compute_fp32_to_bf16`: round to nearest even on the bits; a NaN keeps its top
 *   16 bits with the quiet bit set.
 * - Q8_0, Q4_0: `quantize_row_q8_0_ref` / `quantize_row_q4_0_ref` (see cflow's
 *   `reference/quant.ts`); NaN and ±Infinity inputs are rejected.
 * - Q4_1, Q5_0, Q5_1: `quantize_row_q4_1_ref` / `quantize_row_q5_0_ref` /
 *   `quantize_row_q5_1_ref` of ggml-quants.c (same llama.cpp commit as the K-quants below), per
 *   block of 32 in f32 arithmetic rounded as ggml's x86-64 build rounds it. Q4_1 / Q5_1:
 *   `d = (max - min) / 15` (resp. `/ 31`), `q = trunc((x - min) / d + 0.5)` (via `id = 1 / d`),
 *   clamped to 15 for Q4_1; stored `f16 d, f16 min`. Q5_0: `max` is the first element of the
 *   largest `|x|`, `d = max / -16`, `q = min(31, trunc(x / d + 16.5))`. Among equal values
 *   (±0 too) the first one of the block is the min / max, so the sign of a zero min is the
 *   first zero's, as in C (gguf-py may pick the other zero; its bytes differ only there). Checked
 *   byte for byte against gguf-py (`tests/fixtures/ggml_quant/`). NaN and ±Infinity inputs are
 *   rejected before anything is written; where `1 / d` overflows (a block whose range or `|max|`
 *   is below ~1e-37), the quants are stored as 0 like ggml's scalar C code on x86.
 * - Q4_K, Q5_K, Q6_K: `quantize_row_q4_K_ref` / `quantize_row_q5_K_ref` /
 *   `quantize_row_q6_K_ref` of ggml-quants.c (llama.cpp commit 0c1e570, vendored by PyPI
 *   llama_cpp_python 0.3.36), the functions llama.cpp's quantizer runs for a tensor without an
 *   importance matrix: per 256 values, a weighted scale/min search per sub-block of 32
 *   (Q4_K, Q5_K) or a refined symmetric scale per sub-block of 16 (Q6_K), 6- or 8-bit
 *   sub-block scales and f16 super-block scales. Every f32 operation is rounded as ggml's
 *   x86-64 build rounds it (no FMA), checked byte for byte against the C code
 *   (`tests/fixtures/ggml_kquant/`). NaN and ±Infinity inputs are rejected before anything
 *   is written; finite inputs too large for f16 scales are encoded as ggml encodes them.
 *
 * @example Quantize a row to Q4_K, as llama.cpp does without an imatrix
 * ```ts
 * import { dequantizeRow, quantizeRow } from "./mod.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const q4k = ggmlTypeByName("Q4_K")!;
 * const x = new Float32Array(256).map((_, i) => Math.sin(i) * 0.02);
 * const bytes = quantizeRow(q4k, x); // one 144-byte block
 * assert.equal(bytes.length, 144);
 * const back = dequantizeRow(q4k, bytes, 256);
 * assert.ok(back.every((v, i) => Math.abs(v - x[i]) < 0.003));
 * ```
 *
 * @example Quantize a row to Q5_0 and read the layout
 * ```ts
 * import { dequantizeRow, quantizeRow } from "./mod.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const q50 = ggmlTypeByName("Q5_0")!;
 * const x = new Float32Array(32).map((_, j) => j - 16); // max = -16: d = 1
 * const bytes = quantizeRow(q50, x); // f16 d, u32 qh (5th bits), 16 bytes of nibbles
 * assert.deepEqual([...bytes.subarray(0, 6)], [0x00, 0x3c, 0x00, 0x00, 0xff, 0xff]);
 * assert.deepEqual([...dequantizeRow(q50, bytes, 32)], [...x]);
 * ```
 *
 * @example Round-trip through BF16
 * ```ts
 * import { dequantizeRow, quantizeRow } from "./mod.ts";
 * import { ggmlTypeByName } from "./types.ts";
 * import assert from "node:assert/strict";
 *
 * const bf16 = ggmlTypeByName("BF16")!;
 * const bytes = quantizeRow(bf16, new Float32Array([1, -2.5, 3.0078125]));
 * assert.deepEqual([...dequantizeRow(bf16, bytes, 3)], [1, -2.5, 3]); // 3.0078125 is a tie, to even
 * ```
 *
 * @param type The ggml type to write; see {@link quantizeSupported}.
 * @param x The values; `x.length` must be a multiple of `type.blockSize`.
 * @param out Optional destination with length >= `x.length / blockSize * typeSize`, not
 * overlapping `x`; allocated when omitted. Only that prefix is written.
 * @returns `out` (or the new array) holding the encoded blocks.
 * @throws {TypeError} If `type` is not a type-info object, `x` not a Float32Array or `out` not
 * a Uint8Array.
 * @throws {RangeError} If `type` is unknown, does not match ggml's table or is not supported,
 * `x.length` is not a whole number of blocks, `out` is too short, or (every type but F32, F16
 * and BF16) `x` holds a NaN or ±Infinity.
 */
export function quantizeRow(type: GgmlTypeInfo, x: Float32Array, out?: Uint8Array): Uint8Array {
  const fn = "quantizeRow";
  const t = resolveType(fn, type);
  const encode = ENCODERS.get(t.id);
  if (encode === undefined) {
    throw new RangeError(`${fn}: ggml type ${t.name} (id ${t.id}) is not supported`);
  }
  assertF32(fn, "x", x);
  const nBytes = checkElementCount(fn, "x.length", x.length, t) * t.typeSize;
  let y: Uint8Array;
  if (out === undefined) {
    y = new Uint8Array(nBytes);
  } else {
    assertU8(fn, "out", out);
    assertMinLength(fn, "out", out, nBytes);
    y = out;
  }
  encode(x, y);
  return y;
}

function f32Bits(x: Float32Array): Uint32Array {
  return new Uint32Array(x.buffer, x.byteOffset, x.length);
}

function encodeF32(x: Float32Array, out: Uint8Array): void {
  const n = x.length;
  if (HOST_LITTLE_ENDIAN) {
    out.set(new Uint8Array(x.buffer, x.byteOffset, n * 4));
    return;
  }
  const u = f32Bits(x);
  for (let i = 0; i < n; i++) {
    const v = u[i];
    out[4 * i] = v & 0xff;
    out[4 * i + 1] = (v >>> 8) & 0xff;
    out[4 * i + 2] = (v >>> 16) & 0xff;
    out[4 * i + 3] = v >>> 24;
  }
}

function encodeF16(x: Float32Array, out: Uint8Array): void {
  const u = f32Bits(x);
  for (let i = 0; i < x.length; i++) {
    const bits = u[i];
    // NaN: decided from the bits, as a NaN read into a JS number may lose its sign.
    const h = (bits & 0x7fffffff) > 0x7f800000
      ? ((bits >>> 16) & 0x8000) | 0x7e00
      : f32ToF16Bits(x[i]);
    out[2 * i] = h & 0xff;
    out[2 * i + 1] = h >>> 8;
  }
}

function encodeBF16(x: Float32Array, out: Uint8Array): void {
  const u = f32Bits(x);
  for (let i = 0; i < x.length; i++) {
    const bits = u[i];
    const h = (bits & 0x7fffffff) > 0x7f800000
      ? (bits >>> 16) | 64
      : Math.floor((bits + 0x7fff + ((bits >>> 16) & 1)) / 65536);
    out[2 * i] = h & 0xff;
    out[2 * i + 1] = (h >>> 8) & 0xff;
  }
}

/** An encoder for whole blocks of `blockSize` values that first rejects non-finite inputs. */
function finiteOnly(
  name: string,
  blockSize: number,
  encode: (x: Float32Array, out: Uint8Array, nBlocks: number) => void,
): Encoder {
  return (x, out) => {
    for (let i = 0; i < x.length; i++) {
      if (!Number.isFinite(x[i])) {
        throw new RangeError(
          `quantizeRow: ${name} block ${Math.floor(i / blockSize)} contains a non-finite value ` +
            `${x[i]} at index ${i}`,
        );
      }
    }
    encode(x, out, x.length / blockSize);
  };
}

const ENCODERS: ReadonlyMap<number, Encoder> = new Map<number, Encoder>([
  [0, encodeF32],
  [1, encodeF16],
  [30, encodeBF16],
  [8, (x, out) => void quantizeQ8_0Into(x, out)],
  [2, (x, out) => void quantizeQ4_0Into(x, out)],
  [3, finiteOnly("Q4_1", 32, encodeQ4_1)],
  [6, finiteOnly("Q5_0", 32, encodeQ5_0)],
  [7, finiteOnly("Q5_1", 32, encodeQ5_1)],
  [12, finiteOnly("Q4_K", 256, encodeQ4_K)],
  [13, finiteOnly("Q5_K", 256, encodeQ5_K)],
  [14, finiteOnly("Q6_K", 256, encodeQ6_K)],
]);
