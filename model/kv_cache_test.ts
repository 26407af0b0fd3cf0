import assert from "node:assert/strict";
import { allocAligned } from "../ffi/mod.ts";
import { KvLayout, kvRowBytes } from "./kv_cache.ts";

Deno.test("kv cache: row bytes per type, and q8_0 only on whole blocks", () => {
  assert.equal(kvRowBytes("f32", 64), 256);
  assert.equal(kvRowBytes("f16", 64), 128);
  assert.equal(kvRowBytes("q8_0", 64), 68);
  assert.equal(kvRowBytes("q8_0", 256), 272);
  assert.throws(() => kvRowBytes("q8_0", 48), /multiple of 32; this model's is 48/);
  assert.throws(() => kvRowBytes("f16", 0), RangeError);
  assert.throws(
    () => new KvLayout({ type: "f16", heads: 2, headDim: 64, context: 0, sequences: 1 }),
    /context 0/,
  );
});

Deno.test("kv cache: copyPrefix moves each head's rows of one sequence to another, nothing else", () => {
  const kv = new KvLayout({ type: "q8_0", heads: 2, headDim: 32, context: 4, sequences: 3 });
  assert.equal(kv.rowBytes, 34);
  assert.equal(kv.cacheBytes, 2 * 3 * 4 * 34);
  using mem = allocAligned(2 * kv.cacheBytes, 64);
  const bytes = new Uint8Array(2 * kv.cacheBytes);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + 7) & 255;
  mem.write(0, bytes);
  const bases = [0, kv.cacheBytes];
  kv.copyPrefix(mem, bases, 2, 0, 3);
  const got = new Uint8Array(bytes.length);
  mem.read(0, got.length, got);
  const want = bytes.slice();
  const head = 3 * 4 * 34; // one head: 3 sequences x 4 positions
  for (const base of bases) {
    for (let h = 0; h < 2; h++) {
      const at = base + h * head;
      want.set(bytes.subarray(at + 2 * 4 * 34, at + 2 * 4 * 34 + 3 * 34), at);
    }
  }
  assert.deepEqual(got, want);
});
