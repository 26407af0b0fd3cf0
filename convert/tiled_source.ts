/**
 * A `.cflow` or `.vflow` file as a {@link ModelSource}: converts between the
 * two layouts and re-quantizes. Every matrix is found by (layer, matrix id),
 * not by block (under delays a layer's FFN and experts sit in earlier
 * blocks), and read back as ggml rows: Q4_0 and Q8_0 tiles give their blocks
 * unchanged, so a conversion to the same type is lossless.
 *
 * The hyperparameters, the header fields (combine style, delays, style
 * parameter, feature flags, soft-cap, sliding window) and the whole metadata
 * (tokenizer, Hugging Face config, rope style, ...) carry over, `source`
 * included: the output names the checkpoint the weights first came from.
 *
 * @module
 */

import type { Role } from "../arch/mod.ts";
import {
  ARCH_IDS,
  COMBINE,
  ENTRY_KIND,
  type EntryDescriptor,
  FEATURE,
  MATRIX,
  VOCAB_LAYER,
} from "../formats/cflow/container.ts";
import { type LoadedTiledFile, loadTiledFile } from "../formats/cflow/loader.ts";
import { findEntry, readF32Entry, untile } from "../formats/cflow/reader.ts";
import { rowBytes, TILE_TYPE, tileTypeName } from "../formats/cflow/tile.ts";
import { FormatError } from "../formats/errors.ts";
import type { HyperParams, ModelSource, SourceTensor } from "./model_source.ts";
import { dequantizeRows } from "./quantize_rules.ts";
import { MATRIX_OF } from "./build_weights.ts";

/** Matrix id of each role. */
const MATRIX_OF_ROLE = MATRIX_OF;

/** Roles of the vocabulary section (layer id 0xFFFF). */
const VOCAB_ROLES = new Set<Role>(["token_embd", "output_norm", "output"]);

/** Keys the converter writes itself (build_weights.ts); everything else is `extra`. */
const OWN_KEYS = new Set([
  "cflow_metadata_version",
  "architecture",
  "quant",
  "q4_rule",
  "hyperparameters",
]);

/** Untiled matrices kept (fused runs read their members stripe by stripe). */
const CACHE_SLOTS = 4;

function isRecord(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}

/**
 * Opens a `.cflow` or `.vflow` file (validated, checksums verified) as a
 * ModelSource.
 *
 * @example
 * ```ts ignore
 * import { openTiledSource } from "./tiled_source.ts";
 * const source = openTiledSource("model.cflow");
 * console.log(source.hyper.architecture);
 * source.close();
 * ```
 */
export function openTiledSource(path: string): ModelSource {
  const loaded = loadTiledFile(path, { verifyChecksums: true });
  try {
    return tiledModelSource(loaded);
  } catch (error) {
    loaded.close();
    throw error;
  }
}

/**
 * Builds a ModelSource over a loaded tiled file; closing the source closes
 * the file.
 *
 * @example
 * ```ts ignore
 * import { loadTiledFile } from "../formats/cflow/loader.ts";
 * import { tiledModelSource } from "./tiled_source.ts";
 * const source = tiledModelSource(loadTiledFile("model.vflow"));
 * ```
 */
export function tiledModelSource(loaded: LoadedTiledFile): ModelSource {
  const file = loaded.file;
  const src = loaded.source;
  const g = file.geometry;
  const meta = file.metadata;
  const fail = (field: string, detail: string): never => {
    throw new FormatError(src.name, field, 0, detail);
  };
  const architecture = typeof meta.architecture === "string"
    ? meta.architecture
    : Object.keys(ARCH_IDS).find((k) => ARCH_IDS[k] === g.archId) ??
      fail("metadata.architecture", "missing, and arch_id names no architecture");
  if ((ARCH_IDS[architecture] ?? 0) !== g.archId) {
    fail(
      "metadata.architecture",
      `"${architecture}" disagrees with the header's arch_id ${g.archId}`,
    );
  }

  // Everything the converter did not write itself is carried over as is
  // (tokenizer, hf_config, rope, pipeline-native fields, source...).
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(meta)) if (!OWN_KEYS.has(k)) extra[k] = v;
  // The header fields the converter derives from `extra`, where its default
  // would differ from this file's header.
  const num = (k: string, fallback: number) =>
    typeof extra[k] === "number" ? extra[k] as number : fallback;
  const tied = findEntry(file, VOCAB_LAYER, MATRIX.OUTPUT) === undefined;
  const header: [string, number, number][] = [
    ["dense_delay", g.denseDelay, 0],
    ["expert_delay", g.expertDelay, 0],
    ["combine_style", g.combineStyle, COMBINE.DELAYED_SUM],
    ["style_param", g.styleParam, 0],
    [
      "feature_flags",
      g.featureFlags,
      (tied ? FEATURE.TIED_EMBEDDINGS : 0) | (architecture === "gemma3" ? FEATURE.EMBED_SCALE : 0),
    ],
  ];
  for (const [k, value, fallback] of header) {
    if (num(k, fallback) !== value) extra[k] = value;
  }

  const hp = isRecord(meta.hyperparameters) ? meta.hyperparameters : {};
  const cap = typeof hp.finalLogitSoftcap === "number" &&
      Math.fround(hp.finalLogitSoftcap) === Math.fround(g.finalLogitSoftcap)
    ? hp.finalLogitSoftcap
    : g.finalLogitSoftcap;
  // Keys in the order the input's `hyperparameters` has them, so that the
  // metadata comes out the same.
  const hyper: HyperParams = {
    ...(hp as Partial<HyperParams>),
    architecture,
    hidden: g.hidden,
    layers: g.layers,
    heads: g.heads,
    kvHeads: g.kvHeads,
    headDim: g.headDim,
    ffnHidden: g.ffnHidden,
    experts: g.experts,
    topK: g.topK,
    expertFfnHidden: g.expertFfnHidden,
    vocab: g.vocab,
    slidingWindow: g.slidingWindow,
    slidingPattern: g.slidingPattern,
    tiedEmbeddings: tied,
    finalLogitSoftcap: cap,
    extra,
  };

  // A few untiled matrices, most recently used last.
  const cache = new Map<string, Uint8Array>();
  const rowsOf = (key: string, entry: EntryDescriptor, expert?: number): Uint8Array => {
    let rows = cache.get(key);
    if (rows !== undefined) {
      cache.delete(key);
    } else {
      rows = untile(src, file, entry, expert);
      if (cache.size >= CACHE_SLOTS) cache.delete(cache.keys().next().value!);
    }
    cache.set(key, rows);
    return rows;
  };

  const tensors = new Map<string, SourceTensor>();
  const tiledTensor = (
    name: string,
    entry: EntryDescriptor,
    experts: number,
  ): SourceTensor => {
    const type = entry.tileType;
    const typeName = tileTypeName(type) ?? fail(name, `unknown tile type ${type}`);
    const rb = rowBytes(type, entry.cols);
    const raw = (start: number, count: number, expert?: number): Uint8Array => {
      if (experts > 0 && (expert === undefined || expert < 0 || expert >= experts)) {
        throw new RangeError(`${name}: expert ${expert} out of range`);
      }
      if (start < 0 || count < 0 || start + count > entry.rows) {
        throw new RangeError(`${name}: rows ${start}+${count} out of range`);
      }
      const all = rowsOf(experts > 0 ? `${name}[${expert}]` : name, entry, expert);
      return all.slice(start * rb, (start + count) * rb);
    };
    return {
      name,
      rows: entry.rows,
      cols: entry.cols,
      experts,
      typeName,
      rawRows: raw,
      f32Rows: (start, count, expert) => {
        const bytes = raw(start, count, expert);
        if (type === TILE_TYPE.F32) {
          return new Float32Array(bytes.buffer, bytes.byteOffset, count * entry.cols);
        }
        return dequantizeRows(bytes, count, entry.cols, type);
      },
    };
  };
  const f32Tensor = (name: string, entry: EntryDescriptor): SourceTensor => ({
    name,
    rows: entry.rows,
    cols: entry.cols,
    experts: 0,
    typeName: "F32",
    f32Rows: (start, count) => {
      if (start < 0 || count < 0 || start + count > entry.rows) {
        throw new RangeError(`${name}: rows ${start}+${count} out of range`);
      }
      return readF32Entry(src, entry).slice(start * entry.cols, (start + count) * entry.cols);
    },
  });

  return {
    format: file.format,
    path: loaded.path,
    hyper,
    dataBytes: file.size,
    tensor(role: Role, layer: number): SourceTensor | undefined {
      const id = MATRIX_OF_ROLE[role];
      const vocab = VOCAB_ROLES.has(role);
      const layerId = vocab ? VOCAB_LAYER : layer;
      const name = vocab ? role : `layer.${layer}.${role}`;
      const hit = tensors.get(name);
      if (hit !== undefined) return hit;
      let t: SourceTensor | undefined;
      if (id === MATRIX.EXPERT_GATE || id === MATRIX.EXPERT_UP || id === MATRIX.EXPERT_DOWN) {
        const bank = file.experts.get(layer);
        if (bank === undefined) return undefined;
        const entry = id === MATRIX.EXPERT_GATE
          ? bank.gate
          : id === MATRIX.EXPERT_UP
          ? bank.up
          : bank.down;
        t = tiledTensor(name, entry, bank.spans.length);
      } else {
        const entry = findEntry(file, layerId, id);
        if (entry === undefined) return undefined;
        if (entry.kind === ENTRY_KIND.TILES) t = tiledTensor(name, entry, 0);
        else if (entry.kind === ENTRY_KIND.F32) t = f32Tensor(name, entry);
        else return undefined;
      }
      tensors.set(name, t);
      return t;
    },
    close: () => loaded.close(),
  };
}
