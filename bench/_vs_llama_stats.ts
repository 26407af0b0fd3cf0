/**
 * bench/vs_llama.ts's arithmetic besides the gate: the weight bytes a decoded token reads,
 * medians and ranges of samples, and the seeded shuffle of its rounds. Re-exported from
 * vs_llama.ts.
 *
 * @module
 */

/**
 * Bytes of weights: all of them, and those one decoded token reads (every tensor once; of the
 * token embedding one row, unless it is tied, when it is read whole as the output projection
 * as well).
 *
 * @example
 * ```ts
 * import { weightBytes } from "./vs_llama.ts";
 * const t = [
 *   { name: "token_embd.weight", dims: [64, 100], bytes: 6800 },
 *   { name: "blk.0.attn_q.weight", dims: [64, 64], bytes: 4352 },
 * ];
 * console.log(weightBytes(t)); // { total: 11152, perToken: 11220, tied: true }
 * ```
 */
export function weightBytes(
  tensors: readonly { name: string; dims: readonly number[]; bytes: number }[],
): { total: number; perToken: number; tied: boolean } {
  let total = 0;
  for (const t of tensors) total += t.bytes;
  const embd = tensors.find((t) => t.name === "token_embd.weight");
  const tied = !tensors.some((t) => t.name === "output.weight");
  const row = embd === undefined ? 0 : embd.bytes / embd.dims[embd.dims.length - 1];
  const perToken = embd === undefined ? total : tied ? total + row : total - embd.bytes + row;
  return { total, perToken, tied };
}

/** Median, min and max. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/**
 * Median and range of samples.
 *
 * @example
 * ```ts
 * import { spread } from "./vs_llama.ts";
 * console.log(spread([3, 1, 2, 10])); // { median: 2.5, min: 1, max: 10, n: 4 }
 * ```
 */
export function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], max: s[s.length - 1], n: s.length };
}

/**
 * A seeded shuffle (mulberry32 + Fisher-Yates), so an order can be repeated from its seed.
 *
 * @example
 * ```ts
 * import { seededShuffler } from "./vs_llama.ts";
 * const a = seededShuffler(7)([1, 2, 3, 4]);
 * const b = seededShuffler(7)([1, 2, 3, 4]);
 * console.log(a.join() === b.join()); // true
 * ```
 */
export function seededShuffler(seed: number): <T>(items: readonly T[]) => T[] {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return <T>(items: readonly T[]): T[] => {
    const a = [...items];
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  };
}
