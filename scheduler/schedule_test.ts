import assert from "node:assert/strict";
import { buildSchedule, type ScheduleInput } from "./schedule.ts";

const moe = (style: number, denseDelay: number, expertDelay: number, styleParam = 0, layers = 6) =>
  ({
    layers,
    hasDense: true,
    hasExperts: true,
    pipeline: { style, denseDelay, expertDelay, styleParam },
  }) satisfies ScheduleInput;

Deno.test("schedule: the sequential families are DelayedSum without delays", () => {
  const s = buildSchedule({ layers: 3, hasDense: true, hasExperts: true, pipeline: null });
  assert.equal(s.style, 1);
  assert.deepEqual(s.flush, []);
  assert.equal(s.ringSlots, 0);
  assert.equal(s.queueSlots, 0);
  for (const [l, step] of s.steps.entries()) {
    assert.deepEqual(step.attention, { stream: "x_in" });
    assert.deepEqual(step.dense, { stream: "x_mid" });
    assert.deepEqual(step.experts, { input: { stream: "x_mid" }, injectAt: l });
    assert.deepEqual(step.injects, [l]);
  }
});

Deno.test("schedule: arch2_4_combined reads out[l-1], injects l-2, flushes the last two", () => {
  const s = buildSchedule(moe(1, 1, 2));
  assert.equal(s.ringSlots, 2); // dense_delay + 1 residuals, expert_delay + 1 expert outputs
  assert.equal(s.queueSlots, 3);
  assert.deepEqual(s.steps.map((x) => x.dense), [
    { residualOf: -1 }, // the embedding output, not a zero vector (docs/ARCHITECTURES.md)
    { residualOf: 0 },
    { residualOf: 1 },
    { residualOf: 2 },
    { residualOf: 3 },
    { residualOf: 4 },
  ]);
  assert.deepEqual(s.steps.map((x) => x.experts?.injectAt), [2, 3, 4, 5, 6, 6]);
  assert.deepEqual(s.steps.map((x) => x.injects), [[], [], [0], [1], [2], [3]]);
  assert.deepEqual(s.flush, [4, 5]);
  for (const step of s.steps) assert.deepEqual(step.experts?.input, { stream: "x_mid" });
});

Deno.test("schedule: arch2_4_sync keeps the dense delay and injects at once", () => {
  const s = buildSchedule(moe(1, 1, 0));
  assert.deepEqual(s.steps.map((x) => x.injects), [[0], [1], [2], [3], [4], [5]]);
  assert.deepEqual(s.flush, []);
  assert.equal(s.queueSlots, 0);
  assert.deepEqual(s.steps[3].dense, { residualOf: 2 });
});

Deno.test("schedule: arch4 routes from x_in and injects two layers later", () => {
  const s = buildSchedule(moe(2, 0, 2));
  assert.deepEqual(s.steps[0].experts, { input: { stream: "x_in" }, injectAt: 2 });
  assert.deepEqual(s.steps[0].dense, { stream: "x_mid" });
  assert.deepEqual(s.flush, [4, 5]);
  assert.equal(s.ringSlots, 0);
});

Deno.test("schedule: ParallelSqrt2, decoupled streams, registers and fixed point", () => {
  const p = buildSchedule(moe(0, 0, 0));
  assert.deepEqual(p.steps[2].injects, [2]);
  const d = buildSchedule(moe(3, 0, 0, 3));
  assert.equal(d.output, "s_a");
  assert.deepEqual(d.steps.map((x) => x.merge), [false, false, true, false, false, true]);
  assert.deepEqual(d.steps[0].attention, { stream: "s_a" });
  assert.deepEqual(d.steps[0].dense, { stream: "s_f" });
  // The last layer merges too when the layer count is not a multiple of the interval.
  assert.deepEqual(buildSchedule(moe(3, 0, 0, 4)).steps.map((x) => x.merge), [
    false,
    false,
    false,
    true,
    false,
    true,
  ]);
  const r = buildSchedule(moe(4, 0, 0));
  assert.equal(r.output, "xfm_reg");
  assert.deepEqual(r.steps[1].dense, { stream: "xfm_reg" });
  assert.deepEqual(r.steps[1].attention, { stream: "attn_reg" });
  const f = buildSchedule(moe(5, 0, 0, 3, 2));
  assert.deepEqual(f.steps.map((x) => [x.step, x.layer]), [[0, 0], [1, 0], [2, 0], [3, 1], [4, 1], [
    5,
    1,
  ]]);
});

Deno.test("schedule: without experts nothing is queued, injected or flushed", () => {
  const s = buildSchedule({
    layers: 4,
    hasDense: true,
    hasExperts: false,
    pipeline: { style: 1, denseDelay: 1, expertDelay: 2, styleParam: 0 },
  });
  assert.deepEqual(s.steps.map((x) => x.injects), [[], [], [], []]);
  assert.deepEqual(s.flush, []);
  assert.equal(s.queueSlots, 0);
  assert.ok(s.steps.every((x) => x.experts === null));
});

Deno.test("schedule: refuses an unknown style or a layer count below 1", () => {
  assert.throws(() => buildSchedule(moe(6, 0, 0)), /combine_style 6/);
  assert.throws(() => buildSchedule({ ...moe(1, 0, 0), layers: 0 }), /0 layers/);
});
