/**
 * Tiles: the unit of every weight matrix in `.cflow` and `.vflow` files.
 * A matrix of `rows x cols` (Hugging Face orientation: out x in) is cut into
 * tiles of at most 128 x 256, emitted stripe by stripe. Each tile is a
 * 16-byte {@link TileHeader} followed by its payload; see docs/FORMAT.md.
 *
 * @module
 */

/** Tile height: output rows per tile. */
export const TILE_ROWS = 128;
/** Tile width: input columns per tile. */
export const TILE_COLS = 256;
/** Elements per quantization group (one f16 scale each). */
export const QUANT_GROUP = 32;
/** Size of a TileHeader. */
export const TILE_HEADER_BYTES = 16;
/** `expert_id` of tiles that belong to no expert. */
export const NO_EXPERT = 0xff;

/**
 * Tile payload encodings.
 *
 * @example
 * ```ts
 * import { TILE_TYPE } from "./tile.ts";
 * console.log(TILE_TYPE.Q4_0); // 1
 * ```
 */
export const TILE_TYPE = {
  Q4_0: 1,
  Q8_0: 2,
  F32: 3,
  Q4_1: 4,
  Q5_0: 5,
  Q5_1: 6,
  Q4_K: 7,
  Q5_K: 8,
  Q6_K: 9,
  F16: 10,
  BF16: 11,
} as const;

/**
 * The highest tile type id each `.cflow` version may use: version 5 knows
 * Q4_0, Q8_0 and F32 only; version 6 adds the ggml block types and F16/BF16.
 * Writers write the lowest version that can hold the file.
 *
 * @example
 * ```ts
 * import { maxTileType } from "./tile.ts";
 * console.log(maxTileType(5), maxTileType(6)); // 3 11
 * ```
 */
export function maxTileType(cflowVersion: number): number {
  return cflowVersion >= 6 ? TILE_TYPE.BF16 : TILE_TYPE.F32;
}

/** ggml block geometry of the types whose tiles keep ggml's blocks whole. */
const WHOLE_BLOCKS: Record<number, { elements: number; bytes: number }> = {
  [TILE_TYPE.Q4_1]: { elements: 32, bytes: 20 },
  [TILE_TYPE.Q5_0]: { elements: 32, bytes: 22 },
  [TILE_TYPE.Q5_1]: { elements: 32, bytes: 24 },
  [TILE_TYPE.Q4_K]: { elements: 256, bytes: 144 },
  [TILE_TYPE.Q5_K]: { elements: 256, bytes: 176 },
  [TILE_TYPE.Q6_K]: { elements: 256, bytes: 210 },
};

/**
 * True for the tile types whose payload is whole ggml blocks, row-major
 * (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); Q4_0 and Q8_0 store their scales
 * apart, F32/F16/BF16 plain values.
 *
 * @example
 * ```ts
 * import { isWholeBlockType, TILE_TYPE } from "./tile.ts";
 * console.log(isWholeBlockType(TILE_TYPE.Q4_K), isWholeBlockType(TILE_TYPE.Q4_0)); // true false
 * ```
 */
export function isWholeBlockType(type: number): boolean {
  return WHOLE_BLOCKS[type] !== undefined;
}

/**
 * True for the float tile types (F32, F16, BF16), whose kernels take f32
 * activations; the others take quantized activations.
 *
 * @example
 * ```ts
 * import { isFloatType, TILE_TYPE } from "./tile.ts";
 * console.log(isFloatType(TILE_TYPE.BF16)); // true
 * ```
 */
export function isFloatType(type: number): boolean {
  return type === TILE_TYPE.F32 || type === TILE_TYPE.F16 || type === TILE_TYPE.BF16;
}

/**
 * Weights per block of a type: 256 for the K-quants, 32 for the other
 * quantized types, 1 for the float types. A matrix's columns must be a
 * multiple of it for the whole-block types (ggml's own rule), so tiles of
 * 256 columns hold whole blocks.
 *
 * @example
 * ```ts
 * import { blockElements, TILE_TYPE } from "./tile.ts";
 * console.log(blockElements(TILE_TYPE.Q6_K)); // 256
 * ```
 */
export function blockElements(type: number): number {
  const b = WHOLE_BLOCKS[type];
  if (b !== undefined) return b.elements;
  return type === TILE_TYPE.Q4_0 || type === TILE_TYPE.Q8_0 ? QUANT_GROUP : 1;
}

/**
 * The `quant_group` a TileHeader of this type carries: 32 for Q4_0, Q8_0,
 * Q4_1, Q5_0 and Q5_1, 256 for the K-quants, 0 for the float types.
 *
 * @example
 * ```ts
 * import { tileQuantGroup, TILE_TYPE } from "./tile.ts";
 * console.log(tileQuantGroup(TILE_TYPE.Q4_K), tileQuantGroup(TILE_TYPE.F16)); // 256 0
 * ```
 */
export function tileQuantGroup(type: number): number {
  return isFloatType(type) ? 0 : blockElements(type);
}

/**
 * A tile encoding name.
 *
 * @example
 * ```ts
 * import type { TileTypeName } from "./tile.ts";
 * const t: TileTypeName = "Q8_0";
 * ```
 */
export type TileTypeName = keyof typeof TILE_TYPE;

/**
 * Name of a tile type id, or undefined for unknown ids.
 *
 * @example
 * ```ts
 * import { tileTypeName } from "./tile.ts";
 * console.log(tileTypeName(2)); // "Q8_0"
 * ```
 */
export function tileTypeName(id: number): TileTypeName | undefined {
  for (const [name, value] of Object.entries(TILE_TYPE)) {
    if (value === id) return name as TileTypeName;
  }
  return undefined;
}

/** Bytes of quantized data per group, by tile type (0 for F32). */
function groupDataBytes(type: number): number {
  return type === TILE_TYPE.Q4_0 ? 16 : type === TILE_TYPE.Q8_0 ? 32 : 0;
}

/**
 * Groups per tile row: `ceil(cols / 32)` (the last group zero-padded).
 *
 * @example
 * ```ts
 * import { groupsPerRow } from "./tile.ts";
 * console.log(groupsPerRow(33)); // 2
 * ```
 */
export function groupsPerRow(cols: number): number {
  return Math.ceil(cols / QUANT_GROUP);
}

/**
 * Payload bytes (after the header) of a tile of `rows x cols` of a type.
 *
 * @example
 * ```ts
 * import { TILE_TYPE, tilePayloadBytes } from "./tile.ts";
 * console.log(tilePayloadBytes(TILE_TYPE.Q4_0, 128, 256)); // 18432
 * ```
 */
export function tilePayloadBytes(type: number, rows: number, cols: number): number {
  if (type === TILE_TYPE.F32) return rows * cols * 4;
  if (type === TILE_TYPE.F16 || type === TILE_TYPE.BF16) return rows * cols * 2;
  const whole = WHOLE_BLOCKS[type];
  if (whole !== undefined) return rows * Math.ceil(cols / whole.elements) * whole.bytes;
  const groups = rows * groupsPerRow(cols);
  return groups * 2 + groups * groupDataBytes(type);
}

/**
 * Total bytes of a tile: header plus payload. A full Q4_0 tile is 18,448.
 *
 * @example
 * ```ts
 * import { TILE_TYPE, tileBytes } from "./tile.ts";
 * console.log(tileBytes(TILE_TYPE.Q4_0, 128, 256)); // 18448
 * ```
 */
export function tileBytes(type: number, rows: number, cols: number): number {
  return TILE_HEADER_BYTES + tilePayloadBytes(type, rows, cols);
}

/**
 * Total bytes of all tiles of a `rows x cols` matrix.
 *
 * @example
 * ```ts
 * import { matrixTileBytes, TILE_TYPE } from "./tile.ts";
 * console.log(matrixTileBytes(TILE_TYPE.Q4_0, 128, 512)); // 36896
 * ```
 */
export function matrixTileBytes(type: number, rows: number, cols: number): number {
  if (rows <= 0 || cols <= 0) return 0;
  // Closed form (full tiles, the short last tile row and column, the corner), not a
  // loop over the tiles: readers call this with shapes straight from a file, and
  // 2^32 x 2^32 would be ~10^11 iterations.
  const fullRows = Math.floor(rows / TILE_ROWS);
  const fullCols = Math.floor(cols / TILE_COLS);
  const restRows = rows - fullRows * TILE_ROWS;
  const restCols = cols - fullCols * TILE_COLS;
  let total = fullRows * fullCols * tileBytes(type, TILE_ROWS, TILE_COLS);
  if (restRows > 0) total += fullCols * tileBytes(type, restRows, TILE_COLS);
  if (restCols > 0) total += fullRows * tileBytes(type, TILE_ROWS, restCols);
  if (restRows > 0 && restCols > 0) total += tileBytes(type, restRows, restCols);
  return total;
}

/**
 * The 16-byte header at the start of every tile.
 *
 * @example
 * ```ts
 * import type { TileHeader } from "./tile.ts";
 * const h: TileHeader = {
 *   layerId: 0, matrixId: 1, expertId: 0xff, rowOffset: 0, colOffset: 0,
 *   tileRows: 128, tileCols: 256, quantGroup: 32,
 * };
 * ```
 */
export interface TileHeader {
  /** Decoder layer (0xFFFF for the vocabulary section). */
  layerId: number;
  /** Which matrix (docs/FORMAT.md, matrix ids). */
  matrixId: number;
  /** Expert index, {@link NO_EXPERT} for non-expert tiles. */
  expertId: number;
  /** First output row covered. */
  rowOffset: number;
  /** First input column covered. */
  colOffset: number;
  /** Rows in this tile (1..128). */
  tileRows: number;
  /** Columns in this tile (1..256). */
  tileCols: number;
  /** {@link tileQuantGroup} of the tile's type: 32, 256, or 0 for float tiles. */
  quantGroup: number;
}

/**
 * Writes a TileHeader at `offset` of `view`.
 *
 * @example
 * ```ts
 * import { encodeTileHeader, decodeTileHeader } from "./tile.ts";
 * const v = new DataView(new ArrayBuffer(16));
 * encodeTileHeader(v, 0, { layerId: 3, matrixId: 2, expertId: 255, rowOffset: 128,
 *   colOffset: 256, tileRows: 128, tileCols: 256, quantGroup: 32 });
 * console.log(decodeTileHeader(v, 0).rowOffset); // 128
 * ```
 */
export function encodeTileHeader(view: DataView, offset: number, h: TileHeader): void {
  view.setUint16(offset, h.layerId, true);
  view.setUint8(offset + 2, h.matrixId);
  view.setUint8(offset + 3, h.expertId);
  view.setUint32(offset + 4, h.rowOffset, true);
  view.setUint16(offset + 8, h.colOffset, true);
  view.setUint16(offset + 10, h.tileRows, true);
  view.setUint16(offset + 12, h.tileCols, true);
  view.setUint16(offset + 14, h.quantGroup, true);
}

/**
 * Reads a TileHeader at `offset` of `view`.
 *
 * @example
 * ```ts
 * import { decodeTileHeader } from "./tile.ts";
 * const h = decodeTileHeader(new DataView(new ArrayBuffer(16)), 0);
 * console.log(h.tileRows); // 0
 * ```
 */
export function decodeTileHeader(view: DataView, offset: number): TileHeader {
  return {
    layerId: view.getUint16(offset, true),
    matrixId: view.getUint8(offset + 2),
    expertId: view.getUint8(offset + 3),
    rowOffset: view.getUint32(offset + 4, true),
    colOffset: view.getUint16(offset + 8, true),
    tileRows: view.getUint16(offset + 10, true),
    tileCols: view.getUint16(offset + 12, true),
    quantGroup: view.getUint16(offset + 14, true),
  };
}

/**
 * A matrix as rows of quantized groups. Rows are delivered on request so a
 * converter never holds a whole matrix of a large model.
 *
 * For the quantized types each row is ggml blocks exactly as in GGUF
 * (`groupsPerRow(cols)` blocks of 18 or 34 bytes for Q4_0/Q8_0,
 * `cols / blockElements(type)` for the others); for F32/F16/BF16 each row is
 * `cols` values.
 *
 * @example
 * ```ts
 * import { TILE_TYPE, type RowMatrix } from "./tile.ts";
 * const m: RowMatrix = {
 *   type: TILE_TYPE.F32, rows: 1, cols: 2,
 *   readRows: (start, count) => new Uint8Array(count * 8),
 * };
 * ```
 */
export interface RowMatrix {
  /** Tile type of the rows delivered. */
  type: number;
  /** Rows (output features). */
  rows: number;
  /** Columns (input features). */
  cols: number;
  /** Bytes of rows [start, start + count), in the layout described above. */
  readRows(start: number, count: number): Uint8Array;
}

/**
 * Bytes of one row of a RowMatrix.
 *
 * @example
 * ```ts
 * import { rowBytes, TILE_TYPE } from "./tile.ts";
 * console.log(rowBytes(TILE_TYPE.Q4_0, 64)); // 36
 * ```
 */
export function rowBytes(type: number, cols: number): number {
  if (type === TILE_TYPE.F32) return cols * 4;
  if (type === TILE_TYPE.F16 || type === TILE_TYPE.BF16) return cols * 2;
  const whole = WHOLE_BLOCKS[type];
  if (whole !== undefined) return Math.ceil(cols / whole.elements) * whole.bytes;
  return groupsPerRow(cols) * (2 + groupDataBytes(type));
}

/** Identity of the tiles of one matrix. */
export interface TileIdentity {
  /** Layer the weight belongs to (0xFFFF: vocabulary). */
  layerId: number;
  /** Matrix id (docs/FORMAT.md). */
  matrixId: number;
  /** Expert index (0xFF: none). */
  expertId: number;
}

/**
 * Encodes the tiles of one output stripe (rows [r0, r0 + stripeRows)) of a
 * matrix, given that stripe's rows, into `out` at `offset`. Returns the new
 * offset. Column tiles are emitted left to right.
 *
 * @example
 * ```ts
 * import { encodeStripe, TILE_TYPE, tileBytes } from "./tile.ts";
 * const rows = new Uint8Array(2 * 3 * 4); // 2 rows x 3 f32 columns
 * const out = new Uint8Array(tileBytes(TILE_TYPE.F32, 2, 3));
 * encodeStripe(out, 0, TILE_TYPE.F32, { layerId: 0, matrixId: 1, expertId: 255 }, 0, 2, 3, rows);
 * ```
 */
export function encodeStripe(
  out: Uint8Array,
  offset: number,
  type: number,
  id: TileIdentity,
  r0: number,
  stripeRows: number,
  cols: number,
  rowsData: Uint8Array,
): number {
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const rb = rowBytes(type, cols);
  const gdb = groupDataBytes(type);
  const blockBytes = 2 + gdb;
  let pos = offset;
  for (let c0 = 0; c0 < cols; c0 += TILE_COLS) {
    const tc = Math.min(TILE_COLS, cols - c0);
    encodeTileHeader(view, pos, {
      layerId: id.layerId,
      matrixId: id.matrixId,
      expertId: id.expertId,
      rowOffset: r0,
      colOffset: c0,
      tileRows: stripeRows,
      tileCols: tc,
      quantGroup: tileQuantGroup(type),
    });
    pos += TILE_HEADER_BYTES;
    if (isFloatType(type) || isWholeBlockType(type)) {
      // Rows of values or of whole ggml blocks: the tile's columns are one
      // contiguous byte range of each row.
      const from = rowBytes(type, c0);
      const n = rowBytes(type, tc);
      for (let r = 0; r < stripeRows; r++) {
        const src = r * rb + from;
        out.set(rowsData.subarray(src, src + n), pos);
        pos += n;
      }
      continue;
    }
    const g0 = c0 / QUANT_GROUP;
    const ng = groupsPerRow(tc);
    // scales: [row][group] f16
    for (let r = 0; r < stripeRows; r++) {
      for (let g = 0; g < ng; g++) {
        const src = r * rb + (g0 + g) * blockBytes;
        out[pos++] = rowsData[src];
        out[pos++] = rowsData[src + 1];
      }
    }
    // data: [row][group][16 or 32 bytes]
    for (let r = 0; r < stripeRows; r++) {
      for (let g = 0; g < ng; g++) {
        const src = r * rb + (g0 + g) * blockBytes + 2;
        out.set(rowsData.subarray(src, src + gdb), pos);
        pos += gdb;
      }
    }
  }
  return pos;
}

/**
 * Decodes the payload of one tile back into row-layout bytes (ggml blocks or
 * f32), writing row r of the tile at `dst[(r) * dstRowBytes + colByteOffset]`.
 * The inverse of {@link encodeStripe} for a single tile.
 *
 * @example
 * ```ts
 * import { decodeTilePayload, TILE_TYPE } from "./tile.ts";
 * const dst = new Uint8Array(8);
 * decodeTilePayload(new Uint8Array(8), 0, TILE_TYPE.F32, 1, 2, dst, 8, 0);
 * ```
 */
export function decodeTilePayload(
  src: Uint8Array,
  offset: number,
  type: number,
  tileRows: number,
  tileCols: number,
  dst: Uint8Array,
  dstRowBytes: number,
  colByteOffset: number,
): void {
  if (isFloatType(type) || isWholeBlockType(type)) {
    const n = rowBytes(type, tileCols);
    for (let r = 0; r < tileRows; r++) {
      const s = offset + r * n;
      dst.set(src.subarray(s, s + n), r * dstRowBytes + colByteOffset);
    }
    return;
  }
  const gdb = groupDataBytes(type);
  const ng = groupsPerRow(tileCols);
  const dataStart = offset + tileRows * ng * 2;
  for (let r = 0; r < tileRows; r++) {
    for (let g = 0; g < ng; g++) {
      const d = r * dstRowBytes + colByteOffset + g * (2 + gdb);
      const s = offset + (r * ng + g) * 2;
      dst[d] = src[s];
      dst[d + 1] = src[s + 1];
      const q = dataStart + (r * ng + g) * gdb;
      dst.set(src.subarray(q, q + gdb), d + 2);
    }
  }
}
