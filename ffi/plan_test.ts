import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import { allocAligned } from "./memory.ts";
import { PlanBuilder } from "./plan.ts";
import {
  actRowBytes,
  packedBytes,
  packRun,
  panelQuants,
  RUN_KIND,
  type WeightRun,
} from "./weight_run.ts";
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
  // KV caches: Q8_0 (type 3) only on whole blocks of 32; its size follows from the type.
  const kv = (kvType: number, headDim: number, context: number) => {
    const p = new PlanBuilder();
    p.kvStore({ offset: 0, stride: 256 }, 1024, 2 * headDim, kvType, headDim);
    return status(() => p.build(ws, 1, context).close());
  };
  assert.equal(kv(3, 32, 16), STATUS.OK); // 16 x 64 values: 32 blocks of 34 bytes
  assert.equal(kv(3, 16, 16), STATUS.INVALID_ARG);
  assert.equal(kv(4, 32, 16), STATUS.INVALID_ARG);
  assert.equal(kv(3, 32, 32), STATUS.OK); // 32 x 64 values: 64 blocks, 2,176 bytes from 1,024
  assert.equal(kv(3, 32, 64), STATUS.RANGE); // 4,352 bytes: past the 4,096 of the workspace
  assert.equal(kv(2, 32, 32), STATUS.RANGE); // f16: 4,096 bytes from offset 1,024
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
  const runs = new Uint32Array(24);
  runs.set([77, ws.handle, 0, 0, 64, 0, 32, 1, 4]);
  const ops = new Uint32Array(16);
  ops.set([4, 0, 0, 0, 0, 1024, 0]);
  assert.equal(s.cf_plan_create(ws.handle, ops, 16n, runs, 24n, 1, 16, where), STATUS.INVALID_ARG);
  assert.deepEqual([...where], [1, 0]);
  // TILES runs (kind 6): a tile type per member, none past them, one input kind.
  for (
    const [types, why] of [
      [[12, 0], "unknown type"],
      [[0, 0], "no type"],
      [[7, 7], "a type past the members"],
      [[7, 10], "Q4_K beside F16"],
    ] as const
  ) {
    const w = new Uint32Array(24);
    const members = why === "a type past the members" ? 1 : 2;
    w.set([6, ws.handle, 0, 0, 16 + 144 * 2, 0, 256, members, 1, 1]);
    w.set(types.slice(0, why === "a type past the members" ? 2 : members), 16);
    assert.equal(
      s.cf_plan_create(ws.handle, ops, 16n, w, 24n, 1, 16, where),
      STATUS.INVALID_ARG,
      why,
    );
  }
  // Word counts that are not whole operations.
  assert.equal(s.cf_plan_create(ws.handle, ops, 15n, runs, 24n, 1, 16, where), STATUS.INVALID_ARG);
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

Deno.test("runRows checks every row's cache index: inside the context, none shared", () => {
  const { run } = f32Run();
  using ws = allocAligned(4096, 64);
  const b = new PlanBuilder();
  b.embed(run, { offset: 0, stride: 128 }, 1);
  const plan = b.build(ws, 3, 8);
  const u = (...x: number[]) => new Uint32Array(x);
  plan.runRows(u(1, 2, 3), u(0, 4, 4), u(3, 0, 3)); // indices 3, 4, 7
  assert.equal(status(() => plan.runRows(u(1, 2), u(4, 0), u(4, 0))), STATUS.RANGE); // 8
  assert.equal(status(() => plan.runRows(u(1), u(0xffffffff), u(1))), STATUS.RANGE); // no wrap
  assert.equal(status(() => plan.runRows(u(1, 2), u(0, 4), u(5, 1))), STATUS.INVALID_ARG); // 5 twice
  assert.equal(status(() => plan.runRows(u(4), u(0), u(0))), STATUS.RANGE); // vocab is 4
  assert.throws(() => plan.runRows(u(1, 2), u(0), u(0, 1)), RangeError);
  assert.throws(() => plan.runRows(u(1, 2, 3, 1), u(0, 0, 0, 0), u(0, 1, 2, 3)), RangeError);
  // A closed or unknown plan is refused natively.
  const sym = openKernels().symbols;
  assert.equal(sym.cf_plan_run_rows(0, u(1), 1n, u(0), u(0), 0, 1), STATUS.HANDLE);
  plan.close();
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

/** Reads n f32 at a byte offset of an allocation. */
function floats(ws: { read(o: number, n: number): Uint8Array }, offset: number, n: number) {
  return new Float32Array(ws.read(offset, n * 4).slice().buffer);
}

Deno.test("route, moe, gate_scale and lincomb compute what plan.zig documents", () => {
  // Experts: E = 3 F32 runs of hidden 32 and width 4 (gate/up 2 x 4 rows, down 32 x 4).
  const hidden = 32;
  const width = 4;
  const E = 3;
  const tile = (rows: number, cols: number, seed: number) =>
    Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(seed * 13 + i) / 4);
  const gate = [0, 1, 2].map((e) => tile(width, hidden, 3 * e));
  const up = [0, 1, 2].map((e) => tile(width, hidden, 3 * e + 1));
  const down = [0, 1, 2].map((e) => tile(hidden, width, 3 * e + 2));
  const guBytes = 2 * (16 + width * hidden * 4);
  const dBytes = 16 + hidden * width * 4;
  using bank = allocAligned(E * (guBytes + dBytes), 64);
  const gateUp: WeightRun[] = [];
  const downs: WeightRun[] = [];
  for (let e = 0; e < E; e++) {
    const at = e * (guBytes + dBytes);
    bank.write(at + 16, new Uint8Array(gate[e].buffer));
    bank.write(at + 16 + width * hidden * 4 + 16, new Uint8Array(up[e].buffer));
    bank.write(at + guBytes + 16, new Uint8Array(down[e].buffer));
    gateUp.push({
      kind: RUN_KIND.TILES_F32,
      region: bank,
      offset: at,
      length: guBytes,
      cols: hidden,
      rows: [width, width],
    });
    downs.push({
      kind: RUN_KIND.TILES_F32,
      region: bank,
      offset: at + guBytes,
      length: dBytes,
      cols: width,
      rows: [hidden],
    });
  }
  using ws = allocAligned(1 << 16, 64);
  const x = Float32Array.from({ length: hidden }, (_, i) => Math.cos(i) / 2);
  // Router rows: expert 1 and 2 tie exactly; expert 0 scores highest.
  const router = new Float32Array(E * hidden);
  for (let i = 0; i < hidden; i++) {
    router[i] = 2 * x[i];
    router[hidden + i] = x[i];
    router[2 * hidden + i] = x[i];
  }
  const gateVec = Float32Array.from({ length: hidden }, (_, i) => (i % 3) - 1);
  ws.write(0, new Uint8Array(x.buffer));
  ws.write(4096, new Uint8Array(router.buffer));
  ws.write(8192, new Uint8Array(gateVec.buffer));
  const X = { offset: 0, stride: 0 };
  const sel = { offset: 12288, stride: 0 };
  const out = { offset: 16384, stride: 0 };
  const y = { offset: 20480, stride: 0 };
  const b = new PlanBuilder();
  b.route(X, 4096, hidden, E, 2, true, sel);
  b.lincomb(out, out, out, hidden, 0, 0);
  b.moe({
    gateUp,
    down: downs,
    topK: 2,
    sel,
    x: X,
    act: "silu",
    scratch: { offset: 24576, stride: 0 },
    out,
    counter: 32768,
  });
  b.lincomb(y, X, X, hidden, 0.5, 0.25); // y = 0.75 x
  b.gateScale(y, hidden, 8192, X, hidden);
  using plan = b.build(ws, 1, 4);
  plan.run(new Uint32Array([0]), 0);
  plan.run(new Uint32Array([0]), 0);

  // route: expert 0, then the tie goes to the lower index, 1; weights renormalized.
  const s = new DataView(ws.read(12288, 16).slice().buffer);
  assert.deepEqual([s.getUint32(0, true), s.getUint32(4, true)], [0, 1]);
  const dot = x.reduce((a, v) => a + v * v, 0);
  const p0 = Math.exp(2 * dot) / (Math.exp(2 * dot) + 2 * Math.exp(dot));
  const p1 = Math.exp(dot) / (Math.exp(2 * dot) + 2 * Math.exp(dot));
  const w = [p0 / (p0 + p1), p1 / (p0 + p1)];
  assert.ok(Math.abs(s.getFloat32(8, true) - w[0]) < 1e-6);
  assert.ok(Math.abs(s.getFloat32(12, true) - w[1]) < 1e-6);
  // moe: the weighted sum of experts 0 and 1 only.
  const silu = (v: number) => v / (1 + Math.exp(-v));
  const expert = (e: number) => {
    const h = Array.from({ length: width }, (_, r) => {
      let g = 0;
      let u = 0;
      for (let i = 0; i < hidden; i++) {
        g += gate[e][r * hidden + i] * x[i];
        u += up[e][r * hidden + i] * x[i];
      }
      return silu(g) * u;
    });
    return Array.from(
      { length: hidden },
      (_, o) => h.reduce((a, v, r) => a + down[e][o * width + r] * v, 0),
    );
  };
  const e0 = expert(0);
  const e1 = expert(1);
  const got = floats(ws, 16384, hidden);
  for (let i = 0; i < hidden; i++) {
    assert.ok(Math.abs(got[i] - (w[0] * e0[i] + w[1] * e1[i])) < 1e-5, `moe[${i}]`);
  }
  // Two runs, two experts each: the counter holds exactly their spans, twice.
  const counter = new DataView(ws.read(32768, 8).slice().buffer).getBigUint64(0, true);
  assert.equal(Number(counter), 2 * 2 * (guBytes + dBytes));
  // gate_scale and lincomb.
  const gd = gateVec.reduce((a, v, i) => a + v * x[i], 0);
  const yv = floats(ws, 20480, hidden);
  for (let i = 0; i < hidden; i++) {
    assert.ok(Math.abs(yv[i] - 0.75 * x[i] / (1 + Math.exp(-gd))) < 1e-6, `gate_scale[${i}]`);
  }
});

Deno.test("route and moe refuse what does not fit", () => {
  const { run } = f32Run();
  using ws = allocAligned(8192, 64);
  const X = { offset: 0, stride: 0 };
  const sel = { offset: 1024, stride: 0 };
  const bad = (f: (b: PlanBuilder) => void) => {
    const b = new PlanBuilder();
    f(b);
    return status(() => b.build(ws, 1, 4));
  };
  // top-k above the experts, no experts, a router past the workspace.
  assert.equal(bad((b) => b.route(X, 2048, 32, 2, 3, true, sel)), STATUS.INVALID_ARG);
  assert.equal(bad((b) => b.route(X, 2048, 32, 0, 1, true, sel)), STATUS.INVALID_ARG);
  assert.equal(bad((b) => b.route(X, 8000, 32, 4, 2, true, sel)), STATUS.RANGE);
  // An expert whose gate/up is one matrix, not two.
  const moe = (gateUp: WeightRun, counter: number) => (b: PlanBuilder) =>
    b.moe({
      gateUp: [gateUp],
      down: [gateUp],
      topK: 1,
      sel,
      x: X,
      act: "silu",
      scratch: { offset: 2048, stride: 0 },
      out: { offset: 4096, stride: 0 },
      counter,
    });
  assert.equal(bad(moe(run, 6144)), STATUS.INVALID_ARG);
  assert.throws(() => new PlanBuilder().lincomb(X, X, X, 32, Infinity, 1), RangeError);
  run.region.close();
});

Deno.test("panelQuants: members may differ in type, not in the activations they read", () => {
  const run = (types: number[], cols: number) => ({
    kind: RUN_KIND.TILES,
    cols,
    rows: types.map(() => 256),
    types,
  });
  // A Q4_K_M file's fused Q/K/V: Q4_K q and k, Q6_K v (Qwen2.5-Coder-1.5B); Q5_0 and Q8_0 (0.5B).
  assert.deepEqual(panelQuants(run([7, 7, 9], 1536)), ["q4_k", "q4_k", "q6_k"]);
  assert.deepEqual(panelQuants(run([5, 5, 2], 896)), ["q5_0", "q5_0", "q8_0"]);
  assert.deepEqual(panelQuants(run([1, 4], 64)), ["q4_0", "q4_1"]);
  // K members read Q8_K activations, the others Q8_0 rows: one run cannot mix them.
  assert.equal(panelQuants(run([7, 2], 1536)), undefined);
  // K records are whole super-blocks; other records whole groups of 32.
  assert.equal(panelQuants(run([7, 9], 896)), undefined);
  assert.equal(panelQuants(run([5, 2], 48)), undefined);
  // Types without panels (F16, Q5_K) keep the run in tiles.
  assert.equal(panelQuants(run([5, 10], 64)), undefined);
  assert.equal(panelQuants(run([8, 7], 256)), undefined);
  assert.deepEqual(panelQuants({ kind: RUN_KIND.TILES_Q8_0, cols: 64, rows: [16, 16] }), [
    "q8_0",
    "q8_0",
  ]);
  assert.equal(panelQuants({ kind: RUN_KIND.TILES_F32, cols: 64, rows: [16] }), undefined);
  // Bytes: each member's panels in its own type.
  assert.equal(packedBytes(["q4_k", "q6_k"], 256, [16, 20]), 2368 + 2 * 3360);
  assert.equal(
    packedBytes(["q4_k", "q6_k"], 512, [16, 16]),
    packedBytes("q4_k", 512, [16]) +
      packedBytes("q6_k", 512, [16]),
  );
  assert.throws(() => packedBytes(["q4_k"], 256, [16, 16]), RangeError);
});

Deno.test("plans check a mixed panel run's member types and length", () => {
  using ws = allocAligned(65536, 64);
  using panels = allocAligned(2368 + 3360, 64);
  const run = (types: number[], length: number): WeightRun => ({
    kind: RUN_KIND.PACKED_MIXED,
    region: panels,
    offset: 0,
    length,
    cols: 256,
    rows: [16, 16],
    types,
  });
  const build = (r: WeightRun) => {
    const b = new PlanBuilder();
    b.matmul(r, { offset: 0, stride: 0 }, { offset: 4096, stride: 0 });
    return status(() => b.build(ws, 1, 16).close());
  };
  assert.equal(build(run([7, 9], 2368 + 3360)), STATUS.OK);
  assert.equal(build(run([7, 9], 2368 + 3360 - 64)), STATUS.LENGTH);
  // Q4_K reads Q8_K activations, Q8_0 panels Q8_0 rows: not one run.
  assert.equal(build(run([7, 2], 2368 + 544 * 8)), STATUS.INVALID_ARG);
  // F16 has no panels.
  assert.equal(build(run([7, 10], 2368 + 3360)), STATUS.INVALID_ARG);
});
