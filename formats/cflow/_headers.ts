/**
 * The headers, the section table and the metadata of `.cflow` and `.vflow`
 * files: each field checked against its limits and against the others.
 * Internal to the reader (reader.ts).
 *
 * @module
 */

import {
  ALIGN,
  ARCH_IDS,
  COMBINE,
  type Geometry,
  SECTION_DESCRIPTOR_BYTES,
  SECTION_TABLE_PREFIX_BYTES,
  type SectionDescriptor,
} from "./container.ts";
import { crc32 } from "./crc32.ts";
import { TILE_COLS, TILE_ROWS } from "./tile.ts";
import type { Checker } from "./_checker.ts";
import { LIMITS } from "./reader.ts";

/**
 * Each geometry field against its limits and the others (`offsets`: where
 * each sits in the header).
 */
export function validateGeometry(
  c: Checker,
  g: Geometry,
  base: number,
  offsets: Record<string, number>,
): void {
  const at = (k: string) => base + (offsets[k] ?? 0);
  c.range(g.layers, 1, LIMITS.layers, "n_layers", at("layers"));
  c.range(g.hidden, 1, LIMITS.hidden, "hidden", at("hidden"));
  c.range(g.heads, 1, LIMITS.heads, "n_heads", at("heads"));
  c.range(g.kvHeads, 1, g.heads, "n_kv_heads", at("kvHeads"));
  c.check(
    g.heads % g.kvHeads === 0,
    "n_kv_heads",
    at("kvHeads"),
    `${g.kvHeads} does not divide n_heads ${g.heads}`,
  );
  c.range(g.headDim, 1, 4096, "head_dim", at("headDim"));
  c.range(g.ffnHidden, 0, LIMITS.ffn, "ffn_hidden", at("ffnHidden"));
  c.range(g.experts, 0, LIMITS.experts, "n_experts", at("experts"));
  c.range(g.topK, g.experts > 0 ? 1 : 0, g.experts, "top_k", at("topK"));
  c.range(g.vocab, 1, LIMITS.vocab, "vocab", at("vocab"));
  c.check(
    g.tileRows === TILE_ROWS,
    "tile_rows",
    at("tileRows"),
    `${g.tileRows}, only ${TILE_ROWS} is supported`,
  );
  c.check(
    g.tileCols === TILE_COLS,
    "tile_cols",
    at("tileCols"),
    `${g.tileCols}, only ${TILE_COLS} is supported`,
  );
  c.range(g.quantType, 1, c.maxTileType, "quant_type", at("quantType"));
  c.range(g.archId, 0, MAX_ARCH_ID, "arch_id", at("archId"));
  c.check(
    g.slidingPattern === 0 || g.slidingWindow > 0,
    "sliding_pattern",
    at("slidingPattern"),
    `${g.slidingPattern} without a sliding_window`,
  );
  c.range(g.denseDelay, 0, g.layers, "dense_delay", at("denseDelay"));
  c.range(g.expertDelay, 0, g.layers, "expert_delay", at("expertDelay"));
  c.range(g.combineStyle, 0, 5, "combine_style", at("combineStyle"));
  c.range(g.featureFlags, 0, 15, "feature_flags", at("featureFlags"));
  c.check(
    Number.isFinite(g.finalLogitSoftcap) && g.finalLogitSoftcap >= 0,
    "final_logit_softcap",
    at("finalLogitSoftcap"),
    `${g.finalLogitSoftcap} is not a finite number >= 0`,
  );
}

/**
 * The combine style against the delays, the experts and `style_param`
 * (docs/FORMAT.md, `combine_style`). Pipeline-native files (arch_id 9) use
 * all six styles; every other architecture is a plain transformer, written
 * as 1 (DelayedSum) or, by converters before styles 3-5, as 0.
 */
export function validateCombine(
  c: Checker,
  g: Geometry,
  at: (field: "combineStyle" | "denseDelay" | "expertDelay" | "styleParam" | "experts") => number,
): void {
  const style = g.combineStyle;
  const name = COMBINE_NAMES[style] ?? String(style);
  if (g.archId !== ARCH_IDS.pipeline_native) {
    c.check(
      style === COMBINE.PARALLEL_SQRT2 || style === COMBINE.DELAYED_SUM,
      "combine_style",
      at("combineStyle"),
      `${style} (${name}) is for pipeline-native files (arch_id 9); arch_id ${g.archId} uses 1 (or 0)`,
    );
    c.check(
      g.styleParam === 0,
      "style_param",
      at("styleParam"),
      `${g.styleParam}, must be 0 outside pipeline-native files`,
    );
    return;
  }
  const noDelays = style === COMBINE.PARALLEL_SQRT2 || style >= COMBINE.DECOUPLED_STREAMS;
  if (noDelays) {
    c.check(
      g.denseDelay === 0,
      "dense_delay",
      at("denseDelay"),
      `${g.denseDelay}, combine_style ${style} (${name}) requires 0`,
    );
    c.check(
      g.expertDelay === 0,
      "expert_delay",
      at("expertDelay"),
      `${g.expertDelay}, combine_style ${style} (${name}) requires 0`,
    );
  }
  if (style === COMBINE.PARALLEL_SQRT2) {
    c.check(
      g.experts > 0,
      "n_experts",
      at("experts"),
      `0, combine_style 0 (${name}) requires experts`,
    );
  }
  if (style === COMBINE.DECOUPLED_STREAMS || style === COMBINE.FIXED_POINT) {
    c.check(
      g.styleParam >= 1,
      "style_param",
      at("styleParam"),
      `0, combine_style ${style} (${name}) requires style_param >= 1`,
    );
  } else {
    c.check(
      g.styleParam === 0,
      "style_param",
      at("styleParam"),
      `${g.styleParam}, combine_style ${style} (${name}) requires 0`,
    );
  }
}

const COMBINE_NAMES: Record<number, string> = {
  0: "ParallelSqrt2",
  1: "DelayedSum",
  2: "AsyncExperts",
  3: "DecoupledStreams",
  4: "PipelineRegisters",
  5: "FixedPoint",
};

/** The largest `arch_id` this reader knows (container.ts ARCH_IDS). */
const MAX_ARCH_ID = Math.max(...Object.values(ARCH_IDS));

/** Where each geometry field sits in the `.cflow` global header (for error offsets). */
export const GLOBAL_OFFSETS: Record<string, number> = {
  hidden: 12,
  layers: 16,
  heads: 20,
  kvHeads: 24,
  headDim: 28,
  ffnHidden: 32,
  experts: 36,
  topK: 40,
  expertFfnHidden: 44,
  vocab: 48,
  tileRows: 52,
  tileCols: 54,
  quantGroup: 56,
  quantType: 58,
  archId: 59,
  slidingWindow: 60,
  slidingPattern: 64,
  denseDelay: 65,
  expertDelay: 66,
  combineStyle: 67,
  featureFlags: 68,
  styleParam: 69,
  finalLogitSoftcap: 72,
};

/** Where each geometry field sits in the `.vflow` header. */
export const VFLOW_OFFSETS: Record<string, number> = {
  hidden: 12,
  layers: 16,
  heads: 20,
  kvHeads: 22,
  headDim: 24,
  tileRows: 26,
  tileCols: 28,
  quantType: 30,
  featureFlags: 31,
  ffnHidden: 32,
  vocab: 36,
  experts: 40,
  topK: 42,
  denseDelay: 43,
  expertDelay: 44,
  combineStyle: 45,
};

/**
 * The section table at `offset`: its count, its CRC-32, and every section
 * aligned, in order and inside the file.
 */
export function readSectionTable(
  c: Checker,
  offset: number,
  expected: number,
): SectionDescriptor[] {
  const src = c.src;
  c.check(offset % 8 === 0, "section_table_offset", offset, "not 8-byte aligned");
  const prefix = src.read(offset, SECTION_TABLE_PREFIX_BYTES, "section_table");
  const pv = new DataView(prefix.buffer);
  const count = pv.getUint32(0, true);
  c.check(
    count === expected,
    "section_table.count",
    offset,
    `${count} sections, the header implies ${expected}`,
  );
  const body = src.read(
    offset + SECTION_TABLE_PREFIX_BYTES,
    count * SECTION_DESCRIPTOR_BYTES,
    "section_table.entries",
  );
  const crc = pv.getUint32(4, true);
  c.check(crc32(body) === crc, "section_table.crc32", offset + 4, "checksum mismatch");
  const v = new DataView(body.buffer);
  const out: SectionDescriptor[] = [];
  let prevEnd = offset + SECTION_TABLE_PREFIX_BYTES + body.length;
  for (let i = 0; i < count; i++) {
    const o = i * SECTION_DESCRIPTOR_BYTES;
    const at = offset + SECTION_TABLE_PREFIX_BYTES + o;
    const d: SectionDescriptor = {
      kind: v.getUint32(o, true),
      index: v.getUint32(o + 4, true),
      offset: Number(v.getBigUint64(o + 8, true)),
      length: Number(v.getBigUint64(o + 16, true)),
      crc: v.getUint32(o + 24, true),
    };
    c.check(v.getUint32(o + 28, true) === 0, `sections[${i}].reserved`, at + 28, "must be zero");
    c.check(
      Number.isSafeInteger(d.offset) && d.offset % ALIGN === 0,
      `sections[${i}].offset`,
      at + 8,
      `${d.offset} is not ${ALIGN}-byte aligned`,
    );
    c.check(
      d.offset >= prevEnd,
      `sections[${i}].offset`,
      at + 8,
      `${d.offset} overlaps what precedes it (ends at ${prevEnd})`,
    );
    c.check(
      Number.isSafeInteger(d.length) && d.length <= src.size - d.offset,
      `sections[${i}].length`,
      at + 16,
      `${d.length} bytes at ${d.offset} run past the end of the file (${src.size})`,
    );
    prevEnd = d.offset + d.length;
    out.push(d);
  }
  return out;
}

/** The metadata section: at most `LIMITS.metadataBytes` of UTF-8 holding one JSON object. */
export function parseMetadata(c: Checker, sec: SectionDescriptor): Record<string, unknown> {
  c.check(
    sec.length <= LIMITS.metadataBytes,
    "metadata.length",
    sec.offset,
    `${sec.length} bytes is above the cap`,
  );
  const bytes = c.src.read(sec.offset, sec.length, "metadata");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    c.fail("metadata", sec.offset, "not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    c.fail("metadata", sec.offset, `not valid JSON (${(error as Error).message})`);
  }
  c.check(
    typeof value === "object" && value !== null && !Array.isArray(value),
    "metadata",
    sec.offset,
    "not a JSON object",
  );
  return value as Record<string, unknown>;
}
