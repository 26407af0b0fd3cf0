/**
 * Quantizing f32 rows into tile rows (ggml blocks), with a choice of Q4
 * rounding rule:
 *
 * - `ggml` (default): llama.cpp's `quantize_row_q4_0_ref`. The scale is the
 *   signed element of largest magnitude divided by -8, so that element maps
 *   exactly to nibble 0 and all 16 levels are used. Bit-identical to what
 *   llama.cpp and gguf-py produce.
 * - `paper`: the report's rule (section 3.10.3): s = max|w| / 7,
 *   q = round(w / s) + 8 clipped to [0, 15]; symmetric, 15 levels.
 *
 * Rows whose length is not a multiple of 32 are zero-padded; padding
 * quantizes to the zero value under both rules, as the format requires.
 *
 * @module
 */

import { f32ToF16Bits, quantizeQ4_0Into, quantizeQ8_0Into } from "../reference/mod.ts";
import { rowBytes, TILE_TYPE, tileTypeName } from "../formats/cflow/tile.ts";
import {
  dequantizeRow,
  ggmlTypeByName,
  quantizeRow,
  quantizeSupported,
} from "../formats/ggml/mod.ts";

/**
 * Q4 rounding rules.
 *
 * @example
 * ```ts
 * import type { Q4Rule } from "./quantize_rules.ts";
 * const r: Q4Rule = "ggml";
 * ```
 */
export type Q4Rule = "ggml" | "paper";

function paperQ4Block(x: Float32Array, off: number, out: Uint8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[off + j]));
  const s = Math.fround(amax / 7);
  const inv = s !== 0 ? Math.fround(1 / s) : 0;
  const d = f32ToF16Bits(s);
  out[o] = d & 0xff;
  out[o + 1] = d >> 8;
  for (let j = 0; j < 16; j++) {
    const q0 = Math.min(15, Math.max(0, roundHalfAway(Math.fround(x[off + j] * inv)) + 8));
    const q1 = Math.min(15, Math.max(0, roundHalfAway(Math.fround(x[off + j + 16] * inv)) + 8));
    out[o + 2 + j] = q0 | (q1 << 4);
  }
}

function roundHalfAway(v: number): number {
  return v < 0 ? -Math.round(-v) : Math.round(v);
}

/**
 * Quantizes `rows` rows of `cols` f32 values into tile rows of `type`.
 *
 * @example
 * ```ts
 * import { quantizeRows } from "./quantize_rules.ts";
 * const q = quantizeRows(new Float32Array(40).fill(1), 1, 40, 1, "ggml");
 * console.log(q.length); // 2 blocks x 18 bytes = 36
 * ```
 */
export function quantizeRows(
  x: Float32Array,
  rows: number,
  cols: number,
  type: number,
  rule: Q4Rule,
): Uint8Array {
  if (type === TILE_TYPE.F32) return new Uint8Array(x.slice(0, rows * cols).buffer);
  if (type !== TILE_TYPE.Q4_0 && type !== TILE_TYPE.Q8_0) {
    // The other tile types are ggml rows: ggml's own quantizers (formats/ggml), row by row.
    const ggml = ggmlTypeByName(tileTypeName(type) ?? "");
    if (ggml === undefined || !quantizeSupported(ggml) || cols % ggml.blockSize !== 0) {
      throw new RangeError(`quantizeRows: cannot quantize ${cols} columns to tile type ${type}`);
    }
    const rb = rowBytes(type, cols);
    const out = new Uint8Array(rows * rb);
    for (let r = 0; r < rows; r++) {
      quantizeRow(ggml, x.subarray(r * cols, (r + 1) * cols), out.subarray(r * rb, (r + 1) * rb));
    }
    return out;
  }
  const groups = Math.ceil(cols / 32);
  const blockBytes = type === TILE_TYPE.Q4_0 ? 18 : 34;
  const out = new Uint8Array(rows * groups * blockBytes);
  const padded = new Float32Array(groups * 32);
  for (let r = 0; r < rows; r++) {
    padded.fill(0);
    padded.set(x.subarray(r * cols, (r + 1) * cols));
    const dst = out.subarray(r * groups * blockBytes, (r + 1) * groups * blockBytes);
    if (type === TILE_TYPE.Q8_0) quantizeQ8_0Into(padded, dst);
    else if (rule === "ggml") quantizeQ4_0Into(padded, dst);
    else for (let g = 0; g < groups; g++) paperQ4Block(padded, g * 32, dst, g * 18);
  }
  return out;
}

/**
 * Dequantizes tile rows back to f32 (for error reports).
 *
 * @example
 * ```ts
 * import { dequantizeRows, quantizeRows } from "./quantize_rules.ts";
 * const x = new Float32Array(32).fill(0.5);
 * console.log(dequantizeRows(quantizeRows(x, 1, 32, 2, "ggml"), 1, 32, 2)[0]); // 0.5
 * ```
 */
export function dequantizeRows(
  q: Uint8Array,
  rows: number,
  cols: number,
  type: number,
): Float32Array {
  if (type === TILE_TYPE.F32) return new Float32Array(q.slice().buffer, 0, rows * cols);
  const name = tileTypeName(type);
  const ggml = name === undefined ? undefined : ggmlTypeByName(name);
  if (ggml === undefined) throw new RangeError(`dequantizeRows: unknown tile type ${type}`);
  // A tile row is ggml's row (Q4_0/Q8_0 rows padded to whole blocks), so
  // gguf-py-checked ggml dequantization gives its values.
  const rb = rowBytes(type, cols);
  const padded = Math.ceil(cols / ggml.blockSize) * ggml.blockSize;
  const row = new Float32Array(padded);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    dequantizeRow(ggml, q.subarray(r * rb, (r + 1) * rb), padded, row);
    out.set(row.subarray(0, cols), r * cols);
  }
  return out;
}
