/**
 * The corruption matrix for `.cflow` and `.vflow`: one handcrafted bad file
 * per field and failure mode of docs/FORMAT.md. Every checksum is recomputed
 * after the edit ("resealed"), so what refuses the file is the structural
 * check of that field, not a CRC; each case names the field it expects and
 * the byte offset it expects it at.
 */

import assert from "node:assert/strict";
import { randomModel, type RandomModelOptions } from "../../tests/util/random_model.ts";
import { randomModelBytes, resealTiled } from "../../tests/util/tiled_file.ts";
import { ARCH_IDS, COMBINE, FEATURE, MATRIX } from "./container.ts";
import { memorySink, writeModel } from "./writer.ts";
import { bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { readTiledFile } from "./reader.ts";

type Format = "cflow" | "vflow";

function write(
  format: Format,
  experts = 0,
  extra: Partial<RandomModelOptions> = {},
): Promise<Uint8Array> {
  return randomModelBytes({
    hidden: 40,
    layers: 2,
    heads: 2,
    kvHeads: 1,
    headDim: 20,
    ffn: 70,
    vocab: 130,
    experts,
    topK: experts > 0 ? 2 : undefined,
    expertFfn: experts > 0 ? 24 : undefined,
    seed: 11,
    ...extra,
  }, format);
}

/** Pipeline-native, MoE: DecoupledStreams every 3 layers, moe_norm, a shared expert. */
const PIPELINE_MOE: Partial<RandomModelOptions> = {
  archId: ARCH_IDS.pipeline_native,
  architecture: "pipeline_native",
  combineStyle: COMBINE.DECOUPLED_STREAMS,
  styleParam: 3,
  featureFlags: FEATURE.GEGLU,
  moeNorm: true,
  sharedFfn: 20,
};
/** Pipeline-native, dense: PipelineRegisters. */
const PIPELINE_DENSE: Partial<RandomModelOptions> = {
  archId: ARCH_IDS.pipeline_native,
  architecture: "pipeline_native",
  combineStyle: COMBINE.PIPELINE_REGISTERS,
};

/** Where things are in a valid file. */
class Layout {
  readonly v: DataView;
  constructor(readonly bytes: Uint8Array, readonly format: Format) {
    this.v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  get table(): number {
    return Number(this.v.getBigUint64(this.format === "cflow" ? 80 : 56, true));
  }
  get sections(): number {
    return this.v.getUint32(this.table, true);
  }
  /** Offset of section descriptor i. */
  desc(i: number): number {
    return this.table + 8 + 32 * i;
  }
  sectionOffset(i: number): number {
    return Number(this.v.getBigUint64(this.desc(i) + 8, true));
  }
  sectionLength(i: number): number {
    return Number(this.v.getBigUint64(this.desc(i) + 16, true));
  }
  /** The first section of `kind`. */
  sectionOfKind(kind: number): number {
    for (let i = 0; i < this.sections; i++) {
      if (this.v.getUint32(this.desc(i), true) === kind) return i;
    }
    throw new Error(`no section of kind ${kind}`);
  }
  /** Offset of entry e of the first block of section s. */
  entry(s: number, e: number): number {
    return this.sectionOffset(s) + 16 + 32 * e;
  }
  entryData(at: number): number {
    return Number(this.v.getBigUint64(at + 16, true));
  }
  /** The first entry of a block in section s with this kind. */
  entryOfKind(s: number, kind: number): number {
    const count = this.v.getUint32(this.sectionOffset(s) + 8, true);
    for (let e = 0; e < count; e++) {
      if (this.bytes[this.entry(s, e) + 1] === kind) return this.entry(s, e);
    }
    throw new Error(`no entry of kind ${kind} in section ${s}`);
  }
  /** The first entry of a block in section s with this matrix id. */
  entryOfMatrix(s: number, id: number): number {
    const count = this.v.getUint32(this.sectionOffset(s) + 8, true);
    for (let e = 0; e < count; e++) {
      if (this.bytes[this.entry(s, e)] === id) return this.entry(s, e);
    }
    throw new Error(`no entry of matrix ${id} in section ${s}`);
  }
  /** The byte of the metadata's style_param value (`"style_param":N`). */
  styleParamDigit(): number {
    const s = this.sectionOffset(0);
    const text = new TextDecoder().decode(this.bytes.subarray(s, s + this.sectionLength(0)));
    const i = text.indexOf('"style_param":');
    if (i < 0) throw new Error("no style_param in the metadata");
    return s + i + '"style_param":'.length;
  }
}

interface Case {
  /** What the edit breaks. */
  name: string;
  /** Which files it applies to. */
  formats: Format[];
  /** An MoE model is needed (expert table and bank). */
  moe?: boolean;
  /** A pipeline-native file is needed: "moe" (style 3, param 3, moe_norm, shared expert) or "dense" (style 4). */
  pipeline?: "moe" | "dense";
  /** Edits a copy of a valid file; returns the offset of the field it broke. */
  edit(l: Layout): number;
  /** The field the error must name. */
  field: RegExp;
  /** Leave the checksums as the edit left them. */
  noReseal?: boolean;
}

const u8 = (l: Layout, at: number, v: number) => (l.bytes[at] = v, at);
const u16 = (l: Layout, at: number, v: number) => (l.v.setUint16(at, v, true), at);
const u32 = (l: Layout, at: number, v: number) => (l.v.setUint32(at, v, true), at);
const u64 = (l: Layout, at: number, v: number) => (l.v.setBigUint64(at, BigInt(v), true), at);

const BOTH: Format[] = ["cflow", "vflow"];
const CASES: Case[] = [
  // GlobalHeader (.cflow)
  { name: "future version", formats: ["cflow"], edit: (l) => u32(l, 8, 7), field: /^version$/ },
  { name: "hidden 0", formats: ["cflow"], edit: (l) => u32(l, 12, 0), field: /hidden/ },
  { name: "layers 0", formats: ["cflow"], edit: (l) => u32(l, 16, 0), field: /layers/ },
  { name: "layers above 1024", formats: ["cflow"], edit: (l) => u32(l, 16, 5000), field: /layers/ },
  {
    name: "kv heads not dividing heads",
    formats: ["cflow"],
    edit: (l) => u32(l, 24, 3),
    field: /kv_heads/,
  },
  { name: "head_dim 0", formats: ["cflow"], edit: (l) => u32(l, 28, 0), field: /head_dim/ },
  {
    name: "top_k above experts",
    formats: ["cflow"],
    moe: true,
    edit: (l) => u32(l, 40, 9),
    field: /top_k/,
  },
  { name: "vocab 0", formats: ["cflow"], edit: (l) => u32(l, 48, 0), field: /vocab/ },
  {
    name: "tile_rows not 128",
    formats: ["cflow"],
    edit: (l) => u16(l, 52, 64),
    field: /tile_rows/,
  },
  {
    name: "tile_cols not 256",
    formats: ["cflow"],
    edit: (l) => u16(l, 54, 512),
    field: /tile_cols/,
  },
  {
    name: "quant_group not 32",
    formats: ["cflow"],
    edit: (l) => u16(l, 56, 64),
    field: /quant_group/,
  },
  {
    name: "unknown quant_type",
    formats: ["cflow"],
    edit: (l) => u8(l, 58, 9),
    field: /quant_type/,
  },
  { name: "unknown arch_id", formats: ["cflow"], edit: (l) => u8(l, 59, 200), field: /arch_id/ },
  {
    name: "sliding pattern without a window",
    formats: ["cflow"],
    edit: (l) => u8(l, 64, 3),
    field: /sliding/,
  },
  {
    name: "unknown combine_style",
    formats: ["cflow"],
    edit: (l) => u8(l, 67, 9),
    field: /combine_style/,
  },
  {
    name: "unknown feature bit",
    formats: ["cflow"],
    edit: (l) => u8(l, 68, 0x80),
    field: /feature_flags/,
  },
  {
    name: "feature bit 4 (above GeGLU)",
    formats: BOTH,
    edit: (l) => u8(l, l.format === "cflow" ? 68 : 31, 0x10),
    field: /feature_flags/,
  },
  {
    name: "combine_style 6",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => u8(l, l.format === "cflow" ? 67 : 45, 6),
    field: /combine_style/,
  },
  {
    name: "a pipeline-native style in a llama file",
    formats: BOTH,
    edit: (l) => u8(l, l.format === "cflow" ? 67 : 45, COMBINE.DECOUPLED_STREAMS),
    field: /combine_style/,
  },
  {
    name: "style_param in a llama file",
    formats: ["cflow"],
    edit: (l) => u8(l, 69, 2),
    field: /style_param/,
  },
  {
    name: "DecoupledStreams with style_param 0",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => l.format === "cflow" ? u8(l, 69, 0) : u8(l, l.styleParamDigit(), 0x30),
    field: /style_param/,
  },
  {
    name: "style_param on DelayedSum",
    formats: ["cflow"],
    pipeline: "moe",
    edit: (l) => u8(l, 67, COMBINE.DELAYED_SUM),
    field: /style_param/,
  },
  {
    name: "DecoupledStreams with a dense delay",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => u8(l, l.format === "cflow" ? 65 : 43, 1),
    field: /dense_delay/,
  },
  {
    name: "DecoupledStreams with an expert delay",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => u8(l, l.format === "cflow" ? 66 : 44, 1),
    field: /expert_delay/,
  },
  {
    name: "PipelineRegisters with an expert delay",
    formats: BOTH,
    pipeline: "dense",
    edit: (l) => u8(l, l.format === "cflow" ? 66 : 44, 1),
    field: /expert_delay/,
  },
  {
    name: "ParallelSqrt2 without experts",
    formats: BOTH,
    pipeline: "dense",
    edit: (l) => u8(l, l.format === "cflow" ? 67 : 45, COMBINE.PARALLEL_SQRT2),
    field: /n_experts/,
  },
  {
    name: "moe_norm in the block of another layer",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      return u16(l, l.entryOfMatrix(s, MATRIX.MOE_NORM) + 4, 1);
    },
    field: /layer_id/,
  },
  {
    name: "moe_norm of the wrong width",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      const at = l.entryOfMatrix(s, MATRIX.MOE_NORM);
      u32(l, at + 8, 2); // 2 x 20: same bytes as 1 x 40
      return u32(l, at + 12, 20);
    },
    field: /rows/,
  },
  {
    name: "shared_down of another width",
    formats: BOTH,
    pipeline: "moe",
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      return u8(l, l.entryOfMatrix(s, MATRIX.SHARED_DOWN) + 12, 21);
    },
    field: /shared_down|tile|length/,
  },
  {
    name: "reserved header byte",
    formats: ["cflow"],
    edit: (l) => u8(l, 70, 1),
    field: /reserved/,
  },
  {
    name: "NaN soft-cap",
    formats: ["cflow"],
    edit: (l) => (l.v.setFloat32(72, NaN, true), 72),
    field: /softcap/,
  },
  {
    name: "header checksum",
    formats: ["cflow"],
    noReseal: true,
    edit: (l) => u32(l, 12, 41) && 76,
    field: /^header_crc32$/,
  },
  {
    name: "section table misaligned",
    formats: ["cflow"],
    edit: (l) => u64(l, 80, 89),
    field: /section_table/,
  },
  {
    name: "section table past the end",
    formats: ["cflow"],
    edit: (l) => u64(l, 80, l.bytes.length + 64),
    field: /section_table/,
  },
  // VFlowHeader and group table (.vflow)
  { name: "future version", formats: ["vflow"], edit: (l) => u32(l, 8, 3), field: /^version$/ },
  {
    name: "kv heads not dividing heads",
    formats: ["vflow"],
    edit: (l) => u16(l, 22, 3),
    field: /kv_heads/,
  },
  {
    name: "unknown quant_type",
    formats: ["vflow"],
    edit: (l) => u8(l, 30, 9),
    field: /quant_type/,
  },
  {
    name: "unknown feature bit",
    formats: ["vflow"],
    edit: (l) => u8(l, 31, 0x80),
    field: /feature_flags/,
  },
  { name: "group_count 0", formats: ["vflow"], edit: (l) => u16(l, 46, 0), field: /group_count/ },
  {
    name: "group_count above layers",
    formats: ["vflow"],
    edit: (l) => u16(l, 46, 3),
    field: /group/,
  },
  {
    name: "group table misplaced",
    formats: ["vflow"],
    edit: (l) => u32(l, 48, 72),
    field: /group_table/,
  },
  {
    name: "header checksum",
    formats: ["vflow"],
    noReseal: true,
    edit: (l) => u32(l, 12, 41) && 52,
    field: /^header_crc32$/,
  },
  {
    name: "group skips a layer",
    formats: ["vflow"],
    edit: (l) => u32(l, 64, 1),
    field: /first_layer/,
  },
  {
    name: "group with no layers",
    formats: ["vflow"],
    edit: (l) => u32(l, 68, 0),
    field: /first_layer|layer_count/,
  },
  {
    name: "group offset disagrees with its section",
    formats: ["vflow"],
    edit: (l) => u64(l, 72, l.sectionOffset(1) + 64),
    field: /group/,
  },
  {
    name: "FFN stage offset outside the group",
    formats: ["vflow"],
    edit: (l) => u64(l, 96, l.bytes.length),
    field: /ffn_offset/,
  },
  { name: "group reserved", formats: ["vflow"], edit: (l) => u64(l, 104, 1), field: /reserved/ },
  // Section table
  {
    name: "section count",
    formats: BOTH,
    // .cflow knows its count from the header; .vflow finds the extra
    // descriptor (zeros) overlapping the metadata section.
    edit: (l) => {
      const n = l.sections;
      u32(l, l.table, n + 1);
      return l.format === "cflow" ? l.table : l.desc(n);
    },
    field: /count|sections\[\d+\]/,
  },
  {
    name: "section table checksum",
    formats: BOTH,
    noReseal: true,
    edit: (l) => u32(l, l.desc(0) + 4, 1) && l.table + 4,
    field: /section_table\.crc32/,
  },
  {
    name: "sections out of order",
    formats: BOTH,
    edit: (l) => u32(l, l.desc(0), 2),
    field: /kind/,
  },
  { name: "unknown section kind", formats: BOTH, edit: (l) => u32(l, l.desc(1), 9), field: /kind/ },
  {
    name: "section misaligned",
    formats: BOTH,
    edit: (l) => u64(l, l.desc(1) + 8, l.sectionOffset(1) + 8),
    field: /offset/,
  },
  {
    name: "sections overlap",
    formats: BOTH,
    edit: (l) => u64(l, l.desc(2) + 8, l.sectionOffset(1)),
    field: /offset/,
  },
  {
    name: "section runs past the end",
    formats: BOTH,
    edit: (l) => u64(l, l.desc(l.sections - 1) + 16, l.sectionLength(l.sections - 1) + 64),
    field: /length/,
  },
  {
    name: "trailing bytes after the last section",
    formats: BOTH,
    edit: (l) => u64(l, l.desc(l.sections - 1) + 16, l.sectionLength(l.sections - 1) - 16),
    field: /length|trailing|end/,
  },
  {
    name: "descriptor reserved",
    formats: BOTH,
    edit: (l) => u32(l, l.desc(1) + 28, 1),
    field: /reserved/,
  },
  {
    name: "section checksum",
    formats: BOTH,
    noReseal: true,
    edit: (l) =>
      u8(l, l.sectionOffset(1) + 20, l.bytes[l.sectionOffset(1) + 20] ^ 1) && l.desc(1) + 24,
    field: /crc32/,
  },
  // Padding and metadata
  {
    name: "non-zero padding",
    formats: BOTH,
    edit: (l) => u8(l, l.sectionOffset(0) - 1, 1),
    field: /padding/,
  },
  {
    name: "metadata not UTF-8",
    formats: BOTH,
    edit: (l) => u8(l, l.sectionOffset(0) + 1, 0xff),
    field: /metadata/,
  },
  {
    name: "metadata not JSON",
    formats: BOTH,
    edit: (l) => u8(l, l.sectionOffset(0), "[".charCodeAt(0)),
    field: /metadata/,
  },
  // Block headers
  {
    name: "block magic",
    formats: BOTH,
    edit: (l) => u32(l, l.sectionOffset(1), 0x4b424644),
    field: /magic/,
  },
  {
    name: "block stage",
    formats: BOTH,
    edit: (l) => u8(l, l.sectionOffset(1) + 4, 7),
    field: /stage/,
  },
  {
    name: "block layer",
    formats: BOTH,
    edit: (l) => u16(l, l.sectionOffset(1) + 6, 1),
    field: /layer/,
  },
  {
    name: "entry count beyond the section",
    formats: BOTH,
    edit: (l) => u32(l, l.sectionOffset(1) + 8, 65_536),
    field: /entry_count/,
  },
  {
    name: "block reserved",
    formats: BOTH,
    edit: (l) => u32(l, l.sectionOffset(1) + 12, 1),
    field: /reserved/,
  },
  // Entries
  { name: "unknown matrix", formats: BOTH, edit: (l) => u8(l, l.entry(1, 0), 99), field: /matrix/ },
  {
    name: "unknown entry kind",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 0) + 1, 9),
    field: /kind/,
  },
  {
    name: "a version-6 tile type (Q4_K) in a version-5 file",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 1) + 2, 7),
    field: /tile_type/,
  },
  {
    name: "unknown tile type",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 1) + 2, 12),
    field: /tile_type/,
  },
  {
    name: "unknown fused value",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 1) + 3, 5),
    field: /fused/,
  },
  { name: "entry layer", formats: BOTH, edit: (l) => u16(l, l.entry(1, 0) + 4, 1), field: /layer/ },
  {
    name: "expert id on a dense entry",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 0) + 6, 0),
    field: /expert/,
  },
  {
    name: "entry reserved",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 0) + 7, 1),
    field: /reserved/,
  },
  {
    name: "norm shape (same length)",
    formats: BOTH,
    edit: (l) => u32(l, l.entry(1, 0) + 8, 2) && u32(l, l.entry(1, 0) + 12, 20),
    field: /rows/,
  },
  {
    name: "matrix shape (tiles no longer add up)",
    formats: BOTH,
    edit: (l) => u32(l, l.entry(1, 1) + 8, 39),
    field: /length/,
  },
  {
    name: "entry data misaligned",
    formats: BOTH,
    edit: (l) => u64(l, l.entry(1, 0) + 16, l.entryData(l.entry(1, 0)) + 4),
    field: /offset/,
  },
  {
    name: "entry data outside its section",
    formats: BOTH,
    edit: (l) => u64(l, l.entry(1, 0) + 16, l.bytes.length + 64),
    field: /offset/,
  },
  {
    name: "entry length disagrees with its shape",
    formats: BOTH,
    edit: (l) => u64(l, l.entry(1, 0) + 24, 4),
    field: /length/,
  },
  {
    name: "entries overlap",
    formats: BOTH,
    edit: (l) => u64(l, l.entry(1, 1) + 16, l.entryData(l.entry(1, 0))),
    field: /offset/,
  },
  {
    name: "non-zero padding between entries",
    formats: BOTH,
    edit: (l) => u8(l, l.entryData(l.entry(1, 1)) - 1, 1),
    field: /padding/,
  },
  {
    name: "a vocabulary matrix in a layer block",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(1, 0), 22),
    field: /matrix_id/,
  },
  {
    name: "a layer matrix in the vocabulary section",
    formats: BOTH,
    edit: (l) => u8(l, l.entry(l.sections - 1, 1), 8),
    field: /matrix_id/,
  },
  // Tile headers (first tile of the fused Q/K/V run, entry 1 of layer 0)
  ...([
    ["layer_id", 0, 2, 1],
    ["matrix_id", 2, 1, 3],
    ["expert_id", 3, 1, 0],
    ["row_offset", 4, 4, 128],
    ["col_offset", 8, 2, 256],
    ["tile_rows", 10, 2, 0],
    ["tile_cols", 12, 2, 41],
    ["quant_group", 14, 2, 16],
  ] as const).map(([field, at, size, value]): Case => ({
    name: `tile header ${field}`,
    formats: BOTH,
    edit: (l) => {
      const tile = l.entryData(l.entry(1, 1)) + at;
      return size === 1
        ? u8(l, tile, value)
        : size === 2
        ? u16(l, tile, value)
        : u32(l, tile, value);
    },
    field: new RegExp(
      `tile\\(\\d+,\\d+\\)\\.${field.replace("_id", "").replace("_", "")}|${field}`,
      "i",
    ),
  })),
  // Expert tables and banks
  {
    name: "expert past the bank",
    formats: BOTH,
    moe: true,
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      return u64(l, l.entryData(l.entryOfKind(s, 3)) + 16, l.bytes.length);
    },
    field: /table\[\d+\]\.offset/,
  },
  {
    name: "expert overlapping the previous one",
    formats: BOTH,
    moe: true,
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      const t = l.entryData(l.entryOfKind(s, 3));
      return u64(l, t + 16, Number(l.v.getBigUint64(t, true)));
    },
    field: /table\[\d+\]\.offset/,
  },
  {
    name: "expert of the wrong length",
    formats: BOTH,
    moe: true,
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      const t = l.entryData(l.entryOfKind(s, 3));
      return u64(l, t + 8, Number(l.v.getBigUint64(t + 8, true)) - 64);
    },
    field: /table\[\d+\]\.length/,
  },
  {
    name: "expert tiles without an expert table",
    formats: BOTH,
    moe: true,
    edit: (l) => {
      const s = l.format === "cflow" ? 1 : l.sectionOfKind(5);
      return u8(l, l.entryOfKind(s, 3) + 1, 2);
    },
    field: /kind|length/,
  },
];

const valid = new Map<string, Uint8Array>();
for (const format of BOTH) {
  valid.set(`${format}`, await write(format));
  valid.set(`${format}-moe`, await write(format, 4));
  valid.set(`${format}-pipeline-moe`, await write(format, 4, PIPELINE_MOE));
  valid.set(`${format}-pipeline-dense`, await write(format, 0, PIPELINE_DENSE));
}

Deno.test("resealing a valid file changes nothing, and it parses", () => {
  for (const [name, bytes] of valid) {
    const copy = bytes.slice();
    resealTiled(copy, true);
    assert.deepEqual(copy, bytes, name);
    readTiledFile(bytesSource(name, copy), { verifyChecksums: true });
  }
});

for (const c of CASES) {
  for (const format of c.formats) {
    const variant = c.pipeline !== undefined ? `-pipeline-${c.pipeline}` : c.moe ? "-moe" : "";
    Deno.test(`${format}${variant}: ${c.name} is a FormatError naming the field`, () => {
      const bytes = valid.get(`${format}${variant}`)!.slice();
      const l = new Layout(bytes, format);
      const at = c.edit(l);
      // Every CRC recomputed, so only the edited field is wrong.
      if (!c.noReseal) resealTiled(bytes, true);
      const name = `bad.${format}`;
      let error: unknown;
      try {
        readTiledFile(bytesSource(name, bytes), { verifyChecksums: true });
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof FormatError, `${c.name}: accepted or ${error}`);
      assert.equal(error.file, name);
      assert.match(error.field, c.field, `${c.name}: ${error.message}`);
      assert.ok(
        Number.isSafeInteger(error.offset) && error.offset >= 0 && error.offset <= bytes.length,
        error.message,
      );
      // The offset is the broken field's, or a byte of the structure it belongs to.
      assert.ok(
        Math.abs(error.offset - at) <= 64 || error.field.includes("tile"),
        `${c.name}: edited byte ${at}, error at ${error.offset}: ${error.message}`,
      );
    });
  }
}

/** Small files for the sweep: every byte of them is tried. */
function small(format: Format, experts: number): Promise<Uint8Array> {
  return randomModelBytes({
    hidden: 8,
    layers: 2,
    heads: 1,
    kvHeads: 1,
    headDim: 8,
    ffn: 8,
    vocab: 4,
    experts,
    topK: experts > 0 ? 1 : undefined,
    expertFfn: experts > 0 ? 8 : undefined,
    expertDelay: experts > 0 ? 1 : undefined,
    seed: 5,
  }, format);
}

Deno.test("every byte with a bit flipped, checksums off (the load default): refused or in bounds", async () => {
  for (const format of BOTH) {
    for (const experts of [0, 2]) {
      const bytes = await small(format, experts);
      const name = `${format}${experts > 0 ? "-moe" : ""}`;
      let refused = 0;
      let parsed = 0;
      for (let i = 0; i < bytes.length; i++) {
        for (const bit of [1 << (i % 8), 0x80 >> (i % 8)]) {
          const bad = bytes.slice();
          bad[i] ^= bit;
          let file;
          try {
            file = readTiledFile(bytesSource(name, bad));
          } catch (e) {
            if (!(e instanceof FormatError)) throw new Error(`${name} byte ${i} ^ ${bit}: ${e}`);
            assert.ok(e.offset >= 0 && e.offset <= bad.length, e.message);
            refused++;
            continue;
          }
          // Parsed: the flip hit tile payload (scales, weights) or metadata
          // text. Every entry the reader hands out still lies inside the file.
          parsed++;
          assert.equal(file.format, format);
          for (const block of file.blocks) {
            for (const e of block.entries) {
              assert.ok(e.offset + e.length <= bad.length, `${name} byte ${i}: entry past the end`);
            }
          }
        }
      }
      assert.ok(refused > 0 && parsed > 0, `${name}: ${refused} refused, ${parsed} parsed`);
    }
  }
});

/** Files a writer produces happily but a reader must refuse (the writer does not check shapes). */
async function writtenThenRead(
  o: Partial<RandomModelOptions>,
  format: Format,
  edit?: (m: ReturnType<typeof randomModel>) => void,
) {
  const model = randomModel({
    hidden: 40,
    layers: 2,
    heads: 2,
    kvHeads: 1,
    headDim: 20,
    ffn: 70,
    vocab: 130,
    experts: 4,
    topK: 2,
    expertFfn: 24,
    seed: 13,
    ...o,
  });
  edit?.(model);
  const sink = memorySink();
  await writeModel(model, format, sink);
  return readTiledFile(bytesSource(`w.${format}`, sink.bytes()), { verifyChecksums: true });
}

for (const format of BOTH) {
  Deno.test(`${format}: shared experts whose widths disagree are refused`, async () => {
    await writtenThenRead({ sharedFfn: 20 }, format); // valid
    const bad = (m: ReturnType<typeof randomModel>) => {
      const other = randomModel({
        hidden: 40,
        layers: 2,
        heads: 2,
        kvHeads: 1,
        headDim: 20,
        ffn: 70,
        vocab: 130,
        experts: 4,
        topK: 2,
        expertFfn: 24,
        sharedFfn: 36,
      });
      m.layers[1].moe!.shared!.down = other.layers[1].moe!.shared!.down;
    };
    await assert.rejects(() => writtenThenRead({ sharedFfn: 20 }, format, bad), (e: unknown) => {
      assert.ok(e instanceof FormatError);
      assert.match(e.field, /shared_down/);
      return true;
    });
    const partial = (m: ReturnType<typeof randomModel>) => {
      const sh = m.layers[0].moe!.shared!;
      // Only the down projection: gate and up dropped by giving them no place.
      m.layers[0].moe!.shared = undefined;
      m.layers[0].ffn.push(sh.down);
    };
    await assert.rejects(() => writtenThenRead({ sharedFfn: 20 }, format, partial), FormatError);
  });

  Deno.test(`${format}: OLMoE's q_norm and k_norm span the whole q and k, other archs one head`, async () => {
    const olmoe = { archId: ARCH_IDS.olmoe, architecture: "olmoe" };
    const f = await writtenThenRead({ ...olmoe, qkNorm: "full" }, format);
    assert.equal(f.geometry.archId, ARCH_IDS.olmoe);
    await assert.rejects(() => writtenThenRead({ ...olmoe, qkNorm: "head" }, format), FormatError);
    const qwen3 = { archId: ARCH_IDS.qwen3moe, architecture: "qwen3moe" };
    await writtenThenRead({ ...qwen3, qkNorm: "head" }, format);
    await assert.rejects(() => writtenThenRead({ ...qwen3, qkNorm: "full" }, format), FormatError);
  });

  Deno.test(`${format}: moe_norm and shared experts need experts`, async () => {
    await assert.rejects(
      () =>
        writtenThenRead({ experts: 0, topK: 0 }, format, (m) => {
          m.layers[0].ffn.push({
            matrixId: MATRIX.MOE_NORM,
            rows: 1,
            cols: 40,
            fused: 0,
            f32: () => new Float32Array(40),
          });
        }),
      FormatError,
    );
  });
}
