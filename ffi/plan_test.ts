import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { openKernels } from "./kernels.ts";
import { allocAligned } from "./memory.ts";
import {
  actRowBytes,
  packedBytes,
  packRun,
  PlanBuilder,
  RUN_KIND,
  type WeightRun,
} from "./plan.ts";
import { STATUS } from "./symbols.ts";

openKernels({ threads: 2 });

/** A 4 x 32 F32 tile run (one tile: 16-byte header, rows of f32) in an allocation. */
function f32Run(): { run: WeightRun; values: Float32Array } {
  const values = Float32Array.from({ length: 4 * 32 }, (_, i) => (i % 7) - 3 + i / 128);
  const region = allocAligned(16 + values.byteLength, 64);
  region.write(16, new Uint8Array(values.buffer));
  return {
    run: {
      kind: RUN_KIND.TILES_F32,
      region,
      offset: 0,
      length: 16 + values.byteLength,
      cols: 32,
      rows: [4],
    },
    values,
  };
}

function status(fn: () => unknown): number {
  try {
    fn();
  } catch (e) {
    if (e instanceof KernelError) return e.status;
    throw e;
  }
  return STATUS.OK;
}

Deno.test("a plan embeds, normalizes and multiplies as the reference does", () => {
  const { run, values } = f32Run();
  using ws = allocAligned(8192, 64);
  const ones = new Float32Array(32).fill(1);
  ws.write(4096, new Uint8Array(ones.buffer));
  const b = new PlanBuilder();
  const x = { offset: 0, stride: 128 };
  const y = { offset: 1024, stride: 128 };
  b.embed(run, x, 2);
  b.matmul(run, x, y);
  b.rmsNorm(y, 4096, y, 4, 1e-6);
  const plan = b.build(ws, 4, 16);
  plan.run(new Uint32Array([3, 1]), 0);
  plan.close();
  for (const [row, token] of [[0, 3], [1, 1]]) {
    const got = new Float32Array(ws.read(1024 + row * 128, 16).slice().buffer);
    const e = values.subarray(token * 32, token * 32 + 32).map((v) => 2 * v);
    const want = [0, 1, 2, 3].map((r) => {
      let s = 0;
      for (let j = 0; j < 32; j++) s += values[r * 32 + j] * e[j];
      return s;
    });
    const rms = Math.sqrt(want.reduce((a, v) => a + v * v, 0) / 4 + 1e-6);
    want.forEach((v, i) => assert.ok(Math.abs(got[i] - v / rms) < 1e-4, `${got[i]} vs ${v / rms}`));
  }
  run.region.close();
});

Deno.test("plans refuse what does not fit, naming the operation", () => {
  const { run } = f32Run();
  using ws = allocAligned(4096, 64);
  const b = new PlanBuilder();
  b.embed(run, { offset: 0, stride: 128 }, 1);
  b.rmsNorm({ offset: 0, stride: 128 }, 4000, { offset: 512, stride: 128 }, 32, 1e-6);
  assert.throws(
    () => b.build(ws, 4, 16),
    (e: unknown) =>
      e instanceof KernelError && e.status === STATUS.RANGE &&
      /operation 1 \(rms_norm\)/.test(e.message),
  );
  // The batch multiplies every strided buffer: fine for 4 rows, not for 64.
  const c = new PlanBuilder();
  c.embed(run, { offset: 0, stride: 128 }, 1);
  assert.equal(status(() => c.build(ws, 64, 16).close()), STATUS.RANGE);
  assert.equal(status(() => c.build(ws, 4, 16).close()), STATUS.OK);
  // A run whose length is not what its layout needs.
  const d = new PlanBuilder();
  d.embed({ ...run, length: run.length - 4 }, { offset: 0, stride: 128 }, 1);
  assert.equal(status(() => d.build(ws, 1, 16)), STATUS.LENGTH);
  // Misaligned buffers and non-finite constants.
  const m = new PlanBuilder();
  m.add({ offset: 2, stride: 0 }, { offset: 64, stride: 0 }, 4);
  assert.equal(status(() => m.build(ws, 1, 16)), STATUS.ALIGNMENT);
  assert.throws(() =>
    new PlanBuilder().rmsNorm({ offset: 0, stride: 0 }, 0, { offset: 0, stride: 0 }, 4, NaN)
  );
  run.region.close();
});

Deno.test("raw operation words are checked: unknown opcodes, flags and kinds", () => {
  using ws = allocAligned(4096, 64);
  const s = openKernels().symbols;
  const where = new Uint32Array(2);
  for (const [op, flags] of [[99, 0], [0, 0], [5, 7]]) {
    const ops = new Uint32Array(16);
    ops.set([op, flags, 0, 0, 64, 0, 4]);
    const rc = s.cf_plan_create(ws.handle, ops, 16n, new Uint32Array(0), 0n, 1, 16, where);
    assert.equal(rc, STATUS.INVALID_ARG, `op ${op} flags ${flags}`);
    assert.deepEqual([...where], [2, 0]);
  }
  const runs = new Uint32Array(16);
  runs.set([77, ws.handle, 0, 0, 64, 0, 32, 1, 4]);
  const ops = new Uint32Array(16);
  ops.set([4, 0, 0, 0, 0, 1024, 0]);
  assert.equal(s.cf_plan_create(ws.handle, ops, 16n, runs, 16n, 1, 16, where), STATUS.INVALID_ARG);
  assert.deepEqual([...where], [1, 0]);
  // Word counts that are not whole operations.
  assert.equal(s.cf_plan_create(ws.handle, ops, 15n, runs, 16n, 1, 16, where), STATUS.INVALID_ARG);
});

Deno.test("a plan pins what it reads; runs check tokens, positions and batch", () => {
  const { run } = f32Run();
  const ws = allocAligned(4096, 64);
  const b = new PlanBuilder();
  b.embed(run, { offset: 0, stride: 128 }, 1);
  const plan = b.build(ws, 2, 8);
  assert.equal(status(() => ws.close()), STATUS.BUSY);
  assert.equal(status(() => plan.run(new Uint32Array([4]), 0)), STATUS.RANGE); // vocab is 4
  assert.equal(status(() => plan.run(new Uint32Array([1]), 8)), STATUS.RANGE); // context is 8
  assert.equal(status(() => plan.run(new Uint32Array([1, 2]), 7)), STATUS.RANGE);
  assert.throws(() => plan.run(new Uint32Array([1, 2, 3]), 0), RangeError); // batch is 2
  plan.run(new Uint32Array([1, 2]), 6);
  plan.close();
  assert.equal(status(() => plan.run(new Uint32Array([1]), 0)), STATUS.HANDLE);
  run.region.close();
});

Deno.test("packing checks its input and destination", () => {
  const { run } = f32Run();
  using dst = allocAligned(65536, 64);
  assert.throws(() => packRun(run, dst, 0), RangeError); // F32 tiles do not pack
  const q8: WeightRun = { ...run, kind: RUN_KIND.TILES_Q8_0, length: 16 + 4 * 34 };
  assert.equal(packedBytes("q8_0", 32, [4]), 544);
  assert.throws(() => packRun(q8, dst, 65536 - 100), RangeError);
  const packed = packRun(q8, dst, 0);
  assert.equal(packed.kind, RUN_KIND.PACKED_Q8_0);
  assert.equal(packed.length, 544);
  assert.equal(status(() => packRun({ ...q8, length: 17 + 4 * 34 }, dst, 0)), STATUS.LENGTH);
  assert.equal(actRowBytes(32), 64);
  run.region.close();
});

Deno.test("a run that quantizes a NaN stops with nonfinite", () => {
  const { run } = f32Run();
  const nan = new Float32Array([NaN]);
  run.region.write(16 + 128 * 2 + 4 * 5, new Uint8Array(nan.buffer)); // token 2, column 5
  using ws = allocAligned(8192, 64);
  const b = new PlanBuilder();
  const x = { offset: 0, stride: 128 };
  b.embed(run, x, 1);
  b.quantize(x, 32, { offset: 1024, stride: actRowBytes(32) });
  const plan = b.build(ws, 4, 16);
  assert.equal(status(() => plan.run(new Uint32Array([1, 3]), 0)), STATUS.OK);
  assert.equal(status(() => plan.run(new Uint32Array([1, 2]), 0)), STATUS.NONFINITE);
  plan.close();
  run.region.close();
});
