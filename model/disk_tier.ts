/**
 * The disk expert tier (`expertTier: "disk"`): experts are read from the
 * file with direct I/O into staging slots as the router selects them,
 * rather than through the mapping. This file opens the file and the slots
 * and lays out what the plan's `fetch` and `moe_staged` operations read.
 *
 * @module
 */

import { actRowBytes } from "../ffi/mod.ts";
import { createStage, type DirectFile, openDirect, type Stage } from "../ffi/io.ts";
import type { Schedule } from "../scheduler/mod.ts";
import type { DiskTier, Layout } from "./_plan_state.ts";
import type { TransformerOptions } from "./options.ts";
import type { ModelWeights } from "./weights.ts";

/** An open disk tier: the plan's inputs, and the staging area and file to close. */
export interface OpenedDiskTier {
  tier: DiskTier;
  stage: Stage;
  direct: DirectFile;
}

/**
 * Opens the disk expert tier when asked for and the model has experts:
 * the file for direct reads, staging slots for every expert a batch can
 * have in flight over the fetch window (one pass when sync, the expert
 * queue's length when staged) plus the LRU cache, and in the workspace
 * layout `L` each layer's expert file ranges (written through `vectors`)
 * and the saved selections and inputs. Undefined for the mapped tier or a
 * dense model; throws a RangeError for options out of range.
 *
 * @example
 * ```ts ignore
 * const disk = openDiskTier({ expertTier: "disk" }, weights, schedule, 64, layout, vectors);
 * ```
 */
export function openDiskTier(
  options: TransformerOptions,
  weights: ModelWeights,
  schedule: Schedule,
  batch: number,
  L: Layout,
  vectors: [number, Float32Array][],
): OpenedDiskTier | undefined {
  const c = weights.config;
  const layers = weights.layers;
  const quantized = weights.expertsQuantized;
  const mode = options.expertTier ?? "mmap";
  const fetch = options.expertFetch ?? "sync";
  if (mode !== "mmap" && mode !== "disk") {
    throw new RangeError(`model: expert tier "${mode}" is not mmap or disk`);
  }
  if (fetch !== "sync" && fetch !== "staged") {
    throw new RangeError(`model: expert fetch "${fetch}" is not sync or staged`);
  }
  const cacheMiB = options.expertCacheMiB ?? 0;
  if (!Number.isFinite(cacheMiB) || cacheMiB < 0 || cacheMiB > 1 << 20) {
    throw new RangeError(`model: an expert cache of ${cacheMiB} MiB`);
  }
  if (mode === "mmap" || c.moe === null) return undefined;
  const moe = c.moe;
  const staged = fetch === "staged" && schedule.queueSlots > 0;
  // As many slots in both modes (the staged window's), so that sync and
  // staged differ only in when they wait, not in what stays cached.
  const window = Math.max(1, schedule.queueSlots);
  let span = 0;
  for (const w of layers) {
    w.moe?.gateUp.forEach((g, e) => span = Math.max(span, g.length + w.moe!.down[e].length));
  }
  const direct = openDirect(weights.file.path);
  let stage: Stage;
  try {
    const slotBytes = span + 2 * direct.alignment;
    const inFlight = window * Math.min(moe.experts, batch * moe.topK);
    const slots = inFlight + Math.floor(cacheMiB * 2 ** 20 / slotBytes);
    if (slots > 4096) {
      throw new RangeError(
        `model: the disk tier needs ${slots} staging slots, more than 4096 (lower the batch or the cache)`,
      );
    }
    stage = createStage(direct, slotBytes, slots);
  } catch (error) {
    direct.close();
    throw error;
  }
  const spans = layers.map((w, l) => {
    if (w.moe === undefined) return -1;
    const bank = weights.file.file.experts.get(l)!;
    const table = new BigUint64Array(bank.spans.length * 2);
    bank.spans.forEach((x, e) => {
      table[2 * e] = BigInt(x.offset);
      table[2 * e + 1] = BigInt(x.length);
    });
    const at = L.take(table.byteLength);
    vectors.push([at, new Float32Array(table.buffer)]);
    return at;
  });
  const xBytes = quantized ? actRowBytes(c.hidden) : c.hidden * 4;
  const tier: DiskTier = {
    stage,
    staged,
    spans,
    sel: Array.from({ length: staged ? window : 1 }, () => L.rows(12 * moe.topK, batch)),
    x: Array.from({ length: staged ? window : 1 }, () => L.rows(xBytes, batch)),
  };
  return { tier, stage, direct };
}
