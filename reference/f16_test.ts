import assert from "node:assert/strict";
import { f16BitsToF32, f32ToF16Bits } from "./f16.ts";

// Float16Array (V8's own conversion) is the independent oracle.
const h16 = new Float16Array(1);
const u16 = new Uint16Array(h16.buffer);
function oracleEncode(x: number): number {
  h16[0] = x;
  return u16[0];
}
function oracleDecode(h: number): number {
  u16[0] = h;
  return h16[0];
}
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function f32FromBits(bits: number): number {
  u32[0] = bits >>> 0;
  return f32[0];
}

/** Deterministic xorshift32 stream. */
function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

function hex(h: number): string {
  return "0x" + h.toString(16).padStart(4, "0");
}

Deno.test("f16BitsToF32 matches Float16Array for all 65536 patterns", () => {
  for (let h = 0; h < 65536; h++) {
    const ours = f16BitsToF32(h);
    const ref = oracleDecode(h);
    if (Number.isNaN(ref)) {
      assert.ok(Number.isNaN(ours), `${hex(h)} should decode to NaN`);
    } else if (!Object.is(ours, ref)) {
      assert.fail(`${hex(h)}: got ${ours}, Float16Array says ${ref}`);
    }
  }
});

Deno.test("f32ToF16Bits round-trips every non-NaN pattern", () => {
  for (let h = 0; h < 65536; h++) {
    const v = f16BitsToF32(h);
    if (Number.isNaN(v)) continue;
    const back = f32ToF16Bits(v);
    if (back !== h) assert.fail(`${hex(h)} -> ${v} -> ${hex(back)}`);
  }
});

Deno.test("f32ToF16Bits matches Float16Array on random f32 bit patterns", () => {
  const next = xorshift32(0x9e3779b9);
  for (let k = 0; k < 400_000; k++) {
    const x = f32FromBits(next());
    const ours = f32ToF16Bits(x);
    if (Number.isNaN(x)) {
      assert.equal(ours & 0x7fff, 0x7e00);
      continue;
    }
    const ref = oracleEncode(x);
    if (ours !== ref) assert.fail(`x=${x}: got ${hex(ours)}, Float16Array says ${hex(ref)}`);
  }
});

Deno.test("f32ToF16Bits matches Float16Array on f32 values in and near the f16 range", () => {
  // Exponents -30..17 cover zero-flush, subnormals, normals and overflow densely.
  const next = xorshift32(12345);
  for (let k = 0; k < 400_000; k++) {
    const r = next();
    const exp = 127 - 30 + (r % 48);
    const bits = ((r & 0x80000000) | (exp << 23) | (next() & 0x7fffff)) >>> 0;
    const x = f32FromBits(bits);
    const ours = f32ToF16Bits(x);
    const ref = oracleEncode(x);
    if (ours !== ref) assert.fail(`x=${x}: got ${hex(ours)}, Float16Array says ${hex(ref)}`);
  }
});

Deno.test("f32ToF16Bits rounds exact ties to even, and the f32 neighbours of ties away", () => {
  let ties = 0;
  for (let h = 0; h < 0x7c00; h++) {
    for (const sign of [0, 0x8000]) {
      const a = f16BitsToF32(h | sign);
      // Next magnitude up; from 0x7bff (65504) the next step is 65536, i.e. Infinity.
      const b = h === 0x7bff ? (sign ? -65536 : 65536) : f16BitsToF32((h + 1) | sign);
      const mid = (a + b) / 2; // exact in f32: 12 significant bits at most
      assert.equal(Math.fround(mid), mid);
      const even = (h & 1) === 0 ? h : h + 1;
      assert.equal(f32ToF16Bits(mid), even | sign, `tie between ${hex(h | sign)} and next`);
      assert.equal(oracleEncode(mid), even | sign);
      // One f32 ulp either side of the tie decides it.
      f32[0] = mid;
      const bits = u32[0];
      const towardZero = f32FromBits(bits - 1);
      const awayFromZero = f32FromBits(bits + 1);
      assert.equal(f32ToF16Bits(towardZero), h | sign);
      assert.equal(f32ToF16Bits(awayFromZero), (h + 1) | sign);
      ties++;
    }
  }
  assert.equal(ties, 2 * 0x7c00);
});

Deno.test("f32ToF16Bits edge values", () => {
  const cases: Array<[number, number]> = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-1.5, 0xbe00],
    [65504, 0x7bff],
    [65519.99609375, 0x7bff], // just below the rounding boundary 65520
    [65520, 0x7c00], // tie between 65504 and 65536 (even = Infinity)
    [1e9, 0x7c00],
    [-1e9, 0xfc00],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -14 - 2 ** -24, 0x03ff], // largest subnormal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie between 0 and 2^-24: even is 0
    [Math.fround(2 ** -25 * (1 + 2 ** -23)), 0x0001],
    [-(2 ** -25), 0x8000],
    [1.5 * 2 ** -24, 0x0002], // tie between 1 and 2 ulps: even is 2
    [2.5 * 2 ** -24, 0x0002], // tie between 2 and 3 ulps: even is 2
    [1e-30, 0x0000],
    [2 ** -149, 0x0000], // f32 subnormal
    [1 + 2 ** -11, 0x3c00], // tie: even is 1.0
    [1 + 3 * 2 ** -11, 0x3c02], // tie: even is 1 + 2^-9
  ];
  for (const [x, h] of cases) {
    assert.equal(f32ToF16Bits(x), h, `f32ToF16Bits(${x})`);
  }
});

Deno.test("f32ToF16Bits rounds a non-f32 number to f32 first", () => {
  // 1 + 2^-11 + 2^-40 is above the f16 tie, but rounds to the tie 1 + 2^-11 in f32 first,
  // which then rounds to even (1.0) as a C float argument would.
  const x = 1 + 2 ** -11 + 2 ** -40;
  assert.equal(Math.fround(x), 1 + 2 ** -11);
  assert.equal(f32ToF16Bits(x), 0x3c00);
});

Deno.test("f32ToF16Bits maps NaN to a quiet NaN keeping the sign", () => {
  assert.equal(f32ToF16Bits(NaN), 0x7e00);
  const negNaN = new Float64Array(new Uint32Array([0, 0xfff80000]).buffer)[0];
  assert.ok(Number.isNaN(negNaN));
  assert.equal(f32ToF16Bits(negNaN), 0xfe00);
  assert.equal(f32ToF16Bits(f32FromBits(0x7f800001)), 0x7e00); // signalling NaN payload
  assert.ok(Number.isNaN(f16BitsToF32(0x7e00)));
  assert.ok(Number.isNaN(f16BitsToF32(0xfc01)));
});

Deno.test("f16 argument errors", () => {
  for (const bad of [-1, 65536, 1.5, NaN]) {
    assert.throws(() => f16BitsToF32(bad), {
      name: "RangeError",
      message: `f16BitsToF32: h ${bad} is not an integer in [0, 65535]`,
    });
  }
  assert.throws(() => f32ToF16Bits("1" as unknown as number), {
    name: "TypeError",
    message: "f32ToF16Bits: x must be a number, got string",
  });
});
