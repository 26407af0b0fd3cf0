import assert from "node:assert/strict";
import {
  blockDotsQ4_0Q8_0,
  blockDotsQ8_0Q8_0,
  dotQ4_0Q8_0,
  dotQ8_0Q8_0,
  matvecQ4_0,
  matvecQ8_0,
} from "./dot.ts";
import { f16BitsToF32 } from "./f16.ts";
import { dequantizeQ4_0, dequantizeQ8_0, quantizeQ4_0, quantizeQ8_0 } from "./quant.ts";

/** Deterministic uniform values in [-scale, scale). */
function uniforms(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = (s / 2147483648 - 1) * scale;
  }
  return out;
}

/** Random bytes: arbitrary (not quantizer-produced) blocks, including int8 -128. */
function randomBytes(n: number, seed: number): Uint8Array {
  let s = seed >>> 0 || 1;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = s & 0xff;
  }
  return out;
}

/** Overwrites every block scale with a finite, moderate f16 (random bytes may be Inf/NaN). */
function sanitizeScales(bytes: Uint8Array, blockBytes: number, seed: number): Uint8Array {
  const r = randomBytes(bytes.length / blockBytes, seed);
  for (let b = 0; b * blockBytes < bytes.length; b++) {
    // exponent field 10..20 (2^-5 .. 2^5), random mantissa and sign
    const h = ((r[b] & 0x80) << 8) | ((10 + (r[b] % 11)) << 10) | ((r[b] * 37) & 0x3ff);
    bytes[b * blockBytes] = h & 0xff;
    bytes[b * blockBytes + 1] = h >>> 8;
  }
  return bytes;
}

// Naive, independent decoding via DataView.
function q8Ints(bytes: Uint8Array, b: number): number[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset + b * 34 + 2, 32);
  return Array.from({ length: 32 }, (_, j) => v.getInt8(j));
}
function q4Ints(bytes: Uint8Array, b: number): number[] {
  const out: number[] = [];
  for (let j = 0; j < 32; j++) {
    const byte = bytes[b * 18 + 2 + (j % 16)];
    out.push((j < 16 ? byte % 16 : Math.floor(byte / 16)) - 8);
  }
  return out;
}
function scaleOf(bytes: Uint8Array, offset: number): number {
  return f16BitsToF32(new DataView(bytes.buffer, bytes.byteOffset + offset, 2).getUint16(0, true));
}

Deno.test("blockDotsQ8_0Q8_0 equals the naive integer dot per block", () => {
  const nb = 64;
  const w = randomBytes(nb * 34, 1);
  const x = randomBytes(nb * 34, 2);
  const got = blockDotsQ8_0Q8_0(w, x, nb);
  assert.ok(got instanceof Int32Array);
  assert.equal(got.length, nb);
  for (let b = 0; b < nb; b++) {
    const wi = q8Ints(w, b);
    const xi = q8Ints(x, b);
    assert.equal(got[b], wi.reduce((s, v, j) => s + v * xi[j], 0), `block ${b}`);
  }
});

Deno.test("blockDotsQ4_0Q8_0 equals the naive integer dot per block", () => {
  const nb = 64;
  const w = randomBytes(nb * 18, 3);
  const x = randomBytes(nb * 34, 4);
  const got = blockDotsQ4_0Q8_0(w, x, nb);
  for (let b = 0; b < nb; b++) {
    const wi = q4Ints(w, b);
    const xi = q8Ints(x, b);
    assert.equal(got[b], wi.reduce((s, v, j) => s + v * xi[j], 0), `block ${b}`);
  }
});

Deno.test("block dots reach their extreme values exactly", () => {
  const w = new Uint8Array(34).fill(0x80); // int8 -128 everywhere
  const x = new Uint8Array(34).fill(0x80);
  assert.equal(blockDotsQ8_0Q8_0(w, x, 1)[0], 32 * 128 * 128);
  x.fill(0x7f, 2);
  assert.equal(blockDotsQ8_0Q8_0(w, x, 1)[0], -32 * 128 * 127);
  const w4 = new Uint8Array(18); // every nibble 0, i.e. -8
  x.fill(0x80, 2);
  assert.equal(blockDotsQ4_0Q8_0(w4, x, 1)[0], 32 * 8 * 128);
});

Deno.test("dots equal the sequential f32 sum of scaled block dots", () => {
  const nb = 40;
  const w8 = sanitizeScales(randomBytes(nb * 34, 5), 34, 50);
  const w4 = sanitizeScales(randomBytes(nb * 18, 6), 18, 60);
  const x = sanitizeScales(randomBytes(nb * 34, 7), 34, 70);
  const i8 = blockDotsQ8_0Q8_0(w8, x, nb);
  const i4 = blockDotsQ4_0Q8_0(w4, x, nb);
  let acc8 = 0;
  let acc4 = 0;
  const fr = Math.fround;
  for (let b = 0; b < nb; b++) {
    const dx = scaleOf(x, b * 34);
    acc8 = fr(acc8 + fr(i8[b] * fr(scaleOf(w8, b * 34) * dx)));
    acc4 = fr(acc4 + fr(i4[b] * fr(scaleOf(w4, b * 18) * dx)));
  }
  assert.equal(dotQ8_0Q8_0(w8, x, nb * 32), acc8);
  assert.equal(dotQ4_0Q8_0(w4, x, nb * 32), acc4);
  // A shorter n only uses the leading blocks.
  assert.equal(
    dotQ8_0Q8_0(w8, x, 32),
    fr(i8[0] * fr(scaleOf(w8, 0) * scaleOf(x, 0))),
  );
});

Deno.test("dots approximate the f64 dot of the dequantized vectors", () => {
  const n = 32 * 128;
  const wf = uniforms(n, 8, 0.1);
  const xf = uniforms(n, 9, 3);
  const xq = quantizeQ8_0(xf);
  const xd = dequantizeQ8_0(xq, n);
  for (
    const [name, wq, wd, dot] of [
      ["Q8_0", quantizeQ8_0(wf), dequantizeQ8_0(quantizeQ8_0(wf), n), dotQ8_0Q8_0],
      ["Q4_0", quantizeQ4_0(wf), dequantizeQ4_0(quantizeQ4_0(wf), n), dotQ4_0Q8_0],
    ] as const
  ) {
    let exact = 0;
    let mag = 0;
    for (let i = 0; i < n; i++) {
      exact += wd[i] * xd[i];
      mag += Math.abs(wd[i] * xd[i]);
    }
    const got = dot(wq, xq, n);
    assert.ok(Math.abs(got - exact) <= 1e-5 * mag, `${name}: ${got} vs ${exact}`);
    // and the quantized dot tracks the unquantized one
    let ref = 0;
    for (let i = 0; i < n; i++) ref += wf[i] * xf[i];
    assert.ok(Math.abs(got - ref) <= 0.05 * mag, `${name}: ${got} vs f32 ${ref}`);
  }
});

Deno.test("dotQ8_0Q8_0 known value", () => {
  const q = quantizeQ8_0(new Float32Array(32).fill(1)); // d = f16(1/127), q = 127
  const d = scaleOf(q, 0);
  assert.equal(dotQ8_0Q8_0(q, q, 32), Math.fround(32 * 127 * 127 * Math.fround(d * d)));
  assert.ok(Math.abs(dotQ8_0Q8_0(q, q, 32) - 32) < 0.01);
  assert.equal(dotQ8_0Q8_0(q, q, 0), 0);
});

Deno.test("matvec rows equal row dots; row layout and subarray offsets honoured", () => {
  const rows = 7;
  const cols = 96;
  const wf = uniforms(rows * cols, 10);
  const x = quantizeQ8_0(uniforms(cols, 11));
  const w8 = quantizeQ8_0(wf);
  const w4 = quantizeQ4_0(wf);
  const y8 = matvecQ8_0(w8, rows, cols, x);
  const y4 = matvecQ4_0(w4, rows, cols, x);
  assert.equal(y8.length, rows);
  for (let r = 0; r < rows; r++) {
    assert.equal(y8[r], dotQ8_0Q8_0(w8.subarray(r * 3 * 34), x, cols), `Q8_0 row ${r}`);
    assert.equal(y4[r], dotQ4_0Q8_0(w4.subarray(r * 3 * 18), x, cols), `Q4_0 row ${r}`);
    // each row quantized separately is the same bytes
    const rowQ = quantizeQ8_0(wf.subarray(r * cols, (r + 1) * cols));
    assert.equal(y8[r], dotQ8_0Q8_0(rowQ, x, cols));
  }
  // Odd byte offsets: int8 views must respect byteOffset.
  const buf = new Uint8Array(w8.length + x.length + 3);
  buf.set(w8, 1);
  buf.set(x, 2 + w8.length);
  const wOff = buf.subarray(1, 1 + w8.length);
  const xOff = buf.subarray(2 + w8.length);
  assert.deepEqual(matvecQ8_0(wOff, rows, cols, xOff), y8);
  const out = new Float32Array(rows + 1).fill(-1);
  assert.equal(matvecQ4_0(w4, rows, cols, x, out), out);
  assert.deepEqual(out.subarray(0, rows), y4);
  assert.equal(out[rows], -1);
});

Deno.test("dot and matvec argument errors", () => {
  const w8 = new Uint8Array(68);
  const w4 = new Uint8Array(36);
  const x = new Uint8Array(68);
  assert.throws(() => dotQ8_0Q8_0(w8, x, 48), {
    name: "RangeError",
    message: "dotQ8_0Q8_0: n 48 is not a multiple of 32",
  });
  assert.throws(() => dotQ8_0Q8_0(w8, x, 96), {
    name: "RangeError",
    message: "dotQ8_0Q8_0: w length 68 is less than required 102",
  });
  assert.throws(() => dotQ4_0Q8_0(w4, x.subarray(1), 64), {
    name: "RangeError",
    message: "dotQ4_0Q8_0: x length 67 is less than required 68",
  });
  assert.throws(() => blockDotsQ8_0Q8_0(w8, x, 3), {
    name: "RangeError",
    message: "blockDotsQ8_0Q8_0: w length 68 is less than required 102",
  });
  assert.throws(() => blockDotsQ4_0Q8_0(w4, x, -1), {
    name: "RangeError",
    message: "blockDotsQ4_0Q8_0: nBlocks -1 is not an integer >= 0",
  });
  assert.throws(() => blockDotsQ4_0Q8_0(w4, x, 2, new Int32Array(1)), {
    name: "RangeError",
    message: "blockDotsQ4_0Q8_0: out length 1 is less than required 2",
  });
  assert.throws(() => matvecQ8_0(w8, 2, 33, x), {
    name: "RangeError",
    message: "matvecQ8_0: cols 33 is not a multiple of 32",
  });
  assert.throws(() => matvecQ8_0(w8, 3, 32, x), {
    name: "RangeError",
    message: "matvecQ8_0: w length 68 is less than required 102",
  });
  assert.throws(() => matvecQ4_0(w4, 1, 64, x.subarray(0, 40)), {
    name: "RangeError",
    message: "matvecQ4_0: x length 40 is less than required 68",
  });
  assert.throws(() => matvecQ4_0(w4, 1.5, 32, x), {
    name: "RangeError",
    message: "matvecQ4_0: rows 1.5 is not an integer >= 0",
  });
  assert.throws(() => matvecQ4_0(w4, 2, 32, x, new Float32Array(1)), {
    name: "RangeError",
    message: "matvecQ4_0: out length 1 is less than required 2",
  });
  assert.throws(() => dotQ8_0Q8_0(new Int8Array(34) as never, x, 32), {
    name: "TypeError",
    message: "dotQ8_0Q8_0: w must be a Uint8Array, got Int8Array",
  });
  assert.throws(() => matvecQ8_0(w8, "2" as never, 32, x), {
    name: "TypeError",
    message: "matvecQ8_0: rows must be a number, got string 2",
  });
});
