/**
 * The checked words of a plan's encoding: u32 arguments and the f32 bits
 * of floats, shared by the operations (`PlanBuilder`) and the weight
 * runs they name. Internal to ffi/.
 *
 * @module
 */

export function u32(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`plan: ${what} ${value} is not a u32`);
  }
  return value;
}

const F32_BITS = new Float32Array(1);
const F32_WORD = new Uint32Array(F32_BITS.buffer);

/** The IEEE bits of `x` rounded to f32. */
export function f32Bits(x: number, what: string): number {
  if (!Number.isFinite(x)) throw new RangeError(`plan: ${what} ${x} is not finite`);
  F32_BITS[0] = x;
  return F32_WORD[0];
}
