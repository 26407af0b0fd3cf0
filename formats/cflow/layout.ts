/**
 * Plans where every byte of a `.cflow` or `.vflow` file goes, before any is
 * written: sections, blocks, entries and their absolute offsets. Sizes follow
 * from shapes and tile types alone, so the plan is exact.
 *
 * @module
 */

import {
  alignUp,
  BLOCK_HEADER_BYTES,
  ENTRY_BYTES,
  ENTRY_KIND,
  type EntryDescriptor,
  FUSED,
  GLOBAL_HEADER_BYTES,
  GROUP_DESCRIPTOR_BYTES,
  MATRIX,
  SECTION,
  sectionTableBytes,
  STAGE,
  VFLOW_HEADER_BYTES,
  VOCAB_LAYER,
} from "./container.ts";
import type { LayerWeights, ModelWeights, WeightItem } from "./model_weights.ts";
import { matrixTileBytes, NO_EXPERT, TILE_TYPE } from "./tile.ts";

/** An item placed in a block, with its entry (or entries, for fused runs). */
export interface PlacedRun {
  /** Items in this run: one, or the members of a fused run. */
  items: WeightItem[];
  /** Decoder layer index. */
  layer: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Length in bytes. */
  length: number;
  /** Section or entry kind. */
  kind: number;
}

/** A planned expert bank. */
export interface PlacedExperts {
  /** Decoder layer index. */
  layer: number;
  /** Byte offset of the expert table. */
  tableOffset: number;
  /** Byte offset of each expert's tiles. */
  expertOffsets: number[];
  /** Byte length of each expert's tiles. */
  expertLengths: number[];
  /** Byte offset of the expert bank. */
  bankOffset: number;
  /** Byte length of the expert bank. */
  bankLength: number;
  /** Router and experts of MoE layers. */
  moe: NonNullable<LayerWeights["moe"]>;
}

/** A planned block. */
export interface PlannedBlock {
  /** Which part of the forward pass the block feeds. */
  stage: number;
  /** Decoder layer index. */
  layer: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Bytes of the block header and directory. */
  directoryBytes: number;
  /** The block's directory entries. */
  entries: EntryDescriptor[];
  /** Entry data runs in file order. */
  runs: PlacedRun[];
  /** Number of experts (0 for dense models). */
  experts: PlacedExperts[];
  /** First byte after the block's last entry. */
  end: number;
}

/** A planned section. */
export interface PlannedSection {
  /** Section or entry kind. */
  kind: number;
  /** Layer or group index of the section. */
  index: number;
  /** Absolute byte offset in the file. */
  offset: number;
  /** Length in bytes. */
  length: number;
  /** Blocks of the section, in file order. */
  blocks: PlannedBlock[];
  /** Metadata sections carry bytes directly. */
  bytes?: Uint8Array;
}

/** A planned file. */
export interface FilePlan {
  /** Which of the two formats. */
  format: "cflow" | "vflow";
  /** Size of the header. */
  headerBytes: number;
  /** Byte offset of the group table. */
  groupTableOffset: number;
  /** Layer groups (`.vflow`). */
  groups: { firstLayer: number; layerCount: number; section: number }[];
  /** Byte offset of the section table. */
  sectionTableOffset: number;
  /** The section table, in file order. */
  sections: PlannedSection[];
  /** Size of the file in bytes. */
  size: number;
}

function itemBytes(item: WeightItem): number {
  if (item.matrix !== undefined) return matrixTileBytes(item.matrix.type, item.rows, item.cols);
  return item.rows * item.cols * 4;
}

function itemKind(item: WeightItem): number {
  return item.matrix !== undefined ? ENTRY_KIND.TILES : ENTRY_KIND.F32;
}

/** Groups consecutive items of the same fused group into runs. */
function runsOf(items: readonly WeightItem[]): WeightItem[][] {
  const runs: WeightItem[][] = [];
  for (const item of items) {
    const last = runs[runs.length - 1];
    if (item.fused !== FUSED.NONE && last !== undefined && last[0].fused === item.fused) {
      last.push(item);
    } else runs.push([item]);
  }
  return runs;
}

/** The section (layer position) a delayed item is placed at. */
export function placement(layer: number, delay: number): number {
  return Math.max(0, layer - delay);
}

interface BlockContent {
  /** Which part of the forward pass the block feeds. */
  stage: number;
  /** Decoder layer index. */
  layer: number;
  /** [layer, items] pairs in consumption order. */
  parts: { layer: number; items: WeightItem[] }[];
  /** Number of experts (0 for dense models). */
  experts: { layer: number; moe: NonNullable<LayerWeights["moe"]> }[];
}

/**
 * The items of an MoE layer that precede its router, in block order:
 * `moe_norm`, the shared expert's gate/up (fused) and down, its
 * `shared_expert_gate_inp`. The router, the expert table and the bank
 * follow them.
 */
export function moePrefix(moe: NonNullable<LayerWeights["moe"]>): WeightItem[] {
  const items: WeightItem[] = [];
  if (moe.norm !== undefined) items.push(moe.norm);
  if (moe.shared !== undefined) {
    items.push(moe.shared.gate, moe.shared.up, moe.shared.down);
    if (moe.shared.gateInp !== undefined) items.push(moe.shared.gateInp);
  }
  return items;
}

function planBlock(content: BlockContent, start: number): PlannedBlock {
  const runs: { layer: number; items: WeightItem[] }[] = [];
  for (const part of content.parts) {
    for (const r of runsOf(part.items)) runs.push({ layer: part.layer, items: r });
  }
  const prefixes = content.experts.map((ex) => runsOf(moePrefix(ex.moe)));
  let entryCount = 0;
  for (const r of runs) entryCount += r.items.length;
  for (const p of prefixes) for (const r of p) entryCount += r.length;
  for (const _ of content.experts) entryCount += 5; // router, expert table, gate, up, down
  const directoryBytes = BLOCK_HEADER_BYTES + entryCount * ENTRY_BYTES;
  let pos = alignUp(start + directoryBytes);
  const entries: EntryDescriptor[] = [];
  const placed: PlacedRun[] = [];
  const placeRun = (r: { layer: number; items: WeightItem[] }) => {
    const length = r.items.reduce((n, it) => n + itemBytes(it), 0);
    const kind = itemKind(r.items[0]);
    placed.push({ items: r.items, layer: r.layer, offset: pos, length, kind });
    for (const it of r.items) {
      entries.push({
        matrixId: it.matrixId,
        kind,
        tileType: it.matrix?.type ?? 0,
        fused: r.items.length > 1 ? it.fused : FUSED.NONE,
        layerId: r.layer,
        expertId: NO_EXPERT,
        rows: it.rows,
        cols: it.cols,
        offset: pos,
        length,
      });
    }
    pos = alignUp(pos + length);
  };
  for (const r of runs) placeRun(r);
  const experts: PlacedExperts[] = [];
  for (const [xi, ex] of content.experts.entries()) {
    for (const items of prefixes[xi]) placeRun({ layer: ex.layer, items });
    const router = ex.moe.router;
    const routerBytes = itemBytes(router);
    placed.push({
      items: [router],
      layer: ex.layer,
      offset: pos,
      length: routerBytes,
      kind: ENTRY_KIND.F32,
    });
    entries.push({
      matrixId: MATRIX.ROUTER,
      kind: ENTRY_KIND.F32,
      tileType: 0,
      fused: FUSED.NONE,
      layerId: ex.layer,
      expertId: NO_EXPERT,
      rows: router.rows,
      cols: router.cols,
      offset: pos,
      length: routerBytes,
    });
    pos = alignUp(pos + routerBytes);
    const n = ex.moe.experts.length;
    const tableOffset = pos;
    const tableBytes = n * 16;
    pos = alignUp(pos + tableBytes);
    const bankOffset = pos;
    const expertOffsets: number[] = [];
    const expertLengths: number[] = [];
    for (const e of ex.moe.experts) {
      const len = itemBytes(e.gate) + itemBytes(e.up) + itemBytes(e.down);
      expertOffsets.push(pos);
      expertLengths.push(len);
      pos = alignUp(pos + len);
    }
    const bankLength = pos - bankOffset;
    entries.push({
      matrixId: MATRIX.EXPERT_TABLE,
      kind: ENTRY_KIND.EXPERT_TABLE,
      tileType: 0,
      fused: FUSED.NONE,
      layerId: ex.layer,
      expertId: NO_EXPERT,
      rows: n,
      cols: 2,
      offset: tableOffset,
      length: tableBytes,
    });
    const first = ex.moe.experts[0];
    for (
      const [id, item, fused] of [
        [MATRIX.EXPERT_GATE, first.gate, FUSED.GATE_UP],
        [MATRIX.EXPERT_UP, first.up, FUSED.GATE_UP],
        [MATRIX.EXPERT_DOWN, first.down, FUSED.NONE],
      ] as const
    ) {
      entries.push({
        matrixId: id,
        kind: ENTRY_KIND.EXPERT_TILES,
        tileType: item.matrix?.type ?? TILE_TYPE.F32,
        fused,
        layerId: ex.layer,
        expertId: NO_EXPERT,
        rows: item.rows,
        cols: item.cols,
        offset: bankOffset,
        length: bankLength,
      });
    }
    experts.push({
      layer: ex.layer,
      tableOffset,
      expertOffsets,
      expertLengths,
      bankOffset,
      bankLength,
      moe: ex.moe,
    });
  }
  return {
    stage: content.stage,
    layer: content.layer,
    offset: start,
    directoryBytes,
    entries,
    runs: placed,
    experts,
    end: pos,
  };
}

/** Appends a one-block section that starts where the block does; returns its end. */
function pushSection(
  sections: PlannedSection[],
  kind: number,
  index: number,
  block: PlannedBlock,
): number {
  sections.push({
    kind,
    index,
    offset: block.offset,
    length: block.end - block.offset,
    blocks: [block],
  });
  return block.end;
}

/** The vocabulary section, last in both formats; returns the end of the file. */
function planVocab(model: ModelWeights, sections: PlannedSection[], pos: number): number {
  const block = planBlock({
    stage: STAGE.VOCAB,
    layer: VOCAB_LAYER,
    parts: [{ layer: VOCAB_LAYER, items: model.vocab }],
    experts: [],
  }, pos);
  return pushSection(sections, SECTION.VOCAB, 0, block);
}

/**
 * The metadata JSON. A `.vflow` header has no byte for `style_param`, so it
 * travels in the metadata (key `style_param`, written when non-zero).
 */
function metadataBytes(model: ModelWeights, format: "cflow" | "vflow"): Uint8Array {
  let meta = model.metadata;
  const sp = model.geometry.styleParam;
  if (meta.style_param !== undefined && meta.style_param !== sp) {
    throw new RangeError(
      `writer: metadata style_param ${
        JSON.stringify(meta.style_param)
      } disagrees with the geometry's ${sp}`,
    );
  }
  if (format === "vflow" && sp !== 0) meta = { ...meta, style_param: sp };
  return new TextEncoder().encode(JSON.stringify(meta));
}

/**
 * Which layer section each stage of each layer lands in, under the delays
 * (the paper's DelayedMoESource): attention of layer l at l, dense FFN at
 * max(0, l - dense_delay), the MoE items (moe_norm, shared expert, router,
 * experts) at max(0, l - expert_delay).
 */
function cflowBlocks(model: ModelWeights): BlockContent[] {
  const g = model.geometry;
  const blocks: BlockContent[] = model.layers.map((_, l) => ({
    stage: STAGE.LAYER,
    layer: l,
    parts: [],
    experts: [],
  }));
  model.layers.forEach((lw, l) => blocks[l].parts.push({ layer: l, items: lw.attention }));
  model.layers.forEach((lw, l) => {
    if (lw.ffn.length > 0) {
      blocks[placement(l, g.denseDelay)].parts.push({ layer: l, items: lw.ffn });
    }
  });
  model.layers.forEach((lw, l) => {
    if (lw.moe !== undefined) {
      blocks[placement(l, g.expertDelay)].experts.push({ layer: l, moe: lw.moe });
    }
  });
  return blocks;
}

/**
 * Plans a `.cflow` file: header, section table, metadata, one section per
 * layer, the vocabulary section.
 *
 * @example
 * ```ts ignore
 * import { planCflow } from "./layout.ts";
 * const plan = planCflow(model);
 * console.log(plan.size);
 * ```
 */
export function planCflow(model: ModelWeights): FilePlan {
  const layerCount = model.layers.length;
  const sectionCount = 1 + layerCount + 1;
  const sectionTableOffset = GLOBAL_HEADER_BYTES;
  let pos = alignUp(sectionTableOffset + sectionTableBytes(sectionCount));
  const sections: PlannedSection[] = [];
  const meta = metadataBytes(model, "cflow");
  sections.push({
    kind: SECTION.METADATA,
    index: 0,
    offset: pos,
    length: meta.length,
    blocks: [],
    bytes: meta,
  });
  pos = alignUp(pos + meta.length);
  for (const content of cflowBlocks(model)) {
    pos = alignUp(pushSection(sections, SECTION.LAYER, content.layer, planBlock(content, pos)));
  }
  pos = planVocab(model, sections, pos);
  return {
    format: "cflow",
    headerBytes: GLOBAL_HEADER_BYTES,
    groupTableOffset: 0,
    groups: [],
    sectionTableOffset,
    sections,
    size: pos,
  };
}

/**
 * Layer groups of a `.vflow` file: maximal runs of consecutive layers with
 * the same attention geometry (sliding-window or global).
 *
 * @example
 * ```ts
 * import { vflowGroups } from "./layout.ts";
 * console.log(vflowGroups(4, 0, 0)); // [{ firstLayer: 0, layerCount: 4 }]
 * ```
 */
export function vflowGroups(
  layers: number,
  slidingWindow: number,
  slidingPattern: number,
): { firstLayer: number; layerCount: number }[] {
  const isSliding = (l: number) =>
    slidingWindow > 0 && slidingPattern > 0 && (l + 1) % slidingPattern !== 0;
  const groups: { firstLayer: number; layerCount: number }[] = [];
  for (let l = 0; l < layers; l++) {
    const last = groups[groups.length - 1];
    if (last !== undefined && isSliding(last.firstLayer) === isSliding(l)) last.layerCount++;
    else groups.push({ firstLayer: l, layerCount: 1 });
  }
  return groups;
}

/**
 * Plans a `.vflow` file: header, group table, section table, metadata, one
 * section per group (attention blocks of its layers, then FFN blocks), one
 * expert-bank section per MoE layer, the vocabulary section.
 *
 * @example
 * ```ts ignore
 * import { planVflow } from "./layout.ts";
 * const plan = planVflow(model);
 * ```
 */
export function planVflow(model: ModelWeights): FilePlan {
  const g = model.geometry;
  const groups = vflowGroups(model.layers.length, g.slidingWindow, g.slidingPattern);
  const moeLayers = model.layers.map((lw, l) => (lw.moe !== undefined ? l : -1)).filter((l) =>
    l >= 0
  );
  const sectionCount = 1 + groups.length + moeLayers.length + 1;
  const groupTableOffset = VFLOW_HEADER_BYTES;
  const sectionTableOffset = alignUp(groupTableOffset + groups.length * GROUP_DESCRIPTOR_BYTES, 8);
  let pos = alignUp(sectionTableOffset + sectionTableBytes(sectionCount));
  const sections: PlannedSection[] = [];
  const meta = metadataBytes(model, "vflow");
  sections.push({
    kind: SECTION.METADATA,
    index: 0,
    offset: pos,
    length: meta.length,
    blocks: [],
    bytes: meta,
  });
  pos = alignUp(pos + meta.length);
  // FFN items of layer l feed the FFN stage of layer max(0, l - dense_delay).
  const ffnAt: { layer: number; items: WeightItem[] }[][] = model.layers.map(() => []);
  model.layers.forEach((lw, l) => {
    if (lw.ffn.length > 0) ffnAt[placement(l, g.denseDelay)].push({ layer: l, items: lw.ffn });
  });
  const plannedGroups: FilePlan["groups"] = [];
  groups.forEach((grp, gi) => {
    const start = pos;
    const blocks: PlannedBlock[] = [];
    for (let l = grp.firstLayer; l < grp.firstLayer + grp.layerCount; l++) {
      const b = planBlock({
        stage: STAGE.ATTENTION,
        layer: l,
        parts: [{ layer: l, items: model.layers[l].attention }],
        experts: [],
      }, pos);
      blocks.push(b);
      pos = alignUp(b.end);
    }
    for (let l = grp.firstLayer; l < grp.firstLayer + grp.layerCount; l++) {
      const b = planBlock({ stage: STAGE.FFN, layer: l, parts: ffnAt[l], experts: [] }, pos);
      blocks.push(b);
      pos = alignUp(b.end);
    }
    sections.push({
      kind: SECTION.GROUP,
      index: gi,
      offset: start,
      length: blocks[blocks.length - 1].end - start,
      blocks,
    });
    plannedGroups.push({ ...grp, section: sections.length - 1 });
  });
  for (const l of moeLayers) {
    pos = alignUp(pushSection(
      sections,
      SECTION.EXPERTS,
      l,
      planBlock({
        stage: STAGE.EXPERTS,
        layer: l,
        parts: [],
        experts: [{ layer: l, moe: model.layers[l].moe! }],
      }, pos),
    ));
  }
  pos = planVocab(model, sections, pos);
  return {
    format: "vflow",
    headerBytes: VFLOW_HEADER_BYTES,
    groupTableOffset,
    groups: plannedGroups,
    sectionTableOffset,
    sections,
    size: pos,
  };
}
