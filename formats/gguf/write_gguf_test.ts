import assert from "node:assert/strict";
import { everyValue, ggml, parse, pattern, sampleParts } from "./_test_utils.ts";
import { writeGguf } from "./write_gguf.ts";
import { readTensorBytes } from "./tensor_by_name.ts";
import { bytesSource } from "../byte_source.ts";
import type { GgufValue } from "./gguf_value.ts";

Deno.test("every value type round-trips through the writer and the parser", () => {
  const metadata = everyValue();
  const f = parse(writeGguf({ metadata }));
  assert.equal(f.version, 3);
  assert.equal(f.alignment, 32);
  assert.deepEqual([...f.metadata.keys()], metadata.map(([k]) => k), "file order is kept");
  for (const [key, want] of metadata) {
    const got = f.metadata.get(key)!;
    assert.deepEqual(got, want, key);
  }
  // Spot checks of representation choices.
  const u64 = f.metadata.get("s.u64")!;
  assert.equal(typeof u64.value, "bigint");
  const f32 = f.metadata.get("s.f32")!;
  assert.equal(f32.value, Math.fround(0.1), "f32 keeps exactly the stored float");
  const scores = f.metadata.get("a.f32")!;
  assert.ok(scores.type === "array" && scores.value instanceof Float32Array);
  assert.ok(Number.isNaN((scores.value as Float32Array)[3]));
  const neg0 = f.metadata.get("a.f64")!;
  assert.ok(Object.is((neg0.value as Float64Array)[0], -0));
  const s = f.metadata.get("s.string")!;
  assert.ok(s.value === "h\u00e9llo \u{1f999} \ufeff\u0000", "BOM and NUL inside strings are kept");
});

Deno.test("writing a parsed file again gives the same bytes", () => {
  const bytes = writeGguf(sampleParts());
  const src = bytesSource("t.gguf", bytes);
  const f = parse(bytes);
  const again = writeGguf({
    version: f.version,
    metadata: f.metadata,
    tensors: f.tensors.map((t) => ({
      name: t.name,
      dims: t.dims,
      type: t.type,
      data: readTensorBytes(src, t),
    })),
  });
  assert.deepEqual(again, bytes);
});

Deno.test("the writer lays tensors out aligned, padded, in order", () => {
  const bytes = writeGguf(sampleParts());
  const f = parse(bytes);
  assert.equal(f.dataOffset % 32, 0);
  let expected = f.dataOffset;
  for (const t of f.tensors) {
    assert.equal(t.offset, expected, t.name);
    expected += Math.ceil(t.bytes / 32) * 32;
  }
  assert.equal(bytes.length, expected, "the last tensor is padded too, as ggml and gguf-py do");
  assert.deepEqual(f.tensors.map((t) => [t.name, t.dims, t.type.name, t.elements, t.bytes]), [
    ["norm.weight", [8], "F32", 8, 32],
    ["q.weight", [32, 2], "Q8_0", 64, 68],
    ["k.weight", [64, 1, 1], "Q4_0", 64, 36],
  ]);
});

Deno.test("a custom alignment is written as general.alignment and used for the layout", () => {
  const bytes = writeGguf({
    alignment: 256,
    tensors: [
      { name: "a", dims: [3], type: ggml("F32"), data: pattern(12) },
      { name: "b", dims: [5], type: ggml("I8"), data: pattern(5) },
    ],
  });
  const f = parse(bytes);
  assert.equal(f.alignment, 256);
  assert.deepEqual(f.metadata.get("general.alignment"), { type: "u32", value: 256 });
  assert.equal(f.dataOffset % 256, 0);
  assert.deepEqual(f.tensors.map((t) => t.offset - f.dataOffset), [0, 256]);
  assert.equal(bytes.length, f.dataOffset + 512);
  // An alignment given in the metadata drives the layout too.
  const g = parse(writeGguf({
    metadata: [["general.alignment", { type: "u32", value: 64 }]],
    tensors: [{ name: "a", dims: [3], type: ggml("F32"), data: pattern(12) }],
  }));
  assert.equal(g.alignment, 64);
  assert.equal(g.dataOffset % 64, 0);
});

Deno.test("version 2 files are read like version 3", () => {
  const f = parse(writeGguf({ ...sampleParts(), version: 2 }));
  assert.equal(f.version, 2);
  assert.equal(f.tensors.length, 3);
});

Deno.test("an empty file (no metadata, no tensors) is 24 bytes, padded to 32", () => {
  const bytes = writeGguf({});
  assert.equal(bytes.length, 32);
  const f = parse(bytes);
  assert.equal(f.metadata.size, 0);
  assert.equal(f.tensors.length, 0);
  assert.equal(f.dataOffset, 32);
  // Without the padding it is still a valid file with nothing in its data section.
  assert.equal(parse(bytes.subarray(0, 24)).dataOffset, 32);
});

Deno.test("the writer refuses values that do not fit their type", () => {
  const bad: GgufValue[] = [
    { type: "u8", value: 256 },
    { type: "i8", value: 128 },
    { type: "u16", value: -1 },
    { type: "u32", value: 1.5 },
    { type: "i32", value: 2 ** 31 },
    { type: "u64", value: -1n },
    { type: "i64", value: 1n << 63n },
  ];
  for (const v of bad) {
    assert.throws(() => writeGguf({ metadata: [["k", v]] }), RangeError, JSON.stringify(v.type));
  }
});
