// Property test (fast-check, fixed seed): edits of valid safetensors files,
// headers assembled from mostly-consistent parts (dtype, shape, data_offsets,
// __metadata__, header length and data size, with any field sometimes
// replaced by any JSON value or a boundary number) and random bytes either
// parse into tensors that cover the data exactly once with bytes =
// elements × dtype size, or throw a FormatError naming t.safetensors, a field
// and an offset inside the file. Shared with `deno task fuzz`.

import { assertTarget, safetensorsTarget } from "../../tests/fuzz/properties.ts";

Deno.test("parseSafetensors: any generated file gives a consistent header or a FormatError", async () => {
  await assertTarget(safetensorsTarget, 1000);
});
