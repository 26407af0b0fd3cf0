// Internal argument checks shared by the reference kernels. Not part of the public API.

/** Throws a TypeError unless `value` is a Float32Array. */
export function assertF32(fn: string, name: string, value: unknown): asserts value is Float32Array {
  if (!(value instanceof Float32Array)) {
    throw new TypeError(`${fn}: ${name} must be a Float32Array, got ${describe(value)}`);
  }
}

/** Throws a TypeError unless `value` is a Uint8Array. */
export function assertU8(fn: string, name: string, value: unknown): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array)) {
    throw new TypeError(`${fn}: ${name} must be a Uint8Array, got ${describe(value)}`);
  }
}

/** Throws unless `value` is a safe integer >= `min` (TypeError if not a number). */
export function assertInt(
  fn: string,
  name: string,
  value: unknown,
  min = 0,
): asserts value is number {
  if (typeof value !== "number") {
    throw new TypeError(`${fn}: ${name} must be a number, got ${describe(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${fn}: ${name} ${value} is not an integer >= ${min}`);
  }
}

/** Throws a RangeError unless `array.length >= needed`. */
export function assertMinLength(
  fn: string,
  name: string,
  array: ArrayLike<unknown>,
  needed: number,
): void {
  if (array.length < needed) {
    throw new RangeError(`${fn}: ${name} length ${array.length} is less than required ${needed}`);
  }
}

/** Short description of a value for error messages. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return value.constructor?.name ?? "object";
  return `${typeof value} ${String(value)}`;
}
