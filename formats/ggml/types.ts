/**
 * ggml tensor types: ids as stored in GGUF, block sizes and bytes per block.
 * Names and numbers follow ggml's `ggml_type` enum.
 *
 * @module
 */

/**
 * What cflow knows about one ggml type.
 *
 * @example
 * ```ts
 * import type { GgmlTypeInfo } from "./types.ts";
 * const q: GgmlTypeInfo = { id: 8, name: "Q8_0", blockSize: 32, typeSize: 34 };
 * ```
 */
export interface GgmlTypeInfo {
  /** The id stored in GGUF tensor infos. */
  readonly id: number;
  /** ggml's name, e.g. "Q4_K". */
  readonly name: string;
  /** Elements per block. */
  readonly blockSize: number;
  /** Bytes per block. */
  readonly typeSize: number;
}

const TABLE: readonly GgmlTypeInfo[] = [
  { id: 0, name: "F32", blockSize: 1, typeSize: 4 },
  { id: 1, name: "F16", blockSize: 1, typeSize: 2 },
  { id: 2, name: "Q4_0", blockSize: 32, typeSize: 18 },
  { id: 3, name: "Q4_1", blockSize: 32, typeSize: 20 },
  { id: 6, name: "Q5_0", blockSize: 32, typeSize: 22 },
  { id: 7, name: "Q5_1", blockSize: 32, typeSize: 24 },
  { id: 8, name: "Q8_0", blockSize: 32, typeSize: 34 },
  { id: 9, name: "Q8_1", blockSize: 32, typeSize: 36 },
  { id: 10, name: "Q2_K", blockSize: 256, typeSize: 84 },
  { id: 11, name: "Q3_K", blockSize: 256, typeSize: 110 },
  { id: 12, name: "Q4_K", blockSize: 256, typeSize: 144 },
  { id: 13, name: "Q5_K", blockSize: 256, typeSize: 176 },
  { id: 14, name: "Q6_K", blockSize: 256, typeSize: 210 },
  { id: 15, name: "Q8_K", blockSize: 256, typeSize: 292 },
  { id: 24, name: "I8", blockSize: 1, typeSize: 1 },
  { id: 25, name: "I16", blockSize: 1, typeSize: 2 },
  { id: 26, name: "I32", blockSize: 1, typeSize: 4 },
  { id: 27, name: "I64", blockSize: 1, typeSize: 8 },
  { id: 28, name: "F64", blockSize: 1, typeSize: 8 },
  { id: 30, name: "BF16", blockSize: 1, typeSize: 2 },
];

const BY_ID = new Map(TABLE.map((t) => [t.id, t]));
const BY_NAME = new Map(TABLE.map((t) => [t.name, t]));

/**
 * Looks a type up by its GGUF id; undefined for ids cflow does not know.
 *
 * @example
 * ```ts
 * import { ggmlType } from "./types.ts";
 * console.log(ggmlType(2)?.name); // "Q4_0"
 * ```
 */
export function ggmlType(id: number): GgmlTypeInfo | undefined {
  return BY_ID.get(id);
}

/**
 * Looks a type up by name.
 *
 * @example
 * ```ts
 * import { ggmlTypeByName } from "./types.ts";
 * console.log(ggmlTypeByName("Q8_0")?.typeSize); // 34
 * ```
 */
export function ggmlTypeByName(name: string): GgmlTypeInfo | undefined {
  return BY_NAME.get(name);
}

/**
 * Bytes of `nElements` elements of a type, or undefined when nElements is
 * not a whole number of blocks or the size is not a safe integer.
 *
 * @example
 * ```ts
 * import { ggmlType, ggmlBytes } from "./types.ts";
 * console.log(ggmlBytes(ggmlType(2)!, 64)); // 36
 * ```
 */
export function ggmlBytes(type: GgmlTypeInfo, nElements: number): number | undefined {
  if (!Number.isSafeInteger(nElements) || nElements < 0) return undefined;
  if (nElements % type.blockSize !== 0) return undefined;
  const bytes = (nElements / type.blockSize) * type.typeSize;
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
