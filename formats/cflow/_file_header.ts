/**
 * The first step of reading a `.cflow` or `.vflow` file: its header (and a
 * `.vflow` file's group table) checked field by field, and the geometry
 * fields a `.vflow` header leaves to the metadata. Internal to the reader
 * (reader.ts).
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import {
  ARCH_IDS,
  CFLOW_VERSION,
  CFLOW_VERSION_MIN,
  decodeGlobalHeader,
  decodeGroupDescriptor,
  decodeVFlowHeader,
  type Geometry,
  GLOBAL_HEADER_BYTES,
  GROUP_DESCRIPTOR_BYTES,
  type GroupDescriptor,
  headerCrc,
  type SectionDescriptor,
  VFLOW_HEADER_BYTES,
  VFLOW_VERSION,
  VFLOW_VERSION_MIN,
  vflowHeaderCrc,
} from "./container.ts";
import { maxTileType, QUANT_GROUP } from "./tile.ts";
import type { Checker } from "./_checker.ts";
import { GLOBAL_OFFSETS, validateCombine, validateGeometry, VFLOW_OFFSETS } from "./_headers.ts";

/** What a file's header says: its geometry, version, where its section table is, its groups. */
export interface FileHead {
  geometry: Geometry;
  version: number;
  sectionTableOffset: number;
  /** Layer groups (`.vflow`; none for `.cflow`). */
  groups: GroupDescriptor[];
  /** Size of the header. */
  headerBytes: number;
}

/** The `.cflow` global header, checked (and the tile types its version allows set on `c`). */
export function readCflowHeader(c: Checker): FileHead {
  const bytes = c.src.read(0, GLOBAL_HEADER_BYTES, "header");
  const h = decodeGlobalHeader(bytes);
  c.check(
    h.version >= CFLOW_VERSION_MIN && h.version <= CFLOW_VERSION,
    "version",
    8,
    `${h.version}, this reader supports ${CFLOW_VERSION_MIN}..${CFLOW_VERSION}`,
  );
  c.maxTileType = maxTileType(h.version);
  c.check(headerCrc(bytes) === h.headerCrc, "header_crc32", 76, "checksum mismatch");
  c.check(bytes[70] === 0 && bytes[71] === 0, "reserved", 70, "must be zero");
  c.check(
    h.quantGroup === QUANT_GROUP,
    "quant_group",
    56,
    `${h.quantGroup}, only ${QUANT_GROUP} is supported`,
  );
  validateGeometry(c, h, 0, GLOBAL_OFFSETS);
  validateCombine(c, h, (k) => GLOBAL_OFFSETS[k]);
  return {
    geometry: h,
    version: h.version,
    sectionTableOffset: h.sectionTableOffset,
    groups: [],
    headerBytes: GLOBAL_HEADER_BYTES,
  };
}

/**
 * The `.vflow` header and its group table, checked (and the tile types its
 * version allows set on `c`). The geometry's fields that the header does not
 * hold are zero until {@link vflowMetadataGeometry}.
 */
export function readVflowHeader(c: Checker): FileHead {
  const src = c.src;
  let groups: GroupDescriptor[] = [];
  const bytes = src.read(0, VFLOW_HEADER_BYTES, "header");
  const h = decodeVFlowHeader(bytes);
  c.check(
    h.version >= VFLOW_VERSION_MIN && h.version <= VFLOW_VERSION,
    "version",
    8,
    `${h.version}, this reader supports ${VFLOW_VERSION_MIN}..${VFLOW_VERSION}`,
  );
  // .vflow 2 carries the tile types of .cflow 6.
  c.maxTileType = maxTileType(h.version >= VFLOW_VERSION ? CFLOW_VERSION : CFLOW_VERSION_MIN);
  c.check(vflowHeaderCrc(bytes) === h.headerCrc, "header_crc32", 52, "checksum mismatch");
  const geometry: Geometry = {
    archId: 0,
    hidden: h.hidden,
    layers: h.layers,
    heads: h.heads,
    kvHeads: h.kvHeads,
    headDim: h.headDim,
    ffnHidden: h.ffnHidden,
    experts: h.experts,
    topK: h.topK,
    expertFfnHidden: 0,
    vocab: h.vocab,
    tileRows: h.tileRows,
    tileCols: h.tileCols,
    quantGroup: QUANT_GROUP,
    quantType: h.quantType,
    slidingWindow: 0,
    slidingPattern: 0,
    denseDelay: h.denseDelay,
    expertDelay: h.expertDelay,
    combineStyle: h.combineStyle,
    styleParam: 0,
    featureFlags: h.featureFlags,
    finalLogitSoftcap: 0,
  };
  validateGeometry(c, geometry, 0, VFLOW_OFFSETS);
  c.range(h.groupCount, 1, h.layers, "group_count", 46);
  c.check(
    h.groupTableOffset === VFLOW_HEADER_BYTES,
    "group_table_offset",
    48,
    `${h.groupTableOffset}, expected ${VFLOW_HEADER_BYTES}`,
  );
  const table = src.read(
    h.groupTableOffset,
    h.groupCount * GROUP_DESCRIPTOR_BYTES,
    "group_table",
  );
  const tv = new DataView(table.buffer);
  let next = 0;
  for (let i = 0; i < h.groupCount; i++) {
    const d = decodeGroupDescriptor(tv, i * GROUP_DESCRIPTOR_BYTES);
    const at = h.groupTableOffset + i * GROUP_DESCRIPTOR_BYTES;
    c.check(d.reserved === 0n, `groups[${i}].reserved`, at + 40, "must be zero");
    c.check(
      d.firstLayer === next && d.layerCount >= 1 && d.firstLayer + d.layerCount <= h.layers,
      `groups[${i}].first_layer`,
      at,
      `layers ${d.firstLayer}+${d.layerCount} do not continue from ${next}`,
    );
    next = d.firstLayer + d.layerCount;
    groups.push(d);
  }
  c.check(
    next === h.layers,
    "group_table",
    h.groupTableOffset,
    `groups cover ${next} of ${h.layers} layers`,
  );
  groups = groups.map((x) => ({
    firstLayer: x.firstLayer,
    layerCount: x.layerCount,
    offset: x.offset,
    length: x.length,
    attentionOffset: x.attentionOffset,
    ffnOffset: x.ffnOffset,
  }));

  return {
    geometry,
    version: h.version,
    sectionTableOffset: h.sectionTableOffset,
    groups,
    headerBytes: VFLOW_HEADER_BYTES,
  };
}

/** Byte offset of a top-level `"key"` in the metadata (its section's start if absent). */
function metadataKeyOffset(src: ByteSource, sec: SectionDescriptor, key: string): number {
  const bytes = src.read(sec.offset, sec.length, "metadata");
  const needle = new TextEncoder().encode(JSON.stringify(key));
  outer: for (let i = 0; i + needle.length <= bytes.length; i++) {
    for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    return sec.offset + i;
  }
  return sec.offset;
}

/**
 * The geometry fields a `.vflow` header leaves to the metadata (the
 * metadata section `meta`, parsed into `metadata`), checked and set on `g`.
 */
export function vflowMetadataGeometry(
  c: Checker,
  g: Geometry,
  meta: SectionDescriptor,
  metadata: Record<string, unknown>,
): void {
  const src = c.src;
  // The .vflow header has no arch_id or style_param: both come from the
  // metadata (`architecture`, `style_param`).
  const arch = metadata.architecture;
  g.archId = typeof arch === "string" ? ARCH_IDS[arch] ?? 0 : 0;
  const sp = metadata.style_param;
  const spAt = metadataKeyOffset(src, meta, "style_param");
  c.check(
    sp === undefined || (Number.isInteger(sp) && (sp as number) >= 0 && (sp as number) <= 255),
    "metadata.style_param",
    spAt,
    `${JSON.stringify(sp)} is not an integer 0..255`,
  );
  g.styleParam = (sp as number | undefined) ?? 0;
  validateCombine(c, g, (k) => k === "styleParam" ? spAt : VFLOW_OFFSETS[k]);
  // So are the soft-cap, the sliding window and pattern and the expert
  // width: the writer's `hyperparameters` object.
  const hp = metadata.hyperparameters;
  if (hp !== null && typeof hp === "object" && !Array.isArray(hp)) {
    const h = hp as Record<string, unknown>;
    const hpAt = metadataKeyOffset(src, meta, "hyperparameters");
    const int = (key: string, max: number): number => {
      const v = h[key] ?? 0;
      c.check(
        Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= max,
        `metadata.hyperparameters.${key}`,
        hpAt,
        `${JSON.stringify(v)} is not an integer 0..${max}`,
      );
      return v as number;
    };
    g.slidingWindow = int("slidingWindow", 0xffffffff);
    g.slidingPattern = int("slidingPattern", 255);
    g.expertFfnHidden = int("expertFfnHidden", 0xffffffff);
    const cap = h.finalLogitSoftcap ?? 0;
    c.check(
      typeof cap === "number" && Number.isFinite(cap) && cap >= 0,
      "metadata.hyperparameters.finalLogitSoftcap",
      hpAt,
      `${JSON.stringify(cap)} is not a finite number >= 0`,
    );
    g.finalLogitSoftcap = Math.fround(cap as number);
    c.check(
      g.slidingPattern === 0 || g.slidingWindow > 0,
      "metadata.hyperparameters.slidingPattern",
      hpAt,
      "a sliding pattern without a sliding window",
    );
  }
}
