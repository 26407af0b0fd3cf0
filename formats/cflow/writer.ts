/**
 * Writes `.cflow` and `.vflow` files from {@link ModelWeights}: plan first,
 * then stream every section in order, computing each section's CRC-32 on
 * the way, then patch the section table. Files are written to a temporary
 * name in the destination folder, fsynced and renamed into place, and the
 * folder is fsynced; on any error the temporary file is removed, so the
 * destination is either absent or complete.
 *
 * @module
 */

import {
  alignUp,
  CFLOW_VERSION,
  CFLOW_VERSION_MIN,
  encodeBlockDirectory,
  encodeGlobalHeader,
  encodeGroupTable,
  encodeSectionTable,
  encodeVFlowHeader,
  type GroupDescriptor,
  type SectionDescriptor,
  STAGE,
  VFLOW_VERSION,
  VFLOW_VERSION_MIN,
} from "./container.ts";
import { crc32 } from "./crc32.ts";
import { type FilePlan, moePrefix, planCflow, type PlannedBlock, planVflow } from "./layout.ts";
import type { ModelWeights, WeightItem } from "./model_weights.ts";
import {
  blockElements,
  encodeStripe,
  isWholeBlockType,
  matrixTileBytes,
  maxTileType,
  NO_EXPERT,
  rowBytes,
  TILE_COLS,
  TILE_ROWS,
  tileBytes,
  tileTypeName,
} from "./tile.ts";

/**
 * Where bytes go. `write` is called with consecutive chunks; `writeAt`
 * patches bytes already written (the section table).
 *
 * @example
 * ```ts
 * import { memorySink } from "./writer.ts";
 * const sink = memorySink();
 * ```
 */
export interface Sink {
  /** Appends bytes. */
  write(bytes: Uint8Array): Promise<void>;
  /** Overwrites bytes already written at `offset`. */
  writeAt(offset: number, bytes: Uint8Array): Promise<void>;
}

/**
 * A sink that keeps everything in memory (tests and small models).
 *
 * @example
 * ```ts
 * import { memorySink } from "./writer.ts";
 * const sink = memorySink();
 * await sink.write(new Uint8Array([1, 2]));
 * console.log(sink.bytes().length); // 2
 * ```
 */
export function memorySink(): Sink & { bytes(): Uint8Array } {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let flat: Uint8Array | undefined;
  const flatten = () => {
    if (flat === undefined || flat.length !== size) {
      flat = new Uint8Array(size);
      let o = 0;
      for (const c of chunks) {
        flat.set(c, o);
        o += c.length;
      }
      chunks.length = 0;
      chunks.push(flat);
    }
    return flat;
  };
  return {
    write(bytes: Uint8Array): Promise<void> {
      chunks.push(bytes.slice());
      size += bytes.length;
      flat = undefined;
      return Promise.resolve();
    },
    writeAt(offset: number, bytes: Uint8Array): Promise<void> {
      flatten().set(bytes, offset);
      return Promise.resolve();
    },
    bytes: () => flatten(),
  };
}

/** Progress callback: bytes written so far and the total. */
export type Progress = (written: number, total: number) => void;

class Cursor {
  pos = 0;
  crc = 0;
  constructor(
    readonly sink: Sink,
    readonly progress: Progress | undefined,
    readonly total: number,
  ) {}
  async write(bytes: Uint8Array): Promise<void> {
    if (bytes.length === 0) return;
    await this.sink.write(bytes);
    this.crc = crc32(bytes, this.crc);
    this.pos += bytes.length;
    this.progress?.(this.pos, this.total);
  }
  async padTo(target: number): Promise<void> {
    if (target < this.pos) throw new Error(`writer: layout error, at ${this.pos} past ${target}`);
    if (target > this.pos) await this.write(new Uint8Array(target - this.pos));
  }
}

/** Writes the tiles of a run: one matrix, or several interleaved by output stripe. */
async function writeTiles(
  cur: Cursor,
  items: readonly WeightItem[],
  layer: number,
  expert: number,
): Promise<void> {
  const stripes = Math.max(...items.map((it) => Math.ceil(it.rows / TILE_ROWS)));
  for (let s = 0; s < stripes; s++) {
    for (const it of items) {
      const m = it.matrix!;
      const r0 = s * TILE_ROWS;
      if (r0 >= it.rows) continue;
      const n = Math.min(TILE_ROWS, it.rows - r0);
      const data = m.readRows(r0, n);
      const need = n * rowBytes(m.type, it.cols);
      if (data.length < need) {
        throw new RangeError(
          `writer: matrix ${it.matrixId} rows ${r0}+${n} gave ${data.length} bytes, need ${need}`,
        );
      }
      let size = 0;
      for (let c = 0; c < it.cols; c += TILE_COLS) {
        size += tileBytes(m.type, n, Math.min(TILE_COLS, it.cols - c));
      }
      const out = new Uint8Array(size);
      encodeStripe(
        out,
        0,
        m.type,
        { layerId: layer, matrixId: it.matrixId, expertId: expert },
        r0,
        n,
        it.cols,
        data,
      );
      await cur.write(out);
    }
  }
}

async function writeF32(cur: Cursor, item: WeightItem): Promise<void> {
  const values = item.f32!();
  if (values.length !== item.rows * item.cols) {
    throw new RangeError(
      `writer: f32 matrix ${item.matrixId} has ${values.length} values, expected ${
        item.rows * item.cols
      }`,
    );
  }
  await cur.write(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
}

async function writeBlock(cur: Cursor, block: PlannedBlock): Promise<void> {
  await cur.padTo(block.offset);
  await cur.write(
    encodeBlockDirectory({
      stage: block.stage,
      layerId: block.layer,
      entryCount: block.entries.length,
    }, block.entries),
  );
  const expertsByRouter = new Map(block.experts.map((e) => [e.moe.router, e]));
  for (const run of block.runs) {
    await cur.padTo(run.offset);
    if (run.items[0].matrix !== undefined) {
      await writeTiles(cur, run.items, run.layer & 0xffff, NO_EXPERT);
    } else await writeF32(cur, run.items[0]);
    const ex = expertsByRouter.get(run.items[0]);
    if (ex === undefined) continue;
    await cur.padTo(ex.tableOffset);
    const table = new DataView(new ArrayBuffer(ex.expertOffsets.length * 16));
    ex.expertOffsets.forEach((o, e) => {
      table.setBigUint64(e * 16, BigInt(o), true);
      table.setBigUint64(e * 16 + 8, BigInt(ex.expertLengths[e]), true);
    });
    await cur.write(new Uint8Array(table.buffer));
    for (let e = 0; e < ex.moe.experts.length; e++) {
      await cur.padTo(ex.expertOffsets[e]);
      const w = ex.moe.experts[e];
      await writeTiles(cur, [w.gate, w.up], ex.layer, e);
      await writeTiles(cur, [w.down], ex.layer, e);
      const expected = ex.expertOffsets[e] + ex.expertLengths[e];
      if (cur.pos !== expected) {
        throw new Error(
          `writer: expert ${e} of layer ${ex.layer} ended at ${cur.pos}, planned ${expected}`,
        );
      }
    }
  }
  await cur.padTo(block.end);
}

/**
 * Checks the model and returns the `.cflow` version it needs: 5 when every
 * tile type is Q4_0, Q8_0 or F32, so such files stay readable by readers of
 * version 5; 6 when any other tile type is used.
 */
function checkModel(model: ModelWeights): number {
  const g = model.geometry;
  if (model.layers.length !== g.layers) {
    throw new RangeError(`writer: ${model.layers.length} layers given, geometry says ${g.layers}`);
  }
  const all = [...model.vocab, ...model.layers.flatMap((l) => [...l.attention, ...l.ffn])];
  for (const l of model.layers) {
    if (l.moe === undefined) continue;
    all.push(l.moe.router, ...moePrefix(l.moe));
    for (const e of l.moe.experts) all.push(e.gate, e.up, e.down);
  }
  let version = CFLOW_VERSION_MIN;
  if (!Number.isInteger(g.styleParam) || g.styleParam < 0 || g.styleParam > 255) {
    throw new RangeError(`writer: style_param ${g.styleParam} is not a byte`);
  }
  for (const it of all) {
    if ((it.matrix === undefined) === (it.f32 === undefined)) {
      throw new TypeError(`writer: matrix ${it.matrixId} must have exactly one of matrix, f32`);
    }
    if (
      !Number.isSafeInteger(it.rows) || !Number.isSafeInteger(it.cols) || it.rows < 1 || it.cols < 1
    ) {
      throw new RangeError(`writer: matrix ${it.matrixId} has shape ${it.rows}x${it.cols}`);
    }
    if (it.matrix !== undefined && (it.matrix.rows !== it.rows || it.matrix.cols !== it.cols)) {
      throw new RangeError(`writer: matrix ${it.matrixId} shape disagrees with its rows`);
    }
    if (it.rows > 0xffffffff || it.cols > 0xffff * 2) {
      throw new RangeError(`writer: matrix ${it.matrixId} is too large`);
    }
    const t = it.matrix?.type;
    if (t !== undefined) {
      if (tileTypeName(t) === undefined) {
        throw new RangeError(`writer: matrix ${it.matrixId} has unknown tile type ${t}`);
      }
      if (isWholeBlockType(t) && it.cols % blockElements(t) !== 0) {
        throw new RangeError(
          `writer: matrix ${it.matrixId} has ${it.cols} columns, not a multiple of the ${
            blockElements(t)
          }-weight blocks of ${tileTypeName(t)}`,
        );
      }
      if (t > maxTileType(CFLOW_VERSION_MIN)) version = CFLOW_VERSION;
    }
  }
  if (g.quantType > maxTileType(CFLOW_VERSION_MIN)) version = CFLOW_VERSION;
  return version;
}

/**
 * Writes a model as `.cflow` (or `.vflow`) into `sink`; returns the plan.
 *
 * @example
 * ```ts ignore
 * import { memorySink, writeModel } from "./writer.ts";
 * const sink = memorySink();
 * await writeModel(model, "cflow", sink);
 * ```
 */
export async function writeModel(
  model: ModelWeights,
  format: "cflow" | "vflow",
  sink: Sink,
  progress?: Progress,
): Promise<FilePlan> {
  const version = checkModel(model);
  const plan = format === "cflow" ? planCflow(model) : planVflow(model);
  const cur = new Cursor(sink, progress, plan.size);
  const g = model.geometry;
  // Header and tables with placeholder CRCs; patched at the end.
  if (format === "cflow") {
    await cur.write(encodeGlobalHeader(g, plan.sectionTableOffset, version));
  } else {
    await cur.write(
      encodeVFlowHeader({
        version: version === CFLOW_VERSION ? VFLOW_VERSION : VFLOW_VERSION_MIN,
        hidden: g.hidden,
        layers: g.layers,
        heads: g.heads,
        kvHeads: g.kvHeads,
        headDim: g.headDim,
        tileRows: g.tileRows,
        tileCols: g.tileCols,
        quantType: g.quantType,
        featureFlags: g.featureFlags,
        ffnHidden: g.ffnHidden,
        vocab: g.vocab,
        experts: g.experts,
        topK: g.topK,
        denseDelay: g.denseDelay,
        expertDelay: g.expertDelay,
        combineStyle: g.combineStyle,
        groupCount: plan.groups.length,
        groupTableOffset: plan.groupTableOffset,
        sectionTableOffset: plan.sectionTableOffset,
      }),
    );
    const descriptors: GroupDescriptor[] = plan.groups.map((grp) => {
      const sec = plan.sections[grp.section];
      const ffnBlock = sec.blocks.find((b) => b.stage === STAGE.FFN)!;
      return {
        firstLayer: grp.firstLayer,
        layerCount: grp.layerCount,
        offset: sec.offset,
        length: sec.length,
        attentionOffset: sec.blocks[0].offset,
        ffnOffset: ffnBlock.offset,
      };
    });
    await cur.padTo(plan.groupTableOffset);
    await cur.write(encodeGroupTable(descriptors));
  }
  const descriptors: SectionDescriptor[] = plan.sections.map((s) => ({
    kind: s.kind,
    index: s.index,
    offset: s.offset,
    length: s.length,
    crc: 0,
  }));
  await cur.padTo(plan.sectionTableOffset);
  await cur.write(encodeSectionTable(descriptors));
  for (let i = 0; i < plan.sections.length; i++) {
    const s = plan.sections[i];
    await cur.padTo(s.offset);
    cur.crc = 0;
    if (s.bytes !== undefined) await cur.write(s.bytes);
    for (const b of s.blocks) await writeBlock(cur, b);
    if (cur.pos !== s.offset + s.length) {
      throw new Error(`writer: section ${i} ended at ${cur.pos}, planned ${s.offset + s.length}`);
    }
    descriptors[i].crc = cur.crc;
    if (i + 1 < plan.sections.length) await cur.padTo(alignUp(cur.pos));
  }
  if (cur.pos !== plan.size) {
    throw new Error(`writer: wrote ${cur.pos} bytes, planned ${plan.size}`);
  }
  await sink.writeAt(plan.sectionTableOffset, encodeSectionTable(descriptors));
  return plan;
}

/**
 * Bytes the tiles of a matrix take (re-exported for converters' estimates).
 *
 * @example
 * ```ts
 * import { tiledBytes } from "./writer.ts";
 * console.log(tiledBytes(1, 128, 256)); // 18448
 * ```
 */
export function tiledBytes(type: number, rows: number, cols: number): number {
  return matrixTileBytes(type, rows, cols);
}
