import assert from "node:assert/strict";
import { NgramLookup } from "./ngram_lookup.ts";

Deno.test("NgramLookup: the latest earlier occurrence of the longest matching suffix", () => {
  const l = new NgramLookup(3);
  // Suffix [5, 6] occurred at 0 and 5; the latest (5) is followed by [9].
  assert.deepEqual(l.propose([5, 6, 7, 8, 1, 5, 6, 9, 2, 5, 6], 4), [9, 2, 5, 6]);
  assert.equal(l.lastClass, 2);
  // A 3-token match beats a more recent 2-token one.
  assert.deepEqual(l.propose([1, 2, 3, 4, 7, 2, 3, 8, 1, 2, 3], 2), [4, 7]);
  assert.equal(l.lastClass, 3);
  // Falls back to one token; nothing when the last token never occurred before.
  assert.deepEqual(l.propose([4, 9, 1, 4], 5), [9, 1, 4]);
  assert.equal(l.lastClass, 1);
  assert.deepEqual(l.propose([1, 2, 3], 5), []);
  assert.equal(l.lastClass, 0);
  assert.deepEqual(l.propose([7], 5), []);
  assert.deepEqual(l.propose([], 5), []);
  // The proposal is cut at max and at the history's end.
  assert.deepEqual(l.propose([1, 2, 1, 2, 1, 2], 1), [1]);
  // The window bounds how far back it looks.
  assert.deepEqual(new NgramLookup(1, 3).propose([8, 0, 0, 0, 8], 2), []);
  assert.throws(() => new NgramLookup(0), /n-gram size 0/);
  assert.throws(() => new NgramLookup(17), /n-gram size 17/);
});
