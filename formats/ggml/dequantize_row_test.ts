import assert from "node:assert/strict";
import index from "../../tests/fixtures/ggml_dequant/index.json" with { type: "json" };
import { Rng } from "../../tests/util/rng.ts";
import { dequantizeRow, dequantizeSupported } from "./dequantize_row.ts";
import { ggmlBytes, ggmlType, ggmlTypeByName, type GgmlTypeInfo } from "./types.ts";

// ---- helpers --------------------------------------------------------------------------------

const FIXTURE_DIR = new URL("../../tests/fixtures/ggml_dequant/", import.meta.url);
const canRead = Deno.permissions.querySync({ name: "read", path: FIXTURE_DIR }).state === "granted";

interface Group {
  name: string;
  first_block: number;
  n_blocks: number;
  nonfinite: boolean;
}
interface FixtureType {
  id: number;
  block_size: number;
  type_size: number;
  n_blocks: number;
  n_elements: number;
  bytes: string;
  expected: string;
  sha256: Record<string, string>;
  groups: Group[];
}
interface DivergentElement {
  index: number;
  input_bits: number;
  gguf_py_bits: number;
  ggml_c_bits: number;
}

const TYPES = index.types as Record<string, FixtureType>;
const SUPPORTED = [
  "F32",
  "F16",
  "BF16",
  "Q4_0",
  "Q4_1",
  "Q5_0",
  "Q5_1",
  "Q8_0",
  "Q2_K",
  "Q3_K",
  "Q4_K",
  "Q5_K",
  "Q6_K",
  "Q8_K",
];

function type(name: string): GgmlTypeInfo {
  const t = ggmlTypeByName(name);
  assert.ok(t, name);
  return t;
}

async function readFixture(file: string): Promise<Uint8Array<ArrayBuffer>> {
  return await Deno.readFile(new URL(file, FIXTURE_DIR));
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest].map((v) => v.toString(16).padStart(2, "0")).join("");
}

/** The f32 bit patterns of little-endian bytes, independent of the host's byte order. */
function u32FromLE(bytes: Uint8Array): Uint32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Uint32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}

function bitsOf(x: Float32Array): Uint32Array {
  return new Uint32Array(x.buffer, x.byteOffset, x.length);
}

function isNaNBits(b: number): boolean {
  return (b & 0x7fffffff) > 0x7f800000;
}

function hex(b: number): string {
  return "0x" + (b >>> 0).toString(16).padStart(8, "0");
}

/** Divergent elements (gguf-py vs ggml C) recorded by the generator for a dequantized type. */
function divergences(typeName: string, what: string): DivergentElement[] {
  const d = index.divergences.find((x) => x.type === typeName && x.what.startsWith(what));
  return d === undefined ? [] : d.elements;
}

/**
 * Compares our values with gguf-py's bit for bit. In `nonfinite` groups a NaN only has to
 * meet a NaN (ggml's NaN sign and payload there depend on the CPU). `override` maps an element
 * index to the bits ggml's C code gives where gguf-py differs.
 */
function assertMatches(
  name: string,
  ours: Float32Array,
  expected: Uint32Array,
  fx: FixtureType,
  override: Map<number, number>,
): number {
  const got = bitsOf(ours);
  assert.equal(got.length, expected.length, `${name}: length`);
  let nanClassOnly = 0;
  for (const g of fx.groups) {
    const start = g.first_block * fx.block_size;
    const end = start + g.n_blocks * fx.block_size;
    for (let i = start; i < end; i++) {
      const want = override.get(i) ?? expected[i];
      if (got[i] === want) continue;
      if (g.nonfinite && isNaNBits(got[i]) && isNaNBits(want)) {
        nanClassOnly++;
        continue;
      }
      const block = Math.floor(i / fx.block_size);
      assert.fail(
        `${name} element ${i} (block ${block}, group "${g.name}"): ours ${hex(got[i])} ` +
          `(${ours[i]}), want ${hex(want)}`,
      );
    }
  }
  return nanClassOnly;
}

// ---- the gguf-py fixture --------------------------------------------------------------------

Deno.test("fixture index covers every type dequantizeRow supports except Q8_K", () => {
  assert.deepEqual(Object.keys(TYPES).sort(), SUPPORTED.filter((n) => n !== "Q8_K").sort());
  for (const [name, fx] of Object.entries(TYPES)) {
    const t = type(name);
    assert.equal(fx.id, t.id, name);
    assert.equal(fx.block_size, t.blockSize, name);
    assert.equal(fx.type_size, t.typeSize, name);
    assert.equal(fx.n_elements, fx.n_blocks * fx.block_size, name);
    const covered = fx.groups.reduce((s, g) => s + g.n_blocks, 0);
    assert.equal(covered, fx.n_blocks, `${name}: groups cover every block`);
  }
});

Deno.test({
  name: "fixture files match their recorded sha256 and sizes",
  ignore: !canRead,
  fn: async () => {
    for (const [name, fx] of Object.entries(TYPES)) {
      const bytes = await readFixture(fx.bytes);
      const f32 = await readFixture(fx.expected);
      assert.equal(bytes.length, fx.n_blocks * fx.type_size, name);
      assert.equal(f32.length, fx.n_elements * 4, name);
      assert.equal(await sha256Hex(bytes), fx.sha256[fx.bytes], fx.bytes);
      assert.equal(await sha256Hex(f32), fx.sha256[fx.expected], fx.expected);
    }
  },
});

for (const [name, fx] of Object.entries(TYPES)) {
  Deno.test({
    name: `dequantizeRow ${name} is bit-identical to gguf-py (ggml_dequant fixture)`,
    ignore: !canRead,
    fn: async () => {
      const bytes = await readFixture(fx.bytes);
      const expected = u32FromLE(await readFixture(fx.expected));
      const override = new Map(
        divergences(name, "dequantize").map((e) => [e.index, e.ggml_c_bits]),
      );
      const nanClassOnly = assertMatches(
        name,
        dequantizeRow(type(name), bytes, fx.n_elements),
        expected,
        fx,
        override,
      );
      // Every group but the non-finite one must be exact, and that one is mostly exact too.
      const nonfinite = fx.groups.filter((g) => g.nonfinite);
      const nonfiniteElements = nonfinite.reduce((s, g) => s + g.n_blocks, 0) * fx.block_size;
      assert.ok(nanClassOnly <= nonfiniteElements, `${name}: ${nanClassOnly} NaN-class matches`);
      if (!["F32", "F16", "BF16"].includes(name)) assert.equal(nonfinite.length, 1, name);
    },
  });
}

Deno.test({
  name: "dequantizeRow gives the same values block by block as for the whole row",
  ignore: !canRead,
  fn: async () => {
    for (const [name, fx] of Object.entries(TYPES)) {
      const bytes = await readFixture(fx.bytes);
      const t = type(name);
      const whole = dequantizeRow(t, bytes, fx.n_elements);
      const out = new Float32Array(t.blockSize);
      for (let b = 0; b < fx.n_blocks; b++) {
        const block = bytes.subarray(b * t.typeSize, (b + 1) * t.typeSize);
        dequantizeRow(t, block, t.blockSize, out);
        // NaN sign and payload from a non-finite scale depend on how V8
        // compiled the arithmetic (it may differ between two calls), so NaNs
        // compare as a class; every other value must match bit for bit.
        assert.deepEqual(
          canonicalNaN(bitsOf(out)),
          canonicalNaN(bitsOf(whole.subarray(b * t.blockSize, (b + 1) * t.blockSize))),
          `${name} block ${b}`,
        );
      }
    }
  },
});

Deno.test("known divergence: F16 signalling NaNs are quieted as by ggml's C conversion", async (t) => {
  const elements = divergences("F16", "dequantize");
  assert.ok(elements.length >= 6, "the fixture has signalling-NaN F16 inputs");
  for (const e of elements) {
    const exp = (e.input_bits >>> 10) & 0x1f;
    const mant = e.input_bits & 0x3ff;
    assert.ok(exp === 31 && mant !== 0 && (mant & 0x200) === 0, `${hex(e.input_bits)} is a sNaN`);
    // gguf-py (numpy cast) keeps the NaN signalling; ggml sets the quiet bit, nothing else.
    assert.equal(
      e.gguf_py_bits,
      (((e.input_bits & 0x8000) << 16) | 0x7f800000 | (mant << 13)) >>> 0,
    );
    assert.equal(e.ggml_c_bits, (e.gguf_py_bits | 0x00400000) >>> 0);
  }
  await t.step("ours equal ggml's bits", () => {
    const f16 = type("F16");
    for (const e of elements) {
      const bytes = new Uint8Array([e.input_bits & 0xff, e.input_bits >>> 8]);
      const got = bitsOf(dequantizeRow(f16, bytes, 1))[0];
      assert.equal(hex(got), hex(e.ggml_c_bits), `F16 ${hex(e.input_bits)}`);
    }
  });
});

// ---- exhaustive and hand-made checks --------------------------------------------------------

Deno.test("F16: all 65536 patterns, against an independent decode", () => {
  const bytes = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    bytes[2 * h] = h & 0xff;
    bytes[2 * h + 1] = h >>> 8;
  }
  const y = dequantizeRow(type("F16"), bytes, 65536);
  const bits = bitsOf(y);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 31 && mant !== 0) {
      // NaN: sign and payload kept, quiet bit set (ggml_compute_fp16_to_fp32).
      assert.equal(bits[h], (((h & 0x8000) << 16) | 0x7fc00000 | (mant << 13)) >>> 0, hex(h));
      continue;
    }
    const want = exp === 31
      ? sign * Infinity
      : exp === 0
      ? sign * mant * 2 ** -24
      : sign * (1 + mant / 1024) * 2 ** (exp - 15);
    assert.ok(Object.is(y[h], want), `F16 ${hex(h)}: ${y[h]} !== ${want}`);
  }
});

Deno.test("BF16: all 65536 patterns are the upper 16 bits of the f32, NaN payloads kept", () => {
  const bytes = new Uint8Array(65536 * 2);
  for (let h = 0; h < 65536; h++) {
    bytes[2 * h] = h & 0xff;
    bytes[2 * h + 1] = h >>> 8;
  }
  const bits = bitsOf(dequantizeRow(type("BF16"), bytes, 65536));
  for (let h = 0; h < 65536; h++) assert.equal(bits[h], (h << 16) >>> 0, hex(h));
});

Deno.test("F32: bytes are copied unchanged, signalling NaNs included, from any byte offset", () => {
  const rng = new Rng(5);
  const backing = new Uint8Array(1 + 64 * 4);
  for (let i = 0; i < backing.length; i++) backing[i] = rng.int(0, 255);
  backing.set([0x01, 0x00, 0x80, 0x7f], 1); // 0x7f800001, a signalling NaN
  const bytes = backing.subarray(1); // unaligned for a Float32Array view
  const y = dequantizeRow(type("F32"), bytes, 64);
  assert.deepEqual(bitsOf(y), u32FromLE(bytes));
  assert.equal(bitsOf(y)[0], 0x7f800001);
});

Deno.test("Q8_K (no gguf-py oracle): d is a little-endian f32, value = fround(d * q)", () => {
  const t = type("Q8_K");
  const block = new Uint8Array(292 * 3);
  const view = new DataView(block.buffer);
  const rng = new Rng(11);
  const ds = [0.1, -3.0517578125e-5, 2 ** -149, 3e38];
  for (let b = 0; b < 3; b++) {
    view.setFloat32(b * 292, ds[b], true);
    for (let j = 0; j < 256; j++) block[b * 292 + 4 + j] = rng.int(0, 255);
    for (let j = 0; j < 32; j++) block[b * 292 + 260 + j] = rng.int(0, 255); // bsums: unused
  }
  const y = dequantizeRow(t, block, 768);
  for (let b = 0; b < 3; b++) {
    const d = Math.fround(ds[b]);
    for (let j = 0; j < 256; j++) {
      const q = (block[b * 292 + 4 + j] << 24) >> 24;
      assert.ok(Object.is(y[b * 256 + j], Math.fround(d * q)), `block ${b} [${j}]`);
    }
  }
  // f32 overflow: 3e38 * 127 is +Infinity in f32.
  view.setFloat32(0, 3e38, true);
  block[4] = 127;
  block[5] = 0x81; // -127
  const z = dequantizeRow(t, block.subarray(0, 292), 256);
  assert.equal(z[0], Infinity);
  assert.equal(z[1], -Infinity);
});

Deno.test("hand-made blocks decode to the values ggml's layout gives", () => {
  // Q4_1: d = 0.5, m = -1, nibbles lo = j & 15, hi = 15 - (j & 15).
  const q41 = new Uint8Array(20);
  q41.set([0x00, 0x38, 0x00, 0xbc], 0);
  for (let j = 0; j < 16; j++) q41[4 + j] = j | ((15 - j) << 4);
  const y41 = dequantizeRow(type("Q4_1"), q41, 32);
  for (let j = 0; j < 16; j++) {
    assert.equal(y41[j], j * 0.5 - 1);
    assert.equal(y41[j + 16], (15 - j) * 0.5 - 1);
  }
  // Q5_0: d = 1, all nibbles 0, qh bit j set for odd j: value = (qh_j << 4) - 16.
  const q50 = new Uint8Array(22);
  q50.set([0x00, 0x3c, 0xaa, 0xaa, 0xaa, 0xaa], 0);
  const y50 = dequantizeRow(type("Q5_0"), q50, 32);
  for (let j = 0; j < 32; j++) assert.equal(y50[j], j % 2 === 1 ? 0 : -16, `Q5_0 [${j}]`);
  // Q6_K: d = 1, scales[i] = i - 8, every q = 0b100001 - 32 = 1 -> value = scale of the group.
  const q6 = new Uint8Array(210);
  q6.fill(0x11, 0, 128); // ql: low and high nibble 1
  q6.fill(0xaa, 128, 192); // qh: every 2-bit field 2 -> +32
  for (let i = 0; i < 16; i++) q6[192 + i] = (i - 8) & 0xff;
  q6.set([0x00, 0x3c], 208);
  const y6 = dequantizeRow(type("Q6_K"), q6, 256);
  for (let i = 0; i < 256; i++) assert.equal(y6[i], Math.floor(i / 16) - 8, `Q6_K [${i}]`);
});

/** Fixture-independent check that each byte of a block layout is read. */
Deno.test("every byte of each block layout feeds the output (bit-flip mutation)", () => {
  const unused: Record<string, [number, number]> = { Q8_K: [260, 292] }; // bsums
  const rng = new Rng(2024);
  for (const name of SUPPORTED) {
    const t = type(name);
    const nBlocks = 8;
    const bytes = new Uint8Array(nBlocks * t.typeSize);
    for (let i = 0; i < bytes.length; i++) bytes[i] = rng.int(0, 255);
    // Keep scale fields finite and nonzero so no flip is masked by a zero or NaN scale.
    const f16Fields: Record<string, number[]> = {
      Q4_0: [0],
      Q4_1: [0, 2],
      Q5_0: [0],
      Q5_1: [0, 2],
      Q8_0: [0],
      Q2_K: [80, 82],
      Q3_K: [108],
      Q4_K: [0, 2],
      Q5_K: [0, 2],
      Q6_K: [208],
    };
    for (let b = 0; b < nBlocks; b++) {
      for (const off of f16Fields[name] ?? []) {
        bytes.set([rng.int(0, 255), 0x38], b * t.typeSize + off);
      }
      if (name === "Q8_K") new DataView(bytes.buffer).setFloat32(b * t.typeSize, 0.25, true);
    }
    const nElements = nBlocks * t.blockSize; // F32 / F16 / BF16: a block is one element
    const base = bitsOf(dequantizeRow(t, bytes, nElements)).slice();
    const [u0, u1] = unused[name] ?? [t.typeSize, t.typeSize];
    for (let off = 0; off < t.typeSize; off++) {
      let changed = false;
      for (let b = 0; b < nBlocks && !changed; b++) {
        for (let bit = 0; bit < 8 && !changed; bit++) {
          const pos = b * t.typeSize + off;
          bytes[pos] ^= 1 << bit;
          const y = bitsOf(dequantizeRow(t, bytes, nElements));
          changed = y.some((v, i) => v !== base[i]);
          bytes[pos] ^= 1 << bit;
        }
      }
      assert.equal(changed, off < u0 || off >= u1, `${name}: flipping byte ${off} of a block`);
    }
  }
});

// ---- validation and output buffers -----------------------------------------------------------

Deno.test("dequantizeSupported: exactly the documented types", () => {
  for (const id of [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 30]) {
    const t = ggmlType(id)!;
    assert.equal(dequantizeSupported(t), SUPPORTED.includes(t.name), t.name);
  }
  assert.equal(dequantizeSupported({ id: 2, name: "Q4_0", blockSize: 16, typeSize: 18 }), false);
  assert.equal(dequantizeSupported({ id: 99, name: "X", blockSize: 1, typeSize: 1 }), false);
  assert.equal(dequantizeSupported(null as unknown as GgmlTypeInfo), false);
});

Deno.test("dequantizeRow rejects bad types", () => {
  const bytes = new Uint8Array(64);
  assert.throws(() => dequantizeRow(null as unknown as GgmlTypeInfo, bytes, 0), TypeError);
  assert.throws(() => dequantizeRow("Q4_0" as unknown as GgmlTypeInfo, bytes, 0), TypeError);
  assert.throws(
    () => dequantizeRow({ id: 99, name: "X", blockSize: 1, typeSize: 1 }, bytes, 0),
    { name: "RangeError", message: /unknown ggml type id 99/ },
  );
  assert.throws(
    () => dequantizeRow({ id: 2, name: "Q4_0", blockSize: 16, typeSize: 18 }, bytes, 0),
    { name: "RangeError", message: /does not match ggml's Q4_0/ },
  );
  for (const name of ["Q8_1", "I8", "I16", "I32", "I64", "F64"]) {
    assert.throws(() => dequantizeRow(type(name), bytes, 0), {
      name: "RangeError",
      message: new RegExp(`type ${name} \\(id \\d+\\) is not supported`),
    });
  }
});

Deno.test("dequantizeRow rejects bad bytes, counts and output buffers", () => {
  const q4k = type("Q4_K");
  const ok = new Uint8Array(144);
  for (const bad of [new Int8Array(144), new Uint8ClampedArray(144), ok.buffer, [0, 1], null]) {
    assert.throws(() => dequantizeRow(q4k, bad as unknown as Uint8Array, 256), TypeError);
  }
  assert.throws(() => dequantizeRow(q4k, ok, "256" as unknown as number), TypeError);
  for (const n of [-256, 1.5, NaN, Infinity, 2 ** 53, 128, 255, 257]) {
    assert.throws(() => dequantizeRow(q4k, ok, n), RangeError, String(n));
  }
  assert.throws(() => dequantizeRow(q4k, ok, 512), {
    name: "RangeError",
    message: /bytes length 144 is less than required 288/,
  });
  assert.throws(() => dequantizeRow(q4k, ok.subarray(0, 143), 256), RangeError);
  assert.throws(
    () => dequantizeRow(q4k, ok, 256, new Float64Array(256) as unknown as Float32Array),
    TypeError,
  );
  assert.throws(() => dequantizeRow(q4k, ok, 256, new Float32Array(255)), {
    name: "RangeError",
    message: /out length 255 is less than required 256/,
  });
  assert.throws(() => dequantizeRow(type("F16"), new Uint8Array(3), 2), RangeError);
  // Accepted edges: zero elements, exact lengths, longer bytes.
  assert.equal(dequantizeRow(q4k, new Uint8Array(0), 0).length, 0);
  assert.equal(dequantizeRow(q4k, new Uint8Array(200), 256).length, 256);
});

Deno.test("a rejected call leaves the output buffer untouched", () => {
  const out = new Float32Array(256).fill(3);
  assert.throws(() => dequantizeRow(type("Q6_K"), new Uint8Array(209), 256, out), RangeError);
  assert.ok(out.every((v) => v === 3));
});

Deno.test("out is reused: same object returned, only the first nElements written", () => {
  const rng = new Rng(77);
  for (const name of SUPPORTED) {
    const t = type(name);
    const n = 2 * (t.blockSize === 1 ? 16 : t.blockSize);
    const bytes = new Uint8Array(ggmlBytes(t, n)!);
    for (let i = 0; i < bytes.length; i++) bytes[i] = rng.int(0, 255);
    const fresh = dequantizeRow(t, bytes, n);
    assert.equal(fresh.length, n);
    // A subarray with a byte offset, sentinels on both sides, filled with junk first.
    const backing = new Float32Array(n + 7).fill(-42);
    const out = backing.subarray(3, 3 + n + 2);
    const r1 = dequantizeRow(t, bytes, n, out);
    assert.equal(r1, out, name);
    assert.deepEqual(bitsOf(out.subarray(0, n)), bitsOf(fresh), name);
    assert.deepEqual([...backing.subarray(0, 3)], [-42, -42, -42], name);
    assert.deepEqual([...backing.subarray(3 + n)], [-42, -42, -42, -42], name);
    // Reusing the same buffer for other data overwrites every value.
    const zeros = new Uint8Array(bytes.length);
    dequantizeRow(t, zeros, n, out);
    assert.deepEqual(bitsOf(out.subarray(0, n)), bitsOf(dequantizeRow(t, zeros, n)), name);
  }
});

/** Replaces every f32 NaN bit pattern with the canonical quiet NaN. */
function canonicalNaN(bits: Uint32Array): Uint32Array {
  return bits.map((
    b,
  ) => ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0 ? 0x7fc00000 : b));
}
