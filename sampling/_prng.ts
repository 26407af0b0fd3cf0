// The sampler's pseudo-random generator. Internal: the sequence is part of what a seed means, so
// changing anything here changes every seeded sample (the tests pin it).

/**
 * One step of splitmix32, used only to expand a 32-bit seed into xoshiro state: a Weyl sequence
 * (`state += 0x9e3779b9`) passed through MurmurHash3's 32-bit finalizer
 * (`z ^= z >>> 16; z *= 0x85ebca6b; z ^= z >>> 13; z *= 0xc2b2ae35; z ^= z >>> 16`).
 * Returns the new state and the output.
 */
export function splitmix32(state: number): [number, number] {
  const next = (state + 0x9e3779b9) >>> 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  z = (z ^ (z >>> 16)) >>> 0;
  return [next, z];
}

/**
 * xoshiro128** 1.1 (Blackman and Vigna, https://prng.di.unimi.it/xoshiro128starstar.c): 128 bits
 * of state, period 2^128 - 1, 32-bit outputs. Seeded from a 32-bit integer through four
 * splitmix32 outputs.
 */
export class Xoshiro128ss {
  #s0 = 0;
  #s1 = 0;
  #s2 = 0;
  #s3 = 0;

  constructor(seed: number) {
    this.seed(seed);
  }

  /** Restarts the sequence of `seed` (an integer in [0, 2^32)). */
  seed(seed: number): void {
    let st = seed >>> 0, out: number;
    [st, out] = splitmix32(st);
    this.#s0 = out;
    [st, out] = splitmix32(st);
    this.#s1 = out;
    [st, out] = splitmix32(st);
    this.#s2 = out;
    [, out] = splitmix32(st);
    this.#s3 = out;
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
  }

  /** Sets the raw state (tests use the reference vectors of state 1, 2, 3, 4). */
  setState(s0: number, s1: number, s2: number, s3: number): void {
    this.#s0 = s0 >>> 0;
    this.#s1 = s1 >>> 0;
    this.#s2 = s2 >>> 0;
    this.#s3 = s3 >>> 0;
  }

  /** The next 32-bit output, as an unsigned integer. */
  nextU32(): number {
    const s1 = this.#s1;
    const m = Math.imul(s1, 5);
    const result = Math.imul((m << 7) | (m >>> 25), 9) >>> 0;
    const t = s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = (this.#s3 << 11) | (this.#s3 >>> 21);
    return result;
  }

  /** A uniform double in [0, 1) with 53 random bits (27 from one output, 26 from the next). */
  nextDouble(): number {
    const hi = this.nextU32() >>> 5;
    const lo = this.nextU32() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }
}
