/**
 * The KV cache's layout: what one position of one head takes in each element
 * type, where sequence s of a cache shared by several sequences keeps its
 * rows, and copying a prefix from one sequence to another. The plan's
 * `kv_store` and `attention` operations (kernels-zig/src/plan.zig) read and
 * write the same layout; this file only knows bytes.
 *
 * Layout of one layer's K (or V) cache: `[kv head][sequence x context +
 * position][one head row]`, so that attention streams each head's rows
 * contiguously. A head row is head_dim f32 or f16 values, or for `q8_0`
 * head_dim / 32 Q8_0 blocks (an f16 scale and 32 int8 quants, 34 bytes:
 * llama.cpp's `-ctk q8_0 -ctv q8_0`).
 *
 * @module
 */

import type { MemoryRegion } from "../ffi/mod.ts";
import type { ModelConfig } from "./config.ts";

/** Element types of the KV cache. */
export type KvCacheType = "f16" | "f32" | "q8_0";

/** The KV cache types, for argument parsing. */
export const KV_CACHE_TYPES: readonly KvCacheType[] = ["f16", "f32", "q8_0"];

/** The plan's code for a KV cache type (plan.zig `kv_store`). */
export function kvPlanType(type: KvCacheType): 1 | 2 | 3 {
  return type === "f32" ? 1 : type === "f16" ? 2 : 3;
}

/**
 * Bytes of one head's row of one position: head_dim values, or for `q8_0`
 * head_dim / 32 blocks of 34 bytes. Throws a RangeError for `q8_0` when
 * head_dim is not a multiple of 32.
 *
 * @example
 * ```ts
 * import { kvRowBytes } from "./kv_cache.ts";
 * kvRowBytes("q8_0", 64); // 68
 * ```
 */
export function kvRowBytes(type: KvCacheType, headDim: number): number {
  if (!Number.isSafeInteger(headDim) || headDim < 1) {
    throw new RangeError(`kv cache: head dimension ${headDim} is not a positive integer`);
  }
  if (type === "f32") return headDim * 4;
  if (type === "f16") return headDim * 2;
  if (headDim % 32 !== 0) {
    throw new RangeError(
      `kv cache: q8_0 needs a head dimension that is a multiple of 32; this model's is ${headDim} (use f16)`,
    );
  }
  return (headDim / 32) * 34;
}

/**
 * KV cache bytes per position over every layer (K and V, every KV head).
 *
 * @example
 * ```ts ignore
 * import { kvBytesPerPosition } from "./kv_cache.ts";
 * kvBytesPerPosition(model.config, "f16");
 * ```
 */
export function kvBytesPerPosition(c: ModelConfig, type: KvCacheType): number {
  return c.layers * 2 * c.kvHeads * kvRowBytes(type, c.headDim);
}

/**
 * Where the K and V caches of every plan step lie in a workspace, and the
 * copies between sequences. Per model instance: it holds offsets, not the
 * bytes (the workspace does).
 *
 * @example
 * ```ts ignore
 * const kv = new KvLayout({ type: "f16", heads: 2, headDim: 64, context: 512, sequences: 4 });
 * const k = L.take(kv.cacheBytes); // one layer's K cache
 * ```
 */
export class KvLayout {
  /** Element type. */
  readonly type: KvCacheType;
  /** KV heads. */
  readonly heads: number;
  /** Positions per sequence. */
  readonly context: number;
  /** Sequences sharing the cache. */
  readonly sequences: number;
  /** Bytes of one head row (one position of one head). */
  readonly rowBytes: number;
  /** Bytes of one layer's K (or V) cache. */
  readonly cacheBytes: number;

  /** Checks the shape; throws a RangeError naming what is out of range. */
  constructor(
    o: { type: KvCacheType; heads: number; headDim: number; context: number; sequences: number },
  ) {
    for (
      const [name, v] of [["heads", o.heads], ["context", o.context], [
        "sequences",
        o.sequences,
      ]] as const
    ) {
      if (!Number.isSafeInteger(v) || v < 1) {
        throw new RangeError(`kv cache: ${name} ${v} is not a positive integer`);
      }
    }
    this.type = o.type;
    this.heads = o.heads;
    this.context = o.context;
    this.sequences = o.sequences;
    this.rowBytes = kvRowBytes(o.type, o.headDim);
    const bytes = o.heads * o.sequences * o.context * this.rowBytes;
    if (!Number.isSafeInteger(bytes)) throw new RangeError("kv cache: size overflows");
    this.cacheBytes = bytes;
  }

  /**
   * Copies positions [0, length) of sequence `from` to sequence `to` in
   * every cache at `bases` (offsets of K and V caches in `memory`). The
   * caller has checked the sequences and the length.
   */
  copyPrefix(
    memory: MemoryRegion,
    bases: readonly number[],
    from: number,
    to: number,
    length: number,
  ): void {
    const bytes = length * this.rowBytes;
    const buffer = new Uint8Array(bytes);
    const headBytes = this.sequences * this.context * this.rowBytes;
    for (const base of bases) {
      for (let h = 0; h < this.heads; h++) {
        const head = base + h * headBytes;
        memory.read(head + from * this.context * this.rowBytes, bytes, buffer);
        memory.write(head + to * this.context * this.rowBytes, buffer);
      }
    }
  }
}
