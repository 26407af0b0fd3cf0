/**
 * The delay-aware scheduler: which residual each layer's streams read and
 * where expert outputs are injected, from the header fields alone.
 *
 * @example
 * ```ts
 * import { buildSchedule } from "./mod.ts";
 * const s = buildSchedule({ layers: 6, hasDense: true, hasExperts: true, pipeline: { style: 2, denseDelay: 0, expertDelay: 2, styleParam: 0 } });
 * console.log(s.steps[0].experts); // { input: { stream: "x_in" }, injectAt: 2 }
 * ```
 *
 * @module
 */

export { buildSchedule } from "./schedule.ts";
export type { Schedule, ScheduleInput, ScheduleStep, StreamRead } from "./schedule.ts";
