/**
 * The delay-aware schedule (report 4.4): for every pass through a layer,
 * what its attention, dense FFN and experts read, where the expert outputs
 * go and which earlier outputs are injected. It is decided from the header
 * fields alone (combine style, the two delays, the style parameter) before
 * any weight is read, and it is the same for `.cflow` and `.vflow` files:
 * the file order only changes where the weights lie, not what is computed.
 *
 * @module
 */

/**
 * What a stream operation reads: a named stream after some step, or the
 * residual a layer left (`out[layer]`, -1 the embedding output).
 *
 * @example
 * ```ts
 * import type { StreamRead } from "./schedule.ts";
 * const r: StreamRead = { residualOf: -1 };
 * ```
 */
export type StreamRead =
  | { stream: "x_in" | "x_mid" | "s_a" | "s_f" | "attn_reg" | "xfm_reg" }
  | { residualOf: number };

/**
 * One pass through a layer.
 *
 * @example
 * ```ts
 * import { buildSchedule } from "./schedule.ts";
 * const s = buildSchedule({ layers: 6, hasDense: true, hasExperts: true, pipeline: { style: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 } });
 * console.log(s.steps[3].injects); // [1]
 * ```
 */
export interface ScheduleStep {
  /** Index of the pass (its KV cache). */
  step: number;
  /** The layer (FixedPoint: the block) whose weights it reads. */
  layer: number;
  /** The attention's input. */
  attention: StreamRead;
  /** The dense FFN's input, or null without a dense FFN. */
  dense: StreamRead | null;
  /** The router's and the experts' input and the step their output is injected at (`steps.length`: the final flush). */
  experts: { input: StreamRead; injectAt: number } | null;
  /** Steps whose expert outputs are added to this step's output. */
  injects: number[];
  /** DecoupledStreams: the two streams are averaged after this step. */
  merge: boolean;
}

/**
 * The whole schedule: the steps, the expert outputs flushed after the last
 * one, and the sizes of the residual ring and the expert queue.
 *
 * @example
 * ```ts
 * import { buildSchedule } from "./schedule.ts";
 * const s = buildSchedule({ layers: 6, hasDense: true, hasExperts: true, pipeline: { style: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 } });
 * console.log(s.flush, s.ringSlots, s.queueSlots); // [ 4, 5 ] 2 3
 * ```
 */
export interface Schedule {
  /** combine_style (1, DelayedSum, for the plain sequential families). */
  style: number;
  /** One entry per pass, in execution order. */
  steps: ScheduleStep[];
  /** Steps whose expert outputs are still pending after the last step, added before the final norm. */
  flush: number[];
  /** Residual snapshots kept for the dense delay (0: none). */
  ringSlots: number;
  /** Expert outputs in flight (0: none). */
  queueSlots: number;
  /** The stream the final norm reads. */
  output: "x" | "s_a" | "xfm_reg";
}

/**
 * What the schedule is built from: header fields only.
 *
 * @example
 * ```ts
 * import type { ScheduleInput } from "./schedule.ts";
 * const i: ScheduleInput = { layers: 2, hasDense: true, hasExperts: false, pipeline: null };
 * ```
 */
export interface ScheduleInput {
  /** n_layers (FixedPoint: unique blocks). */
  layers: number;
  /** Layers have a dense FFN. */
  hasDense: boolean;
  /** Layers have experts. */
  hasExperts: boolean;
  /** The pipeline-native fields, or null for the sequential families. */
  pipeline: { style: number; denseDelay: number; expertDelay: number; styleParam: number } | null;
}

/**
 * Builds the schedule (docs/ARCHITECTURES.md). Without pipeline fields it
 * is the standard pre-norm layer: DelayedSum with both delays 0.
 *
 * @example
 * ```ts
 * import { buildSchedule } from "./schedule.ts";
 * const s = buildSchedule({ layers: 3, hasDense: true, hasExperts: false, pipeline: null });
 * console.log(s.steps.length, s.steps[0].dense); // 3 { stream: "x_mid" }
 * ```
 */
export function buildSchedule(input: ScheduleInput): Schedule {
  const p = input.pipeline ?? { style: 1, denseDelay: 0, expertDelay: 0, styleParam: 0 };
  if (!Number.isSafeInteger(input.layers) || input.layers < 1) {
    throw new RangeError(`schedule: ${input.layers} layers`);
  }
  const steps: ScheduleStep[] = [];
  const dense = (read: StreamRead) => input.hasDense ? read : null;
  const experts = (read: StreamRead, injectAt: number) =>
    input.hasExperts ? { input: read, injectAt } : null;
  switch (p.style) {
    case 0:
    case 1:
    case 2: {
      const dd = p.denseDelay;
      const de = p.expertDelay;
      for (let l = 0; l < input.layers; l++) {
        steps.push({
          step: l,
          layer: l,
          attention: { stream: "x_in" },
          dense: dense(dd === 0 ? { stream: "x_mid" } : { residualOf: Math.max(l - dd, -1) }),
          experts: experts(
            { stream: p.style === 2 ? "x_in" : "x_mid" },
            Math.min(l + de, input.layers),
          ),
          injects: input.hasExperts && l - de >= 0 ? [l - de] : [],
          merge: false,
        });
      }
      const flush: number[] = [];
      if (input.hasExperts) {
        for (let l = Math.max(0, input.layers - de); l < input.layers; l++) {
          if (l + de >= input.layers) flush.push(l);
        }
      }
      return {
        style: p.style,
        steps,
        flush,
        ringSlots: dd > 0 ? dd + 1 : 0,
        queueSlots: input.hasExperts && de > 0 ? de + 1 : 0,
        output: "x",
      };
    }
    case 3:
      for (let l = 0; l < input.layers; l++) {
        steps.push({
          step: l,
          layer: l,
          attention: { stream: "s_a" },
          dense: dense({ stream: "s_f" }),
          experts: experts({ stream: "s_f" }, l),
          injects: input.hasExperts ? [l] : [],
          merge: (l + 1) % p.styleParam === 0 || l === input.layers - 1,
        });
      }
      return { style: 3, steps, flush: [], ringSlots: 0, queueSlots: 0, output: "s_a" };
    case 4:
      for (let l = 0; l < input.layers; l++) {
        steps.push({
          step: l,
          layer: l,
          attention: { stream: "attn_reg" },
          dense: dense({ stream: "xfm_reg" }),
          experts: experts({ stream: "xfm_reg" }, l),
          injects: input.hasExperts ? [l] : [],
          merge: false,
        });
      }
      return { style: 4, steps, flush: [], ringSlots: 0, queueSlots: 0, output: "xfm_reg" };
    case 5:
      for (let b = 0; b < input.layers; b++) {
        for (let t = 0; t < p.styleParam; t++) {
          const s = steps.length;
          steps.push({
            step: s,
            layer: b,
            attention: { stream: "x_in" },
            dense: dense({ stream: "x_mid" }),
            experts: experts({ stream: "x_mid" }, s),
            injects: input.hasExperts ? [s] : [],
            merge: false,
          });
        }
      }
      return { style: 5, steps, flush: [], ringSlots: 0, queueSlots: 0, output: "x" };
    default:
      throw new RangeError(`schedule: unknown combine_style ${p.style}`);
  }
}
