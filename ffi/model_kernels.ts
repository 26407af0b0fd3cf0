/**
 * Kernels the forward pass calls: matrix-vector products straight out of
 * the tiles of a mapped `.cflow`/`.vflow` file (named by region handle and
 * byte range, never by pointer), and grouped-query attention over a KV
 * cache. Arguments are checked here and again in the library.
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import type { Kernels } from "./kernels.ts";
import { sz } from "./_kernel_args.ts";
import type { MemoryRegion } from "./memory.ts";
import { STATUS } from "./symbols.ts";

const LARGE_SIZES = new Map<number, bigint>();

/** A size that may exceed 2^20 (file offsets, cache lengths), memoized: the same few recur every token. */
function sizeArg(n: number): bigint {
  if (n < 1 << 20) return sz(n);
  let b = LARGE_SIZES.get(n);
  if (b === undefined) {
    if (LARGE_SIZES.size > 65536) LARGE_SIZES.clear();
    b = BigInt(n);
    LARGE_SIZES.set(n, b);
  }
  return b;
}

/** Tile types (docs/FORMAT.md). */
const TILE_TYPES = new Set([1, 2, 3]);

/**
 * Activations for {@link tilesMatvec}: Q8_0 blocks for Q4_0/Q8_0 tiles,
 * f32 values for F32 tiles.
 *
 * @example
 * ```ts
 * import type { Activation } from "./model_kernels.ts";
 * const a: Activation = { f32: new Float32Array(4) };
 * ```
 */
export interface Activation {
  /** Q8_0 blocks covering the columns (zero-padded to whole groups). */
  q8?: Uint8Array;
  /** f32 values of the columns. */
  f32?: Float32Array;
}

/**
 * y = W x for a tiled run of a mapped file: one matrix or several
 * interleaved by output stripe (`memberRows` gives each one's rows; their
 * outputs follow one another in `y`).
 *
 * @example
 * ```ts ignore
 * import { tilesMatvec } from "./model_kernels.ts";
 * tilesMatvec(kernels, file, entry.offset, entry.length, 1, 576, new Uint32Array([576, 192, 192]), { q8 }, y);
 * ```
 */
export function tilesMatvec(
  k: Kernels,
  region: MemoryRegion,
  offset: number,
  length: number,
  tileType: number,
  cols: number,
  memberRows: Uint32Array,
  x: Activation,
  y: Float32Array,
): void {
  const fn = "tilesMatvec";
  if (region.closed) throw new KernelError("cf_tiles_matvec", STATUS.HANDLE);
  if (!TILE_TYPES.has(tileType)) throw new RangeError(`${fn}: unknown tile type ${tileType}`);
  for (const [name, v] of [["offset", offset], ["length", length], ["cols", cols]] as const) {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`${fn}: ${name} ${v} is not an integer >= 0`);
    }
  }
  if (offset + length > region.size) {
    throw new RangeError(`${fn}: [${offset}, ${offset + length}) is outside the region`);
  }
  if (!(memberRows instanceof Uint32Array) || memberRows.length < 1 || memberRows.length > 8) {
    throw new RangeError(`${fn}: memberRows must be a Uint32Array of 1 to 8 row counts`);
  }
  const rows = memberRows.reduce((a, b) => a + b, 0);
  if (y.length < rows) throw new RangeError(`${fn}: y holds ${y.length}, needs ${rows}`);
  const groups = Math.ceil(cols / 32);
  const q8 = x.q8 ?? new Uint8Array(0);
  const f32 = x.f32 ?? new Float32Array(0);
  if (tileType === 3 && f32.length < cols) {
    throw new RangeError(`${fn}: f32 activation holds ${f32.length}, needs ${cols}`);
  }
  if (tileType !== 3 && q8.length < groups * 34) {
    throw new RangeError(`${fn}: Q8_0 activation holds ${q8.length} bytes, needs ${groups * 34}`);
  }
  const rc = k.symbols.cf_tiles_matvec(
    region.handle,
    sizeArg(offset),
    sizeArg(length),
    tileType,
    sz(cols),
    memberRows.length,
    memberRows,
    q8,
    sz(q8.length),
    f32,
    sz(f32.length),
    y,
    sz(y.length),
  );
  if (rc !== STATUS.OK) throw new KernelError("cf_tiles_matvec", rc);
}

/**
 * A KV cache layer: f32, or f16 (stored in a Float16Array).
 *
 * @example
 * ```ts
 * import type { KvBuffer } from "./model_kernels.ts";
 * const k: KvBuffer = new Float16Array(64);
 * ```
 */
export type KvBuffer = Float32Array | Float16Array;

/**
 * Grouped-query attention of one token: for each of `nHeads` query heads
 * (q: nHeads x headDim), softmax(scale * q.K[j]) over cache rows
 * [first, nPos) weighted into V. `scores` is scratch of nHeads x nPos.
 *
 * @example
 * ```ts ignore
 * import { attention } from "./model_kernels.ts";
 * attention(kernels, q, 9, 3, 64, kCache, vCache, 0, pos + 1, 0.125, 0, scores, out);
 * ```
 */
export function attention(
  k: Kernels,
  q: Float32Array,
  nHeads: number,
  nKvHeads: number,
  headDim: number,
  kCache: KvBuffer,
  vCache: KvBuffer,
  first: number,
  nPos: number,
  scale: number,
  softcap: number,
  scores: Float32Array,
  out: Float32Array,
): void {
  const fn = "attention";
  const f16 = kCache instanceof Float16Array;
  if (f16 !== (vCache instanceof Float16Array)) {
    throw new TypeError(`${fn}: K and V caches must have the same type`);
  }
  for (
    const [name, v] of [["nHeads", nHeads], ["nKvHeads", nKvHeads], ["headDim", headDim], [
      "nPos",
      nPos,
    ]] as const
  ) {
    if (!Number.isSafeInteger(v) || v < 1 || v > 0xffffffff) {
      throw new RangeError(`${fn}: ${name} ${v} is not a positive integer`);
    }
  }
  if (nHeads % nKvHeads !== 0) {
    throw new RangeError(`${fn}: nKvHeads ${nKvHeads} does not divide nHeads ${nHeads}`);
  }
  if (!Number.isSafeInteger(first) || first < 0 || first >= nPos) {
    throw new RangeError(`${fn}: first ${first} is not in [0, ${nPos})`);
  }
  const need = nPos * nKvHeads * headDim;
  if (kCache.length < need || vCache.length < need) {
    throw new RangeError(`${fn}: caches hold fewer than ${need} values`);
  }
  if (q.length < nHeads * headDim || out.length < nHeads * headDim) {
    throw new RangeError(`${fn}: q and out need ${nHeads * headDim} values`);
  }
  if (scores.length < nHeads * nPos) {
    throw new RangeError(`${fn}: scores holds ${scores.length}, needs ${nHeads * nPos}`);
  }
  if (!Number.isFinite(scale) || !Number.isFinite(softcap) || softcap < 0) {
    throw new RangeError(`${fn}: bad scale or softcap`);
  }
  const rc = k.symbols.cf_attention(
    q,
    nHeads,
    nKvHeads,
    headDim,
    kCache,
    vCache,
    f16 ? 2 : 1,
    sizeArg(Math.min(kCache.length, vCache.length)),
    first,
    nPos,
    scale,
    softcap,
    scores,
    sizeArg(scores.length),
    out,
    sz(out.length),
  );
  if (rc !== STATUS.OK) throw new KernelError("cf_attention", rc);
}
