/**
 * `Transformer.trace`: a run of the plan one section at a time, with what
 * each pass of the schedule left in the model's streams read back after it.
 * Internal to model/.
 *
 * @module
 */

import type { AlignedBuffer, Buf, Plan } from "../ffi/mod.ts";
import type { Schedule } from "../scheduler/mod.ts";
import { COMBINE_STYLE, type ModelConfig } from "./config.ts";
import type { ExpertCounters } from "./_expert_counters.ts";
import type { RunState } from "./_plan_state.ts";
import type { TracePosition, TraceStep } from "./options.ts";

/** What a trace reads: the model's plan, its workspace and where things are in it. */
export interface TraceParts {
  config: ModelConfig;
  schedule: Schedule;
  plan: Plan;
  memory: AlignedBuffer;
  state: RunState;
  counters: ExpertCounters;
  /** Copies the last logits out of the workspace (and reads the counters). */
  logits: () => Float32Array;
}

/**
 * Runs `tokens` at positions [pos, ...) one at a time, section by section,
 * and records after every pass the L2 norm of each stream the schedule
 * keeps, the router's selection and the expert bytes read; then the norm
 * of what the final norm reads, the argmax and the logits. The caller has
 * checked the tokens and positions. Leaves `counters.last` at the bytes
 * each layer read over all the tokens.
 *
 * @example
 * ```ts ignore
 * const positions = traceTokens(parts, [1, 2, 3], 0);
 * ```
 */
export function traceTokens(
  m: TraceParts,
  tokens: readonly number[],
  pos: number,
): TracePosition[] {
  const c = m.config;
  const s = m.state;
  const one = new Uint32Array(1);
  const row = new Uint8Array(c.hidden * 4);
  const norm = (buf: Buf) => {
    m.memory.read(buf.offset, row.length, row);
    const f = new Float32Array(row.buffer);
    let sum = 0;
    for (const x of f) sum += x * x;
    return Math.sqrt(sum);
  };
  const streams: [string, Buf][] = m.schedule.style === COMBINE_STYLE.DECOUPLED_STREAMS
    ? [["s_a", s.x], ["s_f", s.xf]]
    : m.schedule.style === COMBINE_STYLE.PIPELINE_REGISTERS
    ? [["A", s.x], ["X", s.xf]]
    : [["x", s.x]];
  const final = m.schedule.output === "xfm_reg" ? s.xf : s.x;
  const perLayer = new Array<number>(c.layers).fill(0);
  const out: TracePosition[] = [];
  tokens.forEach((token, i) => {
    one[0] = token;
    const steps: TraceStep[] = [];
    let finalNorm = 0;
    for (const sec of m.plan.sections) {
      if (sec.name === "output") finalNorm = norm(final);
      m.plan.runOps(one, pos + i, sec.first, sec.last);
      const match = /^layer (\d+) ffn$/.exec(sec.name);
      if (match === null) continue;
      const step = m.schedule.steps[Number(match[1])];
      const rec: TraceStep = { step: step.step, layer: step.layer, norms: {}, expertBytes: 0 };
      for (const [name, buf] of streams) rec.norms[name] = norm(buf);
      if (step.experts !== null && c.moe !== null) {
        const topK = c.moe.topK;
        const bytes = new Uint8Array(8 * topK);
        m.memory.read(s.sel.offset, bytes.length, bytes);
        const v = new DataView(bytes.buffer);
        rec.experts = {
          ids: Array.from({ length: topK }, (_, j) => v.getUint32(j * 4, true)),
          weights: Array.from({ length: topK }, (_, j) => v.getFloat32((topK + j) * 4, true)),
        };
        m.counters.read();
        rec.expertBytes = m.counters.last[step.layer];
        perLayer[step.layer] += rec.expertBytes;
      }
      steps.push(rec);
    }
    const logits = m.logits().slice();
    let argmax = 0;
    for (let j = 1; j < logits.length; j++) if (logits[j] > logits[argmax]) argmax = j;
    out.push({ steps, finalNorm, argmax, logits });
  });
  m.counters.last = perLayer;
  return out;
}
