/**
 * `cflow analyze`: the critical-path bandwidth analysis (report eq. 4.23)
 * of a geometry and an architecture name, or of a `.cflow`/`.vflow` file.
 *
 * @module
 */

import {
  type Analysis,
  ANALYZE_QUANTS,
  type AnalyzeGeometry,
  analyzeGeometry,
  type AnalyzeQuant,
  analyzeTiledFile,
  ARCH_NAMES,
  checkGeometry,
  formatAnalysis,
  PIPELINE_NATIVE_ARCHS,
} from "../analyze/mod.ts";
import { mapFile } from "../ffi/mod.ts";
import { mappedSource } from "../formats/byte_source.ts";
import { FormatError, readTiledFile, sniffTiled } from "../formats/cflow/mod.ts";
import { resolveForCli, UsageError } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";

/** The string options `cflow analyze` reads (its command-line values). */
export interface AnalyzeArgs {
  /** Architecture name. */
  arch?: string;
  /** Geometry flags, as typed. */
  hidden?: string;
  /** Decoder layers. */
  layers?: string;
  /** Dense FFN width. */
  ffn?: string;
  /** Experts per layer. */
  experts?: string;
  /** Experts per token. */
  topK?: string;
  /** One expert's FFN width. */
  expertFfn?: string;
  /** Query heads. */
  heads?: string;
  /** Key/value heads. */
  kvHeads?: string;
  /** Head width. */
  headDim?: string;
  /** paper-q4 | q4_0 | q8_0 | f32. */
  quant?: string;
}

const GEOMETRY_FLAGS = [
  ["hidden", "--hidden"],
  ["layers", "--layers"],
  ["ffn", "--ffn"],
  ["experts", "--experts"],
  ["topK", "--top-k"],
  ["expertFfn", "--expert-ffn"],
  ["heads", "--heads"],
  ["kvHeads", "--kv-heads"],
  ["headDim", "--head-dim"],
] as const;

/** A flag's integer value from `lo`; a UsageError naming the flag otherwise. */
function integer(text: string | undefined, flag: string, lo: number): number | undefined {
  if (text === undefined) return undefined;
  const n = /^[0-9]+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > 1 << 24) {
    throw new UsageError(
      `${flag}: "${text}" is not ${lo > 0 ? "a positive" : "a non-negative"} integer` +
        ` (at most ${1 << 24})`,
    );
  }
  return n;
}

/**
 * The geometry and options of a command line without FILE; every flag is
 * checked, and a mistake is a UsageError naming it.
 *
 * @example
 * ```ts
 * import { parseAnalyzeArgs } from "./analyze.ts";
 * const { geometry } = parseAnalyzeArgs({ arch: "arch2_4_sync", hidden: "512", layers: "6", heads: "8", ffn: "2048" });
 * console.log(geometry.kvHeads); // 8
 * ```
 */
export function parseAnalyzeArgs(
  args: AnalyzeArgs,
): { geometry: AnalyzeGeometry; arch: string; quant: AnalyzeQuant } {
  const arch = args.arch;
  if (arch === undefined) {
    throw new UsageError(`analyze needs --arch NAME (${ARCH_NAMES.join(", ")}) or a FILE`);
  }
  if (!Object.hasOwn(PIPELINE_NATIVE_ARCHS, arch)) {
    throw new UsageError(
      `--arch: unknown architecture '${arch}' (names: ${ARCH_NAMES.join(", ")})`,
    );
  }
  const quant = args.quant ?? "paper-q4";
  if (!(ANALYZE_QUANTS as readonly string[]).includes(quant)) {
    throw new UsageError(`--quant must be one of ${ANALYZE_QUANTS.join(", ")}, not '${quant}'`);
  }
  for (
    const [key, flag] of [["hidden", "--hidden"], ["layers", "--layers"], ["heads", "--heads"]]
  ) {
    if (args[key as keyof AnalyzeArgs] === undefined) throw new UsageError(`analyze needs ${flag}`);
  }
  const hidden = integer(args.hidden, "--hidden", 1)!;
  const layers = integer(args.layers, "--layers", 1)!;
  const heads = integer(args.heads, "--heads", 1)!;
  const kvHeads = integer(args.kvHeads, "--kv-heads", 1) ?? heads;
  const headDim = integer(args.headDim, "--head-dim", 1);
  const ffn = integer(args.ffn, "--ffn", 0) ?? 0;
  const experts = integer(args.experts, "--experts", 0) ?? 0;
  const topK = integer(args.topK, "--top-k", 0) ?? 0;
  const expertFfn = integer(args.expertFfn, "--expert-ffn", 0) ?? 0;
  const geometry: AnalyzeGeometry = {
    hidden,
    layers,
    heads,
    kvHeads,
    ...(headDim === undefined ? {} : { headDim }),
    ffn,
    experts,
    topK,
    expertFfn,
  };
  if (heads % kvHeads !== 0) {
    throw new UsageError(`--heads (${heads}) must be a multiple of --kv-heads (${kvHeads})`);
  }
  if (topK > experts) {
    throw new UsageError(`--top-k (${topK}) must be at most --experts (${experts})`);
  }
  if (experts > 0 && (topK === 0 || expertFfn === 0)) {
    throw new UsageError("--experts needs --top-k and --expert-ffn of at least 1");
  }
  if (experts === 0 && (topK > 0 || expertFfn > 0)) {
    throw new UsageError("--top-k and --expert-ffn need --experts");
  }
  if (headDim === undefined && hidden % heads !== 0) {
    throw new UsageError(
      `--hidden (${hidden}) is not a multiple of --heads (${heads}): give --head-dim`,
    );
  }
  try {
    checkGeometry(geometry);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return { geometry, arch, quant: quant as AnalyzeQuant };
}

/**
 * Runs `cflow analyze`: prints the analysis (or its JSON) and returns the
 * exit status. The caller opens the kernel library first when a FILE is
 * given (files are mapped through it).
 *
 * @example
 * ```ts ignore
 * import { runAnalyze } from "./analyze.ts";
 * await runAnalyze([], { arch: "arch2_4_combined", hidden: "512", layers: "6", heads: "8" }, true);
 * ```
 */
export async function runAnalyze(
  files: readonly string[],
  args: AnalyzeArgs,
  json: boolean,
): Promise<number> {
  let analysis: Analysis;
  if (files.length > 1) throw new UsageError("analyze takes at most one FILE");
  if (files.length === 1) {
    const given = [
      ["arch", "--arch"],
      ["quant", "--quant"],
      ...GEOMETRY_FLAGS,
    ].filter(([k]) => args[k as keyof AnalyzeArgs] !== undefined).map(([, f]) => f);
    if (given.length > 0) {
      throw new UsageError(
        `a FILE brings its own geometry, delays and weights: ${given.join(", ")} do not apply`,
      );
    }
    // A GGUF file or Hugging Face folder is converted once into the cache,
    // as the model commands do, with their default weight type, so that it is
    // the very conversion generate reuses (only the geometry is read here).
    const path = await resolveForCli({ model: files[0] });
    using file = mapFile(path);
    const src = mappedSource(file);
    if (sniffTiled(src) === undefined) {
      throw new FormatError(files[0], "magic", 0, "not a .cflow or .vflow file");
    }
    analysis = analyzeTiledFile(readTiledFile(src));
  } else {
    const { geometry, arch, quant } = parseAnalyzeArgs(args);
    analysis = analyzeGeometry(geometry, { arch, quant });
  }
  console.log(json ? JSON.stringify(analysis, null, 2) : formatAnalysis(analysis));
  return EXIT.OK;
}
