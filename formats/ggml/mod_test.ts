import assert from "node:assert/strict";
import * as mod from "./mod.ts";
import * as dequantize from "./dequantize_row.ts";
import * as quantize from "./quantize_row.ts";
import * as types from "./types.ts";

Deno.test("mod.ts re-exports the public API of types.ts, dequantize_row.ts and quantize_row.ts", () => {
  const expected = { ...types, ...dequantize, ...quantize };
  assert.deepEqual(Object.keys(mod).sort(), Object.keys(expected).sort());
  for (const [name, value] of Object.entries(expected)) {
    assert.equal((mod as Record<string, unknown>)[name], value, name);
  }
  assert.deepEqual(Object.keys(mod).sort(), [
    "dequantizeRow",
    "dequantizeSupported",
    "ggmlBytes",
    "ggmlType",
    "ggmlTypeByName",
    "quantizeRow",
    "quantizeSupported",
  ]);
});
