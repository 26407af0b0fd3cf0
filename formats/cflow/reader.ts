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
import {
  ALIGN,
  BLOCK_HEADER_BYTES,
  CFLOW_MAGIC,
  ENTRY_BYTES,
  ENTRY_KIND,
  type EntryDescriptor,
  type Geometry,
  GROUP_DESCRIPTOR_BYTES,
  type GroupDescriptor,
  MATRIX,
  SECTION,
  SECTION_DESCRIPTOR_BYTES,
  SECTION_TABLE_PREFIX_BYTES,
  type SectionDescriptor,
  STAGE,
  VFLOW_HEADER_BYTES,
  VFLOW_MAGIC,
  VOCAB_LAYER,
} from "./container.ts";
import { crc32 } from "./crc32.ts";
import { decodeTilePayload, matrixTileBytes, rowBytes, TILE_HEADER_BYTES } from "./tile.ts";
import { Checker } from "./_checker.ts";
import { parseMetadata, readSectionTable } from "./_headers.ts";
import { checkShapes, readBlock, walkTiles } from "./_blocks.ts";
import { readCflowHeader, readVflowHeader, vflowMetadataGeometry } from "./_file_header.ts";

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

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
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
  // The header (and a .vflow file's group table).
  const head = format === "cflow" ? readCflowHeader(c) : readVflowHeader(c);
  const { version, sectionTableOffset, groups, headerBytes } = head;
  const g = head.geometry;
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
  if (format === "vflow") vflowMetadataGeometry(c, g, sections[0], metadata);
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
