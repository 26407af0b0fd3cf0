import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { parseGguf } from "./parse_gguf.ts";
import { readTensorBytes } from "./tensor_by_name.ts";
import { writeGguf } from "./write_gguf.ts";
import type { GgufValue } from "./gguf_value.ts";

// tests/fixtures/gguf/all_types.gguf was written by gguf-py 0.19.0, an
// independent writer (see the README there): reading it checks the parser,
// and rebuilding it byte for byte checks the writer.
const path = new URL("../../tests/fixtures/gguf/all_types.gguf", import.meta.url);
const bytes = Deno.readFileSync(path);
const src = bytesSource("all_types.gguf", bytes);

const EXPECTED: [string, GgufValue][] = [
  ["general.architecture", { type: "string", value: "cflowtest" }],
  ["general.alignment", { type: "u32", value: 64 }],
  ["t.u8", { type: "u8", value: 255 }],
  ["t.i8", { type: "i8", value: -128 }],
  ["t.u16", { type: "u16", value: 65535 }],
  ["t.i16", { type: "i16", value: -32768 }],
  ["t.u32", { type: "u32", value: 4294967295 }],
  ["t.i32", { type: "i32", value: -2147483648 }],
  ["t.f32", { type: "f32", value: Math.fround(0.1) }],
  ["t.bool", { type: "bool", value: true }],
  ["t.string", { type: "string", value: "h\u00e9llo \u{1f999} \ufeff" }],
  ["t.u64", { type: "u64", value: (1n << 64n) - 1n }],
  ["t.i64", { type: "i64", value: -(1n << 63n) }],
  ["t.f64", { type: "f64", value: 1 / 3 }],
  ["a.u8", { type: "array", elementType: "u8", value: new Uint8Array([0, 1, 255]) }],
  ["a.i8", { type: "array", elementType: "i8", value: new Int8Array([-128, 0, 127]) }],
  ["a.u16", { type: "array", elementType: "u16", value: new Uint16Array([0, 65535]) }],
  ["a.i16", { type: "array", elementType: "i16", value: new Int16Array([-32768, 32767]) }],
  ["a.u32", { type: "array", elementType: "u32", value: new Uint32Array([0, 4294967295]) }],
  [
    "a.i32",
    { type: "array", elementType: "i32", value: new Int32Array([-2147483648, 2147483647, -1]) },
  ],
  ["a.f32", { type: "array", elementType: "f32", value: new Float32Array([0.5, -1e-5, Infinity]) }],
  ["a.bool", { type: "array", elementType: "bool", value: [true, false, true] }],
  ["a.string", { type: "array", elementType: "string", value: ["a", "", "\u00fc", "\u{1f999}"] }],
  ["a.u64", {
    type: "array",
    elementType: "u64",
    value: new BigUint64Array([0n, (1n << 64n) - 1n]),
  }],
  [
    "a.i64",
    {
      type: "array",
      elementType: "i64",
      value: new BigInt64Array([-(1n << 63n), (1n << 63n) - 1n]),
    },
  ],
  ["a.f64", { type: "array", elementType: "f64", value: new Float64Array([1 / 3, -2.5]) }],
];

Deno.test("a gguf-py file with every value type parses to the values it was given", () => {
  const f = parseGguf(src);
  assert.equal(f.version, 3);
  assert.equal(f.alignment, 64);
  assert.deepEqual([...f.metadata], EXPECTED);
  assert.deepEqual(f.tensors.map((t) => [t.name, t.dims, t.type.name, t.offset, t.bytes]), [
    ["f32.weight", [3, 2], "F32", 1152, 24],
    ["f16.weight", [4], "F16", 1216, 8],
    ["i8.weight", [5], "I8", 1280, 5],
    ["q8_0.weight", [64, 2], "Q8_0", 1344, 136],
    ["q4_0.weight", [32, 2, 3], "Q4_0", 1536, 108],
  ]);
  assert.equal(f.dataOffset, 1152);
  const f32 = readTensorBytes(src, f.tensors[0]);
  assert.deepEqual(
    new Float32Array(f32.buffer, f32.byteOffset, 6),
    new Float32Array([0, 1, 2, 3, 4, 5]),
  );
  const f16 = readTensorBytes(src, f.tensors[1]);
  assert.deepEqual(
    new Uint16Array(f16.buffer, f16.byteOffset, 4),
    new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff]),
  );
  assert.deepEqual(
    new Int8Array(readTensorBytes(src, f.tensors[2]).buffer),
    new Int8Array([-128, -1, 0, 1, 127]),
  );
});

Deno.test("cflow's writer rebuilds the gguf-py file byte for byte", () => {
  const f = parseGguf(src);
  const again = writeGguf({
    metadata: f.metadata,
    tensors: f.tensors.map((t) => ({
      name: t.name,
      dims: t.dims,
      type: t.type,
      data: readTensorBytes(src, t),
    })),
  });
  assert.equal(again.length, bytes.length);
  assert.deepEqual(again, bytes);
});
