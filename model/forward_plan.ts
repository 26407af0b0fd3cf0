/**
 * The forward pass as one plan: the embedding, the passes of the schedule
 * (each an attention block, a dense FFN block and an experts block, in the
 * order and on the streams the schedule names, combined by the model's
 * combine style), the flush of pending expert outputs, and the output head.
 * The blocks are built by attention_block.ts, ffn_block.ts and
 * moe_block.ts; this file only orders them.
 *
 * @module
 */

import type { AlignedBuffer, Buf, Plan, WeightRun } from "../ffi/mod.ts";
import type { Schedule, StreamRead } from "../scheduler/mod.ts";
import { COMBINE_STYLE } from "./config.ts";
import { type BlockContext, project } from "./_plan_state.ts";
import { attentionBlock } from "./attention_block.ts";
import { denseBlock } from "./ffn_block.ts";
import { expertsBlock, finishExperts } from "./moe_block.ts";
import type { HeadOps } from "./output_rows.ts";

/** What the forward plan reads besides the blocks' context. */
export interface ForwardPlanInputs {
  schedule: Schedule;
  embd: WeightRun;
  output: WeightRun;
  /** Workspace offset of the u64 timestamps (after the embedding and each pass). */
  times: number;
  workspace: AlignedBuffer;
  batch: number;
  /** KV cache positions over all sequences. */
  positions: number;
}

/** The output head's operations, its norm's workspace offset and input. */
export interface ForwardHead {
  ops: HeadOps;
  norm: number;
  input: Buf;
}

/**
 * The forward pass, decided here and run by the library in one call per
 * batch: for every token of the batch, at its own position,
 *
 * 1. token embedding (times sqrt(d) when the header says so);
 * 2. per pass of the schedule (scheduler/; one pass per layer except for
 *    FixedPoint models): attention on the stream the schedule names
 *    (RMSNorm, one Q8_0 quantization, fused Q/K/V (+ biases), QK-norm,
 *    V-norm, RoPE, K/V appended to the pass's cache, attention over the
 *    visible positions, O projection, post-attention norm) added into its
 *    stream; the dense FFN (RMSNorm, fused gate/up, gated activation, down,
 *    post-FFN norm) on the stream or delayed residual the schedule names;
 *    the experts (RMSNorm, f32 router, top-k, only the selected experts'
 *    tiles, shared expert), into the queue slot of the pass they are
 *    injected at; then the combination of the layer's combine style;
 * 3. expert outputs still pending are added (the flush);
 * 4. for the batch's last token only: final norm, output projection (the
 *    embeddings when tied), final soft-cap.
 */
export function buildForwardPlan(
  x: BlockContext,
  o: ForwardPlanInputs,
): { plan: Plan; head: ForwardHead } {
  const b = x.b;
  const { c, s, v, disk } = x;
  const sched = o.schedule;
  const copy = (dst: Buf, src: Buf) => b.lincomb(dst, dst, src, c.hidden, 0, 1);
  const mod = (i: number, n: number) => ((i % n) + n) % n;
  /** Where the expert output of pass `step` waits until it is injected. */
  const queued = (step: number) =>
    s.queue.length === 0 ? s.e : s.queue[mod(step + c.pipeline!.expertDelay, s.queue.length)];
  /** The disk tier's saved selection and input of pass `step`. */
  const savedOf = (step: number) =>
    disk === undefined || disk.sel.length === 1
      ? 0
      : mod(step + c.pipeline!.expertDelay, disk.sel.length);
  const staged = disk?.staged ?? false;
  /** Adds the expert output of pass `from` (computed here when staged) into `into`. */
  const inject = (from: number, into: Buf) => {
    if (staged) finishExperts(x, sched.steps[from].layer, queued(from), savedOf(from));
    b.add(into, queued(from), c.hidden);
  };
  const residual = (r: StreamRead, xIn: Buf): Buf => {
    if ("residualOf" in r) return s.ring[mod(r.residualOf, s.ring.length)];
    if (r.stream === "s_f" || r.stream === "xfm_reg") return s.xf;
    return xIn;
  };

  // 1. Token embedding (scaled by sqrt(d) when the header says so).
  b.section("embedding");
  b.embed(o.embd, s.x, c.embedScale);
  b.timestamp(o.times);
  if (sched.ringSlots > 0) copy(s.ring[mod(-1, s.ring.length)], s.x);
  if (sched.style === COMBINE_STYLE.DECOUPLED_STREAMS) copy(s.xf, s.x);
  if (sched.style === COMBINE_STYLE.PIPELINE_REGISTERS) copy(s.xf, s.x);

  // 2. The passes.
  for (const step of sched.steps) {
    const l = step.layer;
    b.section(`layer ${step.step} attention`);
    switch (sched.style) {
      case COMBINE_STYLE.DECOUPLED_STREAMS: {
        attentionBlock(x, l, step.step, s.x, s.x);
        b.section(`layer ${step.step} ffn`);
        if (step.dense) denseBlock(x, l, s.xf, s.d);
        if (step.experts) expertsBlock(x, l, s.xf, s.e);
        if (step.dense) b.add(s.xf, s.d, c.hidden);
        if (step.experts) b.add(s.xf, s.e, c.hidden);
        if (step.merge) {
          b.lincomb(s.x, s.x, s.xf, c.hidden, 0.5, 0.5);
          copy(s.xf, s.x);
        }
        break;
      }
      case COMBINE_STYLE.PIPELINE_REGISTERS: {
        // f reads the previous layer's xfm_reg; then attn_reg moves on; xfm_reg = attn_reg + f.
        if (step.dense) denseBlock(x, l, s.xf, s.d);
        else b.lincomb(s.d, s.d, s.d, c.hidden, 0, 0);
        if (step.experts) {
          expertsBlock(x, l, s.xf, s.e);
          b.add(s.d, s.e, c.hidden);
        }
        attentionBlock(x, l, step.step, s.x, s.x);
        b.section(`layer ${step.step} ffn`);
        b.lincomb(s.xf, s.x, s.d, c.hidden, 1, 1);
        break;
      }
      default: {
        // ParallelSqrt2, DelayedSum, AsyncExperts, FixedPoint and the sequential families.
        if (
          step.experts && "stream" in step.experts.input && step.experts.input.stream === "x_in"
        ) {
          // AsyncExperts: routed before attention.
          expertsBlock(x, l, s.x, queued(step.step), savedOf(step.step), staged);
        }
        attentionBlock(x, l, step.step, s.x, s.x); // s.x is x_mid from here
        b.section(`layer ${step.step} ffn`);
        // Route (and with the disk tier start the reads) before the dense
        // FFN: the two read different inputs into different buffers, and
        // routing first gives the reads the dense FFN's time as well.
        if (
          step.experts &&
          !("stream" in step.experts.input && step.experts.input.stream === "x_in")
        ) {
          expertsBlock(x, l, s.x, queued(step.step), savedOf(step.step), staged);
        }
        if (step.dense) denseBlock(x, l, residual(step.dense, s.x), s.d);
        if (sched.style === COMBINE_STYLE.PARALLEL_SQRT2) {
          const r = Math.fround(1 / Math.SQRT2);
          if (step.dense) b.lincomb(s.d, s.d, s.e, c.hidden, r, r);
          else b.lincomb(s.d, s.d, s.e, c.hidden, 0, r);
          b.add(s.x, s.d, c.hidden);
        } else {
          if (step.dense) b.add(s.x, s.d, c.hidden);
          for (const from of step.injects) inject(from, s.x);
        }
        if (sched.ringSlots > 0) copy(s.ring[mod(step.step, s.ring.length)], s.x);
      }
    }
    b.timestamp(o.times + 8 * (step.step + 1));
  }
  // 3. Expert outputs still pending after the last layer.
  const final = sched.output === "xfm_reg" ? s.xf : s.x;
  if (sched.flush.length > 0) {
    b.section("flush");
    for (const from of sched.flush) inject(from, final);
  }
  // 4. Last token only: final norm, output projection (the embeddings when tied), soft-cap.
  // prefillAll runs the same operations over every row, as a plan of their own (OutputRows).
  const head: HeadOps = (into, input, norm, out, lastOnly) => {
    const lo = { lastOnly };
    into.rmsNorm(input, norm, out.xb, c.hidden, c.eps, lo);
    project(into, o.output, out.xb, c.hidden, out.xq, out.logits, lastOnly);
    if (c.finalSoftcap > 0) into.softcap(out.logits, c.vocab, c.finalSoftcap, lo);
  };
  b.section("output");
  head(b, final, v.outputNorm, s, true);
  return {
    plan: b.build(o.workspace, o.batch, o.positions),
    head: { ops: head, norm: v.outputNorm, input: final },
  };
}
