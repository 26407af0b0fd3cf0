import assert from "node:assert/strict";
import { type ByteSource, bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { Rng } from "../../tests/util/rng.ts";
import { parseSafetensors, type SafetensorsTensor } from "./parse_safetensors.ts";
import { readTensorBytes, readTensorF32 } from "./read_tensor_f32.ts";
import { writeSafetensors } from "./write_safetensors.ts";

function u16le(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  values.forEach((v, i) => {
    out[2 * i] = v & 0xff;
    out[2 * i + 1] = v >>> 8;
  });
  return out;
}

Deno.test("readTensorF32 decodes F16 subnormals, infinities, signed zeros and NaNs exactly", () => {
  const halves = [
    0x0001,
    0x03ff,
    0x0400,
    0x8001,
    0x7bff,
    0x7c00,
    0xfc00,
    0x8000,
    0x7e00,
    0xfd55,
    0x3c00,
    0x3555,
  ];
  const bytes = writeSafetensors([{ name: "h", dtype: "F16", shape: [3, 4], data: u16le(halves) }]);
  const src = bytesSource("h.safetensors", bytes);
  const t = parseSafetensors(src).byName.get("h")!;
  const out = readTensorF32(src, t);
  assert.deepEqual([...out.slice(0, 8)], [
    2 ** -24,
    1023 * 2 ** -24,
    2 ** -14,
    -(2 ** -24),
    65504,
    Infinity,
    -Infinity,
    -0,
  ]);
  assert.ok(Object.is(out[7], -0));
  const bits = new Uint32Array(out.buffer);
  assert.equal(bits[8], 0x7fc00000);
  assert.equal(bits[9], 0xffaaa000, "signalling NaN payload shifted into the f32 mantissa");
  assert.equal(out[10], 1);
  assert.equal(out[11], 0.333251953125);
});

Deno.test("readTensorF32 decodes BF16 and F32 bit patterns exactly", () => {
  const b16 = [0x3f80, 0xc000, 0x0001, 0x0080, 0x7f80, 0xff80, 0x8000, 0x7fc1];
  const f32 = new Uint32Array([0x3f800000, 0x00000001, 0x7f800001, 0xff800000]);
  const bytes = writeSafetensors([
    { name: "b", dtype: "BF16", shape: [8], data: u16le(b16) },
    { name: "f", dtype: "F32", shape: [2, 2], data: new Uint8Array(f32.buffer) },
  ]);
  const src = bytesSource("b.safetensors", bytes);
  const file = parseSafetensors(src);
  const b = readTensorF32(src, file.byName.get("b")!);
  assert.deepEqual([...new Uint32Array(b.buffer)], b16.map((h) => (h << 16) >>> 0));
  assert.deepEqual([...b.slice(0, 7)], [1, -2, 2 ** -133, 2 ** -126, Infinity, -Infinity, -0]);
  const f = readTensorF32(src, file.byName.get("f")!);
  assert.deepEqual([...new Uint32Array(f.buffer)], [...f32], "signalling NaN kept bit for bit");
});

Deno.test("readTensorF32 reads row ranges, and reads only those bytes", () => {
  const rng = new Rng(1);
  const values = rng.floats(5 * 3 * 4);
  const bytes = writeSafetensors([
    { name: "pad", dtype: "U8", shape: [3], data: new Uint8Array([1, 2, 3]) },
    { name: "w", dtype: "F32", shape: [5, 3, 4], data: values },
    { name: "h", dtype: "F16", shape: [5, 12], data: values },
    { name: "b", dtype: "BF16", shape: [60], data: values },
  ]);
  const reads: [number, number, string][] = [];
  const inner = bytesSource("r.safetensors", bytes);
  const src: ByteSource = {
    name: inner.name,
    size: inner.size,
    read(offset, length, field) {
      reads.push([offset, length, field ?? ""]);
      return inner.read(offset, length, field);
    },
  };
  const file = parseSafetensors(src);
  const w = file.byName.get("w")!;
  const all = readTensorF32(src, w);
  assert.deepEqual(all, values);
  reads.length = 0;
  assert.deepEqual(readTensorF32(src, w, 2, 2), values.slice(24, 48));
  assert.deepEqual(reads, [[w.offset + 2 * 48, 2 * 48, "w"]]);
  assert.deepEqual(readTensorF32(src, w, 4), values.slice(48));
  assert.deepEqual(readTensorF32(src, w, 5), new Float32Array(0));
  assert.deepEqual(readTensorF32(src, w, 1, 0), new Float32Array(0));
  const h = file.byName.get("h")!;
  const hAll = readTensorF32(src, h);
  assert.deepEqual(readTensorF32(src, h, 3, 1), hAll.slice(36, 48));
  for (let i = 0; i < 60; i++) {
    assert.ok(Math.abs(hAll[i] - values[i]) <= Math.abs(values[i]) * 2 ** -11 + 2 ** -24);
  }
  const b = file.byName.get("b")!;
  assert.deepEqual(
    readTensorF32(src, b, 10, 5),
    readTensorF32(src, b).slice(10, 15),
    "1-D: one element per row",
  );
  assert.deepEqual(readTensorBytes(src, file.byName.get("pad")!), new Uint8Array([1, 2, 3]));
});

Deno.test("readTensorF32 handles scalars and empty tensors", () => {
  const bytes = writeSafetensors([
    { name: "s", dtype: "F32", shape: [], data: new Float32Array([2.5]) },
    { name: "e", dtype: "BF16", shape: [0, 7], data: new Uint8Array(0) },
    { name: "z", dtype: "F16", shape: [3, 0], data: new Uint8Array(0) },
  ]);
  const src = bytesSource("s.safetensors", bytes);
  const file = parseSafetensors(src);
  assert.deepEqual(readTensorF32(src, file.byName.get("s")!), new Float32Array([2.5]));
  assert.deepEqual(readTensorF32(src, file.byName.get("s")!, 0, 1), new Float32Array([2.5]));
  assert.deepEqual(readTensorF32(src, file.byName.get("e")!), new Float32Array(0));
  assert.deepEqual(readTensorF32(src, file.byName.get("z")!, 1, 2), new Float32Array(0));
});

Deno.test("readTensorF32 refuses bad row ranges and dtypes it cannot convert", () => {
  const bytes = writeSafetensors([
    { name: "w", dtype: "F32", shape: [4, 2], data: new Float32Array(8) },
    { name: "i", dtype: "I32", shape: [2], data: new Uint8Array(8) },
  ]);
  const src = bytesSource("x.safetensors", bytes);
  const file = parseSafetensors(src);
  const w = file.byName.get("w")!;
  for (
    const [start, count] of [[-1, 1], [5, 0], [1.5, 1], [0, 5], [3, 2], [2, -1], [0, 0.5], [NaN, 1]]
  ) {
    assert.throws(() => readTensorF32(src, w, start, count), RangeError, `${start}, ${count}`);
  }
  assert.throws(() => readTensorF32(src, file.byName.get("i")!), TypeError);
  assert.deepEqual(readTensorBytes(src, file.byName.get("i")!, 1), new Uint8Array(4));
  const unknown = { ...w, dtype: "Q4_0" } as unknown as SafetensorsTensor;
  assert.throws(() => readTensorBytes(src, unknown), TypeError);
});

Deno.test("readTensorF32 on a source shorter than the tensor is a FormatError naming the tensor", () => {
  const bytes = writeSafetensors([{
    name: "w",
    dtype: "F32",
    shape: [4],
    data: new Float32Array(4),
  }]);
  const w = parseSafetensors(bytesSource("full", bytes)).byName.get("w")!;
  const short = bytesSource("short.safetensors", bytes.subarray(0, bytes.length - 1));
  assert.throws(() => readTensorF32(short, w), (e: unknown) => {
    assert.ok(e instanceof FormatError);
    assert.equal(e.field, "w");
    assert.equal(e.offset, w.offset);
    return true;
  });
});
