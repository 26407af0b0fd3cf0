// Q4_1, Q5_0 and Q5_1 through quantizeRow: byte for byte against gguf-py (the ggml_quant
// fixture) with ggml C's rule where the two differ, hand-checked layouts and edges, and the
// dequantize(quantize(x)) error bound on random blocks.
import assert from "node:assert/strict";
import quantFixture from "../../tests/fixtures/ggml_quant/fixture.json" with { type: "json" };
import { f16BitsToF32, f32ToF16Bits } from "../../reference/f16.ts";
import { Rng } from "../../tests/util/rng.ts";
import { dequantizeRow } from "./dequantize_row.ts";
import { quantizeRow } from "./quantize_row.ts";
import { ggmlTypeByName, type GgmlTypeInfo } from "./types.ts";

const TYPES = ["Q4_1", "Q5_0", "Q5_1"] as const;
type Name = typeof TYPES[number];
/** Bytes of the f16 header each type's C code writes: d (Q5_0), or d and min. */
const HEADER: Record<Name, number> = { Q4_1: 4, Q5_0: 2, Q5_1: 4 };

function type(name: string): GgmlTypeInfo {
  const t = ggmlTypeByName(name);
  assert.ok(t, name);
  return t;
}

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
  return [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
}

function u16(b: Uint8Array, o: number): number {
  return b[o] | (b[o + 1] << 8);
}

function u32(b: Uint8Array, o: number): number {
  return (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
}

interface Divergence {
  name: string;
  format: string;
  block?: number;
  input_f32?: string;
  gguf_py: string;
  ggml_c: string;
}

const input = f32FromLE(fromBase64(quantFixture.input_f32));
const divergences = quantFixture.divergences_q4_1_q5 as Divergence[];

function ggufPy(name: Name): Uint8Array {
  return fromBase64(quantFixture[name.toLowerCase() as "q4_1" | "q5_0" | "q5_1"]);
}

Deno.test("Q4_1 / Q5_0 / Q5_1 match gguf-py on every fixture block, ggml C where recorded", () => {
  assert.equal(input.length, quantFixture.n_blocks * 32);
  for (const name of TYPES) {
    const t = type(name);
    const py = ggufPy(name);
    assert.equal(py.length, quantFixture.n_blocks * t.typeSize, name);
    const cBlocks = new Map(
      divergences.filter((d) => d.format === name.toLowerCase() && d.block !== undefined)
        .map((d) => [d.block!, d]),
    );
    const got = quantizeRow(t, input);
    assert.equal(got.length, py.length);
    for (let b = 0; b < quantFixture.n_blocks; b++) {
      const ours = got.subarray(b * t.typeSize, (b + 1) * t.typeSize);
      const theirs = py.subarray(b * t.typeSize, (b + 1) * t.typeSize);
      const div = cBlocks.get(b);
      const label = `${name} block ${b} (${quantFixture.block_names[b]})`;
      if (div === undefined) {
        assert.equal(hexBytes(ours), hexBytes(theirs), label);
        continue;
      }
      assert.deepEqual(fromBase64(div.gguf_py), theirs, label);
      assert.equal(hexBytes(ours), hexBytes(fromBase64(div.ggml_c)), `${label}: ggml C rule`);
    }
    // Q5_0 takes its scale from the largest |x|, so only an all-zero block can make gguf-py
    // pick another zero; the fixture's zero blocks start with +0, so none diverge there.
    assert.equal(cBlocks.size, name === "Q5_0" ? 0 : 3, name);
  }
});

Deno.test("recorded divergences differ from gguf-py only in the sign of a zero min or d", () => {
  assert.equal(divergences.length, 9);
  for (const d of divergences) {
    const name = d.format.toUpperCase() as Name;
    const t = type(name);
    const x = d.block !== undefined
      ? input.subarray(d.block * 32, d.block * 32 + 32)
      : f32FromLE(fromBase64(d.input_f32!));
    const c = fromBase64(d.ggml_c);
    const py = fromBase64(d.gguf_py);
    assert.deepEqual(quantizeRow(t, x), c, d.name);
    assert.notDeepEqual(c, py, d.name);
    assert.deepEqual(c.subarray(HEADER[name]), py.subarray(HEADER[name]), `${d.name}: quants`);
    for (let o = 0; o < HEADER[name]; o += 2) {
      const [hc, hp] = [u16(c, o), u16(py, o)];
      assert.ok(hc === hp || ((hc ^ hp) === 0x8000 && (hc & 0x7fff) === 0), `${d.name} @${o}`);
    }
    if (name !== "Q5_0") {
      // C's min is the block's first element equal to the minimum (-0 === +0 here).
      const min = x.reduce((m, v) => Math.min(m, v), Infinity);
      const first = x[x.findIndex((v) => v === min)];
      assert.equal(u16(c, 2), f32ToF16Bits(first), `${d.name}: min`);
    }
  }
  // The extra input: all zeros, -0 first. C: Q5_0 max stays +0 so d = -0; min = max = -0.
  const extra = divergences.filter((d) => d.input_f32 !== undefined);
  assert.deepEqual(extra.map((d) => d.format), ["q4_1", "q5_0", "q5_1"]);
  for (const d of extra) {
    const c = fromBase64(d.ggml_c);
    const want = d.format === "q5_0" ? [0x00, 0x80] : [0x00, 0x00, 0x00, 0x80];
    assert.deepEqual([...c.subarray(0, want.length)], want, d.name);
  }
});

Deno.test("Q4_1 layout: f16 d, f16 min, low nibbles first; x - min + 0.5 truncated", () => {
  // min = -1, max = 14: d = 1, id = 1, so q = trunc(x + 1 + 0.5) exactly.
  const x = new Float32Array(32).map((_, j) => (j % 16) - 1);
  x[1] = -0.5; // -0.5 + 1.5 = 1.0 -> 1 (the tie goes up)
  x[2] = -0.5 - 2 ** -24; // one f32 ulp below: 0.5 - 2^-24 + 0.5 = 1 - 2^-24 -> 0
  x[17] = 13.5; // 15 -> 15
  x[18] = 14; // the max -> 15
  const q = quantizeRow(type("Q4_1"), x);
  assert.equal(q.length, 20);
  assert.equal(u16(q, 0), 0x3c00); // d = 1
  assert.equal(u16(q, 2), 0xbc00); // min = -1
  const nib = (j: number) => j < 16 ? q[4 + j] & 15 : q[4 + j - 16] >>> 4;
  assert.equal(nib(0), 0);
  assert.equal(nib(1), 1);
  assert.equal(nib(2), 0);
  assert.equal(nib(17), 15);
  assert.equal(nib(18), 15);
  for (let j = 3; j < 16; j++) assert.equal(nib(j), j, `low ${j}`);
  assert.deepEqual([...dequantizeRow(type("Q4_1"), q, 32)].slice(3, 16), [...x].slice(3, 16));
});

Deno.test("Q5_0: first largest |x| wins ties, +|max| clamps to 31, fifth bits in qh", () => {
  const x = new Float32Array(32);
  x[3] = 8; // |8| first: max = 8, d = -0.5, id = -2
  x[20] = -8; // -8 * -2 + 16.5 = 32.5 -> 32 -> MIN(31, .) = 31
  x[4] = 0.25; // -0.5 + 16.5 = 16 -> 16 (fifth bit set)
  x[5] = 0.26; // -0.52 + 16.5 -> 15
  const q = quantizeRow(type("Q5_0"), x);
  assert.equal(q.length, 22);
  assert.equal(u16(q, 0), f32ToF16Bits(-0.5));
  const qh = u32(q, 2);
  const val = (j: number) =>
    (j < 16 ? q[6 + j] & 15 : q[6 + j - 16] >>> 4) | (((qh >>> j) & 1) << 4);
  assert.equal(val(3), 0); // 8 * -2 + 16.5 = 0.5 -> 0
  assert.equal(val(20), 31);
  assert.equal(val(4), 16);
  assert.equal(val(5), 15);
  assert.equal(val(0), 16); // zeros -> 16
  // Swapping the two: max = -8, d = 0.5; +8 clamps instead.
  x[3] = -8;
  x[20] = 8;
  const r = quantizeRow(type("Q5_0"), x);
  assert.equal(u16(r, 0), f32ToF16Bits(0.5));
  assert.equal(r[6 + 3] & 15, 0);
  assert.equal((((u32(r, 2) >>> 20) & 1) << 4) | (r[6 + 4] >>> 4), 31);
});

Deno.test("Q5_1: d = (max - min) / 31, min stored, quants 0..31 with fifth bits in qh", () => {
  const x = new Float32Array(32).map((_, j) => 2 + j * 0.5); // min 2, max 17.5: d = 0.5
  const q = quantizeRow(type("Q5_1"), x);
  assert.equal(q.length, 24);
  assert.equal(u16(q, 0), 0x3800); // 0.5
  assert.equal(u16(q, 2), 0x4000); // 2
  assert.equal(u32(q, 4), 0xffff0000); // elements 16..31 have q >= 16
  for (let j = 0; j < 16; j++) assert.equal(q[8 + j], j | (j << 4), `qs[${j}]`);
  assert.deepEqual([...dequantizeRow(type("Q5_1"), q, 32)], [...x]);
});

Deno.test("Q4_1 / Q5_1: constant blocks store d = 0, the value as min and quants 0", () => {
  for (const name of ["Q4_1", "Q5_1"] as const) {
    for (const v of [0, -0, 1, -3.25, 1e-3, 7e4]) {
      const q = quantizeRow(type(name), new Float32Array(32).fill(v));
      assert.equal(u16(q, 0), 0, `${name} ${v}: d`);
      assert.equal(u16(q, 2), f32ToF16Bits(v), `${name} ${v}: min`);
      assert.ok(q.subarray(4).every((b) => b === 0), `${name} ${v}: quants`);
    }
  }
});

Deno.test("Q4_1 / Q5_1: max - min overflowing f32 gives d = Inf, id = 0 and quants 0", () => {
  const x = new Float32Array(32).map((_, j) => (j - 15.5) * 2e37); // range 6.2e38 > FLT_MAX
  for (const name of ["Q4_1", "Q5_1"] as const) {
    const q = quantizeRow(type(name), x);
    assert.equal(u16(q, 0), 0x7c00, name);
    assert.equal(u16(q, 2), 0xfc00, name);
    assert.ok(q.subarray(4).every((b) => b === 0), name);
  }
});

Deno.test("Q4_1 / Q5_0 / Q5_1 reject NaN and ±Infinity before writing, and partial blocks", () => {
  for (const name of TYPES) {
    const t = type(name);
    for (const bad of [NaN, Infinity, -Infinity]) {
      const x = new Float32Array(96);
      x[70] = bad;
      const out = new Uint8Array(3 * t.typeSize).fill(7);
      assert.throws(() => quantizeRow(t, x, out), {
        name: "RangeError",
        message: new RegExp(`${name} block 2 contains a non-finite value .* at index 70`),
      });
      assert.ok(out.every((b) => b === 7), `${name}: nothing written`);
    }
    assert.throws(() => quantizeRow(t, new Float32Array(48)), {
      name: "RangeError",
      message: new RegExp(`x.length 48 is not a multiple of ${name}'s block size 32`),
    });
    // out with a byte offset: only the prefix written, blocks independent.
    const x = new Rng(5).floats(64, 0.1);
    const backing = new Uint8Array(2 * t.typeSize + 2).fill(0xee);
    const out = backing.subarray(1, 1 + 2 * t.typeSize);
    assert.equal(quantizeRow(t, x, out), out);
    assert.equal(backing[0], 0xee);
    assert.equal(backing[backing.length - 1], 0xee);
    assert.deepEqual(out.subarray(t.typeSize), quantizeRow(t, x.subarray(32)));
  }
});

Deno.test("Q4_1 / Q5_0 / Q5_1: dequantize(quantize(x)) within half a step + f16 rounding", () => {
  const rng = new Rng(20260701);
  const nBlocks = 600;
  const x = new Float32Array(nBlocks * 32);
  for (let b = 0; b < nBlocks; b++) {
    const scale = [1, 0.02, 3e-4, 40][b % 4];
    const offset = b % 3 === 0 ? rng.normal() * scale * 4 : 0;
    for (let j = 0; j < 32; j++) x[b * 32 + j] = rng.normal() * scale + offset;
    if (b % 5 === 0) x[b * 32 + rng.int(0, 31)] = scale * (rng.next() < 0.5 ? -12 : 12);
  }
  for (const name of TYPES) {
    const t = type(name);
    const q = quantizeRow(t, x);
    const y = dequantizeRow(t, q, x.length);
    const levels = name === "Q4_1" ? 15 : name === "Q5_1" ? 31 : 16;
    for (let b = 0; b < nBlocks; b++) {
      const xs = x.subarray(b * 32, b * 32 + 32);
      const o = b * t.typeSize;
      const d16 = f16BitsToF32(u16(q, o));
      let maxAbs = 0;
      let min = Infinity;
      let max = -Infinity;
      for (const v of xs) {
        maxAbs = Math.max(maxAbs, Math.abs(v));
        min = Math.min(min, v);
        max = Math.max(max, v);
      }
      // The exact step, what f16 made of it and of min, and the dequantized values' own f32
      // rounding.
      const d = name === "Q5_0" ? maxAbs / 16 : (max - min) / levels;
      const minErr = name === "Q5_0" ? 0 : Math.abs(min - f16BitsToF32(u16(q, o + 2)));
      const slack = levels * Math.abs(d - Math.abs(d16)) + minErr + maxAbs * 2 ** -20;
      for (let j = 0; j < 32; j++) {
        const err = Math.abs(xs[j] - y[b * 32 + j]);
        // Q5_0's +|max| side clamps level 32 to 31: a full step there.
        const clamped = name === "Q5_0" && Math.abs(xs[j]) > 15.5 * d &&
          Math.sign(xs[j]) === Math.sign(d16);
        const bound = (clamped ? d : d / 2) + slack;
        assert.ok(err <= bound, `${name} block ${b} [${j}]: err ${err} > ${bound}`);
      }
    }
  }
});

const FIXTURE_DIR = new URL("../../tests/fixtures/ggml_quant/", import.meta.url);

Deno.test({
  name: "ggml_quant q4_1.bin / q5_0.bin / q5_1.bin match fixture.json (needs --allow-read)",
  ignore: Deno.permissions.querySync({ name: "read", path: FIXTURE_DIR }).state !== "granted",
  fn: async () => {
    for (const name of TYPES) {
      const file = `${name.toLowerCase()}.bin`;
      const bytes = await Deno.readFile(new URL(file, FIXTURE_DIR));
      assert.deepEqual(bytes, ggufPy(name), file);
      const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
      assert.equal(hexBytes(sum), (quantFixture.sha256 as Record<string, string>)[file], file);
    }
  },
});
