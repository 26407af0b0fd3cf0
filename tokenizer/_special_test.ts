import assert from "node:assert/strict";
import { addedSet, type AddedToken, partitionLlama, splitAdded, Trie } from "./_special.ts";

function added(content: string, id: number, flags: Partial<AddedToken> = {}): AddedToken {
  return {
    id,
    content,
    singleWord: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: false,
    ...flags,
  };
}

Deno.test("partitionLlama: longest token claims first, then shorter ones in what is left", () => {
  const texts = ["<long>", "<l", "ng>", "x"];
  const sp = {
    texts,
    ids: [10, 11, 12, 13],
    always: [false, false, true, true],
    trie: new Trie(texts),
  };
  assert.deepEqual(partitionLlama("a<long>b<l ng>x", sp, true), ["a", 10, "b", 11, " ", 12, 13]);
  // Without parseSpecial only the always-matched (user-defined) tokens are cut out.
  assert.deepEqual(partitionLlama("a<long>b<l ng>x", sp, false), ["a<lo", 12, "b<l ", 12, 13]);
  assert.deepEqual(partitionLlama("xxx", sp, false), [13, 13, 13]);
  assert.deepEqual(partitionLlama("", sp, true), []);
});

Deno.test("splitAdded: leftmost-longest, single_word, lstrip/rstrip, special tokens as text still consume", () => {
  const set = addedSet([
    added("[M]", 1, { lstrip: true, special: true }),
    added("<s>", 2, { rstrip: true, special: true }),
    added("cat", 3, { singleWord: true }),
    added("ab", 4),
    added("abc", 5),
    added("xab", 6, { special: true }),
  ], (t) => t.content);
  const show = (text: string, parse = true) =>
    splitAdded(text, set, parse).map((
      s,
    ) => (s.id === undefined ? s.text : `#${s.id}:${JSON.stringify(s.text)}`));
  assert.deepEqual(show("x  [M] y"), ["x", `#1:"  [M]"`, " y"]);
  assert.deepEqual(show("<s>  y"), [`#2:"<s>  "`, "y"]);
  assert.deepEqual(show("a cat, catalog"), ["a ", `#3:"cat"`, ", catalog"]);
  assert.deepEqual(show("zabcab"), ["z", `#5:"abc"`, `#4:"ab"`]);
  assert.deepEqual(show("[M]ab", false), ["[M]", `#4:"ab"`]);
  // tokenizers' scan still consumes a special match it then treats as text: "ab" inside "xab" is not found.
  assert.deepEqual(show("xab", true), [`#6:"xab"`]);
  assert.deepEqual(show("xab", false), ["xab"]);
  assert.deepEqual(show(""), [""]);
});
