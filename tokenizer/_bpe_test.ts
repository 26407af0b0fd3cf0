import assert from "node:assert/strict";
import { mergeSymbols, MergeTable } from "./_bpe.ts";

Deno.test("MergeTable: ranks by insertion, first or last duplicate wins, survives growth", () => {
  const t = new MergeTable();
  for (let i = 0; i < 5000; i++) t.add(i, i + 1, 10_000 + i, "first");
  assert.equal(t.size, 5000);
  for (let i = 0; i < 5000; i += 97) {
    assert.equal(t.rank(i, i + 1), i);
    assert.equal(t.result(t.rank(i, i + 1)), 10_000 + i);
  }
  assert.equal(t.rank(1, 0), -1);
  t.add(3, 4, 99, "first");
  assert.equal(t.rank(3, 4), 3);
  t.add(3, 4, 99, "last");
  assert.equal(t.rank(3, 4), 5001);
  assert.equal(t.result(5001), 99);
});

Deno.test("mergeSymbols: lowest rank first, leftmost on ties, negative ids never merge", () => {
  // ids: a=0 b=1 c=2; ab=3 (rank 1), bc=4 (rank 0), abc=5 from (a, bc) rank 2.
  const t = new MergeTable();
  t.add(1, 2, 4, "first"); // b c → bc
  t.add(0, 1, 3, "first"); // a b → ab
  t.add(0, 4, 5, "first"); // a bc → abc
  assert.deepEqual(mergeSymbols([0, 1, 2], t), [5]); // bc first, then a+bc
  assert.deepEqual(mergeSymbols([0, 1, 0, 1], t), [3, 3]);
  assert.deepEqual(mergeSymbols([1, 2, 1, 2], t), [4, 4]);
  assert.deepEqual(mergeSymbols([0, -1, 1], t), [0, -1, 1]);
  assert.deepEqual(mergeSymbols([], t), []);
  assert.deepEqual(mergeSymbols([2], t), [2]);
});
