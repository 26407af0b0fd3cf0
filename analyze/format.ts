/**
 * The human-readable output of `cflow analyze`.
 *
 * @module
 */

import { type Analysis, type LayerBytes, UNITS } from "./analyze.ts";

const mib = (b: number) => (b / UNITS.mib).toFixed(2);
const mb = (b: number) => (b / UNITS.mb).toFixed(2);
const both = (b: number) => `${mib(b)} MiB (${mb(b)} MB)`;
const cell = (b: number) => `${mib(b)} / ${mb(b)}`;

/** Consecutive layers with the same bytes, as one row. */
function runs(layers: readonly LayerBytes[]): { label: string; l: LayerBytes }[] {
  const out: { first: number; last: number; l: LayerBytes }[] = [];
  for (const l of layers) {
    const prev = out[out.length - 1];
    if (
      prev !== undefined && prev.last + 1 === l.layer &&
      prev.l.attention_bytes === l.attention_bytes && prev.l.dense_bytes === l.dense_bytes &&
      prev.l.expert_bytes === l.expert_bytes && prev.l.critical_bytes === l.critical_bytes
    ) {
      prev.last = l.layer;
    } else out.push({ first: l.layer, last: l.layer, l });
  }
  return out.map((r) => ({
    label: r.first === r.last ? `${r.first}` : `${r.first}-${r.last}`,
    l: r.l,
  }));
}

/**
 * A per-layer table (attention, dense, expert bytes and the layer's
 * critical term, in MiB / MB) and the naive, critical and fully serial
 * totals with the reduction, in MiB and MB.
 *
 * @example
 * ```ts
 * import { analyzeGeometry, formatAnalysis } from "./mod.ts";
 * const a = analyzeGeometry(
 *   { hidden: 512, layers: 6, heads: 8, kvHeads: 8, ffn: 2048, experts: 8, topK: 2, expertFfn: 512 },
 *   { arch: "arch2_4_combined" },
 * );
 * console.log(formatAnalysis(a).includes("critical  4.50 MiB")); // true
 * ```
 */
export function formatAnalysis(a: Analysis): string {
  const head = ["layer", "attention", "dense", "experts", "naive", "critical"];
  const rows = runs(a.per_layer).map(({ label, l }) => [
    label,
    cell(l.attention_bytes),
    cell(l.dense_bytes),
    cell(l.expert_bytes),
    cell(l.naive_bytes),
    cell(l.critical_bytes),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    "  " + r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  const passes = a.passes > 1
    ? ` (${a.per_layer.length} blocks x ${a.passes} iterations = ${
      a.per_layer.length * a.passes
    } passes)`
    : "";
  return [
    `model         the critical-path bandwidth model of the report (eq. 4.23): "Pipeline-Native ` +
    `Transformers: Co-Designing Model Architecture and CPU Inference for Bandwidth-Efficient ` +
    `Autoregressive Decode", which cflow implements`,
    `architecture  ${a.arch} (combine_style ${a.combine_style}, dense_delay ${a.dense_delay}, ` +
    `expert_delay ${a.expert_delay}, style_param ${a.style_param})`,
    `weights       ${a.quant}${
      a.bytes_per_param === null ? "" : ` (${a.bytes_per_param} bytes per weight)`
    }`,
    "",
    `per layer, one pass (MiB / MB; MiB = 2^20 bytes, which the report writes as MB; MB = 10^6 bytes):`,
    line(head),
    ...rows.map(line),
    "",
    `totals per token${passes}, eq. 4.23:`,
    `  naive     ${both(a.naive_bytes)}   sum of max(attention, dense, experts)`,
    `  critical  ${both(a.critical_bytes)}   sum of max(attention, dense/${
      a.dense_delay + 1
    }, experts/${a.expert_delay + 1})`,
    `  serial    ${both(a.serial_bytes)}   sum of attention + dense + experts`,
    `  reduction ${a.reduction.toFixed(2)}x   naive / critical`,
    "",
    "notes:",
    ...a.notes.map((n) => `  - ${n}`),
  ].join("\n");
}
