import assert from "node:assert/strict";
import * as ref from "./mod.ts";

Deno.test("mod.ts exports the reference API", () => {
  const functions = [
    "f32ToF16Bits",
    "f16BitsToF32",
    "quantizeQ8_0",
    "quantizeQ8_0Into",
    "quantizeActivationsQ8_0",
    "quantizeQ4_0",
    "quantizeQ4_0Into",
    "dequantizeQ8_0",
    "dequantizeQ4_0",
    "blockDotsQ8_0Q8_0",
    "blockDotsQ4_0Q8_0",
    "dotQ8_0Q8_0",
    "dotQ4_0Q8_0",
    "matvecQ8_0",
    "matvecQ4_0",
    "rmsNorm",
    "softmax",
    "ropeInvFreq",
    "rope",
    "siluMul",
    "geluMul",
  ];
  const constants = { QK: 32, Q8_0_BLOCK_BYTES: 34, Q4_0_BLOCK_BYTES: 18, ROPE_MAX_POS: 2 ** 24 };
  assert.deepEqual(
    Object.keys(ref).sort(),
    [...functions, ...Object.keys(constants)].sort(),
  );
  const table = ref as unknown as Record<string, unknown>;
  for (const name of functions) assert.equal(typeof table[name], "function", name);
  for (const [name, value] of Object.entries(constants)) assert.equal(table[name], value, name);
});

Deno.test("end to end: quantized matvec of a small layer tracks the f32 result", () => {
  const rows = 16;
  const cols = 256;
  const w = new Float32Array(rows * cols).map((_, i) => Math.sin(i * 0.37) * 0.2);
  const x = ref.rmsNorm(
    new Float32Array(cols).map((_, i) => Math.cos(i * 0.11)),
    new Float32Array(cols).fill(1),
    1e-6,
  );
  const xq = ref.quantizeQ8_0(x);
  const y8 = ref.matvecQ8_0(ref.quantizeQ8_0(w), rows, cols, xq);
  const y4 = ref.matvecQ4_0(ref.quantizeQ4_0(w), rows, cols, xq);
  for (let r = 0; r < rows; r++) {
    let exact = 0;
    let mag = 0;
    for (let c = 0; c < cols; c++) {
      exact += w[r * cols + c] * x[c];
      mag += Math.abs(w[r * cols + c] * x[c]);
    }
    assert.ok(Math.abs(y8[r] - exact) <= 0.01 * mag, `Q8_0 row ${r}`);
    assert.ok(Math.abs(y4[r] - exact) <= 0.1 * mag, `Q4_0 row ${r}`);
  }
});
