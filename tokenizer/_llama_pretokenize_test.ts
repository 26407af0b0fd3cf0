import assert from "node:assert/strict";
import { corpus, fixture, short } from "./_test_utils.ts";
import { LLAMA_PRE_STAGES, splitWords } from "./_llama_pretokenize.ts";
import { codePoints, fromCodePoints } from "./_unicode.ts";

function words(text: string, family: string): string[] {
  const cps = codePoints(text);
  const out: string[] = [];
  let at = 0;
  for (const len of splitWords(cps, LLAMA_PRE_STAGES[family])) {
    out.push(fromCodePoints(cps, at, at + len));
    at += len;
  }
  return out;
}

Deno.test("llama.cpp pre-tokenizers split like the regexes they implement, on hand-picked cases", () => {
  assert.deepEqual(words("Hello  world", "gpt2"), ["Hello", " ", " world"]);
  assert.deepEqual(words("it's I'M", "gpt2"), ["it", "'s", " I", "'", "M"]);
  assert.deepEqual(words("it's I'M", "llama3"), ["it", "'s", " I", "'M"]);
  assert.deepEqual(words("1234567", "llama3"), ["123", "456", "7"]);
  assert.deepEqual(words("1234567", "qwen2"), ["1", "2", "3", "4", "5", "6", "7"]);
  assert.deepEqual(words("x 1234", "smollm"), ["x", " ", "1", "2", "3", "4"]);
  assert.deepEqual(words("a\n\n  b", "llama3"), ["a", "\n\n", " ", " b"]);
  assert.deepEqual(words("$+ 12345 a", "default"), ["$+", " ", "123", "45", " a"]);
  assert.deepEqual(words("", "gpt2"), []);
});

Deno.test("llama.cpp pre-tokenizers split every corpus chunk exactly as tokenizers' Split does", async () => {
  const ref = fixture<{ types: Record<string, Record<string, string>> }>("pretokenize.json");
  for (const [family, hashes] of Object.entries(ref.types)) {
    const bad: string[] = [];
    for (const c of corpus()) {
      const lengths = words(c.text, family).map((w) => w.length).join(",");
      if (await short(lengths) !== hashes[c.name]) bad.push(c.name);
    }
    assert.deepEqual(bad, [], `${family}: ${bad.join(", ")}`);
  }
});
