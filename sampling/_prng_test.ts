import assert from "node:assert/strict";
import { splitmix32, Xoshiro128ss } from "./_prng.ts";

// Expected values from an independent Python transcription of the reference C code
// (https://prng.di.unimi.it/xoshiro128starstar.c) and of splitmix32 as documented in _prng.ts.

Deno.test("xoshiro128** from state 1, 2, 3, 4 gives the reference sequence", () => {
  const g = new Xoshiro128ss(0);
  g.setState(1, 2, 3, 4);
  const got = Array.from({ length: 10 }, () => g.nextU32());
  assert.deepEqual(got, [
    11520,
    0,
    5927040,
    70819200,
    2031721883,
    1637235492,
    1287239034,
    3734860849,
    3729100597,
    4258142804,
  ]);
});

Deno.test("seeds expand through splitmix32 into pinned sequences", () => {
  assert.deepEqual(splitmix32(0), [0x9e3779b9, 2462723854]);
  const cases: [number, number[]][] = [
    [0, [3809008728, 1133695204, 53579671, 2891528803, 139681546, 2203266335]],
    [42, [2837322924, 544945897, 479756282, 3500138142, 339756180, 113173290]],
    [0xffffffff, [835879718, 1921286648, 2356205009, 1885780724, 980451116, 1053911718]],
  ];
  for (const [seed, expected] of cases) {
    const g = new Xoshiro128ss(seed);
    assert.deepEqual(Array.from({ length: 6 }, () => g.nextU32()), expected, `seed ${seed}`);
    g.seed(seed);
    assert.equal(g.nextU32(), expected[0]);
  }
});

Deno.test("nextDouble is in [0, 1) and uses 53 bits", () => {
  const g = new Xoshiro128ss(7);
  let sum = 0;
  for (let i = 0; i < 100_000; i++) {
    const u = g.nextDouble();
    assert.ok(u >= 0 && u < 1);
    sum += u;
  }
  assert.ok(Math.abs(sum / 100_000 - 0.5) < 0.005);
  const h = new Xoshiro128ss(0);
  h.setState(1, 2, 3, 4);
  // (11520 >>> 5) * 2^26 + (0 >>> 6), over 2^53.
  assert.equal(h.nextDouble(), (360 * 67108864) / 9007199254740992);
  g.setState(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff);
  assert.ok(g.nextDouble() < 1);
});
