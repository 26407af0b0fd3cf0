/**
 * The `.vflow` VFlowHeader: its magic, versions and size, and its codec
 * (encode, decode, header CRC). docs/FORMAT.md describes every byte;
 * container.ts re-exports every name here.
 *
 * @module
 */

import { crc32 } from "./crc32.ts";

/** `.vflow` magic: "VFLOW\0\0\0". */
export const VFLOW_MAGIC: Uint8Array = new Uint8Array([0x56, 0x46, 0x4c, 0x4f, 0x57, 0, 0, 0]);
/** Newest `.vflow` version (the tile types of `.cflow` version 6). */
export const VFLOW_VERSION = 2;
/** Oldest `.vflow` version read (tile types of `.cflow` version 5). */
export const VFLOW_VERSION_MIN = 1;
/** Size of the `.vflow` VFlowHeader. */
export const VFLOW_HEADER_BYTES = 64;

export function u64(view: DataView, offset: number, value: number): void {
  view.setBigUint64(offset, BigInt(value), true);
}

/** The VFlowHeader: a compact geometry plus the group and section tables. */
export interface VFlowHeader {
  /** Format version. */
  version: number;
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
  /** Rows per full tile (128). */
  tileRows: number;
  /** Columns per full tile (256). */
  tileCols: number;
  /** Tile type of the weight matrices (1 Q4_0, 2 Q8_0, 3 F32). */
  quantType: number;
  /** Feature bits: embedding scale, V-norm, tied embeddings. */
  featureFlags: number;
  /** Dense FFN width (0: none). */
  ffnHidden: number;
  /** Vocabulary size. */
  vocab: number;
  /** Number of experts (0 for dense models). */
  experts: number;
  /** Experts selected per token. */
  topK: number;
  /** Dense-FFN pipelining delay in layers. */
  denseDelay: number;
  /** Expert pipelining delay in layers. */
  expertDelay: number;
  /** How the layer's parts combine (see {@link Geometry.combineStyle}). */
  combineStyle: number;
  /** Number of layer groups. */
  groupCount: number;
  /** Byte offset of the group table. */
  groupTableOffset: number;
  /** CRC-32 stored in the header. */
  headerCrc: number;
  /** Byte offset of the section table. */
  sectionTableOffset: number;
}

/**
 * Encodes the 64-byte VFlowHeader.
 *
 * @example
 * ```ts ignore
 * import { encodeVFlowHeader } from "./vflow_header.ts";
 * const bytes = encodeVFlowHeader(header);
 * ```
 */
export function encodeVFlowHeader(
  h: Omit<VFlowHeader, "version" | "headerCrc"> & { version?: number },
): Uint8Array {
  const out = new Uint8Array(VFLOW_HEADER_BYTES);
  const v = new DataView(out.buffer);
  out.set(VFLOW_MAGIC, 0);
  v.setUint32(8, h.version ?? VFLOW_VERSION_MIN, true);
  v.setUint32(12, h.hidden, true);
  v.setUint32(16, h.layers, true);
  v.setUint16(20, h.heads, true);
  v.setUint16(22, h.kvHeads, true);
  v.setUint16(24, h.headDim, true);
  v.setUint16(26, h.tileRows, true);
  v.setUint16(28, h.tileCols, true);
  v.setUint8(30, h.quantType);
  v.setUint8(31, h.featureFlags);
  v.setUint32(32, h.ffnHidden, true);
  v.setUint32(36, h.vocab, true);
  v.setUint16(40, h.experts, true);
  v.setUint8(42, h.topK);
  v.setUint8(43, h.denseDelay);
  v.setUint8(44, h.expertDelay);
  v.setUint8(45, h.combineStyle);
  v.setUint16(46, h.groupCount, true);
  v.setUint32(48, h.groupTableOffset, true);
  // 52..55 header_crc32 over bytes 0..51 and 56..63
  u64(v, 56, h.sectionTableOffset);
  v.setUint32(52, vflowHeaderCrc(out), true);
  return out;
}

/** CRC-32 of a VFlowHeader with its crc field (52..55) skipped. */
export function vflowHeaderCrc(bytes: Uint8Array): number {
  return crc32(bytes.subarray(56, 64), crc32(bytes.subarray(0, 52)));
}

/**
 * Decodes a VFlowHeader without validating it.
 *
 * @example
 * ```ts ignore
 * import { decodeVFlowHeader } from "./vflow_header.ts";
 * const h = decodeVFlowHeader(bytes);
 * ```
 */
export function decodeVFlowHeader(b: Uint8Array): VFlowHeader {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    version: v.getUint32(8, true),
    hidden: v.getUint32(12, true),
    layers: v.getUint32(16, true),
    heads: v.getUint16(20, true),
    kvHeads: v.getUint16(22, true),
    headDim: v.getUint16(24, true),
    tileRows: v.getUint16(26, true),
    tileCols: v.getUint16(28, true),
    quantType: v.getUint8(30),
    featureFlags: v.getUint8(31),
    ffnHidden: v.getUint32(32, true),
    vocab: v.getUint32(36, true),
    experts: v.getUint16(40, true),
    topK: v.getUint8(42),
    denseDelay: v.getUint8(43),
    expertDelay: v.getUint8(44),
    combineStyle: v.getUint8(45),
    groupCount: v.getUint16(46, true),
    groupTableOffset: v.getUint32(48, true),
    headerCrc: v.getUint32(52, true),
    sectionTableOffset: Number(v.getBigUint64(56, true)),
  };
}
