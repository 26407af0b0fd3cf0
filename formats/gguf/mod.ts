/**
 * GGUF v2/v3 reading that trusts nothing, plus a small writer for tests.
 *
 * {@link parseGguf} reads the header, metadata and tensor infos through a
 * `ByteSource` (`formats/byte_source.ts`) and checks the tensor layout against the file; every
 * malformed input is a `FormatError` (`formats/errors.ts`) naming the file, the field and
 * the byte offset. Typed getters ({@link getString}, {@link getU32},
 * {@link getArray} …) read metadata; {@link tensorByName} and
 * {@link readTensorBytes} reach tensors. Values keep their GGUF type:
 * 64-bit integers are always bigints, arrays of numbers are typed arrays,
 * arrays of arrays are rejected.
 *
 * ```ts
 * import { getArray, getString, getU32, parseGguf, tensorByName, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 *
 * const bytes = writeGguf({
 *   metadata: [
 *     ["general.architecture", { type: "string", value: "llama" }],
 *     ["llama.block_count", { type: "u32", value: 30 }],
 *     ["tokenizer.ggml.tokens", { type: "array", elementType: "string", value: ["<s>", "</s>"] }],
 *   ],
 *   tensors: [{ name: "output_norm.weight", dims: [576], type: ggmlTypeByName("F32")!, data: new Uint8Array(2304) }],
 * });
 * // A real file: `using file = mapFile(path); const src = mappedSource(file);`
 * const gguf = parseGguf(bytesSource("model.gguf", bytes));
 * console.log(getString(gguf, "general.architecture"), getU32(gguf, "llama.block_count")); // "llama" 30
 * console.log(getArray(gguf, "tokenizer.ggml.tokens", "string").length); // 2
 * console.log(tensorByName(gguf, "output_norm.weight")?.dims); // [576]
 * ```
 *
 * @module
 */

export { DEFAULT_GGUF_LIMITS, parseGguf } from "./parse_gguf.ts";
export type { GgufFile, GgufLimits, GgufTensorInfo } from "./parse_gguf.ts";
export { describeGgufType } from "./gguf_value.ts";
export type {
  GgufArray,
  GgufArrayTypes,
  GgufElementType,
  GgufValue,
  GgufValueType,
} from "./gguf_value.ts";
export {
  getArray,
  getBool,
  getF32,
  getFloat,
  getI32,
  getInt,
  getString,
  getU32,
  getU64,
  getValue,
} from "./get_value.ts";
export { readTensorBytes, requireTensor, tensorByName } from "./tensor_by_name.ts";
export { writeGguf } from "./write_gguf.ts";
export type { GgufWriteParts, GgufWriteTensor } from "./write_gguf.ts";
export type { ByteSource } from "../byte_source.ts";
export type { GgmlTypeInfo } from "../ggml/types.ts";
