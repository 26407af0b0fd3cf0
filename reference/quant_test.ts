import assert from "node:assert/strict";
import fixture from "../tests/fixtures/ggml_quant/fixture.json" with { type: "json" };
import { f16BitsToF32, f32ToF16Bits } from "./f16.ts";
import {
  dequantizeQ4_0,
  dequantizeQ8_0,
  Q4_0_BLOCK_BYTES,
  Q8_0_BLOCK_BYTES,
  QK,
  quantizeQ4_0,
  quantizeQ4_0Into,
  quantizeQ8_0,
  quantizeQ8_0Into,
} from "./quant.ts";

function fromBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function f32FromLE(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

function hexBytes(b: Uint8Array): string {
  return [...b].map((v) => v.toString(16).padStart(2, "0")).join(" ");
}

/** Asserts byte equality, naming the first differing block. */
function assertSameBlocks(ours: Uint8Array, ref: Uint8Array, blockBytes: number, what: string) {
  assert.equal(ours.length, ref.length, `${what}: length`);
  for (let b = 0; b * blockBytes < ref.length; b++) {
    const o = ours.subarray(b * blockBytes, (b + 1) * blockBytes);
    const r = ref.subarray(b * blockBytes, (b + 1) * blockBytes);
    if (o.some((v, i) => v !== r[i])) {
      assert.fail(
        `${what}: block ${b} (${fixture.block_names[b]}) differs\n ours ${hexBytes(o)}\n  ref ${
          hexBytes(r)
        }`,
      );
    }
  }
}

/** Deterministic standard normals (xorshift32 + Box-Muller). */
function normals(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  const uniform = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s + 0.5) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) * scale;
  }
  return out;
}

const fixtureInput = f32FromLE(fromBase64(fixture.input_f32));
const fixtureQ8 = fromBase64(fixture.q8_0);
const fixtureQ4 = fromBase64(fixture.q4_0);

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest].map((v) => v.toString(16).padStart(2, "0")).join("");
}

Deno.test("fixture is the expected shape and matches its recorded sha256", async () => {
  const sums = fixture.sha256 as Record<string, string>;
  assert.equal(await sha256Hex(fromBase64(fixture.input_f32)), sums["input_f32.bin"]);
  assert.equal(await sha256Hex(fixtureQ8), sums["q8_0.bin"]);
  assert.equal(await sha256Hex(fixtureQ4), sums["q4_0.bin"]);
  assert.equal(fixture.qk, QK);
  assert.equal(fixtureInput.length, fixture.n_blocks * QK);
  assert.equal(fixtureQ8.length, fixture.n_blocks * Q8_0_BLOCK_BYTES);
  assert.equal(fixtureQ4.length, fixture.n_blocks * Q4_0_BLOCK_BYTES);
  assert.equal(fixture.block_names.length, fixture.n_blocks);
});

Deno.test("quantizeQ8_0 is byte-identical to gguf-py (ggml_quant fixture)", () => {
  assertSameBlocks(quantizeQ8_0(fixtureInput), fixtureQ8, Q8_0_BLOCK_BYTES, "Q8_0");
});

Deno.test("quantizeQ4_0 is byte-identical to gguf-py (ggml_quant fixture)", () => {
  assertSameBlocks(quantizeQ4_0(fixtureInput), fixtureQ4, Q4_0_BLOCK_BYTES, "Q4_0");
});

Deno.test("quantizing the fixture one block at a time gives the same bytes", () => {
  for (let b = 0; b < fixture.n_blocks; b++) {
    const x = fixtureInput.subarray(b * QK, (b + 1) * QK);
    assert.deepEqual(
      quantizeQ8_0(x),
      fixtureQ8.subarray(b * Q8_0_BLOCK_BYTES, (b + 1) * Q8_0_BLOCK_BYTES),
    );
    assert.deepEqual(
      quantizeQ4_0(x),
      fixtureQ4.subarray(b * Q4_0_BLOCK_BYTES, (b + 1) * Q4_0_BLOCK_BYTES),
    );
  }
});

Deno.test("known divergence: all-zero Q4_0 block with -0 first (ggml C rule, not gguf-py)", () => {
  assert.equal(fixture.divergences.length, 1);
  const div = fixture.divergences[0];
  const x = f32FromLE(fromBase64(div.input_f32));
  assert.ok(Object.is(x[0], -0) && x.slice(1).every((v) => Object.is(v, 0)));
  const ggufPy = fromBase64(div.gguf_py);
  const ours = quantizeQ4_0(x);
  // gguf-py: max = x[argmax |x|] = -0, d = +0 -> 0x0000. ggml C: max stays +0, d = -0 -> 0x8000.
  assert.deepEqual([...ggufPy.subarray(0, 2)], [0x00, 0x00]);
  assert.deepEqual([...ours.subarray(0, 2)], [0x00, 0x80]);
  assert.deepEqual(ours.subarray(2), ggufPy.subarray(2)); // all nibbles 8 in both
  assert.ok(ours.subarray(2).every((v) => v === 0x88));
  // Q8_0 has no sign in d, so it agrees with gguf-py here.
  assert.deepEqual(quantizeQ8_0(x), fromBase64(div.gguf_py_q8_0));
});

const readState = Deno.permissions.querySync({
  name: "read",
  path: new URL("../tests/fixtures/ggml_quant/", import.meta.url),
}).state;

Deno.test({
  name: "fixture .bin files match fixture.json (needs --allow-read)",
  ignore: readState !== "granted",
  fn: async () => {
    const dir = new URL("../tests/fixtures/ggml_quant/", import.meta.url);
    const pairs: Array<[string, string]> = [
      ["input_f32.bin", fixture.input_f32],
      ["q8_0.bin", fixture.q8_0],
      ["q4_0.bin", fixture.q4_0],
    ];
    for (const [file, b64] of pairs) {
      const bytes = await Deno.readFile(new URL(file, dir));
      assert.deepEqual(bytes, fromBase64(b64), file);
      assert.equal(await sha256Hex(bytes), (fixture.sha256 as Record<string, string>)[file], file);
    }
  },
});

Deno.test("dequantize of the gguf-py bytes stays within the format's error bound", () => {
  const dq8 = dequantizeQ8_0(fixtureQ8, fixtureInput.length);
  const dq4 = dequantizeQ4_0(fixtureQ4, fixtureInput.length);
  let checked = 0;
  for (let b = 0; b < fixture.n_blocks; b++) {
    const x = fixtureInput.subarray(b * QK, (b + 1) * QK);
    const amax = x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const d8 = amax / 127;
    const d4 = amax / 8;
    // Skip blocks whose scale is not a normal f16 (tiny: precision lost; huge: Infinity).
    if (d8 < 2 ** -14 || d4 > 65504) continue;
    checked++;
    for (let j = 0; j < QK; j++) {
      const e8 = Math.abs(x[j] - dq8[b * QK + j]);
      const e4 = Math.abs(x[j] - dq4[b * QK + j]);
      // Rounding error d/2 plus the f16 rounding of d scaled by |q| <= 127 (resp. 8).
      assert.ok(e8 <= d8 * (0.5 + 127 * 2 ** -11) + 1e-6 * amax, `Q8_0 block ${b} [${j}]`);
      assert.ok(e4 <= d4 * (1 + 8 * 2 ** -11) + 1e-6 * amax, `Q4_0 block ${b} [${j}]`);
    }
  }
  assert.ok(checked > 100, `checked ${checked} blocks`);
});

Deno.test("Q8_0 round-trip error bound on random data", () => {
  const x = normals(QK * 256, 7);
  const q = quantizeQ8_0(x);
  const y = dequantizeQ8_0(q, x.length);
  for (let b = 0; b < 256; b++) {
    const d = f16BitsToF32(q[b * 34] | (q[b * 34 + 1] << 8));
    const dF32 = x.subarray(b * QK, (b + 1) * QK).reduce((m, v) => Math.max(m, Math.abs(v)), 0) /
      127;
    for (let j = 0; j < QK; j++) {
      const err = Math.abs(x[b * QK + j] - y[b * QK + j]);
      assert.ok(err <= d / 2 + 127 * Math.abs(d - dF32) + 1e-7, `block ${b} [${j}] err ${err}`);
    }
  }
});

Deno.test("Q4_0 round-trip error bound on random data", () => {
  const x = normals(QK * 256, 99, 0.05);
  const q = quantizeQ4_0(x);
  const y = dequantizeQ4_0(q, x.length);
  for (let b = 0; b < 256; b++) {
    const d = Math.abs(f16BitsToF32(q[b * 18] | (q[b * 18 + 1] << 8)));
    for (let j = 0; j < QK; j++) {
      const err = Math.abs(x[b * QK + j] - y[b * QK + j]);
      assert.ok(err <= d * (1 + 2 ** -9), `block ${b} [${j}] err ${err} d ${d}`);
    }
  }
});

Deno.test("Q8_0 layout: f16 d little-endian, then int8 quants; half-way rounds away from 0", () => {
  const x = new Float32Array(QK);
  x[0] = -127; // amax 127: d = 1, id = 1
  for (let j = 1; j < QK; j++) x[j] = j - 16.5; // -15.5 .. 14.5
  const q = quantizeQ8_0(x);
  assert.equal(q.length, Q8_0_BLOCK_BYTES);
  assert.equal(q[0] | (q[1] << 8), 0x3c00);
  const qs = new Int8Array(q.buffer, 2, QK);
  assert.equal(qs[0], -127);
  for (let j = 1; j < QK; j++) {
    const v = j - 16.5;
    assert.equal(qs[j], v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5), `x = ${v}`);
  }
  assert.equal(qs[1], -16); // -15.5 -> -16
  assert.equal(qs[17], 1); // 0.5 -> 1 (not banker's 0)
  assert.equal(qs[18], 2); // 1.5 -> 2
  assert.equal(qs[16], -1); // -0.5 -> -1
});

Deno.test("Q8_0: id is from the f32 d, d is stored rounded to f16", () => {
  // amax = 100: d = fround(100/127) is not an f16 value.
  const x = new Float32Array(QK).map((_, j) => (j - 15) * (100 / 16));
  x[31] = 100;
  const q = quantizeQ8_0(x);
  const d = Math.fround(100 / 127);
  const id = Math.fround(1 / d);
  assert.equal(q[0] | (q[1] << 8), f32ToF16Bits(d));
  assert.notEqual(f16BitsToF32(f32ToF16Bits(d)), d);
  const qs = new Int8Array(q.buffer, 2, QK);
  for (let j = 0; j < QK; j++) {
    const v = Math.fround(x[j] * id);
    assert.equal(qs[j], v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5));
  }
  assert.equal(qs[31], 127);
});

Deno.test("Q4_0 layout: low nibbles are elements 0..15, high nibbles 16..31", () => {
  const x = new Float32Array(QK);
  x[0] = -8; // max = -8: d = 1, id = 1, nibble = trunc(x + 8.5)
  for (let j = 1; j < 16; j++) x[j] = j - 8; // nibbles 1..15
  for (let j = 0; j < 16; j++) x[16 + j] = 7 - j; // nibbles 15..0
  const q = quantizeQ4_0(x);
  assert.equal(q.length, Q4_0_BLOCK_BYTES);
  assert.equal(q[0] | (q[1] << 8), 0x3c00);
  for (let j = 0; j < 16; j++) {
    assert.equal(q[2 + j] & 0x0f, j, `low nibble ${j}`);
    assert.equal(q[2 + j] >> 4, 15 - j, `high nibble ${j}`);
  }
  assert.deepEqual([...dequantizeQ4_0(q, QK)], [...x]);
});

Deno.test("Q4_0: max keeps its sign, first wins ties, +max clamps to nibble 15", () => {
  const x = new Float32Array(QK);
  x[3] = 4;
  x[7] = -4; // same |x|, later: ignored
  x[20] = -4;
  const q = quantizeQ4_0(x);
  assert.equal(f16BitsToF32(q[0] | (q[1] << 8)), -0.5); // d = 4 / -8
  // x = 4: 4 * -2 + 8.5 = 0.5 -> 0; x = -4: 8 + 8.5 = 16.5 -> 16 -> clamp 15; x = 0 -> 8.
  assert.equal(q[2 + 3] & 0x0f, 0);
  assert.equal(q[2 + 7] & 0x0f, 15);
  assert.equal(q[2 + 4] >> 4, 15); // element 20
  assert.equal(q[2 + 0] & 0x0f, 8);
  const y = dequantizeQ4_0(q, QK);
  assert.equal(y[3], 4);
  assert.equal(y[7], -3.5); // clamped: 7 * -0.5, not -4
});

Deno.test("Q4_0 rounds x * id + 8.5 to f32 before truncating", () => {
  const x = new Float32Array(QK);
  x[0] = -8; // d = 1, id = 1
  x[1] = Math.fround(0.5 - 2 ** -25); // 8.99999997 rounds to 9.0 in f32: nibble 9, not 8
  x[2] = Math.fround(-0.5 - 2 ** -24); // 7.99999994 rounds to 8.0 in f32: nibble 8, not 7
  x[3] = Math.fround(0.5 - 2 ** -20); // 8.99999905 is exact in f32: nibble 8
  const q = quantizeQ4_0(x);
  assert.deepEqual([q[2 + 1] & 0x0f, q[2 + 2] & 0x0f, q[2 + 3] & 0x0f], [9, 8, 8]);
});

Deno.test("all-zero blocks: Q8_0 d = +0 and quants 0; Q4_0 d = -0 and nibbles 8", () => {
  const q8 = quantizeQ8_0(new Float32Array(64));
  assert.ok(q8.every((v) => v === 0));
  const q4 = quantizeQ4_0(new Float32Array(64));
  for (let b = 0; b < 2; b++) {
    assert.deepEqual([...q4.subarray(b * 18, b * 18 + 2)], [0x00, 0x80]);
    assert.ok(q4.subarray(b * 18 + 2, b * 18 + 18).every((v) => v === 0x88));
  }
  assert.ok(dequantizeQ4_0(q4, 64).every((v) => v === 0));
});

Deno.test("tiny blocks whose 1/d overflows store quants 0", () => {
  const x = new Float32Array(QK);
  x[0] = 1e-38; // Q8_0: d = 7.9e-41, 1/d = Infinity; Q4_0: d = -1.25e-39, 1/d = -Infinity
  x[1] = -5e-39;
  const q8 = quantizeQ8_0(x);
  assert.ok(q8.every((v) => v === 0));
  const q4 = quantizeQ4_0(x);
  assert.deepEqual([...q4.subarray(0, 2)], [0x00, 0x80]); // f16(-1.25e-39) = -0
  assert.ok(q4.subarray(2).every((v) => v === 0));
});

Deno.test("huge blocks store d = +Infinity in f16", () => {
  const x = new Float32Array(QK).fill(1e7);
  assert.deepEqual([...quantizeQ8_0(x).subarray(0, 3)], [0x00, 0x7c, 127]);
  assert.deepEqual([...quantizeQ4_0(x).subarray(0, 2)], [0x00, 0xfc]); // d = 1e7 / -8
});

Deno.test("dequantize writes fround(q * d) and works on subarrays", () => {
  const x = normals(QK * 3, 5, 3);
  const q8 = quantizeQ8_0(x);
  const buf = new Uint8Array(q8.length + 5);
  buf.set(q8, 5);
  const y = dequantizeQ8_0(buf.subarray(5), x.length);
  for (let b = 0; b < 3; b++) {
    const d = f16BitsToF32(q8[b * 34] | (q8[b * 34 + 1] << 8));
    for (let j = 0; j < QK; j++) {
      const qv = (q8[b * 34 + 2 + j] << 24) >> 24;
      assert.equal(y[b * QK + j], Math.fround(qv * d));
    }
  }
  const out = new Float32Array(QK * 3 + 2).fill(42);
  assert.equal(dequantizeQ8_0(q8, x.length, out), out);
  assert.deepEqual(out.subarray(0, QK * 3), y);
  assert.deepEqual([...out.subarray(QK * 3)], [42, 42]);
  // Only the first n values are decoded.
  assert.deepEqual(dequantizeQ8_0(q8, QK), y.subarray(0, QK));
});

Deno.test("quantize*Into write only their prefix and return out", () => {
  const x = normals(QK * 2, 11);
  const out8 = new Uint8Array(2 * 34 + 3).fill(0xaa);
  assert.equal(quantizeQ8_0Into(x, out8), out8);
  assert.deepEqual(out8.subarray(0, 68), quantizeQ8_0(x));
  assert.deepEqual([...out8.subarray(68)], [0xaa, 0xaa, 0xaa]);
  const out4 = new Uint8Array(2 * 18 + 1).fill(0xaa);
  assert.equal(quantizeQ4_0Into(x, out4), out4);
  assert.deepEqual(out4.subarray(0, 36), quantizeQ4_0(x));
  assert.equal(out4[36], 0xaa);
  assert.equal(quantizeQ8_0(new Float32Array(0)).length, 0);
});

Deno.test("quantize argument errors", () => {
  assert.throws(() => quantizeQ8_0(new Float32Array(33)), {
    name: "RangeError",
    message: "quantizeQ8_0: length 33 is not a multiple of 32",
  });
  assert.throws(() => quantizeQ4_0(new Float32Array(31)), {
    name: "RangeError",
    message: "quantizeQ4_0: length 31 is not a multiple of 32",
  });
  const x = new Float32Array(96);
  x[70] = NaN;
  assert.throws(() => quantizeQ8_0(x), {
    name: "RangeError",
    message: "quantizeQ8_0: block 2 contains a non-finite value NaN at index 70",
  });
  x[70] = 0;
  x[40] = -Infinity;
  assert.throws(() => quantizeQ4_0(x), {
    name: "RangeError",
    message: "quantizeQ4_0: block 1 contains a non-finite value -Infinity at index 40",
  });
  assert.throws(() => quantizeQ8_0Into(new Float32Array(64), new Uint8Array(67)), {
    name: "RangeError",
    message: "quantizeQ8_0Into: out length 67 is less than required 68",
  });
  assert.throws(() => quantizeQ4_0Into(new Float32Array(64), new Uint8Array(35)), {
    name: "RangeError",
    message: "quantizeQ4_0Into: out length 35 is less than required 36",
  });
  assert.throws(() => quantizeQ8_0([1, 2] as unknown as Float32Array), {
    name: "TypeError",
    message: "quantizeQ8_0: x must be a Float32Array, got Array",
  });
  assert.throws(() => quantizeQ4_0Into(new Float32Array(32), new Int8Array(18) as never), {
    name: "TypeError",
    message: "quantizeQ4_0Into: out must be a Uint8Array, got Int8Array",
  });
});

Deno.test("dequantize argument errors", () => {
  assert.throws(() => dequantizeQ8_0(new Uint8Array(34), 33), {
    name: "RangeError",
    message: "dequantizeQ8_0: n 33 is not a multiple of 32",
  });
  assert.throws(() => dequantizeQ8_0(new Uint8Array(67), 64), {
    name: "RangeError",
    message: "dequantizeQ8_0: bytes length 67 is less than required 68",
  });
  assert.throws(() => dequantizeQ4_0(new Uint8Array(18), -32), {
    name: "RangeError",
    message: "dequantizeQ4_0: n -32 is not an integer >= 0",
  });
  assert.throws(() => dequantizeQ4_0(new Uint8Array(36), 64, new Float32Array(63)), {
    name: "RangeError",
    message: "dequantizeQ4_0: out length 63 is less than required 64",
  });
  assert.throws(() => dequantizeQ4_0(new Uint8Array(18), 32.5), RangeError);
});
