/** Pooling and normalisation of hidden rows (pooling.ts), on hand-computed rows. */
import assert from "node:assert/strict";
import { embedTokens, type HiddenStateSource, Pooler, poolingOf } from "./pooling.ts";
import type { ModelConfig } from "./config.ts";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { parseGguf, readTensorBytes, writeGguf } from "../formats/gguf/mod.ts";
import { tinyGguf } from "../tests/util/tiny_gguf.ts";
import { Transformer } from "./transformer.ts";

const rows = [[3, 0, 4], [0, 2, 0], [1, 1, 1]].map((r) => Float32Array.from(r));

function pool(kind: "mean" | "cls" | "last"): number[] {
  const p = new Pooler(3, kind, rows.length);
  rows.forEach((r, i) => p.add(r, i));
  return [...p.finish()];
}

function close(a: number[], b: number[]): void {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < 1e-6, `${a} vs ${b}`));
}

Deno.test("Pooler: mean, cls and last, L2-normalised", () => {
  // mean: (4, 3, 5) / 3, normalised: (4, 3, 5) / sqrt(50).
  close(pool("mean"), [4, 3, 5].map((x) => x / Math.sqrt(50)));
  close(pool("cls"), [0.6, 0, 0.8]);
  close(pool("last"), [1, 1, 1].map((x) => x / Math.sqrt(3)));
});

Deno.test("Pooler refuses rows out of order, of the wrong width, missing, or all zero", () => {
  const p = new Pooler(3, "mean", 2);
  assert.throws(() => p.add(rows[0], 1), /row 1, expected 0/);
  assert.throws(() => p.add(new Float32Array(2), 0), /2 values, not 3/);
  p.add(rows[0], 0);
  assert.throws(() => p.finish(), /1 of 2 rows/);
  const z = new Pooler(3, "cls", 1);
  z.add(new Float32Array(3), 0);
  assert.throws(() => z.finish(), /norm 0/);
  assert.throws(() => new Pooler(3, "max" as "mean", 1), /pooling max/);
  assert.throws(() => new Pooler(0, "mean", 1), /hidden 0/);
});

Deno.test("poolingOf: what the GGUF declares, mean by default, rank and unknown refused", () => {
  assert.equal(poolingOf({ poolingType: null }), "mean");
  assert.equal(poolingOf({ poolingType: 0 }), "mean");
  assert.equal(poolingOf({ poolingType: 1 }), "mean");
  assert.equal(poolingOf({ poolingType: 2 }), "cls");
  assert.equal(poolingOf({ poolingType: 3 }), "last");
  assert.throws(() => poolingOf({ poolingType: 4 }), /rank pooling/);
  assert.throws(() => poolingOf({ poolingType: 9 }), /unknown pooling type 9/);
  assert.throws(() => poolingOf({ poolingType: -1 }), /unknown pooling type -1/);
});

Deno.test("embedTokens pools what the source gives, with the model's pooling", async () => {
  const source: HiddenStateSource = {
    config: { hidden: 3, poolingType: 3 } as ModelConfig,
    contextLength: 8,
    hiddenStatesAsync(tokens, onRow) {
      tokens.forEach((_, i) => onRow(rows[i], i));
      return Promise.resolve();
    },
  };
  close([...await embedTokens(source, [7, 8, 9])], pool("last"));
  close([...await embedTokens(source, [7, 8, 9], { pooling: "cls" })], pool("cls"));
});

Deno.test("a GGUF's pooling_type reaches the converted model, and embedTokens pools by it", async () => {
  openKernels({ threads: 1 });
  const dir = await Deno.makeTempDir({ prefix: "cflow-pooling-" });
  try {
    // The tiny llama GGUF with `llama.pooling_type = 3` (last) added to its metadata.
    const src = bytesSource("tiny.gguf", tinyGguf("Q8_0"));
    const g = parseGguf(src);
    await Deno.writeFile(
      `${dir}/tiny.gguf`,
      writeGguf({
        metadata: [...g.metadata, ["llama.pooling_type", { type: "u32", value: 3 }]],
        tensors: g.tensors.map((t) => ({
          name: t.name,
          dims: t.dims,
          type: t.type,
          data: readTensorBytes(src, t),
        })),
      }),
    );
    await convertFile(`${dir}/tiny.gguf`, `${dir}/tiny.cflow`, {
      format: "cflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
    });
    using model = Transformer.load(`${dir}/tiny.cflow`, { contextLength: 16 });
    assert.equal(model.config.poolingType, 3);
    const tokens = [1, 5, 9, 2];
    const rows = model.hiddenStates(tokens);
    const last = rows[3];
    const norm = Math.sqrt(last.reduce((s, x) => s + x * x, 0));
    close([...await embedTokens(model, tokens)], [...last].map((x) => x / norm));
    // Mean pooling when asked, over the same rows.
    const sum = rows[0].map((_, i) => rows.reduce((s, r) => s + r[i], 0));
    const n = Math.sqrt(sum.reduce((s, x) => s + x * x, 0));
    close([...await embedTokens(model, tokens, { pooling: "mean" })], [...sum].map((x) => x / n));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
