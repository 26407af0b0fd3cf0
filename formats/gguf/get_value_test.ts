import assert from "node:assert/strict";
import { assertFormatError, everyValue, parse } from "./_test_utils.ts";
import {
  getArray,
  getBool,
  getF32,
  getFloat,
  getI32,
  getInt,
  getString,
  getU32,
  getU64,
  getValue,
} from "./get_value.ts";
import { writeGguf } from "./write_gguf.ts";

const file = () => parse(writeGguf({ metadata: everyValue() }));

Deno.test("typed getters return values of their type", () => {
  const f = file();
  assert.equal(getString(f, "general.architecture"), "llama");
  assert.equal(getU32(f, "s.u32"), 4294967295);
  assert.equal(getI32(f, "s.i32"), -2147483648);
  assert.equal(getU64(f, "s.u64"), (1n << 64n) - 1n);
  assert.equal(getF32(f, "s.f32"), Math.fround(0.1));
  assert.equal(getBool(f, "s.bool"), true);
  assert.equal(getFloat(f, "s.f64"), 1 / 3);
  assert.equal(getFloat(f, "s.f32"), Math.fround(0.1));
  assert.deepEqual(getValue(f, "s.u16"), { type: "u16", value: 65535 });
  assert.deepEqual(getArray(f, "a.string", "string"), ["a", "", "\u00fc", "\u{1f999}"]);
  const scores: Float32Array = getArray(f, "a.f32", "f32");
  assert.ok(scores instanceof Float32Array);
  assert.ok(getArray(f, "a.u64", "u64") instanceof BigUint64Array);
  assert.deepEqual(getArray(f, "a.bool", "bool"), [true, false, true]);
});

Deno.test("getInt reads every integer type as a safe number", () => {
  const f = file();
  for (const [key, want] of [["s.u8", 255], ["s.i8", -128], ["s.u16", 65535], ["s.i16", -32768]]) {
    assert.equal(getInt(f, key as string), want);
  }
  assert.equal(getInt(f, "s.u32"), 4294967295);
  assert.equal(getInt(f, "s.i32"), -2147483648);
  const g = parse(writeGguf({
    metadata: [
      ["small", { type: "u64", value: 8192n }],
      ["neg", { type: "i64", value: -5n }],
      ["big", { type: "u64", value: 1n << 53n }],
    ],
  }));
  assert.equal(getInt(g, "small"), 8192);
  assert.equal(getInt(g, "neg"), -5);
  assertFormatError(() => getInt(g, "big"), {
    field: 'kv["big"]',
    offset: 24 + (8 + 5 + 4 + 8) + (8 + 3 + 4 + 8) + (8 + 3), // its value type field
    detail: /u64 value 9007199254740992 is outside the safe integer range/,
  });
  assertFormatError(() => getInt(f, "s.f32"), {
    field: 'kv["s.f32"]',
    detail: /expected an integer/,
  });
});

Deno.test("a missing key gives the fallback or a FormatError; a mistyped key always throws", () => {
  const f = file();
  assert.equal(getU32(f, "nope", 7), 7);
  assert.equal(getString(f, "nope", ""), "");
  assert.equal(getBool(f, "nope", false), false);
  assert.equal(getU64(f, "nope", 0n), 0n);
  assert.equal(getInt(f, "nope", 3), 3);
  assert.deepEqual(getArray(f, "nope", "string", []), []);
  for (const fn of [() => getU32(f, "nope"), () => getValue(f, "nope"), () => getInt(f, "nope")]) {
    assertFormatError(fn, { field: 'kv["nope"]', offset: 24, detail: /required key is missing/ });
  }
  const at = f.metadataOffsets.get("s.u16")!;
  assertFormatError(() => getU32(f, "s.u16", 1), {
    field: 'kv["s.u16"]',
    offset: at,
    detail: /expected u32, found u16/,
  });
  assertFormatError(() => getString(f, "s.u8"), { field: 'kv["s.u8"]', detail: /expected string/ });
  assertFormatError(() => getF32(f, "s.f64"), { field: 'kv["s.f64"]', detail: /found f64/ });
  assertFormatError(() => getI32(f, "s.u32"), { field: 'kv["s.u32"]' });
  assertFormatError(() => getBool(f, "s.u8"), { field: 'kv["s.u8"]' });
  assertFormatError(() => getU64(f, "s.i64"), { field: 'kv["s.i64"]' });
  assertFormatError(() => getFloat(f, "s.i32"), { field: 'kv["s.i32"]' });
  assertFormatError(() => getArray(f, "a.i32", "u32"), {
    field: 'kv["a.i32"]',
    detail: /expected array<u32>, found array<i32>/,
  });
  assertFormatError(() => getArray(f, "s.string", "string"), {
    field: 'kv["s.string"]',
    detail: /expected array<string>, found string/,
  });
});
