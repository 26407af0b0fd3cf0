import assert from "node:assert/strict";
import { type ByteSource, bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { Rng } from "../../tests/util/rng.ts";
import { SAFETENSORS_DTYPES } from "./dtype.ts";
import { MAX_SAFETENSORS_HEADER_BYTES, parseSafetensors } from "./parse_safetensors.ts";
import { writeSafetensors } from "./write_safetensors.ts";

const enc = new TextEncoder();

/** A file with the given header text (unpadded) and `dataBytes` bytes of data. */
function rawFile(header: string | Uint8Array, dataBytes = 0, declared?: bigint): Uint8Array {
  const h = typeof header === "string" ? enc.encode(header) : header;
  const out = new Uint8Array(8 + h.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, declared ?? BigInt(h.length), true);
  out.set(h, 8);
  for (let i = 0; i < dataBytes; i++) out[8 + h.length + i] = i & 0xff;
  return out;
}

function parse(bytes: Uint8Array) {
  return parseSafetensors(bytesSource("t.safetensors", bytes));
}

/** Asserts a FormatError naming t.safetensors, `field` (string or pattern) and `offset`. */
function fails(
  bytes: Uint8Array,
  field: string | RegExp,
  offset: number | null,
  detail?: RegExp,
): void {
  assert.throws(() => parse(bytes), (e: unknown) => {
    assert.ok(e instanceof FormatError, `not a FormatError: ${e}`);
    assert.equal(e.file, "t.safetensors");
    if (typeof field === "string") assert.equal(e.field, field, e.message);
    else assert.match(e.field, field, e.message);
    if (offset !== null) assert.equal(e.offset, offset, e.message);
    if (detail) assert.match(e.message, detail);
    return true;
  });
}

/** Header text with the entry for "w" (F32, the given shape and offsets) and `extra` entries. */
function entry(shape: unknown, offsets: unknown, dtype: unknown = "F32"): string {
  return JSON.stringify({ dtype, shape, data_offsets: offsets });
}

function sample(): Uint8Array {
  return writeSafetensors([
    {
      name: "model.embed_tokens.weight",
      dtype: "BF16",
      shape: [4, 3],
      data: new Float32Array(12).fill(0.5),
    },
    { name: "scalar", dtype: "F32", shape: [], data: new Float32Array([7]) },
    { name: "empty", dtype: "F16", shape: [0, 5], data: new Uint8Array(0) },
    { name: "ids", dtype: "I64", shape: [2], data: new Uint8Array(16) },
  ], { format: "pt" });
}

Deno.test("parseSafetensors reads names, dtypes, shapes, absolute offsets and metadata", () => {
  const bytes = sample();
  const file = parse(bytes);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal(file.name, "t.safetensors");
  assert.equal(file.headerBytes, n);
  assert.equal(file.dataOffset, 8 + n);
  assert.equal(n % 8, 0, "the writer pads the header to 8 bytes");
  assert.deepEqual(
    file.tensors.map((t) => [t.name, t.dtype, t.shape, t.elements, t.offset, t.bytes]),
    [
      ["model.embed_tokens.weight", "BF16", [4, 3], 12, 8 + n, 24],
      ["scalar", "F32", [], 1, 8 + n + 24, 4],
      ["empty", "F16", [0, 5], 0, 8 + n + 28, 0],
      ["ids", "I64", [2], 2, 8 + n + 28, 16],
    ],
  );
  assert.equal(file.byName.get("ids"), file.tensors[3]);
  assert.deepEqual({ ...file.metadata }, { format: "pt" });
  assert.ok(Object.isFrozen(file.tensors[0].shape));
});

Deno.test("parseSafetensors accepts every listed dtype, an empty header, and header padding", () => {
  for (const d of SAFETENSORS_DTYPES) {
    const file = parse(
      writeSafetensors([{
        name: "x",
        dtype: d.name,
        shape: [3],
        data: new Uint8Array(3 * d.bytes),
      }]),
    );
    assert.equal(file.tensors[0].bytes, 3 * d.bytes);
  }
  const empty = parse(rawFile("{}"));
  assert.equal(empty.tensors.length, 0);
  assert.deepEqual({ ...empty.metadata }, {});
  const padded = parse(rawFile(`{"w": ${entry([2], [0, 8])}}      `, 8));
  assert.equal(padded.tensors[0].offset, padded.dataOffset);
  // Tensors may be listed in any order; coverage is checked in offset order.
  const shuffled = parse(rawFile(`{"b": ${entry([1], [4, 8])}, "a": ${entry([1], [0, 4])}}`, 8));
  assert.deepEqual(shuffled.tensors.map((t) => t.name), ["b", "a"]);
});

Deno.test("parseSafetensors refuses bad header lengths", () => {
  fails(new Uint8Array(0), "header_length", 0, /shorter than/);
  fails(new Uint8Array(7), "header_length", 0);
  fails(rawFile("{", 0, 1n), "header_length", 0, /below 2/);
  fails(rawFile("", 0, 0n), "header_length", 0, /below 2/);
  fails(rawFile("{}", 0, 3n), "header_length", 0, /past the end/);
  fails(rawFile("{}", 0, 0xffffffffffffffffn), "header_length", 0, /above the limit/);
  fails(
    rawFile("{}", 0, BigInt(MAX_SAFETENSORS_HEADER_BYTES) + 1n),
    "header_length",
    0,
    /above the limit/,
  );
  fails(rawFile("{}", 0, 2n ** 53n + 1n), "header_length", 0, /above the limit/);
});

Deno.test("parseSafetensors reads no more than the header, even when it claims 100 MB", () => {
  const reads: [number, number][] = [];
  const head = rawFile("{}", 0, BigInt(MAX_SAFETENSORS_HEADER_BYTES));
  const src: ByteSource = {
    name: "big.safetensors",
    size: 8 + MAX_SAFETENSORS_HEADER_BYTES - 1,
    read(offset, length, field = "data") {
      reads.push([offset, length]);
      if (offset + length > 8) {
        throw new FormatError("big.safetensors", field, offset, "unexpected read");
      }
      return head.slice(offset, offset + length);
    },
  };
  assert.throws(
    () => parseSafetensors(src),
    (e) => e instanceof FormatError && /past the end/.test(e.message),
  );
  assert.deepEqual(reads, [[0, 8]]);
  reads.length = 0;
  const bytes = sample();
  const counted: ByteSource = {
    name: "s",
    size: bytes.length,
    read(offset, length) {
      reads.push([offset, length]);
      return bytes.slice(offset, offset + length);
    },
  };
  const file = parseSafetensors(counted);
  assert.deepEqual(reads, [[0, 8], [8, file.headerBytes]], "the data is never read");
});

Deno.test("parseSafetensors refuses headers that are not UTF-8 JSON objects", () => {
  fails(
    rawFile(new Uint8Array([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d])),
    "header",
    10,
    /UTF-8/,
  );
  fails(rawFile('{"a": }'), "header.a", 14);
  fails(rawFile("[]"), "header", 8, /must be a JSON object, found an array/);
  fails(rawFile('"x"'), "header", 8, /found a string/);
  fails(rawFile("12"), "header", 8, /found a number/);
  fails(rawFile("null"), "header", 8);
  fails(rawFile("\uFEFF{}"), "header", 8, /expected a value/);
  fails(rawFile("{}\0"), "header", 10);
  fails(rawFile("[".repeat(10_000)), /^header/, null, /nested deeper/);
});

Deno.test("parseSafetensors refuses malformed entries, naming the JSON path and its offset", () => {
  const at = (header: string, needle: string) =>
    8 + enc.encode(header).indexOf(enc.encode(needle)[0], header.indexOf(needle));
  const check = (h: string, field: string, needle: string, detail: RegExp, data = 8) =>
    fails(rawFile(h, data), field, at(h, needle), detail);
  check('{"w": 5}', "header.w", "5", /must be an object, found a number/);
  check('{"w": []}', "header.w", "[", /must be an object/);
  check('{"w": {"shape": [2], "data_offsets": [0, 8]}}', "header.w", '{"shape', /missing "dtype"/);
  check(
    '{"w": {"dtype": "F32", "data_offsets": [0, 8]}}',
    "header.w",
    '{"dtype',
    /missing "shape"/,
  );
  check('{"w": {"dtype": "F32", "shape": [2]}}', "header.w", '{"dtype', /missing "data_offsets"/);
  check(`{"w": ${entry([2], [0, 8], 4)}}`, "header.w.dtype", "4", /must be a string/);
  check(`{"w": ${entry([2], [0, 8], "Q4_0")}}`, "header.w.dtype", '"Q4_0"', /unknown dtype "Q4_0"/);
  check(`{"w": ${entry([2], [0, 8], "f32")}}`, "header.w.dtype", '"f32"', /unknown dtype/);
  check(`{"w": ${entry("2", [0, 8])}}`, "header.w.shape", '"2"', /must be an array/);
  check(`{"w": ${entry([-2], [0, 8])}}`, "header.w.shape[0]", "-2", /not an integer in \[0/);
  check(`{"w": ${entry([2.5], [0, 8])}}`, "header.w.shape[0]", "2.5", /not an integer/);
  check(`{"w": ${entry(["2"], [0, 8])}}`, "header.w.shape[0]", '"2"', /must be a number/);
  check(`{"w": ${entry([null], [0, 8])}}`, "header.w.shape[0]", "null", /must be a number/);
  check(
    '{"w": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 8]}}',
    "header.w.shape[0]",
    "1e300",
    /not an integer/,
  );
  check(
    '{"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 8]}}',
    "header.w.shape[0]",
    "1e999",
    /Infinity/,
  );
  check(`{"w": ${entry([2 ** 53], [0, 8])}}`, "header.w.shape[0]", "9007", /not an integer/);
  check(`{"w": ${entry({}, [0, 8])}}`, "header.w.shape", "{}", /must be an array/);
  check(`{"w": ${entry([2], 8)}}`, "header.w.data_offsets", "8}", /must be an array/);
  check(`{"w": ${entry([2], [0])}}`, "header.w.data_offsets", "[0]", /found 1 items/);
  check(`{"w": ${entry([2], [0, 8, 8])}}`, "header.w.data_offsets", "[0,8,8]", /found 3 items/);
  check(`{"w": ${entry([2], [-1, 7])}}`, "header.w.data_offsets[0]", "-1", /not an integer/);
  check(`{"w": ${entry([2], [0, "8"])}}`, "header.w.data_offsets[1]", '"8"', /must be a number/);
  check(`{"w": ${entry([2], [0, 8.5])}}`, "header.w.data_offsets[1]", "8.5", /not an integer/);
  check(`{"w": ${entry([0], [8, 0])}}`, "header.w.data_offsets", "[8,0]", /begin 8 is after end 0/);
  check(
    `{"w": ${entry([2], [0, 4])}}`,
    "header.w.data_offsets",
    "[0,4]",
    /spans 4 bytes but F32 \[2\] needs 8/,
  );
  check(
    `{"w": ${entry([2], [0, 8])}}`,
    "header.w.data_offsets",
    "[0,8]",
    /past the 4 bytes of data/,
    4,
  );
  check(`{"w": ${entry([2], [8, 16])}}`, "header.w.data_offsets", "[8,16]", /past the 8 bytes/);
  check('{"a.b": 1}', 'header["a.b"]', "1", /must be an object/);
});

Deno.test("parseSafetensors refuses element counts and byte sizes that overflow 2^53", () => {
  const big = 2 ** 26;
  fails(
    rawFile(`{"w": ${entry([big, big, big], [0, 8])}}`, 8),
    "header.w.shape[2]",
    null,
    /exceeds 2\^53 - 1/,
  );
  fails(rawFile(`{"w": ${entry([2 ** 52, 4], [0, 8])}}`, 8), "header.w.shape[1]", null, /exceeds/);
  fails(
    rawFile(`{"w": ${entry([2 ** 52], [0, 8], "F64")}}`, 8),
    "header.w.shape",
    null,
    /× 8 bytes exceeds/,
  );
  // A zero dimension makes any other dimension harmless.
  const zero = parse(rawFile(`{"w": ${entry([0, 2 ** 52, 2 ** 52], [0, 0])}}`));
  assert.equal(zero.tensors[0].elements, 0);
});

Deno.test("parseSafetensors refuses gaps, overlaps and data that does not end the file", () => {
  const two = (a: unknown, b: unknown) => `{"a": ${entry([1], a)}, "b": ${entry([1], b)}}`;
  fails(rawFile(two([0, 4], [8, 12]), 12), "header.b.data_offsets", null, /gap: bytes \[4, 8\)/);
  fails(rawFile(two([4, 8], [8, 12]), 12), "header.a.data_offsets", null, /gap: bytes \[0, 4\)/);
  fails(
    rawFile(two([0, 4], [2, 6]), 8),
    "header.b.data_offsets",
    null,
    /overlaps "a", which ends at data byte 4/,
  );
  fails(rawFile(two([0, 4], [0, 4]), 4), "header.b.data_offsets", null, /overlaps "a"/);
  const h = two([0, 4], [4, 8]);
  fails(
    rawFile(h, 9),
    "data",
    8 + enc.encode(h).length + 8,
    /cover 8 bytes of data but the file has 9/,
  );
  fails(rawFile("{}", 1), "data", 10, /cover 0 bytes/);
  // A zero-size tensor inside another one is an overlap; at a boundary it is fine.
  fails(
    rawFile(`{"a": ${entry([2], [0, 8])}, "z": ${entry([0], [4, 4])}}`, 8),
    "header.z.data_offsets",
    null,
    /overlaps/,
  );
  assert.equal(
    parse(rawFile(`{"a": ${entry([2], [0, 8])}, "z": ${entry([0], [8, 8])}}`, 8)).tensors.length,
    2,
  );
});

Deno.test("parseSafetensors refuses duplicate names (JSON.parse would keep the last)", () => {
  const h = `{"w": ${entry([1], [0, 4])}, "w": ${entry([1], [4, 8])}}`;
  fails(rawFile(h, 8), "header.w", 8 + h.lastIndexOf('"w"'), /duplicate key \(first at byte 9\)/);
  const inner = '{"w": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}}';
  fails(rawFile(inner, 4), "header.w.dtype", 8 + inner.lastIndexOf('"dtype"'), /duplicate key/);
});

Deno.test("parseSafetensors refuses __metadata__ that is not a string map", () => {
  fails(
    rawFile('{"__metadata__": ["a"]}'),
    "header.__metadata__",
    25,
    /object of strings, found an array/,
  );
  fails(rawFile('{"__metadata__": null}'), "header.__metadata__", 25, /found null/);
  fails(
    rawFile('{"__metadata__": {"a": "x", "b": 1}}'),
    "header.__metadata__.b",
    41,
    /must be a string, found a number/,
  );
  fails(
    rawFile('{"__metadata__": {"a": {"b": "c"}}}'),
    "header.__metadata__.a",
    31,
    /found an object/,
  );
  const ok = parse(rawFile('{"__metadata__": {"format": "pt", "__proto__": "x"}}'));
  assert.equal(ok.metadata.format, "pt");
  assert.equal(Object.getOwnPropertyDescriptor(ok.metadata, "__proto__")?.value, "x");
});

Deno.test("every truncation of a valid file is a FormatError", () => {
  const bytes = sample();
  for (let len = 0; len < bytes.length; len++) {
    assert.throws(() => parse(bytes.subarray(0, len)), FormatError, `prefix of ${len} bytes`);
  }
  assert.doesNotThrow(() => parse(bytes));
});

Deno.test("random corruption of a valid file gives a FormatError or a consistent file, never a crash", () => {
  const base = sample();
  const rng = new Rng(2024);
  let refused = 0;
  for (let k = 0; k < 3000; k++) {
    const bytes = base.slice();
    const flips = rng.int(1, 4);
    for (let f = 0; f < flips; f++) {
      const at = rng.next() < 0.8 ? rng.int(8, 8 + 150) : rng.int(0, bytes.length - 1);
      bytes[at] = rng.next() < 0.5 ? rng.int(0, 255) : bytes[at] ^ (1 << rng.int(0, 7));
    }
    try {
      const file = parse(bytes);
      // Whatever was accepted must be internally consistent.
      let covered = 0;
      for (const t of file.tensors) {
        assert.ok(t.offset >= file.dataOffset && t.offset + t.bytes <= bytes.length);
        covered += t.bytes;
      }
      assert.equal(covered, bytes.length - file.dataOffset);
    } catch (e) {
      if (!(e instanceof FormatError)) throw e;
      refused++;
    }
  }
  assert.ok(refused > 2000, `${refused} refused`);
});

Deno.test("random headers are refused with FormatError only", () => {
  const rng = new Rng(99);
  const pieces = [
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    '"dtype"',
    '"F32"',
    '"shape"',
    '"data_offsets"',
    "0",
    "4",
    "-1",
    "1e999",
    "null",
    " ",
    "\\",
    '"__metadata__"',
    "true",
  ];
  for (let k = 0; k < 3000; k++) {
    const h = Array.from({ length: rng.int(1, 30) }, () => pieces[rng.int(0, pieces.length - 1)])
      .join("");
    try {
      parse(rawFile(h, rng.int(0, 8)));
    } catch (e) {
      if (!(e instanceof FormatError)) throw e;
    }
  }
});
