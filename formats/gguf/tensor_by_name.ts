/**
 * Finding tensors of a parsed GGUF file by name and copying their data.
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { HEADER_BYTES, quoteKey } from "./_private.ts";
import type { GgufFile, GgufTensorInfo } from "./parse_gguf.ts";

const INDEX = new WeakMap<GgufFile, Map<string, GgufTensorInfo>>();

function index(file: GgufFile): Map<string, GgufTensorInfo> {
  let m = INDEX.get(file);
  if (m === undefined) {
    m = new Map(file.tensors.map((t) => [t.name, t]));
    INDEX.set(file, m);
  }
  return m;
}

/**
 * The tensor called `name`, or undefined. The name index is built once per
 * file, on first use.
 *
 * @example
 * ```ts
 * import { parseGguf, tensorByName, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   tensors: [{ name: "output_norm.weight", dims: [4], type: ggmlTypeByName("F32")!, data: new Uint8Array(16) }],
 * })));
 * console.log(tensorByName(f, "output_norm.weight")?.bytes); // 16
 * console.log(tensorByName(f, "output.weight")); // undefined
 * ```
 */
export function tensorByName(file: GgufFile, name: string): GgufTensorInfo | undefined {
  return index(file).get(name);
}

/**
 * The tensor called `name`; throws a {@link FormatError} (field
 * `tensors["name"]`) when the file has none.
 *
 * @example
 * ```ts
 * import { parseGguf, requireTensor, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   tensors: [{ name: "token_embd.weight", dims: [2, 3], type: ggmlTypeByName("F16")!, data: new Uint8Array(12) }],
 * })));
 * console.log(requireTensor(f, "token_embd.weight").dims); // [2, 3]
 * ```
 */
export function requireTensor(file: GgufFile, name: string): GgufTensorInfo {
  const t = index(file).get(name);
  if (t === undefined) {
    throw new FormatError(
      file.name,
      `tensors[${quoteKey(name)}]`,
      HEADER_BYTES,
      "required tensor is missing",
    );
  }
  return t;
}

/**
 * Copies a tensor's raw bytes (still in its ggml type) out of the source
 * the file was parsed from.
 *
 * @example
 * ```ts
 * import { parseGguf, readTensorBytes, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const src = bytesSource("m.gguf", writeGguf({
 *   tensors: [{ name: "b", dims: [3], type: ggmlTypeByName("I8")!, data: new Uint8Array([1, 2, 3]) }],
 * }));
 * const f = parseGguf(src);
 * console.log(readTensorBytes(src, f.tensors[0])); // Uint8Array [1, 2, 3]
 * ```
 */
export function readTensorBytes(src: ByteSource, tensor: GgufTensorInfo): Uint8Array {
  return src.read(tensor.offset, tensor.bytes, `tensors[${quoteKey(tensor.name)}].data`);
}
