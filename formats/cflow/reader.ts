/**
 * Reads and validates `.cflow` and `.vflow` files. Every header, table,
 * block directory and tile header is checked against the others before
 * anything is used; a disagreement is a {@link FormatError} naming the file,
 * the field and the byte offset. Checksums are verified on request (reading
 * every byte of a large model is not free).
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import {
  ALIGN,
  ARCH_IDS,
  BLOCK_HEADER_BYTES,
  BLOCK_MAGIC,
  CFLOW_MAGIC,
  CFLOW_VERSION,
  CFLOW_VERSION_MIN,
  COMBINE,
  decodeEntry,
  decodeGlobalHeader,
  decodeGroupDescriptor,
  decodeVFlowHeader,
  ENTRY_BYTES,
  ENTRY_KIND,
  type EntryDescriptor,
  FUSED,
  type Geometry,
  GLOBAL_HEADER_BYTES,
  GROUP_DESCRIPTOR_BYTES,
  type GroupDescriptor,
  headerCrc,
  MATRIX,
  matrixName,
  SECTION,
  SECTION_DESCRIPTOR_BYTES,
  SECTION_TABLE_PREFIX_BYTES,
  type SectionDescriptor,
  STAGE,
  VFLOW_HEADER_BYTES,
  VFLOW_MAGIC,
  VFLOW_VERSION,
  VFLOW_VERSION_MIN,
  vflowHeaderCrc,
  VOCAB_LAYER,
} from "./container.ts";
import { crc32 } from "./crc32.ts";
import {
  blockElements,
  decodeTileHeader,
  decodeTilePayload,
  isWholeBlockType,
  matrixTileBytes,
  maxTileType,
  NO_EXPERT,
  QUANT_GROUP,
  rowBytes,
  TILE_COLS,
  TILE_HEADER_BYTES,
  TILE_ROWS,
  tileBytes,
  type TileHeader,
  tileQuantGroup,
  tileTypeName,
} from "./tile.ts";

/** Caps on what a header may declare. */
export const LIMITS = {
  layers: 1024,
  hidden: 1 << 17,
  heads: 1024,
  ffn: 1 << 20,
  experts: 1024,
  vocab: 1 << 22,
  metadataBytes: 256 << 20,
  entriesPerBlock: 1 << 16,
} as const;

/** A validated block: its directory with absolute offsets. */
export interface Block {
  /** Which part of the forward pass the block feeds. */
  stage: number;
  /** Decoder layer index. */
  layer: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** The block's directory entries. */
  entries: EntryDescriptor[];
}

/** A validated expert bank of one layer. */
export interface ExpertBank {
  /** Decoder layer index. */
  layer: number;
  /** (offset, length) of each expert's tiles. */
  spans: { offset: number; length: number }[];
  /** The gate projection. */
  gate: EntryDescriptor;
  /** The up projection. */
  up: EntryDescriptor;
  /** The down projection. */
  down: EntryDescriptor;
}

/** A parsed, validated `.cflow` or `.vflow` file. */
export interface TiledFile {
  /** Which of the two formats. */
  format: "cflow" | "vflow";
  /** Format version. */
  version: number;
  /** Size of the header. */
  headerBytes: number;
  /** Model geometry from the header. */
  geometry: Geometry;
  /** The metadata JSON object. */
  metadata: Record<string, unknown>;
  /** The section table, in file order. */
  sections: SectionDescriptor[];
  /** Layer groups (`.vflow`). */
  groups: GroupDescriptor[];
  /** Blocks of the section, in file order. */
  blocks: Block[];
  /** Number of experts (0 for dense models). */
  experts: Map<number, ExpertBank>;
  /** Size of the file in bytes. */
  size: number;
}

class Checker {
  /** The highest tile type the file's version allows (set once the version is read). */
  maxTileType: number = maxTileType(CFLOW_VERSION_MIN);
  constructor(readonly src: ByteSource) {}
  fail(field: string, offset: number, detail: string): never {
    throw new FormatError(this.src.name, field, offset, detail);
  }
  check(ok: boolean, field: string, offset: number, detail: string): void {
    if (!ok) this.fail(field, offset, detail);
  }
  range(value: number, lo: number, hi: number, field: string, offset: number): void {
    if (!(value >= lo && value <= hi)) this.fail(field, offset, `${value} is outside ${lo}..${hi}`);
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function validateGeometry(
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
function validateCombine(
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
/** The largest matrix id (container.ts MATRIX). */
const MAX_MATRIX_ID = Math.max(...Object.values(MATRIX));

/** Which layer block a weight of layer l goes to: the schedule's placement. */
const ATTENTION_MATRICES: ReadonlySet<number> = new Set([
  MATRIX.ATTN_NORM,
  MATRIX.Q,
  MATRIX.K,
  MATRIX.V,
  MATRIX.O,
  MATRIX.Q_NORM,
  MATRIX.K_NORM,
  MATRIX.POST_ATTN_NORM,
  MATRIX.Q_BIAS,
  MATRIX.K_BIAS,
  MATRIX.V_BIAS,
]);
const FFN_MATRICES: ReadonlySet<number> = new Set([
  MATRIX.FFN_NORM,
  MATRIX.GATE,
  MATRIX.UP,
  MATRIX.DOWN,
  MATRIX.POST_FFN_NORM,
]);
const MOE_MATRICES: ReadonlySet<number> = new Set([
  MATRIX.MOE_NORM,
  MATRIX.SHARED_GATE,
  MATRIX.SHARED_UP,
  MATRIX.SHARED_DOWN,
  MATRIX.SHARED_EXPERT_GATE_INP,
  MATRIX.ROUTER,
  MATRIX.EXPERT_TABLE,
  MATRIX.EXPERT_GATE,
  MATRIX.EXPERT_UP,
  MATRIX.EXPERT_DOWN,
]);
const VOCAB_MATRICES: ReadonlySet<number> = new Set([
  MATRIX.TOKEN_EMBD,
  MATRIX.OUTPUT,
  MATRIX.OUTPUT_NORM,
]);

/**
 * The layer whose block holds matrix `m` of layer `l` in a block of `stage`
 * (docs/FORMAT.md, placement), or undefined when `m` has no place there.
 */
function placedAt(g: Geometry, stage: number, m: number, l: number): number | undefined {
  const attention = stage === STAGE.LAYER || stage === STAGE.ATTENTION;
  const ffn = stage === STAGE.LAYER || stage === STAGE.FFN;
  const moe = stage === STAGE.LAYER || stage === STAGE.EXPERTS;
  if (attention && ATTENTION_MATRICES.has(m)) return l;
  // Without a dense FFN, the norm before the experts travels with attention
  // (convert/build_weights.ts).
  if (attention && m === MATRIX.FFN_NORM && g.ffnHidden === 0) return l;
  if (ffn && FFN_MATRICES.has(m)) return Math.max(0, l - g.denseDelay);
  if (moe && MOE_MATRICES.has(m) && g.experts > 0) {
    return stage === STAGE.EXPERTS ? l : Math.max(0, l - g.expertDelay);
  }
  return undefined;
}

/** Checks that [from, to) holds only zero bytes (padding). */
function checkZeros(c: Checker, from: number, to: number, field: string): void {
  if (to <= from) return;
  const gap = c.src.read(from, to - from, field);
  const i = gap.findIndex((b) => b !== 0);
  c.check(i < 0, field, from + Math.max(i, 0), "padding bytes must be zero");
}

const GLOBAL_OFFSETS: Record<string, number> = {
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

const VFLOW_OFFSETS: Record<string, number> = {
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

function readSectionTable(c: Checker, offset: number, expected: number): SectionDescriptor[] {
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

/**
 * Visits every tile of a run (one matrix, or several interleaved by output
 * stripe) in file order; returns the offset after the last tile.
 */
function walkTiles(
  members: readonly EntryDescriptor[],
  start: number,
  visit: (
    m: EntryDescriptor,
    r0: number,
    c0: number,
    tr: number,
    tc: number,
    pos: number,
    size: number,
  ) => void,
): number {
  const stripes = Math.max(...members.map((m) => Math.ceil(m.rows / TILE_ROWS)));
  let pos = start;
  for (let s = 0; s < stripes; s++) {
    for (const m of members) {
      const r0 = s * TILE_ROWS;
      if (r0 >= m.rows) continue;
      const tr = Math.min(TILE_ROWS, m.rows - r0);
      for (let c0 = 0; c0 < m.cols; c0 += TILE_COLS) {
        const tc = Math.min(TILE_COLS, m.cols - c0);
        const size = tileBytes(m.tileType, tr, tc);
        visit(m, r0, c0, tr, tc, pos, size);
        pos += size;
      }
    }
  }
  return pos;
}

/** Walks the tiles of a run and checks every TileHeader against the entries. */
function checkTiles(
  c: Checker,
  members: EntryDescriptor[],
  start: number,
  length: number,
  layer: number,
  expert: number,
  field: string,
): number {
  return walkTiles(members, start, (m, r0, c0, tr, tc, pos, size) => {
    c.check(pos + size <= start + length, field, pos, "tiles run past their entry");
    const h = decodeTileHeader(
      new DataView(c.src.read(pos, TILE_HEADER_BYTES, field).buffer),
      0,
    );
    const want: TileHeader = {
      layerId: layer,
      matrixId: m.matrixId,
      expertId: expert,
      rowOffset: r0,
      colOffset: c0,
      tileRows: tr,
      tileCols: tc,
      quantGroup: tileQuantGroup(m.tileType),
    };
    for (const [k, v] of Object.entries(want) as [keyof TileHeader, number][]) {
      if (h[k] !== v) c.fail(`${field}.tile(${r0},${c0}).${k}`, pos, `${h[k]}, expected ${v}`);
    }
  });
}

function readBlock(
  c: Checker,
  g: Geometry,
  offset: number,
  limit: number,
  expectStage: number,
  expectLayer: number,
  experts: Map<number, ExpertBank>,
): Block {
  const src = c.src;
  const name = `block@${offset}`;
  const head = src.read(offset, BLOCK_HEADER_BYTES, name);
  const hv = new DataView(head.buffer);
  c.check(
    hv.getUint32(0, true) === BLOCK_MAGIC,
    `${name}.magic`,
    offset,
    "not a block (bad magic)",
  );
  const stage = hv.getUint8(4);
  const layer = hv.getUint16(6, true);
  const count = hv.getUint32(8, true);
  c.check(stage === expectStage, `${name}.stage`, offset + 4, `${stage}, expected ${expectStage}`);
  c.check(
    layer === expectLayer,
    `${name}.layer_id`,
    offset + 6,
    `${layer}, expected ${expectLayer}`,
  );
  c.check(
    hv.getUint8(5) === 0 && hv.getUint32(12, true) === 0,
    `${name}.reserved`,
    offset + 5,
    "must be zero",
  );
  c.check(
    count <=
      Math.min(
        LIMITS.entriesPerBlock,
        Math.floor((limit - offset - BLOCK_HEADER_BYTES) / ENTRY_BYTES),
      ),
    `${name}.entry_count`,
    offset + 8,
    `${count} entries cannot fit in the section`,
  );
  const dir = src.read(offset + BLOCK_HEADER_BYTES, count * ENTRY_BYTES, `${name}.entries`);
  const dv = new DataView(dir.buffer);
  const entries: EntryDescriptor[] = [];
  for (let i = 0; i < count; i++) {
    const at = offset + BLOCK_HEADER_BYTES + i * ENTRY_BYTES;
    const e = decodeEntry(dv, i * ENTRY_BYTES);
    const f = `${name}.entries[${i}]`;
    c.check(e.reserved === 0, `${f}.reserved`, at + 7, "must be zero");
    c.range(e.kind, 1, 4, `${f}.kind`, at + 1);
    c.range(e.matrixId, 0, MAX_MATRIX_ID, `${f}.matrix_id`, at);
    c.check(e.expertId === NO_EXPERT, `${f}.expert_id`, at + 6, `${e.expertId}, expected 0xFF`);
    c.range(e.fused, 0, 2, `${f}.fused`, at + 3);
    c.range(e.rows, 1, 0xffffffff, `${f}.rows`, at + 8);
    c.range(e.cols, 1, LIMITS.hidden * 8, `${f}.cols`, at + 12);
    c.check(
      Number.isSafeInteger(e.offset) && Number.isSafeInteger(e.length),
      `${f}.offset`,
      at + 16,
      "not representable",
    );
    c.check(
      e.offset >= offset + BLOCK_HEADER_BYTES + count * ENTRY_BYTES && e.offset + e.length <= limit,
      `${f}.offset`,
      at + 16,
      `[${e.offset}, ${e.offset + e.length}) is outside its section`,
    );
    if (e.kind === ENTRY_KIND.TILES || e.kind === ENTRY_KIND.EXPERT_TILES) {
      c.range(e.tileType, 1, c.maxTileType, `${f}.tile_type`, at + 2);
      c.check(
        !isWholeBlockType(e.tileType) || e.cols % blockElements(e.tileType) === 0,
        `${f}.cols`,
        at + 12,
        `${e.cols} is not a multiple of the ${blockElements(e.tileType)}-weight blocks of ${
          tileTypeName(e.tileType)
        }`,
      );
    } else c.check(e.tileType === 0, `${f}.tile_type`, at + 2, "must be 0 for untiled entries");
    c.check(
      e.offset % ALIGN === 0,
      `${f}.offset`,
      at + 16,
      `${e.offset} is not ${ALIGN}-byte aligned`,
    );
    if (stage !== STAGE.VOCAB) {
      c.check(
        e.layerId < g.layers,
        `${f}.layer_id`,
        at + 4,
        `${e.layerId} >= n_layers ${g.layers}`,
      );
      const placed = placedAt(g, stage, e.matrixId, e.layerId);
      c.check(
        placed !== undefined,
        `${f}.matrix_id`,
        at,
        `${matrixName(e.matrixId)} has no place in a block of stage ${stage}`,
      );
      c.check(
        placed === layer,
        `${f}.layer_id`,
        at + 4,
        `${
          matrixName(e.matrixId)
        } of layer ${e.layerId} belongs in the block of layer ${placed}, ` +
          `not ${layer}`,
      );
    } else {
      c.check(
        e.layerId === VOCAB_LAYER,
        `${f}.layer_id`,
        at + 4,
        `${e.layerId}, expected 0xFFFF`,
      );
      c.check(
        VOCAB_MATRICES.has(e.matrixId),
        `${f}.matrix_id`,
        at,
        `${matrixName(e.matrixId)} has no place in the vocabulary section`,
      );
    }
    entries.push(e);
  }
  // Group entries into runs (fused members share one range) and check each.
  let prevEnd = offset + BLOCK_HEADER_BYTES + count * ENTRY_BYTES;
  let i = 0;
  while (i < entries.length) {
    const e = entries[i];
    const f = `${name}.entries[${i}]`;
    const at = offset + BLOCK_HEADER_BYTES + i * ENTRY_BYTES;
    c.check(
      e.offset >= prevEnd,
      `${f}.offset`,
      at + 16,
      `${e.offset} overlaps the previous entry (ends at ${prevEnd})`,
    );
    checkZeros(c, prevEnd, e.offset, `padding before ${f}`);
    if (e.kind === ENTRY_KIND.TILES) {
      let j = i + 1;
      if (e.fused !== FUSED.NONE) {
        while (
          j < entries.length && entries[j].fused === e.fused && entries[j].offset === e.offset &&
          entries[j].kind === ENTRY_KIND.TILES
        ) j++;
      }
      const members = entries.slice(i, j);
      const want = members.reduce((n, m) => n + matrixTileBytes(m.tileType, m.rows, m.cols), 0);
      for (const m of members) {
        c.check(
          m.length === want && m.layerId === e.layerId,
          `${f}.length`,
          at + 24,
          `${m.length}, the shapes need ${want}`,
        );
      }
      checkTiles(c, members, e.offset, e.length, e.layerId, NO_EXPERT, f);
      prevEnd = e.offset + e.length;
      i = j;
      continue;
    }
    if (e.kind === ENTRY_KIND.F32) {
      c.check(
        e.length === e.rows * e.cols * 4,
        `${f}.length`,
        at + 24,
        `${e.length}, ${e.rows}x${e.cols} f32 needs ${e.rows * e.cols * 4}`,
      );
      c.check(e.offset % 4 === 0, `${f}.offset`, at + 16, "f32 data must be 4-byte aligned");
      prevEnd = e.offset + e.length;
      i++;
      continue;
    }
    if (e.kind === ENTRY_KIND.EXPERT_TABLE) {
      c.check(
        i + 3 < entries.length &&
          entries.slice(i + 1, i + 4).every((x) => x.kind === ENTRY_KIND.EXPERT_TILES),
        `${f}.kind`,
        at + 1,
        "an expert table must be followed by its gate, up and down entries",
      );
      const [gate, up, down] = entries.slice(i + 1, i + 4);
      c.check(
        gate.matrixId === MATRIX.EXPERT_GATE && up.matrixId === MATRIX.EXPERT_UP &&
          down.matrixId === MATRIX.EXPERT_DOWN,
        `${f}.matrix_id`,
        at,
        "expert entries out of order",
      );
      c.check(
        e.rows === g.experts && e.cols === 2 && e.length === e.rows * 16,
        `${f}.rows`,
        at + 8,
        `${e.rows} experts, the header says ${g.experts}`,
      );
      c.check(
        !experts.has(e.layerId),
        `${f}.layer_id`,
        at + 4,
        `layer ${e.layerId} has a second expert table`,
      );
      const bankStart = gate.offset;
      const bankEnd = gate.offset + gate.length;
      c.check(
        bankStart >= e.offset + e.length && up.offset === bankStart && down.offset === bankStart &&
          up.length === gate.length && down.length === gate.length,
        `${f}.bank`,
        at + 16,
        "expert tile entries disagree on the bank",
      );
      const table = new DataView(src.read(e.offset, e.length, `${f}.table`).buffer);
      const perExpert = matrixTileBytes(gate.tileType, gate.rows, gate.cols) +
        matrixTileBytes(up.tileType, up.rows, up.cols) +
        matrixTileBytes(down.tileType, down.rows, down.cols);
      const spans: { offset: number; length: number }[] = [];
      let prev = bankStart;
      for (let x = 0; x < e.rows; x++) {
        const o = Number(table.getBigUint64(x * 16, true));
        const len = Number(table.getBigUint64(x * 16 + 8, true));
        const fx = `${f}.table[${x}]`;
        c.check(
          o >= prev && o + len <= bankEnd,
          `${fx}.offset`,
          e.offset + x * 16,
          `${o} is outside the bank or overlaps expert ${x - 1}`,
        );
        checkZeros(c, prev, o, `padding before ${fx}`);
        c.check(
          len === perExpert,
          `${fx}.length`,
          e.offset + x * 16 + 8,
          `${len}, the expert shapes need ${perExpert}`,
        );
        const mid = checkTiles(c, [{ ...gate }, { ...up }], o, len, e.layerId, x, `${fx}.gate_up`);
        checkTiles(c, [{ ...down }], mid, o + len - mid, e.layerId, x, `${fx}.down`);
        spans.push({ offset: o, length: len });
        prev = o + len;
      }
      checkZeros(c, prev, bankEnd, `padding after ${f}.table[${e.rows - 1}]`);
      experts.set(e.layerId, { layer: e.layerId, spans, gate, up, down });
      prevEnd = bankEnd;
      i += 4;
      continue;
    }
    c.fail(`${f}.kind`, at + 1, "expert tiles without an expert table");
  }
  // Up to the next 64-byte boundary (where the next block starts), or the
  // end of the section.
  checkZeros(
    c,
    prevEnd,
    Math.min(Math.ceil(prevEnd / ALIGN) * ALIGN, limit),
    `padding after ${name}`,
  );
  return { stage, layer, offset, entries };
}

/** Every entry's shape must agree with the header's geometry. */
function checkShapes(c: Checker, g: Geometry, format: "cflow" | "vflow", blocks: Block[]): void {
  const q = g.heads * g.headDim;
  const kv = g.kvHeads * g.headDim;
  const want: Record<number, [number | undefined, number | undefined]> = {
    [MATRIX.ATTN_NORM]: [1, g.hidden],
    [MATRIX.Q]: [q, g.hidden],
    [MATRIX.K]: [kv, g.hidden],
    [MATRIX.V]: [kv, g.hidden],
    [MATRIX.O]: [g.hidden, q],
    // OLMoE normalizes the whole q and k, not each head.
    [MATRIX.Q_NORM]: [1, g.archId === ARCH_IDS.olmoe ? q : g.headDim],
    [MATRIX.K_NORM]: [1, g.archId === ARCH_IDS.olmoe ? kv : g.headDim],
    [MATRIX.POST_ATTN_NORM]: [1, g.hidden],
    [MATRIX.FFN_NORM]: [1, g.hidden],
    [MATRIX.GATE]: [g.ffnHidden, g.hidden],
    [MATRIX.UP]: [g.ffnHidden, g.hidden],
    [MATRIX.DOWN]: [g.hidden, g.ffnHidden],
    [MATRIX.POST_FFN_NORM]: [1, g.hidden],
    [MATRIX.ROUTER]: [g.experts, g.hidden],
    [MATRIX.MOE_NORM]: [1, g.hidden],
    [MATRIX.SHARED_EXPERT_GATE_INP]: [1, g.hidden],
    // The shared expert's width is not in the header: checked below against
    // the layer's other shared-expert entries.
    [MATRIX.SHARED_GATE]: [undefined, g.hidden],
    [MATRIX.SHARED_UP]: [undefined, g.hidden],
    [MATRIX.SHARED_DOWN]: [g.hidden, undefined],
    [MATRIX.Q_BIAS]: [1, q],
    [MATRIX.K_BIAS]: [1, kv],
    [MATRIX.V_BIAS]: [1, kv],
    [MATRIX.TOKEN_EMBD]: [g.vocab, g.hidden],
    [MATRIX.OUTPUT]: [g.vocab, g.hidden],
    [MATRIX.OUTPUT_NORM]: [1, g.hidden],
    [MATRIX.EXPERT_GATE]: [format === "cflow" ? g.expertFfnHidden : undefined, g.hidden],
    [MATRIX.EXPERT_UP]: [format === "cflow" ? g.expertFfnHidden : undefined, g.hidden],
    [MATRIX.EXPERT_DOWN]: [g.hidden, format === "cflow" ? g.expertFfnHidden : undefined],
  };
  for (const b of blocks) {
    b.entries.forEach((e, i) => {
      const w = want[e.matrixId];
      if (w === undefined) return;
      const at = b.offset + BLOCK_HEADER_BYTES + i * ENTRY_BYTES + 8;
      if ((w[0] !== undefined && e.rows !== w[0]) || (w[1] !== undefined && e.cols !== w[1])) {
        c.fail(
          `block@${b.offset}.entries[${i}].rows`,
          at,
          `${matrixName(e.matrixId)} is ${e.rows}x${e.cols}, the header implies ${w[0] ?? "any"}x${
            w[1] ?? "any"
          }`,
        );
      }
    });
  }
  checkSharedExperts(c, blocks);
}

/** A layer's shared_gate, shared_up and shared_down agree on the shared width. */
function checkSharedExperts(c: Checker, blocks: Block[]): void {
  const ids = [MATRIX.SHARED_GATE, MATRIX.SHARED_UP, MATRIX.SHARED_DOWN] as const;
  const byLayer = new Map<number, Map<number, { e: EntryDescriptor; at: number }>>();
  for (const b of blocks) {
    b.entries.forEach((e, i) => {
      if (!(ids as readonly number[]).includes(e.matrixId)) return;
      const m = byLayer.get(e.layerId) ?? new Map();
      byLayer.set(e.layerId, m);
      const at = b.offset + BLOCK_HEADER_BYTES + i * ENTRY_BYTES;
      c.check(
        !m.has(e.matrixId),
        `block@${b.offset}.entries[${i}].matrix_id`,
        at,
        `layer ${e.layerId} has a second ${matrixName(e.matrixId)}`,
      );
      m.set(e.matrixId, { e, at });
    });
  }
  for (const [layer, m] of byLayer) {
    const [gate, up, down] = ids.map((id) => m.get(id));
    const any = (gate ?? up ?? down)!;
    c.check(
      gate !== undefined && up !== undefined && down !== undefined,
      "shared_expert",
      any.at,
      `layer ${layer} has only part of a shared expert (gate, up and down go together)`,
    );
    const width = gate!.e.rows;
    c.check(
      up!.e.rows === width,
      "shared_up.rows",
      up!.at + 8,
      `${up!.e.rows}, shared_gate of layer ${layer} has ${width} rows`,
    );
    c.check(
      down!.e.cols === width,
      "shared_down.cols",
      down!.at + 12,
      `${down!.e.cols}, shared_gate of layer ${layer} has ${width} rows`,
    );
  }
}

function parseMetadata(c: Checker, sec: SectionDescriptor): Record<string, unknown> {
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

/** Indices of sections whose bytes do not match their CRC-32. */
function badSections(src: ByteSource, sections: readonly SectionDescriptor[]): number[] {
  const bad: number[] = [];
  sections.forEach((s, i) => {
    let crc = 0;
    for (let o = 0; o < s.length; o += 1 << 22) {
      crc = crc32(src.read(s.offset + o, Math.min(1 << 22, s.length - o), `sections[${i}]`), crc);
    }
    if (crc !== s.crc) bad.push(i);
  });
  return bad;
}

/**
 * Checks every section's CRC-32; returns the indices of those that fail.
 *
 * @example
 * ```ts ignore
 * import { readTiledFile, verifyChecksums } from "./reader.ts";
 * const bad = verifyChecksums(src, readTiledFile(src));
 * console.log(bad.length === 0 ? "ok" : "corrupt");
 * ```
 */
export function verifyChecksums(src: ByteSource, file: TiledFile): number[] {
  return badSections(src, file.sections);
}

/**
 * Detects the format of a file from its first bytes.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { sniffTiled } from "./reader.ts";
 * console.log(sniffTiled(bytesSource("x", new Uint8Array(4)))); // undefined
 * ```
 */
export function sniffTiled(src: ByteSource): "cflow" | "vflow" | undefined {
  if (src.size < 8) return undefined;
  const m = src.read(0, 8, "magic");
  if (sameBytes(m, CFLOW_MAGIC)) return "cflow";
  if (sameBytes(m, VFLOW_MAGIC)) return "vflow";
  return undefined;
}

/**
 * Parses and validates a `.cflow` or `.vflow` file.
 *
 * @example
 * ```ts ignore
 * import { mapFile } from "../../ffi/mod.ts";
 * import { mappedSource } from "../byte_source.ts";
 * import { readTiledFile } from "./reader.ts";
 * using f = mapFile("model.cflow");
 * const file = readTiledFile(mappedSource(f), { verifyChecksums: true });
 * ```
 */
export function readTiledFile(
  src: ByteSource,
  options: { verifyChecksums?: boolean } = {},
): TiledFile {
  const c = new Checker(src);
  const format = sniffTiled(src) ?? c.fail("magic", 0, "not a .cflow or .vflow file");
  let geometry: Geometry;
  let version: number;
  let sectionTableOffset: number;
  let groups: GroupDescriptor[] = [];
  let headerBytes: number;
  if (format === "cflow") {
    headerBytes = GLOBAL_HEADER_BYTES;
    const bytes = src.read(0, GLOBAL_HEADER_BYTES, "header");
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
    geometry = h;
    version = h.version;
    sectionTableOffset = h.sectionTableOffset;
  } else {
    headerBytes = VFLOW_HEADER_BYTES;
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
    version = h.version;
    sectionTableOffset = h.sectionTableOffset;
    geometry = {
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
  }
  const g = geometry;
  // Before anything is read at the offset (the .vflow count below), so that
  // an offset past the end is reported at the header field that holds it.
  c.check(
    sectionTableOffset >= headerBytes && sectionTableOffset < src.size,
    "section_table_offset",
    format === "cflow" ? 80 : 56,
    `${sectionTableOffset} is outside the file`,
  );
  // Section layout: metadata, layers or groups (+ expert banks), vocab.
  const count = (() => {
    if (format === "cflow") return 1 + g.layers + 1;
    // Expert sections: count what the table says, bounded by layers.
    const prefix = src.read(sectionTableOffset, SECTION_TABLE_PREFIX_BYTES, "section_table");
    const n = new DataView(prefix.buffer).getUint32(0, true);
    const min = 1 + groups.length + 1;
    c.check(
      n >= min && n <= min + g.layers,
      "section_table.count",
      sectionTableOffset,
      `${n} sections, expected ${min} to ${min + g.layers}`,
    );
    return n;
  })();
  const sections = readSectionTable(c, sectionTableOffset, count);
  const at = (i: number) =>
    sectionTableOffset + SECTION_TABLE_PREFIX_BYTES + i * SECTION_DESCRIPTOR_BYTES;
  c.check(
    sections[0].kind === SECTION.METADATA,
    "sections[0].kind",
    at(0),
    `${sections[0].kind}, expected metadata (1)`,
  );
  const last = sections.length - 1;
  c.check(
    sections[last].kind === SECTION.VOCAB && sections[last].index === 0,
    `sections[${last}].kind`,
    at(last),
    "the last section must be the vocabulary",
  );
  c.check(
    sections[last].offset + sections[last].length === src.size,
    `sections[${last}].length`,
    at(last) + 16,
    `the file has ${src.size - sections[last].offset - sections[last].length} trailing bytes`,
  );
  // Every byte between the tables and the sections, and between sections,
  // is padding and must be zero: nothing unchecked hides in a file.
  let gapStart = sectionTableOffset + SECTION_TABLE_PREFIX_BYTES + count * SECTION_DESCRIPTOR_BYTES;
  for (const [i, s] of sections.entries()) {
    if (s.offset > gapStart) {
      const gap = src.read(gapStart, s.offset - gapStart, "padding");
      const bad = gap.findIndex((b) => b !== 0);
      c.check(
        bad < 0,
        `padding before sections[${i}]`,
        gapStart + bad,
        "padding bytes must be zero",
      );
    }
    gapStart = s.offset + s.length;
  }
  if (format === "vflow") {
    const tableEnd = VFLOW_HEADER_BYTES + groups.length * GROUP_DESCRIPTOR_BYTES;
    const gap = src.read(tableEnd, sectionTableOffset - tableEnd, "padding");
    c.check(
      gap.every((b) => b === 0),
      "padding before section_table",
      tableEnd,
      "padding bytes must be zero",
    );
  }
  if (options.verifyChecksums) {
    const bad = badSections(src, sections);
    if (bad.length > 0) {
      c.fail(
        `sections[${bad[0]}].crc32`,
        at(bad[0]) + 24,
        `checksum mismatch (section at byte ${sections[bad[0]].offset})`,
      );
    }
  }
  const metadata = parseMetadata(c, sections[0]);
  if (format === "vflow") {
    // The .vflow header has no arch_id or style_param: both come from the
    // metadata (`architecture`, `style_param`).
    const arch = metadata.architecture;
    g.archId = typeof arch === "string" ? ARCH_IDS[arch] ?? 0 : 0;
    const sp = metadata.style_param;
    const spAt = metadataKeyOffset(src, sections[0], "style_param");
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
      const hpAt = metadataKeyOffset(src, sections[0], "hyperparameters");
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
  const blocks: Block[] = [];
  const experts = new Map<number, ExpertBank>();
  if (format === "cflow") {
    for (let l = 0; l < g.layers; l++) {
      const s = sections[1 + l];
      c.check(
        s.kind === SECTION.LAYER && s.index === l,
        `sections[${1 + l}].kind`,
        at(1 + l),
        `expected layer section ${l}`,
      );
      blocks.push(readBlock(c, g, s.offset, s.offset + s.length, STAGE.LAYER, l, experts));
    }
  } else {
    groups.forEach((grp, gi) => {
      const s = sections[1 + gi];
      const si = 1 + gi;
      c.check(
        s.kind === SECTION.GROUP && s.index === gi,
        `sections[${si}].kind`,
        at(si),
        `expected group section ${gi}`,
      );
      c.check(
        grp.offset === s.offset && grp.length === s.length,
        `groups[${gi}].offset`,
        VFLOW_HEADER_BYTES + gi * GROUP_DESCRIPTOR_BYTES + 8,
        "disagrees with the section table",
      );
      c.check(
        grp.attentionOffset === s.offset,
        `groups[${gi}].attention_offset`,
        VFLOW_HEADER_BYTES + gi * GROUP_DESCRIPTOR_BYTES + 24,
        "must be the group's first byte",
      );
      let pos = s.offset;
      const end = s.offset + s.length;
      for (const stage of [STAGE.ATTENTION, STAGE.FFN]) {
        for (let l = grp.firstLayer; l < grp.firstLayer + grp.layerCount; l++) {
          if (stage === STAGE.FFN && l === grp.firstLayer) {
            c.check(
              grp.ffnOffset === pos,
              `groups[${gi}].ffn_offset`,
              VFLOW_HEADER_BYTES + gi * GROUP_DESCRIPTOR_BYTES + 32,
              `${grp.ffnOffset}, the FFN stage starts at ${pos}`,
            );
          }
          const b = readBlock(c, g, pos, end, stage, l, experts);
          blocks.push(b);
          const tail = b.entries.reduce(
            (m, e) => Math.max(m, e.offset + e.length),
            b.offset + BLOCK_HEADER_BYTES + b.entries.length * ENTRY_BYTES,
          );
          pos = Math.ceil(tail / ALIGN) * ALIGN;
        }
      }
    });
    for (let si = 1 + groups.length; si < last; si++) {
      const s = sections[si];
      c.check(
        s.kind === SECTION.EXPERTS && s.index < g.layers,
        `sections[${si}].kind`,
        at(si),
        "expected an expert-bank section",
      );
      blocks.push(
        readBlock(c, g, s.offset, s.offset + s.length, STAGE.EXPERTS, s.index, experts),
      );
    }
  }
  const v = sections[last];
  blocks.push(readBlock(c, g, v.offset, v.offset + v.length, STAGE.VOCAB, VOCAB_LAYER, experts));
  checkShapes(c, g, format, blocks);
  return {
    format,
    version,
    headerBytes,
    geometry: g,
    metadata,
    sections,
    groups,
    blocks,
    experts,
    size: src.size,
  };
}

/**
 * Finds the entry of a matrix of a layer (VOCAB_LAYER for the vocabulary).
 *
 * @example
 * ```ts ignore
 * import { findEntry } from "./reader.ts";
 * import { MATRIX } from "./container.ts";
 * const q = findEntry(file, 0, MATRIX.Q);
 * ```
 */
export function findEntry(
  file: TiledFile,
  layer: number,
  matrixId: number,
): EntryDescriptor | undefined {
  for (const b of file.blocks) {
    for (const e of b.entries) {
      if (e.layerId === layer && e.matrixId === matrixId && e.kind !== ENTRY_KIND.EXPERT_TILES) {
        return e;
      }
    }
  }
  return undefined;
}

/**
 * Reads a tiled matrix back into rows (ggml blocks or f32): the inverse of
 * tiling, for checks and conversion. `expert` selects an expert's matrix.
 *
 * @example
 * ```ts ignore
 * import { untile } from "./reader.ts";
 * const rows = untile(src, file, entry);
 * ```
 */
export function untile(
  src: ByteSource,
  file: TiledFile,
  entry: EntryDescriptor,
  expert?: number,
): Uint8Array {
  let members: EntryDescriptor[];
  let start: number;
  if (entry.kind === ENTRY_KIND.EXPERT_TILES) {
    const bank = file.experts.get(entry.layerId);
    if (bank === undefined || expert === undefined || expert < 0 || expert >= bank.spans.length) {
      throw new RangeError(`untile: expert ${expert} of layer ${entry.layerId} does not exist`);
    }
    start = bank.spans[expert].offset;
    members = entry.matrixId === MATRIX.EXPERT_DOWN ? [bank.down] : [bank.gate, bank.up];
    if (entry.matrixId === MATRIX.EXPERT_DOWN) {
      start += matrixTileBytes(bank.gate.tileType, bank.gate.rows, bank.gate.cols) +
        matrixTileBytes(bank.up.tileType, bank.up.rows, bank.up.cols);
    }
  } else if (entry.kind === ENTRY_KIND.TILES) {
    start = entry.offset;
    members = [];
    for (const b of file.blocks) {
      for (const e of b.entries) {
        if (
          e.kind === ENTRY_KIND.TILES && e.offset === entry.offset && e.layerId === entry.layerId
        ) members.push(e);
      }
    }
  } else {
    throw new RangeError("untile: the entry is not tiled");
  }
  const rb = rowBytes(entry.tileType, entry.cols);
  const out = new Uint8Array(entry.rows * rb);
  walkTiles(members, start, (m, r0, c0, tr, tc, pos, size) => {
    if (m.matrixId !== entry.matrixId) return;
    const tile = src.read(pos + TILE_HEADER_BYTES, size - TILE_HEADER_BYTES, "tile");
    // Tile boundaries fall on whole blocks (256 columns), so a tile's first
    // byte in the row is the size of the row's first c0 columns.
    const colBytes = rowBytes(m.tileType, c0);
    decodeTilePayload(tile, 0, m.tileType, tr, tc, out.subarray(r0 * rb), rb, colBytes);
  });
  return out;
}

/**
 * Reads an f32 entry's values.
 *
 * @example
 * ```ts ignore
 * import { readF32Entry } from "./reader.ts";
 * const norm = readF32Entry(src, entry);
 * ```
 */
export function readF32Entry(src: ByteSource, entry: EntryDescriptor): Float32Array {
  if (entry.kind !== ENTRY_KIND.F32) throw new RangeError("readF32Entry: the entry is not f32");
  const bytes = src.read(entry.offset, entry.length, "f32 entry");
  return new Float32Array(bytes.buffer, bytes.byteOffset, entry.rows * entry.cols);
}
