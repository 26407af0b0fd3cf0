/**
 * Mutation-based inputs for the property tests and the fuzz campaign: a
 * valid seed file plus fast-check-generated edits (byte sets, little-endian
 * u16/u32/u64 overwrites with boundary values, insertions, deletions,
 * truncation), and fully random byte strings behind a given prefix.
 *
 * @module
 */

import fc from "fast-check";

/** One edit of a byte string; positions are taken modulo the current length. */
export type Edit =
  | { readonly k: "set"; readonly at: number; readonly v: number }
  | { readonly k: "u16" | "u32"; readonly at: number; readonly v: number }
  | { readonly k: "u64"; readonly at: number; readonly v: bigint }
  | { readonly k: "insert"; readonly at: number; readonly bytes: Uint8Array }
  | { readonly k: "delete"; readonly at: number; readonly n: number }
  | { readonly k: "truncate"; readonly at: number };

/** Values at the edges of integer fields: 0, ±1, powers of two, all ones. */
export const U32_EDGES: readonly number[] = [
  0,
  1,
  2,
  3,
  4,
  7,
  8,
  31,
  32,
  63,
  64,
  127,
  128,
  255,
  256,
  1023,
  4096,
  0xffff,
  0x10000,
  0x7fffffff,
  0x80000000,
  0xfffffffe,
  0xffffffff,
];

/** Edge values of u64 fields (counts, lengths, offsets). */
export const U64_EDGES: readonly bigint[] = [
  0n,
  1n,
  2n,
  8n,
  64n,
  0x7fffffffn,
  0xffffffffn,
  1n << 32n,
  (1n << 53n) - 1n,
  1n << 53n,
  (1n << 63n) - 1n,
  1n << 63n,
  (1n << 64n) - 1n,
];

/** A position: mostly near the start (headers), sometimes anywhere. */
function position(headerBias: number): fc.Arbitrary<number> {
  return fc.oneof(
    { arbitrary: fc.nat({ max: headerBias }), weight: 3 },
    { arbitrary: fc.nat(), weight: 2 },
  );
}

/** One edit; `headerBias` is the span near the start where most edits land. */
export function editArb(headerBias = 256): fc.Arbitrary<Edit> {
  const at = position(headerBias);
  return fc.oneof(
    {
      arbitrary: fc.record({ k: fc.constant("set" as const), at, v: fc.nat({ max: 255 }) }),
      weight: 5,
    },
    {
      arbitrary: fc.record({
        k: fc.constant("u16" as const),
        at,
        v: fc.oneof(fc.constantFrom(0, 1, 0x7fff, 0x8000, 0xffff), fc.nat({ max: 0xffff })),
      }),
      weight: 1,
    },
    {
      arbitrary: fc.record({
        k: fc.constant("u32" as const),
        at,
        v: fc.oneof(fc.constantFrom(...U32_EDGES), fc.nat({ max: 0xffffffff })),
      }),
      weight: 3,
    },
    {
      arbitrary: fc.record({
        k: fc.constant("u64" as const),
        at,
        v: fc.oneof(fc.constantFrom(...U64_EDGES), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })),
      }),
      weight: 3,
    },
    {
      arbitrary: fc.record({
        k: fc.constant("insert" as const),
        at,
        bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
      }),
      weight: 1,
    },
    {
      arbitrary: fc.record({
        k: fc.constant("delete" as const),
        at,
        n: fc.integer({ min: 1, max: 16 }),
      }),
      weight: 1,
    },
    { arbitrary: fc.record({ k: fc.constant("truncate" as const), at: fc.nat() }), weight: 1 },
  );
}

/** Applies `edits` in order to a copy of `bytes`. */
export function applyEdits(bytes: Uint8Array, edits: readonly Edit[]): Uint8Array {
  let b = bytes.slice();
  for (const e of edits) {
    const n = b.length;
    switch (e.k) {
      case "set":
        if (n > 0) b[e.at % n] = e.v;
        break;
      case "u16":
      case "u32":
      case "u64": {
        const w = e.k === "u16" ? 2 : e.k === "u32" ? 4 : 8;
        if (n < w) break;
        const at = e.at % (n - w + 1);
        const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
        if (e.k === "u16") v.setUint16(at, e.v as number, true);
        else if (e.k === "u32") v.setUint32(at, e.v as number, true);
        else v.setBigUint64(at, e.v as bigint, true);
        break;
      }
      case "insert": {
        const at = e.at % (n + 1);
        const out = new Uint8Array(n + e.bytes.length);
        out.set(b.subarray(0, at));
        out.set(e.bytes, at);
        out.set(b.subarray(at), at + e.bytes.length);
        b = out;
        break;
      }
      case "delete": {
        if (n === 0) break;
        const at = e.at % n;
        const out = new Uint8Array(n - Math.min(e.n, n - at));
        out.set(b.subarray(0, at));
        out.set(b.subarray(at + e.n), at);
        b = out;
        break;
      }
      case "truncate":
        b = b.slice(0, e.at % (n + 1));
        break;
    }
  }
  return b;
}

/** A seed index and the edits to apply to it. */
export interface Mutation {
  /** Index into the seed list. */
  readonly seed: number;
  /** Edits, applied in order. */
  readonly edits: readonly Edit[];
}

/** Mutations of one of `seeds` files: 1 to `maxEdits` edits. */
export function mutationArb(
  seeds: number,
  maxEdits = 6,
  headerBias = 256,
): fc.Arbitrary<Mutation> {
  return fc.record({
    seed: fc.nat({ max: seeds - 1 }),
    edits: fc.array(editArb(headerBias), { minLength: 1, maxLength: maxEdits }),
  });
}

/** Random bytes after `prefix` (a magic number, say). */
export function randomAfter(prefix: Uint8Array, maxLength = 512): fc.Arbitrary<Uint8Array> {
  return fc.uint8Array({ maxLength }).map((tail) => {
    const out = new Uint8Array(prefix.length + tail.length);
    out.set(prefix);
    out.set(tail, prefix.length);
    return out;
  });
}

/** Short hex dump of a byte string, for counterexample messages. */
export function hex(b: Uint8Array, max = 64): string {
  const s = [...b.subarray(0, max)].map((x) => x.toString(16).padStart(2, "0")).join("");
  return b.length > max ? `${s}… (${b.length} bytes)` : s;
}
