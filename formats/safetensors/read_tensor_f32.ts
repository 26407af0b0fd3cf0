/**
 * Per-tensor and per-row-range reads of safetensors data.
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { decodeToF32 } from "./_convert.ts";
import { safetensorsDtype } from "./dtype.ts";
import type { SafetensorsTensor } from "./parse_safetensors.ts";

/**
 * Rows of a tensor: the first dimension (1 for a scalar), each row holding
 * the product of the remaining dimensions.
 */
function rowsOf(tensor: SafetensorsTensor): { rows: number; rowElements: number } {
  if (tensor.shape.length === 0) return { rows: 1, rowElements: 1 };
  const rows = tensor.shape[0];
  return { rows, rowElements: rows === 0 ? 0 : tensor.elements / rows };
}

function checkRows(
  fn: string,
  tensor: SafetensorsTensor,
  rowStart: number,
  rowCount: number | undefined,
) {
  const { rows, rowElements } = rowsOf(tensor);
  if (!Number.isSafeInteger(rowStart) || rowStart < 0 || rowStart > rows) {
    throw new RangeError(`${fn}: rowStart ${rowStart} is not in [0, ${rows}] for ${tensor.name}`);
  }
  const count = rowCount ?? rows - rowStart;
  if (!Number.isSafeInteger(count) || count < 0 || count > rows - rowStart) {
    throw new RangeError(
      `${fn}: rowCount ${rowCount} is not in [0, ${
        rows - rowStart
      }] for ${tensor.name} (rowStart ${rowStart})`,
    );
  }
  return { rowElements, count };
}

/**
 * Copies the raw little-endian bytes of rows [rowStart, rowStart + rowCount)
 * of a tensor (rows are the first dimension; a 1-D tensor has one element per
 * row, a scalar one row). Reads only those bytes from the source; a file
 * shorter than its header promised gives a FormatError from the source.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { parseSafetensors } from "./parse_safetensors.ts";
 * import { readTensorBytes } from "./read_tensor_f32.ts";
 * import { writeSafetensors } from "./write_safetensors.ts";
 * const src = bytesSource("t", writeSafetensors([
 *   { name: "ids", dtype: "U8", shape: [2, 2], data: new Uint8Array([1, 2, 3, 4]) },
 * ]));
 * const [t] = parseSafetensors(src).tensors;
 * console.log(readTensorBytes(src, t, 1)); // Uint8Array [3, 4]
 * ```
 *
 * @throws {RangeError} When the row range is not inside the tensor.
 */
export function readTensorBytes(
  src: ByteSource,
  tensor: SafetensorsTensor,
  rowStart = 0,
  rowCount?: number,
): Uint8Array {
  const { rowElements, count } = checkRows("readTensorBytes", tensor, rowStart, rowCount);
  const info = safetensorsDtype(tensor.dtype);
  if (info === undefined) throw new TypeError(`readTensorBytes: unknown dtype ${tensor.dtype}`);
  const rowBytes = rowElements * info.bytes;
  return src.read(tensor.offset + rowStart * rowBytes, count * rowBytes, tensor.name);
}

/**
 * Reads rows [rowStart, rowStart + rowCount) of an F32, F16 or BF16 tensor
 * as f32 (rows as in {@link readTensorBytes}; by default the whole tensor).
 * Conversions are exact and work on bit patterns: F16 subnormals, ±0,
 * ±Infinity and NaN payloads (shifted into the f32 mantissa) all survive.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { parseSafetensors } from "./parse_safetensors.ts";
 * import { readTensorF32 } from "./read_tensor_f32.ts";
 * import { writeSafetensors } from "./write_safetensors.ts";
 * const src = bytesSource("t", writeSafetensors([
 *   { name: "w", dtype: "BF16", shape: [3, 2], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
 * ]));
 * const w = parseSafetensors(src).byName.get("w")!;
 * console.log(readTensorF32(src, w, 1, 2)); // Float32Array [3, 4, 5, 6]
 * ```
 *
 * @throws {TypeError} For dtypes other than F32, F16 and BF16.
 * @throws {RangeError} When the row range is not inside the tensor.
 */
export function readTensorF32(
  src: ByteSource,
  tensor: SafetensorsTensor,
  rowStart = 0,
  rowCount?: number,
): Float32Array<ArrayBuffer> {
  const info = safetensorsDtype(tensor.dtype);
  if (info === undefined || !info.convertible) {
    throw new TypeError(
      `readTensorF32: ${tensor.name} is ${tensor.dtype}; only F32, F16 and BF16 convert to f32`,
    );
  }
  const bytes = readTensorBytes(src, tensor, rowStart, rowCount);
  const out = new Float32Array(bytes.length / info.bytes);
  decodeToF32(info.name as "F32" | "F16" | "BF16", bytes, out);
  return out;
}
