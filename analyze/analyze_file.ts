/**
 * The critical-path analysis of a real `.cflow`/`.vflow` file: the bytes of
 * each layer's entries, stream by stream, as the file stores them (tile
 * headers and block scales included), and the delays and combine style of
 * its header.
 *
 * @module
 */

import { ENTRY_KIND, MATRIX, VOCAB_LAYER } from "../formats/cflow/container.ts";
import { matrixTileBytes, tileTypeName } from "../formats/cflow/tile.ts";
import {
  type Analysis,
  ARCH_NAMES,
  archName,
  combineStreams,
  FIXED_POINT_STYLE,
  PIPELINE_NATIVE_ARCHS,
  type PipelineArch,
  type StreamBytes,
} from "./analyze.ts";

const ATTENTION: ReadonlySet<number> = new Set([MATRIX.Q, MATRIX.K, MATRIX.V, MATRIX.O]);
const DENSE: ReadonlySet<number> = new Set([
  MATRIX.GATE,
  MATRIX.UP,
  MATRIX.DOWN,
  MATRIX.SHARED_GATE,
  MATRIX.SHARED_UP,
  MATRIX.SHARED_DOWN,
]);

/**
 * What the analysis reads of a parsed file: the parts of a `TiledFile`
 * (`formats/cflow/mod.ts`, `readTiledFile`) it needs.
 */
export interface AnalyzableFile {
  /** "cflow" or "vflow". */
  format: string;
  /** The header's geometry (`styleParam` when the reader has the field). */
  geometry: {
    layers: number;
    topK: number;
    denseDelay: number;
    expertDelay: number;
    combineStyle: number;
    styleParam?: number;
  };
  /** The metadata JSON object (`.vflow` keeps `style_param` there). */
  metadata: Record<string, unknown>;
  /** Blocks with their directory entries. */
  blocks: readonly {
    entries: readonly {
      matrixId: number;
      kind: number;
      tileType: number;
      layerId: number;
      rows: number;
      cols: number;
      length: number;
    }[];
  }[];
  /** Expert banks by layer: each expert's span. */
  experts: ReadonlyMap<
    number,
    { spans: readonly { length: number }[]; gate: { tileType: number } }
  >;
}

/** The `style_param` of a file: the header field when the reader has it, else `.vflow` metadata. */
function styleParamOf(file: AnalyzableFile): number | undefined {
  const fromHeader = file.geometry.styleParam;
  if (typeof fromHeader === "number") return fromHeader;
  const fromMeta = file.metadata.style_param;
  return typeof fromMeta === "number" && Number.isSafeInteger(fromMeta) ? fromMeta : undefined;
}

/**
 * Analyzes a parsed `.cflow`/`.vflow` file (eq. 4.23 over its real bytes).
 * Attention = the Q, K, V, O tile entries; dense = gate, up, down (and
 * shared-expert gate, up, down); experts = the `top_k` largest per-expert
 * spans of the layer's expert table (the worst case; the format stores
 * every expert of a layer at the same size). Entries are attributed by
 * their `layer_id`, not by the block that holds them (under delays the
 * weights sit in earlier blocks). Norms, biases and the router (f32
 * vectors) are left out of the streams and reported in the notes.
 *
 * @example
 * ```ts ignore
 * import { mapFile } from "../ffi/mod.ts";
 * import { mappedSource } from "../formats/byte_source.ts";
 * import { readTiledFile } from "../formats/cflow/mod.ts";
 * import { analyzeTiledFile } from "./analyze_file.ts";
 * using f = mapFile("model.cflow");
 * console.log(analyzeTiledFile(readTiledFile(mappedSource(f))).reduction);
 * ```
 */
export function analyzeTiledFile(file: AnalyzableFile): Analysis {
  const g = file.geometry;
  const notes: string[] = [];
  const streams: StreamBytes[] = Array.from(
    { length: g.layers },
    (_, layer) => ({ layer, attention: 0, dense: 0, expert: 0 }),
  );
  let other = 0;
  const types = new Set<string>();
  for (const block of file.blocks) {
    for (const e of block.entries) {
      if (e.layerId === VOCAB_LAYER || e.layerId >= g.layers) continue;
      const s = streams[e.layerId];
      if (e.kind === ENTRY_KIND.TILES) {
        // fused members share one byte range; each member's own share is its tiles
        const bytes = matrixTileBytes(e.tileType, e.rows, e.cols);
        types.add(tileTypeName(e.tileType) ?? `type ${e.tileType}`);
        if (ATTENTION.has(e.matrixId)) s.attention += bytes;
        else if (DENSE.has(e.matrixId)) s.dense += bytes;
        else other += bytes;
      } else if (e.kind === ENTRY_KIND.F32) {
        other += e.length;
      }
    }
  }
  for (const [layer, bank] of file.experts) {
    if (layer >= g.layers) continue;
    const k = Math.min(g.topK, bank.spans.length);
    const largest = bank.spans.map((x) => x.length).sort((a, b) => b - a).slice(0, k);
    streams[layer].expert = largest.reduce((n, x) => n + x, 0);
    types.add(tileTypeName(bank.gate.tileType) ?? `type ${bank.gate.tileType}`);
  }
  let styleParam = styleParamOf(file);
  let name: string | undefined;
  if (styleParam === undefined) {
    const fallback = g.combineStyle === FIXED_POINT_STYLE ? 1 : 0;
    notes.push(
      `the file does not record style_param; ${
        g.combineStyle === FIXED_POINT_STYLE
          ? "combine style 5 is counted as 1 pass per block (an undercount if it iterates)"
          : `taken as ${fallback} (it does not change the bytes of combine style ${g.combineStyle})`
      }`,
    );
    styleParam = fallback;
    name = ARCH_NAMES.find((n) => {
      const a = PIPELINE_NATIVE_ARCHS[n];
      return a.combineStyle === g.combineStyle && a.denseDelay === g.denseDelay &&
        a.expertDelay === g.expertDelay;
    });
  }
  const arch: PipelineArch = {
    combineStyle: g.combineStyle,
    denseDelay: g.denseDelay,
    expertDelay: g.expertDelay,
    styleParam,
  };
  notes.unshift(
    `${file.format} file: the bytes of its tiles (${
      [...types].join(", ") || "no tiles"
    }; tile headers and block scales included); attention = Q, K, V, O; dense = gate, up, ` +
      `down (+ shared expert); experts = the top_k (${g.topK}) largest per-expert spans of each ` +
      "layer's expert table (the worst case; the format stores all experts of a layer at one size)",
    `entries are counted at their layer_id, not at the block that holds them; ${other} bytes of ` +
      "norms, biases and routers are not counted in any stream; embeddings and the output head " +
      "are not counted",
  );
  const a = combineStreams(streams, arch, "file", null, notes);
  if (name !== undefined) a.arch = name;
  else a.arch = archName(arch) ?? "custom";
  return a;
}
