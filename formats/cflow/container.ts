/**
 * Byte-level codecs shared by `.cflow` and `.vflow`: the `.cflow`
 * GlobalHeader, the `.vflow` VFlowHeader and GroupDescriptor, the section
 * table and the block (directory + entries) that every layer, stage, expert
 * bank and vocabulary section starts with. docs/FORMAT.md describes every
 * byte; this file is its executable form.
 *
 * @module
 */

import { u64 } from "./vflow_header.ts";
export {
  decodeVFlowHeader,
  encodeVFlowHeader,
  VFLOW_HEADER_BYTES,
  VFLOW_MAGIC,
  VFLOW_VERSION,
  VFLOW_VERSION_MIN,
  type VFlowHeader,
  vflowHeaderCrc,
} from "./vflow_header.ts";

/** `.cflow` magic: "CFLOW\0\0\0". */
export const CFLOW_MAGIC: Uint8Array = new Uint8Array([0x43, 0x46, 0x4c, 0x4f, 0x57, 0, 0, 0]);
/** Newest `.cflow` version, written when a file uses a tile type beyond Q4_0, Q8_0, F32. */
export const CFLOW_VERSION = 6;
/** Oldest `.cflow` version read (and written for files of Q4_0, Q8_0, F32 tiles only). */
export const CFLOW_VERSION_MIN = 5;
/** Size of the `.cflow` GlobalHeader. */
export const GLOBAL_HEADER_BYTES = 88;
/** Size of one GroupDescriptor. */
export const GROUP_DESCRIPTOR_BYTES = 48;
/** Size of the section table's prefix (count, crc). */
export const SECTION_TABLE_PREFIX_BYTES = 8;
/** Size of one SectionDescriptor. */
export const SECTION_DESCRIPTOR_BYTES = 32;
/** Size of a BlockHeader. */
export const BLOCK_HEADER_BYTES = 16;
/** Size of one EntryDescriptor. */
export const ENTRY_BYTES = 32;
/** Alignment of sections and of entry data. */
export const ALIGN = 64;
/** "CFBK": the magic at the start of every block. */
export const BLOCK_MAGIC = 0x4b424643;
/** layer_id of the vocabulary section and its tiles. */
export const VOCAB_LAYER = 0xffff;

/**
 * Section kinds.
 *
 * @example
 * ```ts
 * import { SECTION } from "./container.ts";
 * console.log(SECTION.LAYER); // 2
 * ```
 */
export const SECTION = { METADATA: 1, LAYER: 2, VOCAB: 3, GROUP: 4, EXPERTS: 5 } as const;

/**
 * Block stages: what part of the forward pass a block feeds.
 *
 * @example
 * ```ts
 * import { STAGE } from "./container.ts";
 * console.log(STAGE.ATTENTION); // 1
 * ```
 */
export const STAGE = { LAYER: 0, ATTENTION: 1, FFN: 2, EXPERTS: 3, VOCAB: 4 } as const;

/**
 * Entry kinds.
 *
 * @example
 * ```ts
 * import { ENTRY_KIND } from "./container.ts";
 * console.log(ENTRY_KIND.TILES); // 1
 * ```
 */
export const ENTRY_KIND = { TILES: 1, F32: 2, EXPERT_TABLE: 3, EXPERT_TILES: 4 } as const;

/**
 * Fused runs: tiles of several matrices interleaved by output stripe.
 *
 * @example
 * ```ts
 * import { FUSED } from "./container.ts";
 * console.log(FUSED.QKV); // 1
 * ```
 */
export const FUSED = { NONE: 0, QKV: 1, GATE_UP: 2 } as const;

/**
 * Matrix ids, stored in TileHeader.matrix_id and EntryDescriptor.matrix_id.
 *
 * @example
 * ```ts
 * import { MATRIX } from "./container.ts";
 * console.log(MATRIX.Q); // 1
 * ```
 */
export const MATRIX = {
  ATTN_NORM: 0,
  Q: 1,
  K: 2,
  V: 3,
  O: 4,
  Q_NORM: 5,
  K_NORM: 6,
  POST_ATTN_NORM: 7,
  FFN_NORM: 8,
  GATE: 9,
  UP: 10,
  DOWN: 11,
  POST_FFN_NORM: 12,
  ROUTER: 13,
  EXPERT_GATE: 14,
  EXPERT_UP: 15,
  EXPERT_DOWN: 16,
  Q_BIAS: 17,
  K_BIAS: 18,
  V_BIAS: 19,
  TOKEN_EMBD: 20,
  OUTPUT: 21,
  OUTPUT_NORM: 22,
  SHARED_GATE: 23,
  SHARED_UP: 24,
  SHARED_DOWN: 25,
  SHARED_EXPERT_GATE_INP: 26,
  EXPERT_TABLE: 27,
  MOE_NORM: 28,
} as const;

/**
 * A matrix id's name.
 *
 * @example
 * ```ts
 * import { MATRIX, matrixName } from "./container.ts";
 * console.log(matrixName(MATRIX.DOWN)); // "down"
 * ```
 */
export function matrixName(id: number): string {
  for (const [name, value] of Object.entries(MATRIX)) if (value === id) return name.toLowerCase();
  return `matrix_${id}`;
}

/**
 * `feature_flags` bits.
 *
 * @example
 * ```ts
 * import { FEATURE } from "./container.ts";
 * console.log(FEATURE.TIED_EMBEDDINGS); // 4
 * ```
 */
export const FEATURE = { EMBED_SCALE: 1, V_NORM: 2, TIED_EMBEDDINGS: 4, GEGLU: 8 } as const;

/**
 * `combine_style` values (docs/ARCHITECTURES.md): how attention, the dense
 * FFN and the experts of a pipeline-native layer combine.
 *
 * @example
 * ```ts
 * import { COMBINE } from "./container.ts";
 * console.log(COMBINE.FIXED_POINT); // 5
 * ```
 */
export const COMBINE = {
  PARALLEL_SQRT2: 0,
  DELAYED_SUM: 1,
  ASYNC_EXPERTS: 2,
  DECOUPLED_STREAMS: 3,
  PIPELINE_REGISTERS: 4,
  FIXED_POINT: 5,
} as const;

/**
 * Model geometry and execution fields carried by the headers.
 *
 * @example
 * ```ts
 * import type { Geometry } from "./container.ts";
 * const g: Partial<Geometry> = { hidden: 576, layers: 30 };
 * ```
 */
export interface Geometry {
  /** Architecture id (docs/FORMAT.md). */
  archId: number;
  /** Model width d. */
  hidden: number;
  /** Number of decoder layers. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads. */
  kvHeads: number;
  /** Dimension of one attention head. */
  headDim: number;
  /** Dense FFN width (0: none). */
  ffnHidden: number;
  /** Number of experts (0 for dense models). */
  experts: number;
  /** Experts selected per token. */
  topK: number;
  /** FFN width of each expert. */
  expertFfnHidden: number;
  /** Vocabulary size. */
  vocab: number;
  /** Rows per full tile (128). */
  tileRows: number;
  /** Columns per full tile (256). */
  tileCols: number;
  /** Elements per quantization group (32). */
  quantGroup: number;
  /** Tile type of the weight matrices (1 Q4_0, 2 Q8_0, 3 F32). */
  quantType: number;
  /** Window of sliding-attention layers (0: none). */
  slidingWindow: number;
  /** Every n-th layer is global, the others slide (0: none). */
  slidingPattern: number;
  /** Dense-FFN pipelining delay in layers. */
  denseDelay: number;
  /** Expert pipelining delay in layers. */
  expertDelay: number;
  /**
   * How attention, dense FFN and expert outputs combine ({@link COMBINE}:
   * 0 ParallelSqrt2, 1 DelayedSum, 2 AsyncExperts, 3 DecoupledStreams,
   * 4 PipelineRegisters, 5 FixedPoint).
   */
  combineStyle: number;
  /**
   * The combine style's parameter: merge interval (3 DecoupledStreams),
   * iterations (5 FixedPoint), else 0. `.cflow` GlobalHeader byte 69;
   * `.vflow` metadata key `style_param` (absent: 0).
   */
  styleParam: number;
  /** Feature bits: embedding scale, V-norm, tied embeddings, GeGLU. */
  featureFlags: number;
  /** Final logit soft-cap (0: disabled). */
  finalLogitSoftcap: number;
}

/** The GlobalHeader: geometry plus where the section table is. */
export interface GlobalHeader extends Geometry {
  /** Format version. */
  version: number;
  /** CRC-32 stored in the header. */
  headerCrc: number;
  /** Byte offset of the section table. */
  sectionTableOffset: number;
}

/**
 * Architecture ids stored in `arch_id`.
 *
 * @example
 * ```ts
 * import { ARCH_IDS } from "./container.ts";
 * console.log(ARCH_IDS.llama); // 1
 * ```
 */
export const ARCH_IDS: Record<string, number> = {
  llama: 1,
  qwen2: 2,
  qwen3: 3,
  gemma3: 4,
  mixtral: 5,
  olmoe: 6,
  qwen2moe: 7,
  qwen3moe: 8,
  pipeline_native: 9,
};

/**
 * Encodes the 88-byte GlobalHeader (the CRC field is computed here).
 *
 * @example
 * ```ts ignore
 * import { encodeGlobalHeader } from "./container.ts";
 * const bytes = encodeGlobalHeader(geometry, 4096);
 * ```
 */
export function encodeGlobalHeader(
  g: Geometry,
  sectionTableOffset: number,
  version: number = CFLOW_VERSION_MIN,
): Uint8Array {
  const out = new Uint8Array(GLOBAL_HEADER_BYTES);
  const v = new DataView(out.buffer);
  out.set(CFLOW_MAGIC, 0);
  v.setUint32(8, version, true);
  v.setUint32(12, g.hidden, true);
  v.setUint32(16, g.layers, true);
  v.setUint32(20, g.heads, true);
  v.setUint32(24, g.kvHeads, true);
  v.setUint32(28, g.headDim, true);
  v.setUint32(32, g.ffnHidden, true);
  v.setUint32(36, g.experts, true);
  v.setUint32(40, g.topK, true);
  v.setUint32(44, g.expertFfnHidden, true);
  v.setUint32(48, g.vocab, true);
  v.setUint16(52, g.tileRows, true);
  v.setUint16(54, g.tileCols, true);
  v.setUint16(56, g.quantGroup, true);
  v.setUint8(58, g.quantType);
  v.setUint8(59, g.archId);
  v.setUint32(60, g.slidingWindow, true);
  v.setUint8(64, g.slidingPattern);
  v.setUint8(65, g.denseDelay);
  v.setUint8(66, g.expertDelay);
  v.setUint8(67, g.combineStyle);
  v.setUint8(68, g.featureFlags);
  v.setUint8(69, g.styleParam);
  // 70..71 reserved, zero
  v.setFloat32(72, g.finalLogitSoftcap, true);
  // 76..79 header_crc32, computed over bytes 0..75 and 80..87
  u64(v, 80, sectionTableOffset);
  v.setUint32(76, headerCrc(out), true);
  return out;
}

/** CRC-32 of a header's bytes with the crc field (76..79) skipped. */
export function headerCrc(bytes: Uint8Array): number {
  return crc32(bytes.subarray(80, 88), crc32(bytes.subarray(0, 76)));
}

/**
 * Decodes a GlobalHeader without validating it (see the reader for checks).
 *
 * @example
 * ```ts ignore
 * import { decodeGlobalHeader } from "./container.ts";
 * const h = decodeGlobalHeader(bytes);
 * ```
 */
export function decodeGlobalHeader(b: Uint8Array): GlobalHeader {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    version: v.getUint32(8, true),
    hidden: v.getUint32(12, true),
    layers: v.getUint32(16, true),
    heads: v.getUint32(20, true),
    kvHeads: v.getUint32(24, true),
    headDim: v.getUint32(28, true),
    ffnHidden: v.getUint32(32, true),
    experts: v.getUint32(36, true),
    topK: v.getUint32(40, true),
    expertFfnHidden: v.getUint32(44, true),
    vocab: v.getUint32(48, true),
    tileRows: v.getUint16(52, true),
    tileCols: v.getUint16(54, true),
    quantGroup: v.getUint16(56, true),
    quantType: v.getUint8(58),
    archId: v.getUint8(59),
    slidingWindow: v.getUint32(60, true),
    slidingPattern: v.getUint8(64),
    denseDelay: v.getUint8(65),
    expertDelay: v.getUint8(66),
    combineStyle: v.getUint8(67),
    featureFlags: v.getUint8(68),
    styleParam: v.getUint8(69),
    finalLogitSoftcap: v.getFloat32(72, true),
    headerCrc: v.getUint32(76, true),
    sectionTableOffset: Number(v.getBigUint64(80, true)),
  };
}

/** One GroupDescriptor of a `.vflow` group table. */
export interface GroupDescriptor {
  /** First layer of the group. */
  firstLayer: number;
  /** Layers in the group. */
  layerCount: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Length in bytes. */
  length: number;
  /** Byte offset of the group's attention stage. */
  attentionOffset: number;
  /** Byte offset of the group's FFN stage. */
  ffnOffset: number;
}

/**
 * Encodes a group table (descriptors back to back).
 *
 * @example
 * ```ts ignore
 * import { encodeGroupTable } from "./container.ts";
 * const bytes = encodeGroupTable(groups);
 * ```
 */
export function encodeGroupTable(groups: readonly GroupDescriptor[]): Uint8Array {
  const out = new Uint8Array(groups.length * GROUP_DESCRIPTOR_BYTES);
  const v = new DataView(out.buffer);
  groups.forEach((g, i) => {
    const o = i * GROUP_DESCRIPTOR_BYTES;
    v.setUint32(o, g.firstLayer, true);
    v.setUint32(o + 4, g.layerCount, true);
    u64(v, o + 8, g.offset);
    u64(v, o + 16, g.length);
    u64(v, o + 24, g.attentionOffset);
    u64(v, o + 32, g.ffnOffset);
    // o + 40: reserved u64, zero
  });
  return out;
}

/**
 * Decodes one GroupDescriptor.
 *
 * @example
 * ```ts ignore
 * import { decodeGroupDescriptor } from "./container.ts";
 * const g = decodeGroupDescriptor(view, 0);
 * ```
 */
export function decodeGroupDescriptor(
  v: DataView,
  o: number,
): GroupDescriptor & { reserved: bigint } {
  return {
    firstLayer: v.getUint32(o, true),
    layerCount: v.getUint32(o + 4, true),
    offset: Number(v.getBigUint64(o + 8, true)),
    length: Number(v.getBigUint64(o + 16, true)),
    attentionOffset: Number(v.getBigUint64(o + 24, true)),
    ffnOffset: Number(v.getBigUint64(o + 32, true)),
    reserved: v.getBigUint64(o + 40, true),
  };
}

/** One SectionDescriptor. */
export interface SectionDescriptor {
  /** Section or entry kind. */
  kind: number;
  /** Layer or group index of the section. */
  index: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Length in bytes. */
  length: number;
  /** CRC-32 of the section's bytes. */
  crc: number;
}

/**
 * Encodes a section table: u32 count, u32 crc of the descriptors, then the
 * descriptors.
 *
 * @example
 * ```ts ignore
 * import { encodeSectionTable } from "./container.ts";
 * const bytes = encodeSectionTable(sections);
 * ```
 */
export function encodeSectionTable(sections: readonly SectionDescriptor[]): Uint8Array {
  const out = new Uint8Array(
    SECTION_TABLE_PREFIX_BYTES + sections.length * SECTION_DESCRIPTOR_BYTES,
  );
  const v = new DataView(out.buffer);
  v.setUint32(0, sections.length, true);
  sections.forEach((s, i) => {
    const o = SECTION_TABLE_PREFIX_BYTES + i * SECTION_DESCRIPTOR_BYTES;
    v.setUint32(o, s.kind, true);
    v.setUint32(o + 4, s.index, true);
    u64(v, o + 8, s.offset);
    u64(v, o + 16, s.length);
    v.setUint32(o + 24, s.crc >>> 0, true);
    // o + 28 reserved u32, zero
  });
  v.setUint32(4, crc32(out.subarray(SECTION_TABLE_PREFIX_BYTES)), true);
  return out;
}

/**
 * Bytes of a section table of `count` sections.
 *
 * @example
 * ```ts
 * import { sectionTableBytes } from "./container.ts";
 * console.log(sectionTableBytes(2)); // 72
 * ```
 */
export function sectionTableBytes(count: number): number {
  return SECTION_TABLE_PREFIX_BYTES + count * SECTION_DESCRIPTOR_BYTES;
}

/** One EntryDescriptor of a block directory. */
export interface EntryDescriptor {
  /** Matrix id (docs/FORMAT.md). */
  matrixId: number;
  /** Section or entry kind. */
  kind: number;
  /** Tile type (1 Q4_0, 2 Q8_0, 3 F32). */
  tileType: number;
  /** Fused run: 0 none, 1 QKV, 2 gate/up. */
  fused: number;
  /** Layer the weight belongs to (0xFFFF: vocabulary). */
  layerId: number;
  /** Expert index (0xFF: none). */
  expertId: number;
  /** Rows (output features). */
  rows: number;
  /** Columns (input features). */
  cols: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Length in bytes. */
  length: number;
}

/** A block's header: its stage, its layer and its entries. */
export interface BlockHeader {
  /** Which part of the forward pass the block feeds. */
  stage: number;
  /** Layer the weight belongs to (0xFFFF: vocabulary). */
  layerId: number;
  /** Number of directory entries. */
  entryCount: number;
}

/**
 * Encodes a BlockHeader and its directory.
 *
 * @example
 * ```ts ignore
 * import { encodeBlockDirectory } from "./container.ts";
 * const bytes = encodeBlockDirectory({ stage: 0, layerId: 3, entryCount: 2 }, entries);
 * ```
 */
export function encodeBlockDirectory(
  h: BlockHeader,
  entries: readonly EntryDescriptor[],
): Uint8Array {
  const out = new Uint8Array(BLOCK_HEADER_BYTES + entries.length * ENTRY_BYTES);
  const v = new DataView(out.buffer);
  v.setUint32(0, BLOCK_MAGIC, true);
  v.setUint8(4, h.stage);
  // 5 reserved u8
  v.setUint16(6, h.layerId, true);
  v.setUint32(8, entries.length, true);
  // 12 reserved u32
  entries.forEach((e, i) => {
    const o = BLOCK_HEADER_BYTES + i * ENTRY_BYTES;
    v.setUint8(o, e.matrixId);
    v.setUint8(o + 1, e.kind);
    v.setUint8(o + 2, e.tileType);
    v.setUint8(o + 3, e.fused);
    v.setUint16(o + 4, e.layerId, true);
    v.setUint8(o + 6, e.expertId);
    // o + 7 reserved u8
    v.setUint32(o + 8, e.rows, true);
    v.setUint32(o + 12, e.cols, true);
    u64(v, o + 16, e.offset);
    u64(v, o + 24, e.length);
  });
  return out;
}

/**
 * Decodes one EntryDescriptor.
 *
 * @example
 * ```ts ignore
 * import { decodeEntry } from "./container.ts";
 * const e = decodeEntry(view, 16);
 * ```
 */
export function decodeEntry(v: DataView, o: number): EntryDescriptor & { reserved: number } {
  return {
    matrixId: v.getUint8(o),
    kind: v.getUint8(o + 1),
    tileType: v.getUint8(o + 2),
    fused: v.getUint8(o + 3),
    layerId: v.getUint16(o + 4, true),
    expertId: v.getUint8(o + 6),
    reserved: v.getUint8(o + 7),
    rows: v.getUint32(o + 8, true),
    cols: v.getUint32(o + 12, true),
    offset: Number(v.getBigUint64(o + 16, true)),
    length: Number(v.getBigUint64(o + 24, true)),
  };
}

/**
 * Rounds up to the next multiple of {@link ALIGN}.
 *
 * @example
 * ```ts
 * import { alignUp } from "./container.ts";
 * console.log(alignUp(65)); // 128
 * ```
 */
export function alignUp(n: number, a: number = ALIGN): number {
  return Math.ceil(n / a) * a;
}

import { crc32 } from "./crc32.ts";
