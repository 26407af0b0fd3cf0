import assert from "node:assert/strict";
import index from "../../tests/fixtures/ggml_kquant/index.json" with { type: "json" };
import { Rng } from "../../tests/util/rng.ts";
import { dequantizeRow } from "./dequantize_row.ts";
import { quantizeRow } from "./quantize_row.ts";
import { ggmlTypeByName, type GgmlTypeInfo } from "./types.ts";

const FIXTURE_DIR = new URL("../../tests/fixtures/ggml_kquant/", import.meta.url);
const canRead = Deno.permissions.querySync({ name: "read", path: FIXTURE_DIR }).state === "granted";
const K_TYPES = ["Q4_K", "Q5_K", "Q6_K"] as const;

function type(name: string): GgmlTypeInfo {
  const t = ggmlTypeByName(name);
  assert.ok(t, name);
  return t;
}

/** A Float32Array holding exactly the little-endian f32 bit patterns in `bytes`. */
function f32FromLE(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...h].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function readFixture(name: string): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = await Deno.readFile(new URL(name, FIXTURE_DIR));
  assert.equal(await sha256(bytes), (index.sha256 as Record<string, string>)[name], name);
  return bytes;
}

for (const name of K_TYPES) {
  Deno.test({
    name:
      `quantizeRow ${name} matches ggml's C quantize_row_${name.toLowerCase()}_ref byte for byte`,
    ignore: !canRead,
    fn: async () => {
      const info = (index.types as Record<string, { file: string; type_size: number }>)[name];
      const x = f32FromLE(await readFixture(index.input));
      const want = await readFixture(info.file);
      assert.equal(x.length, index.n_elements);
      const t = type(name);
      assert.equal(info.type_size, t.typeSize);
      const failed: string[] = [];
      for (const row of index.rows) {
        // One call per row, as llama.cpp quantizes a tensor row by row.
        const got = quantizeRow(t, x.subarray(row.first_element, row.first_element + row.n));
        const start = row.first_block * t.typeSize;
        const expected = want.subarray(start, start + (row.n / 256) * t.typeSize);
        assert.equal(got.length, expected.length, row.name);
        const i = got.findIndex((b, k) => b !== expected[k]);
        if (i >= 0) {
          failed.push(
            `${row.name}: block ${Math.floor(i / t.typeSize)} byte ${i % t.typeSize}: ` +
              `got ${got[i]}, ggml ${expected[i]}`,
          );
        }
      }
      assert.deepEqual(failed, [], `${name}: rows that differ from ggml`);
      // The whole input in one call gives the same bytes: blocks are independent.
      assert.deepEqual(quantizeRow(t, x), want);
    },
  });
}

Deno.test({
  name: "K-quant fixture covers zero, tiny and huge rows and f16 scale overflow",
  ignore: !canRead,
  fn: async () => {
    const want = await readFixture("q4_k.bin");
    const names = index.rows.map((r) => r.name);
    for (
      const n of [
        "all +0 n=256",
        "tiny gaussian sigma=1e-40 n=256",
        "huge gaussian sigma=1e+30 n=256",
      ]
    ) {
      assert.ok(names.includes(n), n);
    }
    // At sigma = 1e8 the Q4_K super-block scale max_scale / 63 exceeds f16: ggml stores +Inf.
    const row = index.rows.find((r) => r.name === "huge gaussian sigma=1e+08 n=256")!;
    const o = row.first_block * 144;
    assert.equal(want[o] | (want[o + 1] << 8), 0x7c00);
    const zero = index.rows.find((r) => r.name === "all +0 n=256")!;
    assert.ok(
      want.subarray(zero.first_block * 144, zero.first_block * 144 + 144).every((b) => b === 0),
    );
  },
});

Deno.test("K-quants: Gaussian rows dequantize close to the input, Q6_K closest", () => {
  const rng = new Rng(11);
  const x = new Float32Array(4096).map(() => rng.normal() * 0.02);
  const rms: Record<string, number> = {};
  for (const name of K_TYPES) {
    const t = type(name);
    const bytes = quantizeRow(t, x);
    assert.equal(bytes.length, (4096 / 256) * t.typeSize);
    const back = dequantizeRow(t, bytes, 4096);
    let se = 0;
    for (let i = 0; i < x.length; i++) se += (back[i] - x[i]) ** 2;
    rms[name] = Math.sqrt(se / x.length) / 0.02;
  }
  // Relative RMS error of ggml's reference K-quants on Gaussian data: about 0.1 (4-bit),
  // 0.05 (5-bit) and 0.025 (6-bit).
  assert.ok(rms.Q4_K < 0.13, `Q4_K ${rms.Q4_K}`);
  assert.ok(rms.Q5_K < 0.065, `Q5_K ${rms.Q5_K}`);
  assert.ok(rms.Q6_K < 0.035, `Q6_K ${rms.Q6_K}`);
  assert.ok(rms.Q6_K < rms.Q5_K && rms.Q5_K < rms.Q4_K, JSON.stringify(rms));
});

Deno.test("K-quants: out with a byte offset, only the prefix written; blocks independent", () => {
  const rng = new Rng(5);
  const x = new Float32Array(512).map(() => rng.normal());
  for (const name of K_TYPES) {
    const t = type(name);
    const whole = quantizeRow(t, x);
    const backing = new Uint8Array(3 + 2 * t.typeSize + 5).fill(0xee);
    const out = backing.subarray(3, 3 + 2 * t.typeSize + 4);
    assert.equal(quantizeRow(t, x, out), out);
    assert.deepEqual(out.subarray(0, 2 * t.typeSize), whole);
    assert.ok(backing.subarray(0, 3).every((b) => b === 0xee), name);
    assert.ok(out.subarray(2 * t.typeSize).every((b) => b === 0xee), name);
    assert.deepEqual(quantizeRow(t, x.subarray(256)), whole.subarray(t.typeSize), name);
    assert.equal(quantizeRow(t, new Float32Array(0)).length, 0);
  }
});

Deno.test("K-quants reject NaN and ±Infinity before writing, and partial blocks", () => {
  for (const name of K_TYPES) {
    const t = type(name);
    for (const bad of [NaN, Infinity, -Infinity]) {
      const x = new Float32Array(512);
      x[300] = bad;
      const out = new Uint8Array(2 * t.typeSize).fill(7);
      assert.throws(() => quantizeRow(t, x, out), {
        name: "RangeError",
        message: new RegExp(`${name} block 1 contains a non-finite value .* at index 300`),
      });
      assert.ok(out.every((b) => b === 7), `${name}: nothing written`);
    }
    assert.throws(() => quantizeRow(t, new Float32Array(128)), {
      name: "RangeError",
      message: new RegExp(`x.length 128 is not a multiple of ${name}'s block size 256`),
    });
  }
});

Deno.test("Q6_K: a block whose sub-block scales are all under 1e-15 is all zero bytes", () => {
  const x = new Float32Array(256).fill(1e-16);
  assert.ok(quantizeRow(type("Q6_K"), x).every((b) => b === 0));
  // At 1e-12 the sub-block scales (about -3e-14) pass GROUP_MAX_EPS, but d = scale / -128
  // underflows f16 to 0, while the int8 scales are -128 (0x80); `if (!d) continue` then keeps
  // the search's levels: 0 (-32) for every element.
  const y = quantizeRow(type("Q6_K"), new Float32Array(256).fill(1e-12));
  assert.equal(y[208] | (y[209] << 8), 0);
  assert.ok(y.subarray(192, 208).every((b) => b === 0x80), "int8 scales -128");
  assert.ok(y.subarray(0, 192).every((b) => b === 0), "levels 0");
});
