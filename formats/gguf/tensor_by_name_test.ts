import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { assertFormatError, parse, pattern, sampleParts } from "./_test_utils.ts";
import { readTensorBytes, requireTensor, tensorByName } from "./tensor_by_name.ts";
import { writeGguf } from "./write_gguf.ts";

Deno.test("tensors are found by name and their bytes read back", () => {
  const parts = sampleParts();
  const bytes = writeGguf(parts);
  const src = bytesSource("t.gguf", bytes);
  const f = parse(bytes);
  for (const want of parts.tensors!) {
    const t = tensorByName(f, want.name)!;
    assert.equal(t, requireTensor(f, want.name));
    assert.equal(t, f.tensors[t.index]);
    assert.deepEqual(readTensorBytes(src, t), want.data);
  }
  assert.equal(tensorByName(f, "missing.weight"), undefined);
  assertFormatError(() => requireTensor(f, "missing.weight"), {
    field: 'tensors["missing.weight"]',
    offset: 24,
    detail: /required tensor is missing/,
  });
});

Deno.test("reading a tensor from a shorter source is a FormatError", () => {
  const bytes = writeGguf(sampleParts());
  const f = parse(bytes);
  const t = f.tensors[2];
  assertFormatError(
    () => readTensorBytes(bytesSource("t.gguf", bytes.subarray(0, t.offset + 1)), t),
    {
      field: 'tensors["k.weight"].data',
      offset: t.offset,
    },
  );
  assert.deepEqual(readTensorBytes(bytesSource("t.gguf", bytes), t), pattern(36, 3));
});
