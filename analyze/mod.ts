/**
 * `cflow analyze`: the critical-path bandwidth analysis of report section
 * 4.5 (eq. 4.23), for a geometry and an architecture name, or for a real
 * `.cflow`/`.vflow` file. docs/ANALYZE.md explains the model and the units.
 *
 * ```ts
 * import { analyzeGeometry } from "./mod.ts";
 * const a = analyzeGeometry(
 *   { hidden: 512, layers: 6, heads: 8, kvHeads: 8, ffn: 2048, experts: 8, topK: 2, expertFfn: 512 },
 *   { arch: "arch2_4_combined" },
 * );
 * console.log(a.critical_mib); // 4.5
 * ```
 *
 * @module
 */

export {
  ANALYZE_QUANTS,
  analyzeGeometry,
  arch5Note,
  ARCH_NAMES,
  archName,
  bytesPerParam,
  checkGeometry,
  combineStreams,
  FIXED_POINT_STYLE,
  matrixBytes,
  PIPELINE_NATIVE_ARCHS,
  resolveArch,
  UNITS,
} from "./analyze.ts";
export type {
  Analysis,
  AnalyzeGeometry,
  AnalyzeOptions,
  AnalyzeQuant,
  LayerBytes,
  PipelineArch,
  StreamBytes,
  UnitInfo,
} from "./analyze.ts";
export { analyzeTiledFile } from "./analyze_file.ts";
export type { AnalyzableFile } from "./analyze_file.ts";
export { formatAnalysis } from "./format.ts";
