import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { parseSafetensors } from "./parse_safetensors.ts";
import { readTensorF32 } from "./read_tensor_f32.ts";
import { writeSafetensors } from "./write_safetensors.ts";

Deno.test("writeSafetensors lays out the reference format", () => {
  const bytes = writeSafetensors([{
    name: "a",
    dtype: "F32",
    shape: [1],
    data: new Float32Array([1]),
  }], { k: "v" });
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = new TextDecoder().decode(bytes.subarray(8, 8 + n));
  assert.equal(
    header.trimEnd(),
    '{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
  );
  assert.equal(n % 8, 0);
  assert.match(header, /^[^ ]* *$/, "padding is trailing spaces");
  assert.deepEqual(bytes.subarray(8 + n), new Uint8Array([0, 0, 0x80, 0x3f]));
});

Deno.test("writeSafetensors round-trips through parseSafetensors and readTensorF32", () => {
  const values = new Float32Array([0.1, -2, 3.5, 1e-8, 65504, -0]);
  const bytes = writeSafetensors([
    { name: "__proto__", dtype: "F32", shape: [2, 3], data: values },
    { name: "model.x", dtype: "BF16", shape: [6], data: values },
  ]);
  const src = bytesSource("rt", bytes);
  const file = parseSafetensors(src);
  assert.deepEqual(file.tensors.map((t) => t.name), ["__proto__", "model.x"]);
  assert.deepEqual(readTensorF32(src, file.tensors[0]), values);
  assert.deepEqual(
    [...new Uint32Array(readTensorF32(src, file.tensors[1]).buffer)],
    [0x3dcd0000, 0xc0000000, 0x40600000, 0x322c0000, 0x47800000, 0x80000000],
  );
});

Deno.test("writeSafetensors refuses inconsistent input", () => {
  const f = new Float32Array(2);
  assert.throws(
    () => writeSafetensors([{ name: "a", dtype: "F32", shape: [3], data: f }]),
    RangeError,
  );
  assert.throws(
    () => writeSafetensors([{ name: "a", dtype: "F32", shape: [-2], data: f }]),
    RangeError,
  );
  assert.throws(
    () => writeSafetensors([{ name: "a", dtype: "I32", shape: [2], data: f }]),
    TypeError,
  );
  assert.throws(
    () => writeSafetensors([{ name: "a", dtype: "X" as "F32", shape: [2], data: f }]),
    TypeError,
  );
  assert.throws(() =>
    writeSafetensors([
      { name: "a", dtype: "F32", shape: [2], data: f },
      { name: "a", dtype: "F32", shape: [2], data: f },
    ]), TypeError);
  assert.throws(
    () => writeSafetensors([{ name: "__metadata__", dtype: "F32", shape: [2], data: f }]),
    TypeError,
  );
  assert.throws(() => writeSafetensors([], { a: 1 as unknown as string }), TypeError);
});
