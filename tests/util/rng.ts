/**
 * A small seeded PRNG (mulberry32) for reproducible test inputs.
 *
 * @module
 */

/**
 * Seeded random numbers for tests.
 *
 * @example
 * ```ts
 * import { Rng } from "./rng.ts";
 * const r = new Rng(1);
 * console.log(r.int(0, 9) <= 9); // true
 * ```
 */
export class Rng {
  #s: number;

  /** Starts the sequence at `seed`. */
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** A Float32Array of normals times `scale`. */
  floats(n: number, scale = 1): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.normal() * scale;
    return out;
  }

  /** Random bytes. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.int(0, 255);
    return out;
  }
}
