/**
 * safetensors: a header parser that trusts nothing, per-tensor and
 * per-row-range reads (F32 / F16 / BF16 to f32, bit-exact), and a small
 * writer for tests.
 *
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { parseSafetensors, readTensorF32, writeSafetensors } from "./mod.ts";
 *
 * const bytes = writeSafetensors([
 *   { name: "w", dtype: "BF16", shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
 * ]);
 * const src = bytesSource("w.safetensors", bytes);
 * const file = parseSafetensors(src);
 * const row1 = readTensorF32(src, file.byName.get("w")!, 1, 1); // Float32Array [4, 5, 6]
 * ```
 *
 * @module
 */

export { SAFETENSORS_DTYPES, safetensorsDtype } from "./dtype.ts";
export type { SafetensorsDtype, SafetensorsDtypeInfo } from "./dtype.ts";
export { MAX_SAFETENSORS_HEADER_BYTES, parseSafetensors } from "./parse_safetensors.ts";
export type { SafetensorsFile, SafetensorsTensor } from "./parse_safetensors.ts";
export { readTensorBytes, readTensorF32 } from "./read_tensor_f32.ts";
export { writeSafetensors } from "./write_safetensors.ts";
export type { SafetensorsInput } from "./write_safetensors.ts";
export type { ByteSource } from "../byte_source.ts";
export { FormatError } from "../errors.ts";
