/**
 * The argument checks and conversions the typed wrappers of kernels.ts run before a call crosses
 * into native code: integer, type and length checks that throw `TypeError`/`RangeError`, block
 * counts, the usize arguments as bigint, and the CPU feature and variant ids of the symbol table.
 * Private to ffi/.
 *
 * @module
 */

import type { WeightType } from "./kernels.ts";
import { CPU_FEATURES, type CpuFeature, type VariantName, VARIANTS } from "./symbols.ts";

const QK = 32;
export const Q8_0_BYTES = 34;
const Q4_0_BYTES = 18;

export function featureMask(features: readonly CpuFeature[]): bigint {
  let mask = 0n;
  for (const f of features) mask |= 1n << BigInt(CPU_FEATURES[f]);
  return mask;
}

const SMALL_SIZES: bigint[] = [];

/**
 * A size argument: the binding takes usize as bigint. Sizes below 2^20 are
 * memoized so that per-token calls do not allocate.
 *
 * @internal
 */
export function sz(n: number): bigint {
  if (n < 1 << 20) return SMALL_SIZES[n] ??= BigInt(n);
  return BigInt(n);
}

export function variantName(id: number): VariantName {
  for (const [name, value] of Object.entries(VARIANTS)) {
    if (value === id) return name as VariantName;
  }
  throw new RangeError(`unknown kernel variant id ${id}`);
}

export function checkInt(fn: string, name: string, value: number, min = 0): void {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${fn}: ${name} ${value} is not an integer >= ${min}`);
  }
}

export function checkType(
  fn: string,
  name: string,
  value: unknown,
  type: abstract new (...args: never[]) => unknown,
): void {
  if (!(value instanceof type)) {
    throw new TypeError(`${fn}: ${name} must be a ${type.name}`);
  }
}

export function checkLen(fn: string, name: string, have: number, need: number): void {
  if (have < need) {
    throw new RangeError(`${fn}: ${name} holds ${have}, needs at least ${need}`);
  }
}

export function checkBlocks(fn: string, name: string, n: number): number {
  checkInt(fn, name, n, 1);
  if (n % QK !== 0) throw new RangeError(`${fn}: ${name} ${n} is not a multiple of ${QK}`);
  return n / QK;
}

export function weightBlockBytes(type: WeightType): number {
  return type === "q4_0" ? Q4_0_BYTES : Q8_0_BYTES;
}
