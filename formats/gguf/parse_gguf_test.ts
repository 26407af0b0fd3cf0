import assert from "node:assert/strict";
import { FormatError } from "../errors.ts";
import type { ByteSource } from "../byte_source.ts";
import {
  assertFormatError,
  ggml,
  parse,
  patchU32,
  patchU64,
  pattern,
  sampleParts,
} from "./_test_utils.ts";
import { DEFAULT_GGUF_LIMITS, parseGguf } from "./parse_gguf.ts";
import { type GgufWriteTensor, writeGguf } from "./write_gguf.ts";
import type { GgufValue } from "./gguf_value.ts";

// Layout of a file with one kv whose key is "k": key length at 24, key at 32,
// value type at 33, value at 37 (arrays: element type 37, count 41, elements 49).
const K_TYPE = 33;
const K_VALUE = 37;
const one = (v: GgufValue) => writeGguf({ metadata: [["k", v]] });

// Layout of a file with one tensor named "t" and no metadata: name length at
// 24, name at 32, n_dims at 33, dims from 37, then type and offset.
const tensorFile = (...tensors: GgufWriteTensor[]) => writeGguf({ tensors });
const f32 = (name: string, n: number, extra: Partial<GgufWriteTensor> = {}): GgufWriteTensor => ({
  name,
  dims: [n],
  type: ggml("F32"),
  data: pattern(4 * n),
  ...extra,
});

Deno.test("header: bad magic, old, future and big-endian versions", () => {
  const good = writeGguf(sampleParts());
  const magic = good.slice();
  magic[3] = 0x47;
  assertFormatError(() => parse(magic), {
    field: "magic",
    offset: 0,
    detail: /expected "GGUF".*47 47 55 47/,
  });
  for (const v of [0, 1, 4, 0xffffffff]) {
    assertFormatError(() => parse(patchU32(good, 4, v)), {
      field: "version",
      offset: 4,
      detail: new RegExp(`unsupported GGUF version ${v}`),
    });
  }
  assertFormatError(() => parse(patchU32(good, 4, 0x03000000)), {
    field: "version",
    offset: 4,
    detail: /big-endian/,
  });
  assertFormatError(() => parse(new Uint8Array(0)), { field: "magic", offset: 0 });
  assertFormatError(() => parse(new TextEncoder().encode("GGU")), { field: "magic", offset: 0 });
});

Deno.test("header: huge tensor and kv counts are refused before anything is allocated", () => {
  const good = writeGguf(sampleParts());
  for (
    const n of [1n << 63n, (1n << 64n) - 1n, 1n << 32n, BigInt(DEFAULT_GGUF_LIMITS.maxTensors + 1)]
  ) {
    assertFormatError(() => parse(patchU64(good, 8, n)), {
      field: "tensor_count",
      offset: 8,
      detail: /exceed the limit/,
    });
    assertFormatError(() => parse(patchU64(good, 16, n)), {
      field: "metadata_kv_count",
      offset: 16,
      detail: /exceed the limit/,
    });
  }
  assertFormatError(() => parse(patchU64(good, 8, (1n << 64n) - 1n)), {
    field: "tensor_count",
    detail: /18446744073709551615 \(2\^64-1\)/,
  });
  // Within the limits, but more than the remaining bytes could hold.
  assertFormatError(() => parse(patchU64(good, 16, 100_000n)), {
    field: "metadata_kv_count",
    offset: 16,
    detail: /100000 key\/value pairs need at least 1300000 bytes/,
  });
  assertFormatError(() => parse(patchU64(good, 8, 100_000n)), {
    field: "tensor_count",
    offset: 8,
    detail: /100000 tensor infos need at least 3200000 bytes/,
  });
  // Counts that fit the bytes but not the actual content fail where the content runs out.
  // (The 4th tensor info is read from the zero padding: an empty name.)
  const e = assertFormatError(() => parse(patchU64(good, 8, 4n)), {
    field: "tensor_infos[3].name",
    detail: /empty tensor name/,
  });
  assert.ok(e.offset > 24);
});

Deno.test("strings: lengths past the file or above a cap, invalid UTF-8, empty keys", () => {
  const f = one({ type: "string", value: "abc" });
  assertFormatError(() => parse(patchU64(f, 24, 1n << 40n)), {
    field: "kv[0].key.length",
    offset: 24,
    detail: /exceeds the limit of 65535/,
  });
  assertFormatError(() => parse(patchU64(f, 24, 5000n)), {
    field: "kv[0].key.length",
    offset: 24,
    detail: /runs past the end of the file/,
  });
  assertFormatError(() => parse(patchU64(f, K_VALUE, (1n << 64n) - 1n)), {
    field: 'kv["k"].value.length',
    offset: K_VALUE,
    detail: /exceeds the limit of 16777216/,
  });
  assertFormatError(() => parse(f, { maxStringBytes: 2 }), {
    field: 'kv["k"].value.length',
    offset: K_VALUE,
    detail: /string of 3 bytes exceeds the limit of 2/,
  });
  assertFormatError(() => parse(one({ type: "u8", value: 1 }), { maxKeyBytes: 0 }), {
    field: "kv[0].key.length",
    offset: 24,
  });
  // Invalid UTF-8 in a key, a value, an array element and a tensor name.
  const badKey = f.slice();
  badKey[32] = 0xff;
  assertFormatError(() => parse(badKey), { field: "kv[0].key", offset: 32, detail: /UTF-8/ });
  for (
    const bad of [[0xc3, 0x28, 0x41], [0xed, 0xa0, 0x80], [0xc0, 0x80, 0x41], [0x41, 0x41, 0xe2]]
  ) {
    const v = f.slice();
    v.set(bad, K_VALUE + 8);
    assertFormatError(() => parse(v), {
      field: 'kv["k"].value',
      offset: K_VALUE + 8,
      detail: /not valid UTF-8/,
    });
  }
  const arr = one({ type: "array", elementType: "string", value: ["ok", "xy"] });
  const badElem = arr.slice();
  badElem[49 + 10 + 8] = 0x80;
  assertFormatError(() => parse(badElem), {
    field: 'kv["k"].value[1]',
    offset: 49 + 10 + 8,
    detail: /UTF-8/,
  });
  const t = tensorFile(f32("t", 4));
  t[32] = 0xfe;
  assertFormatError(() => parse(t), { field: "tensor_infos[0].name", offset: 32, detail: /UTF-8/ });
  // A long invalid string goes through the TextDecoder path.
  const long = one({ type: "string", value: "a".repeat(1000) });
  long[K_VALUE + 8 + 999] = 0xf8;
  assertFormatError(() => parse(long), { field: 'kv["k"].value', offset: K_VALUE + 8 });
  assertFormatError(() => parse(writeGguf({ metadata: [["", { type: "u8", value: 1 }]] })), {
    field: "kv[0].key",
    offset: 24,
    detail: /empty key/,
  });
  assertFormatError(() => parse(tensorFile(f32("", 4))), {
    field: "tensor_infos[0].name",
    offset: 24,
    detail: /empty tensor name/,
  });
  assertFormatError(() => parse(tensorFile(f32("x".repeat(300), 4))), {
    field: "tensor_infos[0].name.length",
    offset: 24,
    detail: /exceeds the limit of 256/,
  });
});

Deno.test("values: unknown types, bools that are not 0/1, nested and mistyped arrays", () => {
  const u8 = one({ type: "u8", value: 1 });
  for (const t of [13, 255, 0xffffffff]) {
    assertFormatError(() => parse(patchU32(u8, K_TYPE, t)), {
      field: 'kv["k"].type',
      offset: K_TYPE,
      detail: new RegExp(`unknown value type ${t}`),
    });
  }
  const bool = one({ type: "bool", value: true });
  bool[K_VALUE] = 2;
  assertFormatError(() => parse(bool), {
    field: 'kv["k"].value',
    offset: K_VALUE,
    detail: /bool must be 0 or 1, found 2/,
  });
  const bools = one({ type: "array", elementType: "bool", value: [true, false, true] });
  bools[49 + 1] = 0x80;
  assertFormatError(() => parse(bools), {
    field: 'kv["k"].value[1]',
    offset: 50,
    detail: /found 128/,
  });
  const arr = one({ type: "array", elementType: "u32", value: new Uint32Array([1, 2, 3]) });
  assertFormatError(() => parse(patchU32(arr, K_VALUE, 9)), {
    field: 'kv["k"].element_type',
    offset: K_VALUE,
    detail: /nested arrays/,
  });
  assertFormatError(() => parse(patchU32(arr, K_VALUE, 13)), {
    field: 'kv["k"].element_type',
    offset: K_VALUE,
    detail: /unknown array element type 13/,
  });
  // Element type says u64 (3 × 8 bytes) where the file holds 3 × 4 bytes then the end.
  assertFormatError(() => parse(patchU32(arr, K_VALUE, 10)), {
    field: 'kv["k"].count',
    offset: 41,
    detail: /3 u64 elements need at least 24 bytes but only 15 are left/,
  });
  // Element type says string: 3 strings need at least 24 bytes, and 12 are there.
  assertFormatError(() => parse(patchU32(arr, K_VALUE, 8)), {
    field: 'kv["k"].count',
    offset: 41,
    detail: /3 string elements need at least 24 bytes/,
  });
  // u64s read as strings: the first length is 2^40.
  const u64s = one({
    type: "array",
    elementType: "u64",
    value: new BigUint64Array([1n << 40n, 0n]),
  });
  assertFormatError(() => parse(patchU32(u64s, K_VALUE, 8)), {
    field: 'kv["k"].value[0].length',
    offset: 49,
    detail: /string of 1099511627776 bytes exceeds the limit/,
  });
  for (const n of [1n << 63n, (1n << 64n) - 1n, BigInt(DEFAULT_GGUF_LIMITS.maxArrayElements + 1)]) {
    assertFormatError(() => parse(patchU64(arr, 41, n)), {
      field: 'kv["k"].count',
      offset: 41,
      detail: /exceeds the limit of 67108864/,
    });
  }
  assertFormatError(() => parse(patchU64(arr, 41, 1_000_000n)), {
    field: 'kv["k"].count',
    offset: 41,
    detail: /1000000 u32 elements need at least 4000000 bytes/,
  });
  const strings = one({ type: "array", elementType: "string", value: ["a", "b"] });
  assertFormatError(() => parse(patchU64(strings, 41, 1_000_000n)), {
    field: 'kv["k"].count',
    detail: /1000000 string elements need at least 8000000 bytes/,
  });
  assertFormatError(() => parse(arr, { maxArrayElements: 2 }), {
    field: 'kv["k"].count',
    detail: /array of 3 elements exceeds the limit of 2/,
  });
});

Deno.test("duplicate keys and duplicate tensor names", () => {
  const dup = writeGguf({
    metadata: [
      ["a", { type: "u8", value: 1 }],
      ["b", { type: "u8", value: 2 }],
      ["a", { type: "u8", value: 3 }],
    ],
  });
  assertFormatError(() => parse(dup), {
    field: "kv[2].key",
    offset: 24 + 14 + 14,
    detail: /duplicate key "a" \(also kv\[0\] at byte 24\)/,
  });
  const tensors = tensorFile(f32("x", 8), f32("y", 8), f32("x", 8));
  assertFormatError(() => parse(tensors), {
    field: "tensor_infos[2].name",
    detail: /duplicate tensor name "x" \(also tensor_infos\[0\]\)/,
  });
});

Deno.test("tensor shapes: n_dims, zero dims, overflow, block sizes, unknown types", () => {
  const t = (dims: (number | bigint)[], type = ggml("F32"), data = pattern(64)) =>
    tensorFile({ name: "t", dims, type, data });
  assertFormatError(() => parse(t([])), {
    field: "tensor_infos[0].n_dims",
    offset: 33,
    detail: /tensor "t": n_dims 0 is not in 1..4/,
  });
  assertFormatError(() => parse(t([1, 1, 1, 1, 1])), {
    field: "tensor_infos[0].n_dims",
    offset: 33,
    detail: /n_dims 5/,
  });
  assertFormatError(() => parse(t([4, 0])), {
    field: "tensor_infos[0].dims[1]",
    offset: 45,
    detail: /dimension 1 is 0/,
  });
  assertFormatError(() => parse(t([1n << 32n, 1n << 32n])), {
    field: "tensor_infos[0].dims[1]",
    offset: 45,
    detail: /4294967296 makes the element count overflow 2\^53/,
  });
  assertFormatError(() => parse(t([(1n << 64n) - 1n])), {
    field: "tensor_infos[0].dims[0]",
    offset: 37,
    detail: /18446744073709551615 \(2\^64-1\) makes the element count overflow/,
  });
  assertFormatError(() => parse(t([1n << 53n])), { field: "tensor_infos[0].dims[0]" });
  assertFormatError(() => parse(t([1 << 26, 1 << 26])), {
    field: "tensor_infos[0].type",
    offset: 53,
    detail: /4503599627370496 F32 elements take more than 2\^53 bytes/,
  });
  assertFormatError(() => parse(t([33, 2], ggml("Q8_0"))), {
    field: "tensor_infos[0].dims[0]",
    offset: 37,
    detail: /row length ne\[0\] = 33 is not a multiple of the Q8_0 block size 32/,
  });
  assertFormatError(() => parse(t([128], ggml("Q4_K"))), {
    field: "tensor_infos[0].dims[0]",
    detail: /Q4_K block size 256/,
  });
  for (const id of [4, 5, 16, 39, 0xffffffff]) {
    assertFormatError(
      () => parse(tensorFile({ name: "t", dims: [32], type: id, data: pattern(64) })),
      {
        field: "tensor_infos[0].type",
        offset: 45,
        detail: new RegExp(`unknown or unsupported ggml type id ${id}`),
      },
    );
  }
});

Deno.test("tensor layout: misaligned, past the end, wrapping and overlapping offsets", () => {
  // One tensor info "t" with one dim ends at 24 + 9 + 4 + 8 + 4 + 8 = 57: data at 64.
  assertFormatError(() => parse(tensorFile(f32("t", 8, { offset: 16 }))), {
    field: "tensor_infos[0].offset",
    offset: 49,
    detail: /data offset 16 is not a multiple of the alignment 32/,
  });
  assertFormatError(() => parse(tensorFile(f32("t", 8, { offset: 1024 }))), {
    field: "tensor_infos[0].offset",
    offset: 49,
    detail:
      /data offset 1024 \(\+ data section at byte 64\) is past the end of the file at byte 96/,
  });
  for (const off of [(1n << 64n) - 32n, 1n << 63n, (1n << 53n) + 32n]) {
    assertFormatError(() => parse(tensorFile(f32("t", 8, { offset: off }))), {
      field: "tensor_infos[0].offset",
      offset: 49,
      detail: new RegExp(`data offset ${off}`),
    });
  }
  // Data starting inside the file but running past its end.
  assertFormatError(() => parse(tensorFile(f32("t", 8)).subarray(0, 90)), {
    field: "tensor_infos[0].offset",
    offset: 49,
    detail: /32 bytes of data at byte 64 run past the end of the file at byte 90/,
  });
  assertFormatError(() => parse(tensorFile(f32("a", 8), f32("b", 8, { offset: 0 }))), {
    field: "tensor_infos[1].offset",
    detail: /tensor "b" data \[\d+, \d+\) overlaps tensor "a" \(tensor_infos\[0\]\)/,
  });
  // A partial overlap: "a" is 64 bytes at 0, "b" starts at 32.
  assertFormatError(() => parse(tensorFile(f32("a", 16), f32("b", 8, { offset: 32 }))), {
    field: "tensor_infos[1].offset",
    detail: /overlaps tensor "a"/,
  });
  // Out-of-order but disjoint tensors, and gaps, are fine.
  const f = parse(tensorFile(f32("a", 8, { offset: 32 }), f32("b", 8, { offset: 0 })));
  assert.deepEqual(f.tensors.map((t) => t.offset - f.dataOffset), [32, 0]);
});

Deno.test("general.alignment: not a power of two, zero, or of the wrong type", () => {
  const withAlign = (v: GgufValue) =>
    writeGguf({ metadata: [["general.alignment", v]], tensors: [f32("t", 8)] });
  for (const a of [0, 3, 48, 0xffffffff]) {
    assertFormatError(() => parse(withAlign({ type: "u32", value: a })), {
      field: 'kv["general.alignment"].value',
      offset: 24 + 8 + 17 + 4,
      detail: new RegExp(`alignment ${a} is not a power of two`),
    });
  }
  for (const v of [{ type: "u64", value: 32n }, { type: "string", value: "32" }] as GgufValue[]) {
    assertFormatError(() => parse(withAlign(v)), {
      field: 'kv["general.alignment"].value',
      offset: 24 + 8 + 17,
      detail: new RegExp(`must be a u32, found ${v.type}`),
    });
  }
  const f = parse(withAlign({ type: "u32", value: 1 }));
  assert.equal(f.alignment, 1);
  assert.equal(f.dataOffset, 24 + 8 + 17 + 4 + 4 + 9 + 4 + 8 + 4 + 8);
});

Deno.test("limits: caps are enforced, and bad limits are a RangeError", () => {
  const bytes = writeGguf(sampleParts());
  assertFormatError(() => parse(bytes, { maxTensors: 2 }), {
    field: "tensor_count",
    offset: 8,
    detail: /3 tensors exceed the limit of 2/,
  });
  assertFormatError(() => parse(bytes, { maxKvs: 10 }), {
    field: "metadata_kv_count",
    offset: 16,
    detail: /26 key\/value pairs exceed the limit of 10/,
  });
  assertFormatError(() => parse(bytes, { maxTensorNameBytes: 5 }), {
    field: "tensor_infos[0].name.length",
    detail: /string of 11 bytes exceeds the limit of 5/,
  });
  assert.equal(parse(bytes, { maxTensors: 3, maxKvs: 26 }).tensors.length, 3);
  for (const bad of [{ maxKvs: -1 }, { maxStringBytes: 1.5 }, { maxTensors: 2 ** 60 }]) {
    assert.throws(() => parse(bytes, bad), RangeError);
  }
});

Deno.test("truncation at every byte is a FormatError, until only padding is missing", () => {
  const bytes = writeGguf(sampleParts());
  const full = parse(bytes);
  const last = full.tensors[full.tensors.length - 1];
  const dataEnd = last.offset + last.bytes;
  assert.ok(dataEnd < bytes.length, "the sample ends with padding");
  const fields = new Set<string>();
  for (let n = 0; n < bytes.length; n++) {
    const cut = bytes.subarray(0, n);
    if (n < dataEnd) {
      let e: unknown;
      try {
        parse(cut);
      } catch (x) {
        e = x;
      }
      assert.ok(e instanceof FormatError, `prefix ${n}: ${e}`);
      assert.equal(e.file, "t.gguf");
      assert.ok(e.field.length > 0);
      assert.ok(e.offset <= n, `prefix ${n}: error offset ${e.offset} is inside the prefix`);
      fields.add(e.field.replace(/\[\d+\]/g, "[i]"));
    } else {
      assert.deepEqual(parse(cut).tensors, full.tensors, `prefix ${n} only lacks padding`);
    }
  }
  // Every part of the file was hit: header, keys, values, tensor infos, data.
  for (
    const f of ["magic", "version", "tensor_count", "kv[i].key.length", "tensor_infos[i].offset"]
  ) {
    assert.ok(fields.has(f), `${f} in ${[...fields].join(", ")}`);
  }
});

/** The field of the FormatError `fn` throws (fails when it throws anything else). */
function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof FormatError) return e.field;
    throw e;
  }
  assert.fail("expected a FormatError");
}

Deno.test("reads are bounded: counts are checked before reading, spans are read whole", () => {
  const reads: [number, number][] = [];
  const tokens = Array.from({ length: 262_144 }, (_, i) => `tok${i}`);
  const scores = new Float32Array(262_144).map((_, i) => -i / 7);
  const bytes = writeGguf({
    metadata: [
      ["tokenizer.ggml.tokens", { type: "array", elementType: "string", value: tokens }],
      ["tokenizer.ggml.scores", { type: "array", elementType: "f32", value: scores }],
    ],
  });
  const src: ByteSource = {
    name: "vocab.gguf",
    size: bytes.length,
    read(offset, length) {
      reads.push([offset, length]);
      return bytes.slice(offset, offset + length);
    },
  };
  const t0 = performance.now();
  const f = parseGguf(src);
  const ms = performance.now() - t0;
  console.log(`262,144 tokens + scores parsed in ${ms.toFixed(0)} ms`);
  const got = f.metadata.get("tokenizer.ggml.tokens")!;
  assert.deepEqual(got.value, tokens);
  assert.deepEqual(f.metadata.get("tokenizer.ggml.scores")!.value, scores);
  assert.ok(ms < 1000, `parsing a 262k vocabulary took ${ms.toFixed(0)} ms`);
  assert.ok(
    reads.some(([, len]) => len === 262_144 * 4),
    "the f32 scores are read with one read() call",
  );
  assert.ok(reads.length < 40, `${reads.length} read() calls`);
  for (const [offset, length] of reads) assert.ok(offset + length <= bytes.length);
});

Deno.test("a FormatError names the source it came from", () => {
  const bytes = writeGguf(sampleParts()).subarray(0, 100);
  assertFormatError(() => parse(bytes, undefined, "/models/x.gguf"), {
    file: "/models/x.gguf",
    field: fieldOf(() => parse(bytes)),
  });
});
