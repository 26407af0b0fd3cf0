/**
 * Plans: the forward pass as a list of operations that TypeScript decides
 * and the kernel library runs in one call per token (or per batch of
 * prompt tokens), with its worker pool spinning between operations.
 *
 * Operations name bytes of one workspace allocation (activations, norms,
 * the KV cache) and weight runs (a region, a byte range and a layout),
 * never pointers. The library checks every buffer of every operation for
 * the largest batch once, when the plan is built, and pins the regions the
 * plan reads so that they cannot be released under it.
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import { openKernels } from "./kernels.ts";
import type { AlignedBuffer, MemoryRegion } from "./memory.ts";
import { STATUS } from "./symbols.ts";

const OP_WORDS = 16;
const RUN_WORDS = 24;
const MAX_MEMBERS = 8;
/** Largest batch a plan accepts (plan.zig `max_batch`). */
export const MAX_PLAN_BATCH = 1024;

/**
 * Layouts of weight runs: `.cflow` tiles (docs/FORMAT.md) or packed 16-row
 * panels (docs/KERNELS.md).
 *
 * @example
 * ```ts
 * import { RUN_KIND } from "./plan.ts";
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
 * import { RUN_KIND, type WeightRun } from "./plan.ts";
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
 * A buffer of the workspace: a byte offset and the byte stride between the
 * rows of a batch (0: one row shared by the whole batch).
 *
 * @example
 * ```ts
 * import type { Buf } from "./plan.ts";
 * const x: Buf = { offset: 0, stride: 2304 };
 * ```
 */
export interface Buf {
  /** Byte offset in the workspace. */
  offset: number;
  /** Bytes between rows (0: a single row). */
  stride: number;
}

/**
 * Bytes of one token's quantized activations for `cols` columns (Q8_0
 * blocks, their scales as f32 and their sums; packing.zig `ActRow`).
 *
 * @example
 * ```ts
 * import { actRowBytes } from "./plan.ts";
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
 * import { packedBytes } from "./plan.ts";
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

function u32(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`plan: ${what} ${value} is not a u32`);
  }
  return value;
}

const F32_BITS = new Float32Array(1);
const F32_WORD = new Uint32Array(F32_BITS.buffer);

/** The IEEE bits of `x` rounded to f32. */
function f32Bits(x: number, what: string): number {
  if (!Number.isFinite(x)) throw new RangeError(`plan: ${what} ${x} is not finite`);
  F32_BITS[0] = x;
  return F32_WORD[0];
}

function runWords(r: WeightRun): Uint32Array {
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
 * import { moeScratchBytes } from "./plan.ts";
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
 * import { kQuantRun, RUN_KIND } from "./plan.ts";
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
 * import { panelQuants, RUN_KIND } from "./plan.ts";
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
 * import { packRun, packedBytes } from "./plan.ts";
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

/** Options of one operation. */
export interface OpOptions {
  /** Only the batch's last row (the logits of a prompt). */
  lastOnly?: boolean;
}

/**
 * A named range of a plan's operations, [first, last).
 *
 * @example
 * ```ts
 * import type { PlanSection } from "./plan.ts";
 * const s: PlanSection = { name: "layer 0", first: 1, last: 20 };
 * ```
 */
export interface PlanSection {
  /** What the operations compute. */
  name: string;
  /** Index of the first operation. */
  first: number;
  /** Index after the last operation. */
  last: number;
}

/**
 * Builds a plan operation by operation. Each method names its buffers;
 * see kernels-zig/src/plan.zig for what each operation computes.
 *
 * @example
 * ```ts ignore
 * import { PlanBuilder } from "./plan.ts";
 * const b = new PlanBuilder();
 * b.rmsNorm(x, normWeights, xb, 576, 1e-5);
 * const plan = b.build(workspace, 64, 2048);
 * plan.run(new Uint32Array([1]), 0);
 * ```
 */
export class PlanBuilder {
  #ops: number[] = [];
  #runs: WeightRun[] = [];
  #sections: PlanSection[] = [];

  /**
   * Starts a named section: the operations added from here to the next
   * section (or the end) belong to it. Sections are what
   * {@link Plan.runOps} profiles.
   */
  section(name: string): void {
    const first = this.#ops.length / OP_WORDS;
    const last = this.#sections.at(-1);
    if (last !== undefined) last.last = first;
    this.#sections.push({ name, first, last: first });
  }

  #op(code: number, args: number[], options?: OpOptions): void {
    if (args.length > OP_WORDS - 2) throw new RangeError("plan: too many arguments");
    const words = new Array<number>(OP_WORDS).fill(0);
    words[0] = code;
    words[1] = options?.lastOnly ? 1 : 0;
    args.forEach((a, i) => words[2 + i] = u32(a, `argument ${i} of operation ${code}`));
    this.#ops.push(...words);
  }

  #run(r: WeightRun): number {
    const i = this.#runs.indexOf(r);
    if (i >= 0) return i;
    this.#runs.push(r);
    return this.#runs.length - 1;
  }

  /** out = row `token` of the run's matrix, times `scale`. */
  embed(run: WeightRun, out: Buf, scale: number): void {
    this.#op(1, [this.#run(run), out.offset, out.stride, f32Bits(scale, "embedding scale")]);
  }

  /** out = RMSNorm(x) * w over n values. */
  rmsNorm(x: Buf, w: number, out: Buf, n: number, eps: number, options?: OpOptions): void {
    this.#op(2, [x.offset, x.stride, w, out.offset, out.stride, n, f32Bits(eps, "eps")], options);
  }

  /** q = Q8_0 quantization of x (n a multiple of 32) with scales and sums. */
  quantize(x: Buf, n: number, q: Buf, options?: OpOptions): void {
    this.#op(3, [x.offset, x.stride, n, q.offset, q.stride], options);
  }

  /**
   * q = Q8_K quantization of x (n a multiple of 256): ggml's rule for the
   * activations of K-quant weights, one scale per 256 values, written as
   * ActRows (act_q8_k.zig); see {@link kQuantRun}.
   */
  quantizeK(x: Buf, n: number, q: Buf, options?: OpOptions): void {
    this.#op(20, [x.offset, x.stride, n, q.offset, q.stride], options);
  }

  /** y = W x: x quantized (Q4_0/Q8_0 runs) or f32 (F32 tiles). */
  matmul(run: WeightRun, x: Buf, y: Buf, options?: OpOptions): void {
    this.#op(4, [this.#run(run), x.offset, x.stride, y.offset, y.stride], options);
  }

  /** a += b over n values. */
  add(a: Buf, b: Buf, n: number): void {
    this.#op(5, [a.offset, a.stride, b.offset, b.stride, n]);
  }

  /** a += v (one vector at byte offset v) over n values. */
  addVec(a: Buf, v: number, n: number): void {
    this.#op(6, [a.offset, a.stride, v, n]);
  }

  /** RMSNorm of each of n heads of headDim values, weights at w. */
  headNorm(v: Buf, heads: number, headDim: number, w: number, eps: number): void {
    this.#op(7, [v.offset, v.stride, heads, headDim, w, f32Bits(eps, "eps")]);
  }

  /** RoPE at each row's position; freqs holds nRot/2 inverse frequencies. */
  rope(x: Buf, heads: number, headDim: number, nRot: number, freqs: number, mode: number): void {
    this.#op(8, [x.offset, x.stride, heads, headDim, nRot, freqs, mode]);
  }

  /**
   * Copies each row (kvDim values, heads of headDim) to its position in a
   * head-major cache (kvType 1: f32, 2: f16, 3: Q8_0 blocks, head_dim a multiple of 32) of
   * `context` positions per head.
   */
  kvStore(src: Buf, cache: number, kvDim: number, kvType: number, headDim: number): void {
    this.#op(9, [src.offset, src.stride, cache, kvDim, kvType, headDim]);
  }

  /** Grouped-query attention of each row over cache positions up to its own. */
  attention(a: {
    q: Buf;
    k: number;
    v: number;
    kvType: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    window: number;
    scale: number;
    softcap: number;
    out: Buf;
  }): void {
    this.#op(10, [
      a.q.offset,
      a.q.stride,
      a.k,
      a.v,
      a.kvType,
      a.heads,
      a.kvHeads,
      a.headDim,
      a.window,
      f32Bits(a.scale, "attention scale"),
      f32Bits(a.softcap, "attention soft-cap"),
      a.out.offset,
      a.out.stride,
    ]);
  }

  /** out = act(gu[0, n)) * gu[n, 2n), act SiLU or GELU (tanh). */
  gated(kind: "silu" | "gelu", gu: Buf, out: Buf, n: number): void {
    this.#op(11, [kind === "silu" ? 0 : 1, gu.offset, gu.stride, out.offset, out.stride, n]);
  }

  /** x = cap * tanh(x / cap) over n values. */
  softcap(x: Buf, n: number, cap: number, options?: OpOptions): void {
    this.#op(12, [x.offset, x.stride, n, f32Bits(cap, "soft-cap")], options);
  }

  /**
   * Routes each row: the f32 router (nExperts rows of n floats at byte
   * offset `router`) gives logits, their softmax p, and the topK largest p
   * (ties: the lower index) are written to `sel` as topK u32 expert ids then
   * topK f32 weights, renormalized to sum 1 when `renormalize`.
   */
  route(
    x: Buf,
    router: number,
    n: number,
    nExperts: number,
    topK: number,
    renormalize: boolean,
    sel: Buf,
  ): void {
    this.#op(13, [
      x.offset,
      x.stride,
      router,
      n,
      nExperts,
      topK,
      renormalize ? 1 : 0,
      sel.offset,
      sel.stride,
    ]);
  }

  /**
   * out += the weighted sum of each row's selected experts (from `sel`,
   * written by {@link route}) applied to `x` (quantized for quantized runs):
   * expert e is `gateUp[e]` (2 members), the activation, then `down[e]`.
   * Only the selected experts' runs are read, once per batch each; their
   * bytes are added to the u64 at byte offset `counter`. `scratch` needs
   * {@link moeScratchBytes} per row, 64-byte aligned.
   */
  moe(m: {
    gateUp: readonly WeightRun[];
    down: readonly WeightRun[];
    topK: number;
    sel: Buf;
    x: Buf;
    act: "silu" | "gelu";
    scratch: Buf;
    out: Buf;
    counter: number;
  }): void {
    if (m.gateUp.length !== m.down.length || m.gateUp.length < 1) {
      throw new RangeError("plan: moe needs one gate/up and one down run per expert");
    }
    const g0 = this.#runs.length;
    this.#runs.push(...m.gateUp);
    const d0 = this.#runs.length;
    this.#runs.push(...m.down);
    this.#op(14, [
      g0,
      d0,
      m.gateUp.length,
      m.topK,
      m.sel.offset,
      m.sel.stride,
      m.x.offset,
      m.x.stride,
      m.act === "silu" ? 0 : 1,
      m.scratch.offset,
      m.scratch.stride,
      m.out.offset,
      m.out.stride,
      m.counter,
    ]);
  }

  /** y *= sigmoid(v . x): v nX floats at byte offset v. */
  gateScale(y: Buf, nY: number, v: number, x: Buf, nX: number): void {
    this.#op(15, [y.offset, y.stride, nY, v, x.offset, x.stride, nX]);
  }

  /** out = alpha a + beta b over n values (a is not read when alpha is 0). */
  lincomb(out: Buf, a: Buf, b: Buf, n: number, alpha: number, beta: number): void {
    this.#op(16, [
      out.offset,
      out.stride,
      a.offset,
      a.stride,
      b.offset,
      b.stride,
      n,
      f32Bits(alpha, "alpha"),
      f32Bits(beta, "beta"),
    ]);
  }

  /**
   * Pins each row's selected experts (a {@link route} selection row, which
   * needs room for topK more u32 words: the slots this fills) of `layer` in
   * slots of the staging area `stage`, starting the direct reads of those
   * not cached from the file ranges at `spans` (nExperts pairs of u64
   * offset, length in the workspace). Returns at once; {@link moeStaged}
   * waits for the reads.
   */
  fetch(
    stage: { handle: number },
    layer: number,
    nExperts: number,
    topK: number,
    sel: Buf,
    spans: number,
  ): void {
    this.#op(18, [stage.handle, layer, nExperts, topK, sel.offset, sel.stride, spans]);
  }

  /**
   * {@link moe} over the experts a {@link fetch} pinned: each expert's tiles
   * come from its staging slot, laid out as `gateUp` and `down` (the
   * template runs, whose own bytes are not read); the pins are released.
   */
  moeStaged(m: {
    stage: { handle: number };
    gateUp: WeightRun;
    down: WeightRun;
    nExperts: number;
    topK: number;
    sel: Buf;
    x: Buf;
    act: "silu" | "gelu";
    scratch: Buf;
    out: Buf;
    counter: number;
  }): void {
    const t = this.#runs.length;
    this.#runs.push(m.gateUp, m.down);
    this.#op(19, [
      m.stage.handle,
      t,
      m.nExperts,
      m.topK,
      m.sel.offset,
      m.sel.stride,
      m.x.offset,
      m.x.stride,
      m.act === "silu" ? 0 : 1,
      m.scratch.offset,
      m.scratch.stride,
      m.out.offset,
      m.out.stride,
      m.counter,
    ]);
  }

  /** The monotonic clock in ns as a u64 at byte offset `slot` (8-byte aligned). */
  timestamp(slot: number): void {
    this.#op(17, [slot]);
  }

  /**
   * Hands the operations to the library, which checks them against the
   * workspace for batches of up to `maxTokens` and a KV cache of `context`
   * positions.
   */
  build(workspace: AlignedBuffer, maxTokens: number, context: number): Plan {
    if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_PLAN_BATCH) {
      throw new RangeError(`plan: batch ${maxTokens} is not in [1, ${MAX_PLAN_BATCH}]`);
    }
    const ops = Uint32Array.from(this.#ops);
    const runs = new Uint32Array(this.#runs.length * RUN_WORDS);
    this.#runs.forEach((r, i) => runs.set(runWords(r), i * RUN_WORDS));
    const s = openKernels().symbols;
    const where = new Uint32Array(2);
    const handle = s.cf_plan_create(
      workspace.handle,
      ops,
      BigInt(ops.length),
      runs,
      BigInt(runs.length),
      maxTokens,
      u32(context, "context"),
      where,
    );
    if (handle <= 0) {
      const names = ["", "embed", "rms_norm", "quantize", "matmul", "add", "add_vec", "head_norm"]
        .concat(["rope", "kv_store", "attention", "gated", "softcap", "route", "moe"])
        .concat(["gate_scale", "lincomb", "timestamp", "fetch", "moe_staged", "quantize_k"]);
      const detail = where[0] === 1
        ? `run ${where[1]} (${JSON.stringify({ ...this.#runs[where[1]], region: undefined })})`
        : where[0] === 2
        ? `operation ${where[1]} (${names[ops[where[1] * OP_WORDS]] ?? "unknown"})`
        : undefined;
      throw new KernelError("cf_plan_create", handle, detail);
    }
    const count = ops.length / OP_WORDS;
    const sections = this.#sections.map((x, i, all) => ({
      ...x,
      last: i === all.length - 1 ? count : x.last,
    }));
    return new Plan(handle, maxTokens, sections);
  }
}

/**
 * A checked plan held by the library.
 *
 * @example
 * ```ts ignore
 * using plan = builder.build(workspace, 64, 2048);
 * plan.run(new Uint32Array([42]), 0);
 * ```
 */
export class Plan {
  #handle: number;
  /** Largest batch. */
  readonly maxTokens: number;
  /** The named operation ranges of the plan, in order ({@link PlanBuilder.section}). */
  readonly sections: readonly PlanSection[];

  /** @internal Use {@link PlanBuilder.build}. */
  constructor(handle: number, maxTokens: number, sections: readonly PlanSection[] = []) {
    this.#handle = handle;
    this.maxTokens = maxTokens;
    this.sections = sections;
  }

  /**
   * Runs operations [first, last) only, on the pool; running every section
   * in order is exactly one {@link run}. For profiling.
   */
  runOps(tokens: Uint32Array, pos: number, first: number, last: number): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run_ops", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    const rc = openKernels().symbols.cf_plan_run_ops(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      u32(pos, "position"),
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_ops", rc);
  }

  /**
   * Runs operations [first, last) (default: all) for rows that each carry a
   * KV base and a position: row t is the token at position `positions[t]`
   * of a sequence whose keys and values sit at cache indices from
   * `bases[t]` on (with the plan's context shared by several sequences, for
   * example sequence s at s x n). Each row gets exactly the arithmetic it
   * gets in a run of its own sequence. Two rows may not share a cache index.
   *
   * @example
   * ```ts ignore
   * // Two sequences of a plan built for 2 x 512 positions, one token each.
   * plan.runRows(new Uint32Array([7, 9]), new Uint32Array([0, 512]), new Uint32Array([3, 10]));
   * ```
   */
  runRows(
    tokens: Uint32Array,
    bases: Uint32Array,
    positions: Uint32Array,
    first = 0,
    last = 0xffffffff,
  ): void {
    this.#checkRows(tokens, bases, positions);
    const rc = openKernels().symbols.cf_plan_run_rows(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      bases,
      positions,
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_rows", rc);
  }

  /** What {@link runRows} and {@link runRowsAsync} check before the call. */
  #checkRows(tokens: Uint32Array, bases: Uint32Array, positions: Uint32Array): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run_rows", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    if (bases.length !== tokens.length || positions.length !== tokens.length) {
      throw new RangeError(
        `plan: ${tokens.length} tokens with ${bases.length} bases and ${positions.length} positions`,
      );
    }
  }

  /**
   * {@link runRows} on one of Deno's blocking threads, so the event loop
   * runs meanwhile. The plan must not be closed until the promise settles.
   *
   * @example
   * ```ts ignore
   * await plan.runRowsAsync(new Uint32Array([7]), new Uint32Array([0]), new Uint32Array([3]));
   * ```
   */
  async runRowsAsync(
    tokens: Uint32Array,
    bases: Uint32Array,
    positions: Uint32Array,
    first = 0,
    last = 0xffffffff,
  ): Promise<void> {
    this.#checkRows(tokens, bases, positions);
    // The call owns its buffers until it settles: private copies.
    const rc = await openKernels().symbols.cf_plan_run_rows_async(
      this.#handle,
      tokens.slice(),
      BigInt(tokens.length),
      bases.slice(),
      positions.slice(),
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_rows", rc);
  }

  /**
   * Runs the tokens at positions [pos, pos + tokens.length), on the pool or
   * (`singleThread`) on the calling thread alone; the results are the same.
   */
  run(tokens: Uint32Array, pos: number, singleThread = false): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    const rc = openKernels().symbols.cf_plan_run(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      u32(pos, "position"),
      singleThread ? 1 : 0,
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run", rc);
  }

  /**
   * Like {@link run}, on one of Deno's blocking threads, so the event loop
   * runs meanwhile; aborting `signal` stops the run before its next
   * operation and rejects with the signal's reason. A stopped run leaves the
   * KV cache rows of its positions partly written: run them again before
   * reading them. The plan must not be closed until the promise settles.
   */
  async runAsync(tokens: Uint32Array, pos: number, signal?: AbortSignal): Promise<void> {
    if (this.#handle === 0) throw new KernelError("cf_plan_run", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    signal?.throwIfAborted();
    const s = openKernels().symbols;
    const handle = this.#handle;
    let rc = s.cf_plan_cancel(handle, 0);
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_cancel", rc);
    const cancel = () => s.cf_plan_cancel(handle, 1);
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      // The call owns `tokens` until it settles: keep a private copy.
      rc = await s.cf_plan_run_async(
        handle,
        tokens.slice(),
        BigInt(tokens.length),
        u32(pos, "position"),
        0,
      );
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
    if (rc === STATUS.CANCELLED) {
      signal?.throwIfAborted();
      throw new KernelError("cf_plan_run", rc);
    }
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run", rc);
  }

  /** Frees the plan and unpins its regions. */
  close(): void {
    if (this.#handle === 0) return;
    const rc = openKernels().symbols.cf_plan_destroy(this.#handle);
    this.#handle = 0;
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_destroy", rc);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
