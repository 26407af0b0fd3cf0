/**
 * The tile-native weight formats: `.cflow` (per-layer, compute order) and
 * `.vflow` (stage-major groups plus an expert bank). docs/FORMAT.md gives
 * every byte.
 *
 * ```ts ignore
 * import { mapFile } from "../../ffi/mod.ts";
 * import { mappedSource } from "../byte_source.ts";
 * import { readTiledFile } from "./mod.ts";
 *
 * using f = mapFile("smollm2.cflow");
 * const file = readTiledFile(mappedSource(f), { verifyChecksums: true });
 * console.log(file.geometry.layers);
 * ```
 *
 * @module
 */

export * from "./container.ts";
export { crc32 } from "./crc32.ts";
export { placement, planCflow, planVflow, vflowGroups } from "./layout.ts";
export type { FilePlan, PlacedExperts, PlacedRun, PlannedBlock, PlannedSection } from "./layout.ts";
export type { LayerWeights, ModelWeights, MoeWeights, WeightItem } from "./model_weights.ts";
export {
  findEntry,
  LIMITS,
  readF32Entry,
  readTiledFile,
  sniffTiled,
  untile,
  verifyChecksums,
} from "./reader.ts";
export type { Block, ExpertBank, TiledFile } from "./reader.ts";
export * from "./tile.ts";
export { memorySink, tiledBytes, writeModel } from "./writer.ts";
export type { Progress, Sink } from "./writer.ts";
export { LoadedTiledFile, loadTiledFile } from "./loader.ts";
export type { ByteSource } from "../byte_source.ts";
export { FormatError } from "../errors.ts";
