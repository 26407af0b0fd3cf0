import assert from "node:assert/strict";
import { Rng } from "../tests/util/rng.ts";
import { TokenVocab } from "./_vocab.ts";

const never = (i: number, first: number): never => {
  throw new Error(`duplicate ${i} of ${first}`);
};

Deno.test("TokenVocab: every text's id and every id's text, as a Map and an array give them", () => {
  const rng = new Rng(7);
  const alphabet = ["a", "b", "▁", "é", "😀", " ", "\u0000", "<", ">", "x"];
  const seen = new Set<string>();
  const texts: string[] = [];
  while (texts.length < 20_000) {
    const n = 1 + Math.floor(rng.next() * 6);
    let t = "";
    for (let k = 0; k < n; k++) t += alphabet[Math.floor(rng.next() * alphabet.length)];
    if (seen.has(t)) continue;
    seen.add(t);
    texts.push(t);
  }
  texts.push("y".repeat(5000)); // longer than one String.fromCharCode chunk
  const v = new TokenVocab(texts, never);
  assert.equal(v.size, texts.length);
  assert.equal(v.maxLength, 5000);
  const map = new Map(texts.map((t, i) => [t, i]));
  for (let i = 0; i < texts.length; i++) {
    assert.equal(v.text(i), texts[i]);
    assert.equal(v.get(texts[i]), i);
    assert.ok(v.has(texts[i]));
  }
  // Texts that are not tokens, and slices that are.
  for (let k = 0; k < 5000; k++) {
    const t = texts[Math.floor(rng.next() * 20_000)] + "z";
    assert.equal(v.get(t), map.get(t));
    assert.equal(v.has(t), map.has(t));
    const from = Math.floor(rng.next() * 3);
    const len = Math.floor(rng.next() * (t.length - from + 1));
    assert.equal(v.getSlice(t, from, len), map.get(t.substr(from, len)));
  }
  assert.equal(v.get(""), undefined);
  assert.throws(() => v.text(texts.length), RangeError);
  assert.throws(() => v.text(-1), RangeError);
  assert.throws(() => v.text(0.5), RangeError);
});

Deno.test("TokenVocab: a repeated text is reported with its first id", () => {
  assert.throws(
    () => new TokenVocab(["a", "b", "c", "b"], never),
    { message: "duplicate 3 of 1" },
  );
  const one = new TokenVocab(["only"], never);
  assert.deepEqual([one.get("only"), one.get("onl"), one.text(0)], [0, undefined, "only"]);
});
