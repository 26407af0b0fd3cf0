// The plan's `quantize_k` operation (kernels-zig/src/act_q8_k.zig) against ggml's own Q8_K
// quantizer: tests/fixtures/ggml_q8_k/ holds rows and the block_q8_K bytes libggml-base's
// `quantize_row_q8_K_ref` made of them (tests/reference/gen_ggml_q8_k_fixture.ts).

import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import { allocAligned } from "./memory.ts";
import { PlanBuilder } from "./plan.ts";
import { actRowBytes, kQuantRun, RUN_KIND } from "./weight_run.ts";
import { STATUS } from "./symbols.ts";

openKernels({ threads: 2 });

const DIR = new URL("../tests/fixtures/ggml_q8_k/", import.meta.url);
const QK_K = 256;
const BLOCK = 292;

function fixture(): { input: Float32Array; blocks: Uint8Array; rows: number } {
  const input = new Float32Array(Deno.readFileSync(new URL("input_f32.bin", DIR)).buffer);
  const blocks = Deno.readFileSync(new URL("q8_k.bin", DIR));
  const rows = input.length / QK_K;
  assert.equal(blocks.length, rows * BLOCK);
  return { input, blocks, rows };
}

/**
 * Runs embed (row `token` of an F32 run holding the fixture's rows) then quantize_k for the
 * given tokens, and returns each token's ActRow.
 */
function quantizeThroughPlan(input: Float32Array, rows: number, tokens: number[]): Uint8Array[] {
  const region = allocAligned(16 + input.byteLength, 64);
  region.write(16, new Uint8Array(input.buffer));
  const run = {
    kind: RUN_KIND.TILES_F32,
    region,
    offset: 0,
    length: 16 + input.byteLength,
    cols: QK_K,
    rows: [rows],
  };
  const qBytes = actRowBytes(QK_K);
  const n = tokens.length;
  using ws = allocAligned(n * (QK_K * 4 + qBytes), 64);
  const x = { offset: 0, stride: QK_K * 4 };
  const q = { offset: n * QK_K * 4, stride: qBytes };
  const b = new PlanBuilder();
  b.embed(run, x, 1);
  b.quantizeK(x, QK_K, q);
  const plan = b.build(ws, n, 16);
  try {
    plan.run(new Uint32Array(tokens), 0);
  } finally {
    plan.close();
    region.close();
  }
  return tokens.map((_, t) => ws.read(q.offset + t * qBytes, qBytes).slice());
}

/** Checks one ActRow against ggml's block: quants, the scale of every group, group sums. */
function assertSameAsGgml(act: Uint8Array, block: Uint8Array, what: string): void {
  const bv = new DataView(block.buffer, block.byteOffset, block.byteLength);
  const av = new DataView(act.buffer, act.byteOffset, act.byteLength);
  const dBits = bv.getUint32(0, true);
  const ng = QK_K / 32;
  const scales = Math.ceil((ng * 34) / 4) * 4;
  for (let g = 0; g < ng; g++) {
    for (let i = 0; i < 32; i++) {
      assert.equal(
        av.getInt8(g * 34 + 2 + i),
        bv.getInt8(4 + g * 32 + i),
        `${what}: quant ${g * 32 + i}`,
      );
    }
    assert.equal(av.getUint32(scales + g * 4, true), dBits, `${what}: scale of group ${g}`);
    const sum = bv.getInt16(4 + QK_K + 4 * g, true) + bv.getInt16(4 + QK_K + 4 * g + 2, true);
    assert.equal(av.getInt32(scales + ng * 4 + g * 4, true), sum, `${what}: sum of group ${g}`);
  }
}

Deno.test("quantize_k gives ggml's Q8_K bytes (quantize_row_q8_K_ref), batched and one row at a time", () => {
  const { input, blocks, rows } = fixture();
  const all = Array.from({ length: rows }, (_, i) => i);
  // A batch takes the per-row path; a single row is split into slices for the pool.
  const batched = quantizeThroughPlan(input, rows, all);
  all.forEach((r) =>
    assertSameAsGgml(batched[r], blocks.subarray(r * BLOCK, (r + 1) * BLOCK), `row ${r}`)
  );
  for (const r of all) {
    const [one] = quantizeThroughPlan(input, rows, [r]);
    assert.deepEqual(one, batched[r], `row ${r} alone`);
  }
});

Deno.test("quantize_k refuses a length that is not whole super-blocks, and non-finite values", () => {
  using ws = allocAligned(8192, 64);
  const b = new PlanBuilder();
  b.quantizeK({ offset: 0, stride: 0 }, 224, { offset: 4096, stride: 0 });
  assert.throws(
    () => b.build(ws, 1, 16),
    (e) => e instanceof KernelError && e.status === STATUS.LENGTH,
  );
  const input = new Float32Array(2 * QK_K).fill(0.5);
  input[QK_K + 7] = Infinity;
  assert.equal(quantizeThroughPlan(input, 2, [0]).length, 1);
  assert.throws(
    () => quantizeThroughPlan(input, 2, [1]),
    (e) => e instanceof KernelError && e.status === STATUS.NONFINITE,
  );
});

Deno.test("K-quant runs take Q8_K activations; runs with other types keep Q8_0", () => {
  const base = { cols: 512, rows: [16, 16] };
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.PACKED_Q4_K }), true);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.PACKED_Q6_K }), true);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.TILES, types: [7, 9] }), true);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.TILES, types: [8, 8] }), true);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.TILES, types: [7, 5] }), false);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.PACKED_Q5_0 }), false);
  assert.equal(kQuantRun({ ...base, kind: RUN_KIND.TILES_Q8_0 }), false);
});
