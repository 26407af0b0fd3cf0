import assert from "node:assert/strict";
import { Rng } from "../../tests/util/rng.ts";
import {
  decodeToF32,
  encodeFromF32,
  f16BitsToF32Bits,
  f32BitsToBf16Bits,
  f32BitsToF16Bits,
} from "./_convert.ts";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0];
}
function valueOf(bits: number): number {
  u32[0] = bits;
  return f32[0];
}

/** The exact value of an f16 pattern, from the definition (no bit tricks). */
function f16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

Deno.test("F16 decoding is exact for all 65536 patterns, NaN payloads kept", () => {
  const bytes = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    bytes[2 * h] = h & 0xff;
    bytes[2 * h + 1] = h >>> 8;
  }
  const out = new Float32Array(65536);
  decodeToF32("F16", bytes, out);
  const bits = new Uint32Array(out.buffer);
  for (let h = 0; h < 65536; h++) {
    assert.equal(bits[h], f16BitsToF32Bits(h));
    const want = f16Value(h);
    if (Number.isNaN(want)) {
      assert.equal(bits[h], ((h & 0x8000) << 16 | 0x7f800000 | (h & 0x3ff) << 13) >>> 0, `h=${h}`);
    } else {
      assert.ok(Object.is(out[h], want), `h=0x${h.toString(16)}: ${out[h]} vs ${want}`);
    }
  }
  // Named landmarks.
  assert.equal(out[0x0001], 2 ** -24, "smallest subnormal");
  assert.equal(out[0x03ff], 1023 * 2 ** -24, "largest subnormal");
  assert.equal(out[0x0200], 2 ** -15, "subnormal with one bit");
  assert.equal(out[0x0400], 2 ** -14, "smallest normal");
  assert.equal(out[0x7bff], 65504, "largest finite");
  assert.equal(out[0x3c00], 1);
  assert.equal(out[0xc000], -2);
  assert.equal(out[0x7c00], Infinity);
  assert.equal(out[0xfc00], -Infinity);
  assert.ok(Object.is(out[0x8000], -0));
  assert.equal(bits[0x7e00], 0x7fc00000, "quiet NaN");
  assert.equal(bits[0xfe01], 0xffc02000, "negative NaN with payload");
  assert.equal(bits[0x7c01], 0x7f802000, "signalling NaN stays signalling");
});

Deno.test("F16 decoding agrees with the engine's Float16Array on every non-NaN pattern", () => {
  const h16 = new Uint16Array(65536);
  for (let h = 0; h < 65536; h++) h16[h] = h;
  const engine = new Float16Array(h16.buffer);
  const out = new Float32Array(65536);
  decodeToF32("F16", new Uint8Array(h16.buffer), out);
  for (let h = 0; h < 65536; h++) {
    if (Number.isNaN(engine[h])) assert.ok(Number.isNaN(out[h]));
    else assert.ok(Object.is(out[h], engine[h]), `h=0x${h.toString(16)}`);
  }
});

Deno.test("BF16 decoding is the top half of the f32 pattern, for all 65536 patterns", () => {
  const bytes = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    bytes[2 * h] = h & 0xff;
    bytes[2 * h + 1] = h >>> 8;
  }
  const out = new Float32Array(65536);
  decodeToF32("BF16", bytes, out);
  const bits = new Uint32Array(out.buffer);
  for (let h = 0; h < 65536; h++) assert.equal(bits[h], (h << 16) >>> 0);
  assert.equal(out[0x3f80], 1);
  assert.equal(out[0xc000], -2);
  assert.equal(out[0x0001], 2 ** -133, "smallest subnormal");
  assert.equal(out[0x007f], 127 * 2 ** -133, "largest subnormal");
  assert.equal(out[0x0080], 2 ** -126, "smallest normal");
  assert.equal(out[0x7f80], Infinity);
  assert.equal(out[0xff80], -Infinity);
  assert.ok(Object.is(out[0x8000], -0));
  assert.equal(bits[0x7fc1], 0x7fc10000, "NaN payload kept");
  assert.equal(bits[0xff81], 0xff810000, "signalling negative NaN kept");
});

Deno.test("F32 decoding is a bit copy, little-endian, including NaN payloads", () => {
  const patterns = [0, 0x80000000, 0x3f800000, 0x7f800001, 0xffbfffff, 0x00000001, 0x12345678];
  const bytes = new Uint8Array(patterns.length * 4);
  const view = new DataView(bytes.buffer);
  patterns.forEach((p, i) => view.setUint32(4 * i, p, true));
  const out = new Float32Array(patterns.length);
  decodeToF32("F32", bytes, out);
  assert.deepEqual([...new Uint32Array(out.buffer)], patterns);
});

Deno.test("F16 encoding rounds to nearest even like Float16Array and round-trips", () => {
  for (let h = 0; h < 65536; h++) {
    const f = f16BitsToF32Bits(h);
    const back = f32BitsToF16Bits(f);
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) {
      assert.equal(back & 0x7e00, 0x7e00, "NaN stays a quiet NaN");
      assert.equal(back & 0x8000, h & 0x8000, "NaN sign kept");
    } else assert.equal(back, h);
  }
  const rng = new Rng(7);
  const engine = new Float16Array(1);
  const engineBits = new Uint16Array(engine.buffer);
  for (let k = 0; k < 200_000; k++) {
    // Random f32 patterns concentrated around the f16 range, plus fully random ones.
    const bits = k % 2 === 0
      ? (rng.int(0, 0xffffffff) >>> 0)
      : (((rng.int(0, 1) << 31) | (rng.int(90, 150) << 23) | rng.int(0, 0x7fffff)) >>> 0);
    const x = valueOf(bits);
    if (Number.isNaN(x)) continue;
    engine[0] = x;
    assert.equal(f32BitsToF16Bits(bits), engineBits[0], `bits 0x${bits.toString(16)}`);
  }
  assert.equal(f32BitsToF16Bits(bitsOf(65520)), 0x7c00, "65520 rounds up to Infinity");
  assert.equal(f32BitsToF16Bits(bitsOf(65519.99)), 0x7bff);
  assert.equal(f32BitsToF16Bits(bitsOf(2 ** -25)), 0, "half the smallest subnormal ties to 0");
  assert.equal(f32BitsToF16Bits(bitsOf(3 * 2 ** -25)), 2, "1.5 × smallest ties to even (2)");
});

Deno.test("BF16 encoding rounds to nearest even and keeps NaN a NaN", () => {
  assert.equal(f32BitsToBf16Bits(0x3f808000), 0x3f80, "tie, even stays");
  assert.equal(f32BitsToBf16Bits(0x3f818000), 0x3f82, "tie, odd rounds up");
  assert.equal(f32BitsToBf16Bits(0x3f808001), 0x3f81, "above the tie rounds up");
  assert.equal(f32BitsToBf16Bits(0x3f807fff), 0x3f80, "below the tie rounds down");
  assert.equal(f32BitsToBf16Bits(0x7f7fffff), 0x7f80, "largest f32 rounds to Infinity");
  assert.equal(f32BitsToBf16Bits(0xff800000), 0xff80, "-Infinity");
  assert.equal(f32BitsToBf16Bits(0x7f800001), 0x7fc0, "signalling NaN becomes quiet, not Infinity");
  assert.equal(f32BitsToBf16Bits(0xffffffff), 0xffff);
  assert.equal(f32BitsToBf16Bits(0x80000000), 0x8000, "-0");
  for (let h = 0; h < 65536; h++) {
    if ((h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0) continue;
    assert.equal(f32BitsToBf16Bits((h << 16) >>> 0), h);
  }
});

Deno.test("encodeFromF32 then decodeToF32 is the identity on representable values", () => {
  const rng = new Rng(3);
  const values = rng.floats(1000, 3);
  for (const dtype of ["F32", "F16", "BF16"] as const) {
    const bytes = encodeFromF32(dtype, values);
    assert.equal(bytes.length, values.length * (dtype === "F32" ? 4 : 2));
    const once = new Float32Array(values.length);
    decodeToF32(dtype, bytes, once);
    if (dtype === "F32") assert.deepEqual(once, values);
    const twice = new Float32Array(values.length);
    decodeToF32(dtype, encodeFromF32(dtype, once), twice);
    assert.deepEqual(twice, once, dtype);
  }
});
