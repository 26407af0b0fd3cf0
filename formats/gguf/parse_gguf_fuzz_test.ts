import assert from "node:assert/strict";
import { Rng } from "../../tests/util/rng.ts";
import { FormatError } from "../errors.ts";
import { parse, sampleParts } from "./_test_utils.ts";
import type { GgufFile } from "./parse_gguf.ts";
import { writeGguf } from "./write_gguf.ts";

/** Parses, returning the file or the FormatError; anything else thrown fails the test. */
function attempt(bytes: Uint8Array, what: string): GgufFile | FormatError {
  try {
    return parse(bytes);
  } catch (e) {
    if (e instanceof FormatError) {
      assert.equal(e.file, "t.gguf");
      assert.ok(e.field.length > 0, what);
      assert.ok(Number.isSafeInteger(e.offset) && e.offset >= 0 && e.offset <= bytes.length, what);
      return e;
    }
    throw new Error(`${what}: threw ${e} instead of a FormatError`, { cause: e });
  }
}

/** What a parsed file promises: tensors aligned, inside the file, disjoint. */
function checkInvariants(f: GgufFile, size: number, what: string): void {
  assert.ok(f.version === 2 || f.version === 3, what);
  assert.ok(f.alignment > 0 && (f.alignment & (f.alignment - 1)) === 0, what);
  const spans = f.tensors.map((t) => [t.offset, t.offset + t.bytes] as const);
  for (const t of f.tensors) {
    assert.ok(t.dims.length >= 1 && t.dims.length <= 4, what);
    assert.equal(t.elements, t.dims.reduce((a, b) => a * b, 1), what);
    assert.equal((t.offset - f.dataOffset) % f.alignment, 0, what);
    assert.ok(t.offset >= f.dataOffset && t.offset + t.bytes <= size, what);
  }
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) assert.ok(spans[i][0] >= spans[i - 1][1], what);
}

Deno.test("single-byte corruptions at every offset only give a file or a FormatError", () => {
  const bytes = writeGguf(sampleParts());
  let parsed = 0;
  let rejected = 0;
  for (let pos = 0; pos < bytes.length; pos++) {
    for (const v of [0x00, 0x01, 0x09, 0x7f, 0x80, 0xff]) {
      if (bytes[pos] === v) continue;
      const b = bytes.slice();
      b[pos] = v;
      const r = attempt(b, `byte ${pos} = ${v}`);
      if (r instanceof FormatError) rejected++;
      else {
        checkInvariants(r, b.length, `byte ${pos} = ${v}`);
        parsed++;
      }
    }
  }
  assert.ok(parsed > 0 && rejected > 0, `${parsed} parsed, ${rejected} rejected`);
});

Deno.test("random corruptions (seeded) only give a file or a FormatError", () => {
  const rng = new Rng(0x6775_6666);
  const bytes = writeGguf(sampleParts());
  for (let i = 0; i < 20000; i++) {
    const b = bytes.slice();
    const edits = rng.int(1, 4);
    const log: string[] = [];
    for (let k = 0; k < edits; k++) {
      const pos = rng.int(0, b.length - 1);
      b[pos] = rng.int(0, 255);
      log.push(`${pos}=${b[pos]}`);
    }
    // Sometimes also cut the file short.
    const cut = rng.next() < 0.2 ? b.subarray(0, rng.int(0, b.length)) : b;
    const what = `case ${i}: ${log.join(" ")} length ${cut.length}`;
    const r = attempt(cut, what);
    if (!(r instanceof FormatError)) checkInvariants(r, cut.length, what);
  }
});
