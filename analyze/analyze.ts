/**
 * The critical-path bandwidth model of report section 4.5 (eq. 4.23), as
 * pure functions over a geometry: per layer, three weight streams
 * (attention, dense FFN, the `top_k` selected experts), and the bytes a
 * token must stream before each layer's output exists.
 *
 * ```
 * B_critical = sum over layers of max(B_attn, B_dense / (dense_delay + 1),
 *                                     B_expert / (expert_delay + 1))
 * B_naive    = the same with both delays 0
 * B_serial   = sum over layers of (B_attn + B_dense + B_expert)
 * reduction  = B_naive / B_critical
 * ```
 *
 * docs/ANALYZE.md explains the model, the units and the reproduced numbers.
 *
 * @module
 */

/** The combine style, delays and style parameter one architecture name fixes. */
export interface PipelineArch {
  /** GlobalHeader `combine_style` (docs/ARCHITECTURES.md). */
  combineStyle: number;
  /** Layers the dense FFN output is delayed by. */
  denseDelay: number;
  /** Layers the expert output is delayed by. */
  expertDelay: number;
  /** Merge interval (arch1) or fixed-point iterations (arch5); 0 otherwise. */
  styleParam: number;
}

/**
 * `combine_style` 5: every stored layer (block) runs `style_param` times.
 *
 * @example
 * ```ts
 * import { FIXED_POINT_STYLE, PIPELINE_NATIVE_ARCHS } from "./analyze.ts";
 * console.log(PIPELINE_NATIVE_ARCHS.arch5_fixed_point.combineStyle === FIXED_POINT_STYLE); // true
 * ```
 */
export const FIXED_POINT_STYLE = 5;

/**
 * The architecture names a user types (report Table 4.1, docs/ARCHITECTURES.md).
 *
 * @example
 * ```ts
 * import { PIPELINE_NATIVE_ARCHS } from "./analyze.ts";
 * console.log(PIPELINE_NATIVE_ARCHS.arch2_4_combined.expertDelay); // 2
 * ```
 */
export const PIPELINE_NATIVE_ARCHS: Readonly<Record<string, Readonly<PipelineArch>>> = {
  gemma4_parallel: { combineStyle: 0, denseDelay: 0, expertDelay: 0, styleParam: 0 },
  arch1_decoupled_streams: { combineStyle: 3, denseDelay: 0, expertDelay: 0, styleParam: 3 },
  arch2_4_combined: { combineStyle: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 },
  arch2_4_sync: { combineStyle: 1, denseDelay: 1, expertDelay: 0, styleParam: 0 },
  arch3_pipeline_registers: { combineStyle: 4, denseDelay: 0, expertDelay: 0, styleParam: 0 },
  arch4_async_experts: { combineStyle: 2, denseDelay: 0, expertDelay: 2, styleParam: 0 },
  arch5_fixed_point: { combineStyle: 5, denseDelay: 0, expertDelay: 0, styleParam: 3 },
};

/**
 * The names of {@link PIPELINE_NATIVE_ARCHS}, in table order.
 *
 * @example
 * ```ts
 * import { ARCH_NAMES } from "./analyze.ts";
 * console.log(ARCH_NAMES[0]); // "gemma4_parallel"
 * ```
 */
export const ARCH_NAMES: readonly string[] = Object.keys(PIPELINE_NATIVE_ARCHS);

/**
 * The architecture name whose settings these are, or undefined.
 *
 * @example
 * ```ts
 * import { archName } from "./analyze.ts";
 * console.log(archName({ combineStyle: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 }));
 * // "arch2_4_combined"
 * ```
 */
export function archName(a: PipelineArch): string | undefined {
  return ARCH_NAMES.find((n) => {
    const b = PIPELINE_NATIVE_ARCHS[n];
    return b.combineStyle === a.combineStyle && b.denseDelay === a.denseDelay &&
      b.expertDelay === a.expertDelay && b.styleParam === a.styleParam;
  });
}

/** How weights are counted in bytes. */
export type AnalyzeQuant = "paper-q4" | "q4_0" | "q8_0" | "f32";

/**
 * The quantizations {@link analyzeGeometry} counts.
 *
 * @example
 * ```ts
 * import { ANALYZE_QUANTS } from "./analyze.ts";
 * console.log(ANALYZE_QUANTS.join(" | ")); // "paper-q4 | q4_0 | q8_0 | f32"
 * ```
 */
export const ANALYZE_QUANTS: readonly AnalyzeQuant[] = ["paper-q4", "q4_0", "q8_0", "f32"];

/**
 * Average bytes per weight of a quantization: paper-q4 0.5 (as the report
 * counts), q4_0 18/32, q8_0 34/32, f32 4.
 *
 * @example
 * ```ts
 * import { bytesPerParam } from "./analyze.ts";
 * console.log(bytesPerParam("q4_0")); // 0.5625
 * ```
 */
export function bytesPerParam(quant: AnalyzeQuant): number {
  switch (quant) {
    case "paper-q4":
      return 0.5;
    case "q4_0":
      return 18 / 32;
    case "q8_0":
      return 34 / 32;
    case "f32":
      return 4;
  }
}

/**
 * Bytes of one `rows x cols` matrix: ggml blocks of 32 along each row for
 * q4_0 and q8_0 (a short last block still takes a whole one), exact
 * products for paper-q4 and f32.
 *
 * @example
 * ```ts
 * import { matrixBytes } from "./analyze.ts";
 * console.log(matrixBytes("paper-q4", 512, 512)); // 131072
 * console.log(matrixBytes("q4_0", 1, 33)); // 36
 * ```
 */
export function matrixBytes(quant: AnalyzeQuant, rows: number, cols: number): number {
  switch (quant) {
    case "paper-q4":
      return rows * cols * 0.5;
    case "q4_0":
      return rows * Math.ceil(cols / 32) * 18;
    case "q8_0":
      return rows * Math.ceil(cols / 32) * 34;
    case "f32":
      return rows * cols * 4;
  }
}

/** A model geometry as the analysis needs it. */
export interface AnalyzeGeometry {
  /** Model width d. */
  hidden: number;
  /** Decoder layers (unique blocks for combine style 5). */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (GQA). */
  kvHeads: number;
  /** Head width; default `hidden / heads`. */
  headDim?: number;
  /** Dense FFN width (0: no dense FFN). */
  ffn: number;
  /** Experts per MoE layer (0: dense model). */
  experts: number;
  /** Experts each token uses. */
  topK: number;
  /** Width of one expert's FFN. */
  expertFfn: number;
}

/** The bytes of one layer's three streams and its contribution to the totals. */
export interface LayerBytes {
  /** Layer index (the logical layer the weights belong to). */
  layer: number;
  /** B_attn: Q, K, V and O projections. */
  attention_bytes: number;
  /** B_dense: gate, up and down projections. */
  dense_bytes: number;
  /** B_expert: the top_k selected experts (gate, up and down each). */
  expert_bytes: number;
  /** max(B_attn, B_dense, B_expert): this layer's term of B_naive. */
  naive_bytes: number;
  /** This layer's term of eq. 4.23. */
  critical_bytes: number;
  /** B_attn + B_dense + B_expert. */
  serial_bytes: number;
}

/** The two units every total is shown in. */
export interface UnitInfo {
  /** Bytes in a MiB (2^20), the unit the report's Table 4.1 writes as "MB". */
  mib: number;
  /** Bytes in a decimal MB (10^6), the unit of the report's section 6.2.1. */
  mb: number;
  /** How the units are named. */
  note: string;
}

/**
 * The units of {@link Analysis}.
 *
 * @example
 * ```ts
 * import { UNITS } from "./analyze.ts";
 * console.log(1_572_864 / UNITS.mib); // 1.5
 * ```
 */
export const UNITS: Readonly<UnitInfo> = {
  mib: 1 << 20,
  mb: 1e6,
  note:
    "bytes; MiB = 2^20 bytes (the report's Table 4.1 writes MB), MB = 10^6 bytes (section 6.2.1)",
};

/** The result of an analysis (the `--json` output of `cflow analyze`). */
export interface Analysis {
  /** Architecture name, or "custom" when the settings match none. */
  arch: string;
  /** GlobalHeader `combine_style`. */
  combine_style: number;
  /** Dense delay. */
  dense_delay: number;
  /** Expert delay. */
  expert_delay: number;
  /** Style parameter (merge interval or iterations). */
  style_param: number;
  /** Times each stored layer is streamed per token (style_param for combine style 5, else 1). */
  passes: number;
  /** How bytes were counted ("paper-q4", "q4_0", ..., or "file"). */
  quant: string;
  /** Bytes per weight (null when counted from a file's own tiles). */
  bytes_per_param: number | null;
  /** The units. */
  units: UnitInfo;
  /** Per stored layer, one pass. */
  per_layer: LayerBytes[];
  /** B_naive over all passes. */
  naive_bytes: number;
  /** B_critical (eq. 4.23) over all passes. */
  critical_bytes: number;
  /** B_serial over all passes. */
  serial_bytes: number;
  /** naive / critical. */
  reduction: number;
  /** B_naive in MiB. */
  naive_mib: number;
  /** B_critical in MiB. */
  critical_mib: number;
  /** B_serial in MiB. */
  serial_mib: number;
  /** B_naive in decimal MB. */
  naive_mb: number;
  /** B_critical in decimal MB. */
  critical_mb: number;
  /** B_serial in decimal MB. */
  serial_mb: number;
  /** What the numbers count and what they leave out. */
  notes: string[];
}

/** Options of {@link analyzeGeometry}. */
export interface AnalyzeOptions {
  /** An architecture name of {@link PIPELINE_NATIVE_ARCHS}, or explicit settings. */
  arch: string | PipelineArch;
  /** How weights are counted (default "paper-q4"). */
  quant?: AnalyzeQuant;
}

/**
 * The settings of an architecture name; throws a RangeError listing the
 * names when it is unknown.
 *
 * @example
 * ```ts
 * import { resolveArch } from "./analyze.ts";
 * console.log(resolveArch("arch4_async_experts").combineStyle); // 2
 * ```
 */
export function resolveArch(arch: string | PipelineArch): PipelineArch {
  if (typeof arch !== "string") return arch;
  const a = Object.hasOwn(PIPELINE_NATIVE_ARCHS, arch) ? PIPELINE_NATIVE_ARCHS[arch] : undefined;
  if (a === undefined) {
    throw new RangeError(`unknown architecture '${arch}' (names: ${ARCH_NAMES.join(", ")})`);
  }
  return { ...a };
}

/** Three streams' bytes of one layer, before the delays. */
export interface StreamBytes {
  /** Layer index. */
  layer: number;
  /** B_attn. */
  attention: number;
  /** B_dense. */
  dense: number;
  /** B_expert. */
  expert: number;
}

/**
 * Applies eq. 4.23 to per-layer stream bytes: the shared arithmetic of
 * {@link analyzeGeometry} and the file analysis.
 *
 * @example
 * ```ts
 * import { combineStreams } from "./analyze.ts";
 * const a = combineStreams(
 *   [{ layer: 0, attention: 2, dense: 6, expert: 3 }],
 *   { combineStyle: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 },
 *   "paper-q4",
 *   0.5,
 *   [],
 * );
 * console.log(a.naive_bytes, a.critical_bytes, a.serial_bytes, a.reduction); // 6 3 11 2
 * ```
 */
export function combineStreams(
  layers: readonly StreamBytes[],
  arch: PipelineArch,
  quant: string,
  bpp: number | null,
  notes: string[],
): Analysis {
  const per_layer: LayerBytes[] = layers.map((s) => ({
    layer: s.layer,
    attention_bytes: s.attention,
    dense_bytes: s.dense,
    expert_bytes: s.expert,
    naive_bytes: Math.max(s.attention, s.dense, s.expert),
    critical_bytes: Math.max(
      s.attention,
      s.dense / (arch.denseDelay + 1),
      s.expert / (arch.expertDelay + 1),
    ),
    serial_bytes: s.attention + s.dense + s.expert,
  }));
  const passes = arch.combineStyle === FIXED_POINT_STYLE ? Math.max(1, arch.styleParam) : 1;
  const sum = (f: (l: LayerBytes) => number) => passes * per_layer.reduce((n, l) => n + f(l), 0);
  const naive = sum((l) => l.naive_bytes);
  const critical = sum((l) => l.critical_bytes);
  const serial = sum((l) => l.serial_bytes);
  if (arch.combineStyle === FIXED_POINT_STYLE) {
    notes.push(
      `combine style 5 (fixed point): each of the ${per_layer.length} stored blocks runs ` +
        `${passes} times per token, so every total is ${passes} x the per-block sum ` +
        `(${per_layer.length} blocks x ${passes} iterations = ${per_layer.length * passes} passes)`,
    );
  }
  return {
    arch: archName(arch) ?? "custom",
    combine_style: arch.combineStyle,
    dense_delay: arch.denseDelay,
    expert_delay: arch.expertDelay,
    style_param: arch.styleParam,
    passes,
    quant,
    bytes_per_param: bpp,
    units: { ...UNITS },
    per_layer,
    naive_bytes: naive,
    critical_bytes: critical,
    serial_bytes: serial,
    reduction: critical > 0 ? naive / critical : 1,
    naive_mib: naive / UNITS.mib,
    critical_mib: critical / UNITS.mib,
    serial_mib: serial / UNITS.mib,
    naive_mb: naive / UNITS.mb,
    critical_mb: critical / UNITS.mb,
    serial_mb: serial / UNITS.mb,
    notes,
  };
}

/**
 * The check of a geometry {@link analyzeGeometry} makes; throws a RangeError naming the field.
 *
 * @example
 * ```ts
 * import { checkGeometry } from "./analyze.ts";
 * try {
 *   checkGeometry({ hidden: 8, layers: 1, heads: 2, kvHeads: 2, ffn: 8, experts: 2, topK: 3, expertFfn: 4 });
 * } catch (e) {
 *   console.log((e as Error).message); // "top-k (3) must be at most experts (2)"
 * }
 * ```
 */
export function checkGeometry(g: AnalyzeGeometry): void {
  const positive = (v: number | undefined, name: string, zero = false) => {
    if (v === undefined || !Number.isSafeInteger(v) || v < (zero ? 0 : 1)) {
      throw new RangeError(`${name} must be a ${zero ? "non-negative" : "positive"} integer`);
    }
  };
  positive(g.hidden, "hidden");
  positive(g.layers, "layers");
  positive(g.heads, "heads");
  positive(g.kvHeads, "kv-heads");
  positive(g.ffn, "ffn", true);
  positive(g.experts, "experts", true);
  positive(g.topK, "top-k", true);
  positive(g.expertFfn, "expert-ffn", true);
  if (g.headDim !== undefined) positive(g.headDim, "head-dim");
  if (g.heads % g.kvHeads !== 0) {
    throw new RangeError(`heads (${g.heads}) must be a multiple of kv-heads (${g.kvHeads})`);
  }
  if (g.headDim === undefined && g.hidden % g.heads !== 0) {
    throw new RangeError(
      `hidden (${g.hidden}) is not a multiple of heads (${g.heads}): give head-dim`,
    );
  }
  if (g.topK > g.experts) {
    throw new RangeError(`top-k (${g.topK}) must be at most experts (${g.experts})`);
  }
  if (g.experts > 0 && (g.topK === 0 || g.expertFfn === 0)) {
    throw new RangeError("a model with experts needs top-k and expert-ffn of at least 1");
  }
}

/**
 * The critical-path analysis of a geometry (eq. 4.23). Every layer has the
 * same shape, so `per_layer` repeats one row per layer.
 *
 * @example
 * ```ts
 * import { analyzeGeometry } from "./analyze.ts";
 * const a = analyzeGeometry(
 *   { hidden: 512, layers: 6, heads: 8, kvHeads: 8, ffn: 2048, experts: 8, topK: 2, expertFfn: 512 },
 *   { arch: "arch2_4_combined" },
 * );
 * console.log(a.naive_mib, a.critical_mib, a.serial_mib, a.reduction); // 9 4.5 16.5 2
 * ```
 */
export function analyzeGeometry(g: AnalyzeGeometry, options: AnalyzeOptions): Analysis {
  checkGeometry(g);
  const arch = resolveArch(options.arch);
  const quant = options.quant ?? "paper-q4";
  if (!ANALYZE_QUANTS.includes(quant)) {
    throw new RangeError(`quant must be one of ${ANALYZE_QUANTS.join(", ")}, not '${quant}'`);
  }
  const hd = g.headDim ?? g.hidden / g.heads;
  const m = (rows: number, cols: number) => matrixBytes(quant, rows, cols);
  const attention = m(g.heads * hd, g.hidden) + 2 * m(g.kvHeads * hd, g.hidden) +
    m(g.hidden, g.heads * hd);
  const dense = g.ffn > 0 ? 2 * m(g.ffn, g.hidden) + m(g.hidden, g.ffn) : 0;
  const expert = g.experts > 0
    ? g.topK * (2 * m(g.expertFfn, g.hidden) + m(g.hidden, g.expertFfn))
    : 0;
  const layers = Array.from({ length: g.layers }, (_, layer) => ({
    layer,
    attention,
    dense,
    expert,
  }));
  const notes = [
    `weights only: attention = Q, K, V, O (head_dim ${hd}, ${g.heads} heads, ${g.kvHeads} kv heads); ` +
    "dense = gate, up, down; experts = top_k x (gate, up, down) of the selected experts, " +
    "not the whole bank; norms, router, embeddings and the output head are not counted",
    quant === "paper-q4"
      ? "paper-q4: 0.5 bytes per weight, as the report counts (no block scales)"
      : `${quant}: ${bytesPerParam(quant)} bytes per weight (ggml blocks of 32 along each row)`,
  ];
  if (arch.combineStyle === FIXED_POINT_STYLE) {
    notes.push(arch5Note(g.layers * (attention + dense), g.layers));
  }
  return combineStreams(layers, arch, quant, bytesPerParam(quant), notes);
}

/**
 * The arithmetic behind Table 4.1's arch5 figure, which the stated geometry
 * does not reproduce: 14.0625 = 3 x 4.6875, the report's "unique on-disk
 * bytes 4.69 MB" counted three times.
 *
 * @example
 * ```ts
 * import { arch5Note } from "./analyze.ts";
 * console.log(arch5Note(2 * 2.0 * 2 ** 20, 2).includes("14.06")); // true
 * ```
 */
export function arch5Note(uniqueAttnDenseBytes: number, blocks = 2): string {
  const mib = (uniqueAttnDenseBytes / UNITS.mib).toFixed(2);
  return "the report's Table 4.1 gives 14.06 MB for arch5 = 3 x 4.6875, its 'unique on-disk " +
    `bytes 4.69 MB' counted three times; these ${blocks} blocks hold ${mib} MiB of attention ` +
    "and dense weights (at d=512, d_ff=2048: 2 blocks x 2.00 MiB = 4.00 MiB, not 4.69), so " +
    "cflow cannot reproduce 14.06 and reports what the geometry gives; --layers counts unique " +
    "blocks, so Table 4.1's depth 6 is --layers 2 (2 blocks x 3 iterations = 6 passes: " +
    "9.00 MiB) (docs/ANALYZE.md)";
}
