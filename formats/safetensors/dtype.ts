/**
 * The element types a safetensors header may name.
 *
 * @module
 */

/**
 * A safetensors dtype name as written in the header.
 *
 * @example
 * ```ts
 * import type { SafetensorsDtype } from "./dtype.ts";
 * const d: SafetensorsDtype = "BF16";
 * ```
 */
export type SafetensorsDtype =
  | "F32"
  | "F16"
  | "BF16"
  | "F64"
  | "I64"
  | "I32"
  | "I16"
  | "I8"
  | "U8"
  | "BOOL"
  | "F8_E4M3"
  | "F8_E5M2";

/**
 * What cflow knows about one dtype.
 *
 * @example
 * ```ts
 * import type { SafetensorsDtypeInfo } from "./dtype.ts";
 * const info: SafetensorsDtypeInfo = { name: "F16", bytes: 2, convertible: true };
 * ```
 */
export interface SafetensorsDtypeInfo {
  /** The header name. */
  readonly name: SafetensorsDtype;
  /** Bytes per element. */
  readonly bytes: number;
  /** Whether `readTensorF32` can convert it (F32, F16, BF16). */
  readonly convertible: boolean;
}

/**
 * Every dtype the parser accepts, in no particular order. Any other name in a
 * header is a FormatError.
 *
 * @example
 * ```ts
 * import { SAFETENSORS_DTYPES } from "./dtype.ts";
 * console.log(SAFETENSORS_DTYPES.filter((d) => d.convertible).map((d) => d.name));
 * // ["F32", "F16", "BF16"]
 * ```
 */
export const SAFETENSORS_DTYPES: readonly SafetensorsDtypeInfo[] = Object.freeze([
  { name: "F32", bytes: 4, convertible: true },
  { name: "F16", bytes: 2, convertible: true },
  { name: "BF16", bytes: 2, convertible: true },
  { name: "F64", bytes: 8, convertible: false },
  { name: "I64", bytes: 8, convertible: false },
  { name: "I32", bytes: 4, convertible: false },
  { name: "I16", bytes: 2, convertible: false },
  { name: "I8", bytes: 1, convertible: false },
  { name: "U8", bytes: 1, convertible: false },
  { name: "BOOL", bytes: 1, convertible: false },
  { name: "F8_E4M3", bytes: 1, convertible: false },
  { name: "F8_E5M2", bytes: 1, convertible: false },
].map((d) => Object.freeze(d as SafetensorsDtypeInfo)));

const BY_NAME = new Map<string, SafetensorsDtypeInfo>(SAFETENSORS_DTYPES.map((d) => [d.name, d]));

/**
 * Looks a dtype up by its header name (case-sensitive, as safetensors is);
 * undefined for names cflow does not know.
 *
 * @example
 * ```ts
 * import { safetensorsDtype } from "./dtype.ts";
 * console.log(safetensorsDtype("BF16")?.bytes); // 2
 * console.log(safetensorsDtype("bf16")); // undefined
 * ```
 */
export function safetensorsDtype(name: string): SafetensorsDtypeInfo | undefined {
  return BY_NAME.get(name);
}
