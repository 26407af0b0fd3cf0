import assert from "node:assert/strict";
import { LOOKUP_CLASS, NgramLookup } from "./ngram_lookup.ts";

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

// A source span [10..17], a later span that repeats part of it with another
// continuation ([12, 13, 99, 16, 61]), and a copy of the source starting.
const H1 = [10, 11, 12, 13, 14, 15, 16, 17, 50, 12, 13, 99, 16, 61, 60, 10, 11];
const H2 = [...H1, 12, 13]; // the copy went on: two drafted tokens kept

Deno.test("NgramLookup: follows the span it copies from, where the latest match would jump", () => {
  const l = new NgramLookup(2);
  assert.deepEqual(l.propose(H1, 4), [12, 13, 14, 15]);
  assert.equal(l.lastClass, 2);
  // [12, 13] last occurred at 9 (followed by 99); the copy is at 4.
  assert.deepEqual(l.propose(H2, 4), [14, 15, 16, 17]);
  assert.equal(l.lastClass, LOOKUP_CLASS.follow);
  assert.deepEqual(new NgramLookup(2).propose(H2, 4), [99, 16, 61, 60]);
  // A new generation forgets the span.
  l.prepare();
  assert.deepEqual(l.propose(H2, 4), [99, 16, 61, 60]);
});

Deno.test("NgramLookup: after a changed token, the source after the token it replaced", () => {
  const l = new NgramLookup(2);
  l.propose(H1, 4);
  l.propose(H2, 4);
  // The model wrote 77 where the source has 14 (a rename): the copy skips 14.
  const h3 = [...H2, 77];
  assert.deepEqual(l.propose(h3, 4), [15, 16, 17, 50]);
  assert.equal(l.lastClass, LOOKUP_CLASS.replace);
  assert.deepEqual(new NgramLookup(2).propose(h3, 4), []);
  // Once per change: a second miss right after falls back to the search.
  assert.deepEqual(l.propose([...h3, 5], 4), []);
  assert.equal(l.lastClass, 0);
});

Deno.test("NgramLookup: after a change, picks the source up where the last tokens occur near the copy", () => {
  const l = new NgramLookup(2);
  l.propose(H1, 4);
  l.propose(H2, 4);
  // The model wrote 88, 16 for 14, 15, 16: 16 is 2 past where the copy stopped.
  const h = [...H2, 88, 16];
  assert.deepEqual(l.propose(h, 4), [17, 50, 12, 13]);
  assert.equal(l.lastClass, LOOKUP_CLASS.resync + 1);
  // The plain search takes the latest 16 (at 12) instead.
  assert.deepEqual(new NgramLookup(2).propose(h, 4), [61, 60, 10, 11]);
});

Deno.test("NgramLookup: a history that does not extend the last one is searched afresh", () => {
  const l = new NgramLookup(2);
  l.propose(H1, 4);
  const other = [...H1];
  other[10] = 1; // same length, an earlier token differs
  assert.deepEqual(l.propose([...other.slice(0, 15), 12, 13, 12, 13], 2), [12, 13]);
  assert.equal(l.lastClass, 2);
});
