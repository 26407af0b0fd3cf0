/**
 * The default context of the model commands (`contextLength: "trained"`):
 * the length SmolLM2-135M was trained for (8,192), cut to a KV cache budget
 * with the cap reported. Ignored when the Q8_0 GGUF is absent
 * (`./dev task test:ts` derives it).
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { kvBytesPerPosition, Transformer } from "../model/mod.ts";

const GGUF = new URL("../cache/models/smollm2-135m-instruct.Q8_0.gguf", import.meta.url).pathname;
const present = (() => {
  try {
    return Deno.statSync(GGUF).isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: "contextLength 'trained': the trained length, cut to a KV cache budget",
  ignore: !present,
  async fn() {
    openKernels({ threads: 1 });
    const dir = await Deno.makeTempDir({ prefix: "cflow-context-" });
    try {
      const out = `${dir}/smollm2.cflow`;
      await convertFile(GGUF, out, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      using full = Transformer.load(out, { contextLength: "trained" });
      assert.equal(full.config.contextLength, 8192);
      assert.equal(full.contextLength, 8192);
      assert.equal(full.contextCap, undefined);
      // The library's default stays at most 4096.
      using plain = Transformer.load(out);
      assert.equal(plain.contextLength, 4096);
      const perPosition = kvBytesPerPosition(full.config, "f16");
      assert.equal(perPosition, 30 * 2 * 3 * 64 * 2);
      // A budget of 1000.5 positions: 1000 of them, and the cap says so.
      using cut = Transformer.load(out, {
        contextLength: "trained",
        contextMemoryBytes: perPosition * 1000.5,
      });
      assert.equal(cut.contextLength, 1000);
      assert.deepEqual(cut.contextCap, {
        trained: 8192,
        chosen: 1000,
        kvBytes: 1000 * perPosition,
      });
      // f32 entries take twice the bytes: half the positions.
      using cut32 = Transformer.load(out, {
        contextLength: "trained",
        kvCache: "f32",
        contextMemoryBytes: perPosition * 1000.5,
      });
      assert.equal(cut32.contextLength, 500);
      // Never below 256 positions, whatever the budget.
      using floor = Transformer.load(out, { contextLength: "trained", contextMemoryBytes: 1 });
      assert.equal(floor.contextLength, 256);
      assert.throws(
        () => Transformer.load(out, { contextLength: "trained", contextMemoryBytes: 0 }),
        /contextMemoryBytes 0 is not > 0/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
