/**
 * The blocks of `.cflow` and `.vflow` files: each block's directory, where
 * the schedule places every weight, the tiles of every entry and expert
 * bank, the padding between them, and the shapes of all entries together.
 * Internal to the reader (reader.ts).
 *
 * @module
 */

import {
  ALIGN,
  ARCH_IDS,
  BLOCK_HEADER_BYTES,
  BLOCK_MAGIC,
  decodeEntry,
  ENTRY_BYTES,
  ENTRY_KIND,
  type EntryDescriptor,
  FUSED,
  type Geometry,
  MATRIX,
  matrixName,
  STAGE,
  VOCAB_LAYER,
} from "./container.ts";
import {
  blockElements,
  decodeTileHeader,
  isWholeBlockType,
  matrixTileBytes,
  NO_EXPERT,
  TILE_COLS,
  TILE_HEADER_BYTES,
  TILE_ROWS,
  tileBytes,
  type TileHeader,
  tileQuantGroup,
  tileTypeName,
} from "./tile.ts";
import { type Checker, checkZeros } from "./_checker.ts";
import { type Block, type ExpertBank, LIMITS } from "./reader.ts";

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

/**
 * Visits every tile of a run (one matrix, or several interleaved by output
 * stripe) in file order; returns the offset after the last tile.
 */
export function walkTiles(
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

/**
 * One block at `offset` (before `limit`): its header, its directory, every
 * entry's tiles and expert bank; fills `experts`.
 */
export function readBlock(
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
export function checkShapes(
  c: Checker,
  g: Geometry,
  format: "cflow" | "vflow",
  blocks: Block[],
): void {
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
