/**
 * The plan builder of one mixture-of-experts block: RMSNorm, the f32
 * router and its top-k, the shared expert, and only the selected experts'
 * tiles (rows of a batch that chose the same expert share one read of it).
 * With the disk tier the selection and the input are saved and the experts
 * fetched, so that a pipeline-native schedule can compute them at a later
 * pass while the reads run.
 *
 * @module
 */

import type { Buf } from "../ffi/mod.ts";
import { type BlockContext, pad32, project, quantizedRun } from "./_plan_state.ts";

/**
 * out = MoE(N_moe(input)) of layer `l`: the shared expert (if any), then
 * only the selected experts. With the disk tier the selection and the
 * input are kept in saved buffer `saved` and the experts fetched; unless
 * `defer`, they are also computed here (else by {@link finishExperts} at
 * the injection pass, from the same saved inputs, so with the same result).
 *
 * @example
 * ```ts ignore
 * expertsBlock(ctx, 0, ctx.s.x, ctx.s.e);
 * ```
 */
export function expertsBlock(
  x: BlockContext,
  l: number,
  input: Buf,
  out: Buf,
  saved = 0,
  defer = false,
): void {
  const { b, c, s, disk } = x;
  const m = x.layers[l].moe!;
  const moe = c.moe!;
  const act = c.activation === "silu" ? "silu" : "gelu";
  const sel = disk ? disk.sel[saved] : s.sel;
  b.rmsNorm(input, m.norm, s.xb, c.hidden, c.eps);
  b.route(s.xb, m.router, c.hidden, moe.experts, moe.topK, moe.renormalize, sel);
  const quant = quantizedRun(m.down[0]);
  if (disk) {
    if (quant) b.quantize(s.xb, pad32(c.hidden), disk.x[saved]);
    else b.lincomb(disk.x[saved], disk.x[saved], s.xb, c.hidden, 0, 1);
    b.fetch(disk.stage, l, moe.experts, moe.topK, sel, disk.spans[l]);
  } else if (quant) {
    b.quantize(s.xb, pad32(c.hidden), s.xq);
  }
  b.lincomb(out, out, out, c.hidden, 0, 0);
  if (m.shared !== undefined) {
    const sh = m.shared;
    project(b, sh.gateUp, s.xb, c.hidden, s.xq, s.gateUp);
    b.gated(act, s.gateUp, s.hb, sh.ffn);
    project(b, sh.down, s.hb, sh.ffn, s.hq, s.shared);
    b.gateScale(s.shared, c.hidden, sh.gate, s.xb, c.hidden);
    b.add(out, s.shared, c.hidden);
  }
  if (!defer) finishExperts(x, l, out, saved);
}

/**
 * out += the selected experts of layer `l` (from saved buffer `saved` with
 * the disk tier, waiting for their reads).
 *
 * @example
 * ```ts ignore
 * finishExperts(ctx, 3, queueSlot, 1);
 * ```
 */
export function finishExperts(x: BlockContext, l: number, out: Buf, saved: number): void {
  const { b, c, s, disk } = x;
  const m = x.layers[l].moe!;
  const moe = c.moe!;
  const act = c.activation === "silu" ? "silu" : "gelu";
  if (disk) {
    b.moeStaged({
      stage: disk.stage,
      gateUp: m.gateUp[0],
      down: m.down[0],
      nExperts: moe.experts,
      topK: moe.topK,
      sel: disk.sel[saved],
      x: disk.x[saved],
      act,
      scratch: s.moeScratch,
      out,
      counter: m.counter,
    });
    return;
  }
  b.moe({
    gateUp: m.gateUp,
    down: m.down,
    topK: moe.topK,
    sel: s.sel,
    x: quantizedRun(m.down[0]) ? s.xq : s.xb,
    act,
    scratch: s.moeScratch,
    out,
    counter: m.counter,
  });
}
