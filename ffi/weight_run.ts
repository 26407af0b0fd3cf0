/**
 * Weight runs: the matrices a plan reads (a region, a byte range and a
 * layout), the sizes of what the kernels read and write for them, their
 * encoding for the library and their packing into 16-row panels.
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import type { AlignedBuffer, MemoryRegion } from "./memory.ts";
import { STATUS } from "./symbols.ts";
import { u32 } from "./_plan_words.ts";

export const RUN_WORDS = 24;
const MAX_MEMBERS = 8;

/**
 * Layouts of weight runs: `.cflow` tiles (docs/FORMAT.md) or packed 16-row
 * panels (docs/KERNELS.md).
 *
 * @example
 * ```ts
 * import { RUN_KIND } from "./weight_run.ts";
 * console.log(RUN_KIND.PACKED_Q8_0); // 5
 * ```
 */
export const RUN_KIND = {
  TILES_Q4_0: 1,
  TILES_Q8_0: 2,
  TILES_F32: 3,
  PACKED_Q4_0: 4,
  PACKED_Q8_0: 5,
  /** Tiles whose members each have their own tile type ({@link WeightRun.types}). */
  TILES: 6,
  /** Q4_1 panels: the Q4_0 record with 16 f16 mins after the scales (docs/KERNELS.md). */
  PACKED_Q4_1: 7,
  /** Q4_K panels: one 2,368-byte record per 16 rows and 256-column super-block. */
  PACKED_Q4_K: 8,
  /** Q6_K panels: one 3,360-byte record per 16 rows and 256-column super-block. */
  PACKED_Q6_K: 9,
  /** Q5_0 panels: the Q4_0 record with the rows' 32-bit fifth-bit words (352 bytes). */
  PACKED_Q5_0: 10,
  /**
   * Panels of a fused run whose members have different panel types (a Q4_K_M file's Q6_K
   * `attn_v` beside Q4_K `q` and `k`), member after member, each in its own type
   * ({@link WeightRun.types}: the tile type each was packed from).
   */
  PACKED_MIXED: 11,
} as const;

/** The panel types: what {@link panelQuants} gives and {@link packedBytes} takes. */
export type PanelQuant = "q4_0" | "q8_0" | "q4_1" | "q5_0" | "q4_k" | "q6_k";

/** One of {@link RUN_KIND}'s values. */
export type RunKind = typeof RUN_KIND[keyof typeof RUN_KIND];

/**
 * A weight run: 1-8 matrices of `cols` columns (fused projections) stored
 * in one layout at [offset, offset + length) of a region.
 *
 * @example
 * ```ts ignore
 * import { RUN_KIND, type WeightRun } from "./weight_run.ts";
 * const r: WeightRun = { kind: RUN_KIND.TILES_Q8_0, region: file, offset: 4096, length: 1 << 20, cols: 576, rows: [576] };
 * ```
 */
export interface WeightRun {
  /** Layout. */
  kind: RunKind;
  /** The mapping or allocation holding it. */
  region: MemoryRegion;
  /** First byte. */
  offset: number;
  /** Bytes. */
  length: number;
  /** Input columns. */
  cols: number;
  /** Output rows of each member. */
  rows: readonly number[];
  /**
   * Tile type of each member (`TILE_TYPE`, docs/FORMAT.md), for kinds
   * `TILES` and `PACKED_MIXED` only: members may differ (a Q4_K_M file's Q6_K
   * attn_v beside its Q4_K q and k), but must all be quantized or all float
   * (F32/F16/BF16).
   */
  types?: readonly number[];
}

/**
 * Bytes of one token's quantized activations for `cols` columns (Q8_0
 * blocks, their scales as f32 and their sums; packing.zig `ActRow`).
 *
 * @example
 * ```ts
 * import { actRowBytes } from "./weight_run.ts";
 * console.log(actRowBytes(576)); // 768
 * ```
 */
export function actRowBytes(cols: number): number {
  const ng = Math.ceil(cols / 32);
  const scales = Math.ceil((ng * 34) / 4) * 4;
  return Math.ceil((scales + ng * 8) / 64) * 64;
}

/**
 * Bytes of a run packed into 16-row panels: each member padded to whole
 * panels, 288 (Q4_0), 320 (Q4_1), 352 (Q5_0) or 544 (Q8_0) bytes per panel and group of
 * 32 columns, 2,368 (Q4_K) or 3,360 (Q6_K) per panel and 256 columns. `quant` is every
 * member's panel type, or one per member (as {@link panelQuants} gives them).
 *
 * @example
 * ```ts
 * import { packedBytes } from "./weight_run.ts";
 * console.log(packedBytes("q8_0", 64, [16])); // 1088
 * console.log(packedBytes(["q4_k", "q6_k"], 256, [16, 16])); // 5728
 * ```
 */
export function packedBytes(
  quant: PanelQuant | readonly PanelQuant[],
  cols: number,
  rows: readonly number[],
): number {
  if (typeof quant !== "string" && quant.length !== rows.length) {
    throw new RangeError(`packedBytes: ${quant.length} panel types for ${rows.length} members`);
  }
  let total = 0;
  rows.forEach((r, m) => {
    const q = typeof quant === "string" ? quant : quant[m];
    const groups = q === "q4_k" || q === "q6_k" ? Math.ceil(cols / 256) : Math.ceil(cols / 32);
    total += Math.ceil(r / 16) * groups * PANEL_RECORD[q];
  });
  return total;
}

export function runWords(r: WeightRun): Uint32Array {
  if (r.region.closed) throw new KernelError("plan", STATUS.HANDLE, "a run's region is closed");
  if (r.rows.length < 1 || r.rows.length > MAX_MEMBERS) {
    throw new RangeError(`plan: a run has ${r.rows.length} members, not 1..${MAX_MEMBERS}`);
  }
  if (!Number.isSafeInteger(r.offset) || r.offset < 0) {
    throw new RangeError(`plan: run offset ${r.offset}`);
  }
  if (!Number.isSafeInteger(r.length) || r.length < 1) {
    throw new RangeError(`plan: run length ${r.length}`);
  }
  const w = new Uint32Array(RUN_WORDS);
  w[0] = u32(r.kind, "run kind");
  w[1] = r.region.handle;
  w[2] = r.offset % 2 ** 32;
  w[3] = Math.floor(r.offset / 2 ** 32);
  w[4] = r.length % 2 ** 32;
  w[5] = Math.floor(r.length / 2 ** 32);
  w[6] = u32(r.cols, "run cols");
  w[7] = r.rows.length;
  r.rows.forEach((n, i) => w[8 + i] = u32(n, "run rows"));
  if (r.kind === RUN_KIND.TILES || r.kind === RUN_KIND.PACKED_MIXED) {
    if (r.types === undefined || r.types.length !== r.rows.length) {
      throw new RangeError(`plan: a TILES or PACKED_MIXED run needs one tile type per member`);
    }
    r.types.forEach((t, i) => w[16 + i] = u32(t, "run tile type"));
  } else if (r.types !== undefined) {
    throw new RangeError(`plan: only TILES and PACKED_MIXED runs carry per-member tile types`);
  }
  return w;
}

/**
 * Bytes of one row of a {@link PlanBuilder.moe} scratch buffer for experts
 * of width `expertFfn` over `hidden` (plan.zig `MoeScratch`).
 *
 * @example
 * ```ts
 * import { moeScratchBytes } from "./weight_run.ts";
 * console.log(moeScratchBytes(64, 32, true) > 0); // true
 * ```
 */
export function moeScratchBytes(hidden: number, expertFfn: number, quantized: boolean): number {
  const up = (n: number) => Math.ceil(n / 64) * 64;
  const x = quantized ? actRowBytes(hidden) : hidden * 4;
  return up(x) + up(2 * expertFfn * 4) + up(expertFfn * 4) +
    (quantized ? up(actRowBytes(expertFfn)) : 0) + up(hidden * 4);
}

/**
 * Whether a run's activations are quantized as Q8_K (one scale per 256
 * values, {@link PlanBuilder.quantizeK}) rather than Q8_0: when every member
 * is a K-quant (Q4_K, Q5_K, Q6_K, in tiles or panels), as llama.cpp's x86
 * build does for those types (their `vec_dot_type` is Q8_K). A run mixing
 * K-quants with other types keeps Q8_0; the kernels read either.
 *
 * @example
 * ```ts
 * import { kQuantRun, RUN_KIND } from "./weight_run.ts";
 * console.log(kQuantRun({ kind: RUN_KIND.PACKED_Q6_K, cols: 256, rows: [16] })); // true
 * ```
 */
export function kQuantRun(r: Pick<WeightRun, "kind" | "cols" | "rows" | "types">): boolean {
  if (r.cols % 256 !== 0) return false;
  if (r.kind === RUN_KIND.PACKED_Q4_K || r.kind === RUN_KIND.PACKED_Q6_K) return true;
  if (r.kind !== RUN_KIND.TILES && r.kind !== RUN_KIND.PACKED_MIXED) return false;
  if (r.types === undefined || r.types.length === 0) return false;
  // Tile types 7, 8, 9: Q4_K, Q5_K, Q6_K (formats/cflow/tile.ts).
  return r.types.every((t) => t === 7 || t === 8 || t === 9);
}

/** Bytes of one panel record of each type (packing.zig). */
const PANEL_RECORD: Record<PanelQuant, number> = {
  q4_0: 288,
  q8_0: 544,
  q4_1: 320,
  q5_0: 352,
  q4_k: 2368,
  q6_k: 3360,
};

/** The run kind of each panel type. */
const PANEL_KIND: Record<PanelQuant, RunKind> = {
  q4_0: RUN_KIND.PACKED_Q4_0,
  q8_0: RUN_KIND.PACKED_Q8_0,
  q4_1: RUN_KIND.PACKED_Q4_1,
  q5_0: RUN_KIND.PACKED_Q5_0,
  q4_k: RUN_KIND.PACKED_Q4_K,
  q6_k: RUN_KIND.PACKED_Q6_K,
};

/** The panel type of each tile type that has one (`TILE_TYPE`: Q4_0, Q8_0, Q4_1, Q5_0, Q4_K, Q6_K). */
const TILE_PANEL: ReadonlyMap<number, PanelQuant> = new Map([
  [1, "q4_0"],
  [2, "q8_0"],
  [4, "q4_1"],
  [5, "q5_0"],
  [7, "q4_k"],
  [9, "q6_k"],
]);

/**
 * The panel type each member of a tiled run packs into, or undefined when
 * the run stays in tiles: a member whose type has no panels (F32, F16, Q5_K,
 * ...), columns that are not whole records (groups of 32; super-blocks of
 * 256 for Q4_K and Q6_K), or members that read different activations (K
 * types read Q8_K rows, the others Q8_0 rows: a run mixing the two).
 * Members may otherwise differ: a Q4_K_M file's Q6_K `attn_v` packs beside
 * its Q4_K `attn_q` and `attn_k` (plan.zig `packed_mixed`).
 *
 * @example
 * ```ts ignore
 * import { panelQuants, RUN_KIND } from "./weight_run.ts";
 * console.log(panelQuants({ ...run, kind: RUN_KIND.TILES, types: [7, 7, 9] })); // ["q4_k", "q4_k", "q6_k"]
 * ```
 */
export function panelQuants(
  r: Pick<WeightRun, "kind" | "cols" | "rows" | "types">,
): PanelQuant[] | undefined {
  let types: readonly number[];
  if (r.kind === RUN_KIND.TILES_Q4_0) types = r.rows.map(() => 1);
  else if (r.kind === RUN_KIND.TILES_Q8_0) types = r.rows.map(() => 2);
  else if (r.kind === RUN_KIND.TILES && r.types !== undefined) types = r.types;
  else return undefined;
  if (types.length === 0 || types.length !== r.rows.length) return undefined;
  const quants: PanelQuant[] = [];
  for (const t of types) {
    const q = TILE_PANEL.get(t);
    if (q === undefined) return undefined;
    const k = q === "q4_k" || q === "q6_k";
    if (r.cols % (k ? 256 : 32) !== 0) return undefined;
    quants.push(q);
  }
  const k = quants.filter((q) => q === "q4_k" || q === "q6_k").length;
  if (k !== 0 && k !== quants.length) return undefined;
  return quants;
}

/**
 * Packs a tiled run of Q4_0, Q8_0, Q4_1, Q5_0, Q4_K or Q6_K members ({@link panelQuants}) into
 * 16-row panels at `dstOffset` of `dst` and returns the packed run (`PACKED_MIXED` when its
 * members' types differ). With `evictSource`, the source pages are
 * dropped (MADV_DONTNEED) as they are packed, so that packing a large
 * matrix never holds both copies.
 *
 * @example
 * ```ts ignore
 * import { packRun, packedBytes } from "./weight_run.ts";
 * const dst = allocAligned(packedBytes("q8_0", run.cols, run.rows), 64);
 * const packed = packRun(run, dst, 0);
 * ```
 */
export function packRun(
  src: WeightRun,
  dst: AlignedBuffer,
  dstOffset: number,
  options: { evictSource?: boolean } = {},
): WeightRun {
  const quants = panelQuants(src);
  if (quants === undefined) {
    throw new RangeError(
      "packRun: only runs of Q4_0, Q8_0, Q4_1, Q5_0, Q4_K and Q6_K tiles pack, K and other types apart",
    );
  }
  const length = packedBytes(quants, src.cols, src.rows);
  if (!Number.isSafeInteger(dstOffset) || dstOffset < 0 || dstOffset + length > dst.size) {
    throw new RangeError(`packRun: [${dstOffset}, +${length}) does not fit ${dst.size} bytes`);
  }
  const rc = openKernels().symbols.cf_pack(
    runWords(src),
    BigInt(RUN_WORDS),
    dst.handle,
    BigInt(dstOffset),
    BigInt(length),
    options.evictSource ? 1 : 0,
  );
  if (rc !== STATUS.OK) throw new KernelError("cf_pack", rc);
  const uniform = quants.every((q) => q === quants[0]);
  return {
    kind: uniform ? PANEL_KIND[quants[0]] : RUN_KIND.PACKED_MIXED,
    region: dst,
    offset: dstOffset,
    length,
    cols: src.cols,
    rows: src.rows,
    ...(uniform ? {} : { types: src.types }),
  };
}
