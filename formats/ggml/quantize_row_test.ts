import assert from "node:assert/strict";
import index from "../../tests/fixtures/ggml_dequant/index.json" with { type: "json" };
import quantFixture from "../../tests/fixtures/ggml_quant/fixture.json" with { type: "json" };
import { Rng } from "../../tests/util/rng.ts";
import { dequantizeRow } from "./dequantize_row.ts";
import { quantizeRow, quantizeSupported } from "./quantize_row.ts";
import { ggmlType, ggmlTypeByName, type GgmlTypeInfo } from "./types.ts";

const FIXTURE_DIR = new URL("../../tests/fixtures/ggml_dequant/", import.meta.url);
const canRead = Deno.permissions.querySync({ name: "read", path: FIXTURE_DIR }).state === "granted";

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

/** A Float32Array holding exactly the little-endian f32 bit patterns in `bytes`. */
function f32FromLE(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.length / 4);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < out.length; i++) bits[i] = view.getUint32(i * 4, true);
  return out;
}

function u16FromLE(bytes: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i += 2) out.push(bytes[i] | (bytes[i + 1] << 8));
  return out;
}

function hex(b: number, width = 4): string {
  return "0x" + b.toString(16).padStart(width, "0");
}

Deno.test("quantizeSupported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and K-quants", () => {
  const yes = [
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q4_K",
    "Q5_K",
    "Q6_K",
  ];
  for (const id of [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 30]) {
    const t = ggmlType(id)!;
    assert.equal(quantizeSupported(t), yes.includes(t.name), t.name);
  }
  assert.equal(quantizeSupported({ id: 8, name: "Q8_0", blockSize: 32, typeSize: 36 }), false);
  assert.equal(quantizeSupported(undefined as unknown as GgmlTypeInfo), false);
});

for (const name of ["F16", "BF16"]) {
  Deno.test({
    name: `quantizeRow F32 -> ${name} matches gguf-py except the recorded NaN divergences`,
    ignore: !canRead,
    fn: async () => {
      const q = (index.quantize as Record<string, { input: string; output: string }>)[name];
      const x = f32FromLE(await Deno.readFile(new URL(q.input, FIXTURE_DIR)));
      const want = u16FromLE(await Deno.readFile(new URL(q.output, FIXTURE_DIR)));
      const div = index.divergences.find((d) => d.type === name && d.what.startsWith("quantize"));
      const ggmlC = new Map((div?.elements ?? []).map((e) => [e.index, e.ggml_c_bits]));
      const got = u16FromLE(quantizeRow(type(name), x));
      assert.equal(got.length, want.length);
      for (let i = 0; i < got.length; i++) {
        assert.equal(hex(got[i]), hex(ggmlC.get(i) ?? want[i]), `${name} element ${i}`);
      }
      if (name === "F16") {
        // gguf-py (numpy) keeps NaN payload bits; ggml's C writes 0x7e00 with the sign.
        assert.ok(ggmlC.size >= 4);
        for (const [i, bits] of ggmlC) {
          assert.ok(Number.isNaN(x[i]));
          assert.equal(bits & 0x7fff, 0x7e00);
        }
      } else {
        assert.equal(div, undefined, "BF16: gguf-py follows ggml's C rule exactly");
      }
    },
  });
}

Deno.test("quantizeRow Q8_0 / Q4_0 matches gguf-py (ggml_quant fixture)", () => {
  const x = f32FromLE(fromBase64(quantFixture.input_f32));
  assert.deepEqual(quantizeRow(type("Q8_0"), x), fromBase64(quantFixture.q8_0));
  assert.deepEqual(quantizeRow(type("Q4_0"), x), fromBase64(quantFixture.q4_0));
});

Deno.test("F16 and BF16: every non-NaN pattern survives dequantize -> quantize", () => {
  for (const name of ["F16", "BF16"]) {
    const t = type(name);
    const bytes = new Uint8Array(65536 * 2);
    for (let h = 0; h < 65536; h++) {
      bytes[2 * h] = h & 0xff;
      bytes[2 * h + 1] = h >>> 8;
    }
    const back = quantizeRow(t, dequantizeRow(t, bytes, 65536));
    for (let h = 0; h < 65536; h++) {
      const got = back[2 * h] | (back[2 * h + 1] << 8);
      const isNaN = name === "F16"
        ? (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0
        : (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;
      const want = !isNaN ? h : name === "F16" ? (h & 0x8000) | 0x7e00 : h | 0x40;
      assert.equal(hex(got), hex(want), `${name} ${hex(h)}`);
    }
  }
});

Deno.test("BF16 rounding: nearest, ties to even, NaN quieted, overflow to Infinity", () => {
  const bits = new Uint32Array([
    0x3f808000, // tie, even below -> 0x3f80
    0x3f818000, // tie, odd below -> 0x3f82
    0x3f808001, // above the tie -> 0x3f81
    0x7f7fffff, // f32 max -> rounds up to +Infinity 0x7f80
    0xff800001, // signalling NaN -> quiet, sign and top payload kept: 0xffc0
    0x80000001, // smallest negative subnormal -> -0
  ]);
  const y = quantizeRow(type("BF16"), new Float32Array(bits.buffer));
  assert.deepEqual(u16FromLE(y).map((v) => hex(v)), [
    "0x3f80",
    "0x3f82",
    "0x3f81",
    "0x7f80",
    "0xffc0",
    "0x8000",
  ]);
});

Deno.test("F32: bits copied unchanged (NaN payloads too); out reused with a byte offset", () => {
  const rng = new Rng(3);
  const bits = new Uint32Array(16).map(() => rng.int(0, 0xffffffff));
  bits[0] = 0x7f800001;
  const x = new Float32Array(bits.buffer);
  const backing = new Uint8Array(1 + 64 + 1).fill(0xee);
  const out = backing.subarray(1, 65);
  assert.equal(quantizeRow(type("F32"), x, out), out);
  assert.deepEqual(out, new Uint8Array(bits.buffer));
  assert.equal(backing[0], 0xee);
  assert.equal(backing[65], 0xee);
});

Deno.test("quantizeRow rejects bad arguments", () => {
  const q8 = type("Q8_0");
  assert.throws(() => quantizeRow(type("Q3_K"), new Float32Array(256)), {
    name: "RangeError",
    message: /Q3_K \(id 11\) is not supported/,
  });
  assert.throws(
    () => quantizeRow({ id: 8, name: "Q8_0", blockSize: 16, typeSize: 34 }, new Float32Array(32)),
    RangeError,
  );
  assert.throws(() => quantizeRow(q8, new Float64Array(32) as unknown as Float32Array), TypeError);
  assert.throws(() => quantizeRow(q8, new Float32Array(33)), {
    name: "RangeError",
    message: /x.length 33 is not a multiple of Q8_0's block size 32/,
  });
  assert.throws(() => quantizeRow(q8, new Float32Array(32), new Uint8Array(33)), RangeError);
  assert.throws(
    () => quantizeRow(q8, new Float32Array(32), [] as unknown as Uint8Array),
    TypeError,
  );
  assert.throws(() => quantizeRow(q8, new Float32Array(32).fill(NaN)), RangeError);
  assert.equal(quantizeRow(q8, new Float32Array(0)).length, 0);
});
