/** Pooling and normalisation of hidden rows (pooling.ts), on hand-computed rows. */
import assert from "node:assert/strict";
import { embedTokens, type HiddenStateSource, Pooler, poolingOf } from "./pooling.ts";
import type { ModelConfig } from "./config.ts";

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
