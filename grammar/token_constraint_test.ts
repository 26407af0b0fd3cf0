/**
 * Token masks: the trie walk gives exactly the tokens that one-by-one checks allow (on a toy
 * vocabulary with multi-byte characters split over tokens, and on SmolLM2's real one); end of
 * generation only where the output is complete; control tokens never; compiled constraints
 * cached per tokenizer.
 */
import assert from "node:assert/strict";
import {
  compileConstraint,
  compileGrammar,
  type ConstraintTokenizer,
  TokenConstraint,
  tokenTrie,
} from "./mod.ts";
import { SMOLLM2_GGUF, smollm2Present } from "../tests/util/test_models.ts";
import { ggufTokenizerMetadata } from "../tokenizer/_test_utils.ts";
import { tokenizerFromGgufMetadata } from "../tokenizer/mod.ts";

const enc = new TextEncoder();

/** A toy vocabulary: the strings, "é" and "中" also split into their bytes, an EOG and a control token. */
function toy(): ConstraintTokenizer & { words: Uint8Array[] } {
  const strings = ["{", "}", '"', "a", "ab", '"a', '":', " ", "1", "12", "x", "<eos>", "<ctl>"];
  const words: Uint8Array[] = strings.map((s) => enc.encode(s));
  for (const ch of ["é", "中"]) {
    const b = enc.encode(ch);
    words.push(b);
    for (let i = 0; i < b.length; i++) words.push(b.slice(i, i + 1));
    words.push(b.slice(0, 2));
  }
  const eos = strings.indexOf("<eos>"), ctl = strings.indexOf("<ctl>");
  return {
    words,
    vocabSize: words.length,
    tokenBytes: (id) => words[id],
    isEog: (id) => id === eos,
    isSpecial: (id) => id === eos || id === ctl,
  };
}

function maskMatchesChecks(c: TokenConstraint, path: number[]): void {
  const m = c.matcher();
  for (const id of path) {
    const mask = m.mask();
    for (let t = 0; t < c.vocabSize; t++) {
      assert.equal(mask[t] === 1, m.allows(t), `token ${t} after ${path.join(",")}`);
    }
    assert.ok(m.allows(id), `path token ${id}`);
    m.accept(id);
  }
}

Deno.test("mask: the trie walk equals per-token checks, UTF-8 split over tokens", () => {
  const t = toy();
  const id = (s: string) => t.words.findIndex((w) => new TextDecoder().decode(w) === s);
  const c = new TokenConstraint(compileGrammar('root ::= "{" [é中a]+ "}"'), t);
  const e = enc.encode("é");
  const first = t.words.findIndex((w) => w.length === 1 && w[0] === e[0]);
  const second = t.words.findIndex((w) => w.length === 1 && w[0] === e[1]);
  maskMatchesChecks(c, [id("{"), first, second, id("a"), id("中"), id("}")]);
  const m = c.matcher();
  m.accept(id("{"));
  m.accept(first);
  assert.ok(!m.allows(id("}")), "a character in progress must be finished first");
  assert.ok(!m.allows(id("a")));
  m.accept(second);
  assert.ok(m.allows(id("}")));
  // EOG only where complete; control tokens never.
  const eos = id("<eos>"), ctl = id("<ctl>");
  assert.ok(!m.allows(eos) && !m.allows(ctl));
  m.accept(id("}"));
  assert.ok(m.isAccepting() && !m.canContinue());
  assert.ok(m.allows(eos) && !m.allows(ctl));
  assert.equal(m.mask()[eos], 1);
  assert.throws(() => m.accept(id("x")), /not allowed/);
});

Deno.test({
  name: "mask: SmolLM2's vocabulary, a JSON schema: mask equals per-token checks along a path",
  ignore: !smollm2Present,
  fn() {
    const tok = tokenizerFromGgufMetadata(ggufTokenizerMetadata(SMOLLM2_GGUF), { name: "smollm2" });
    const spec = {
      kind: "json_schema" as const,
      schema: {
        type: "object",
        properties: {
          name: { type: "string", maxLength: 8 },
          n: { type: "integer", minimum: -5, maximum: 300 },
        },
        required: ["name", "n"],
      },
    };
    const c = compileConstraint(spec, tok);
    assert.equal(compileConstraint(spec, tok), c, "cached per tokenizer and text");
    assert.equal(tokenTrie(tok), c.trie);
    const path = tok.encode('{"name": "Zoë", "n": 250}');
    maskMatchesChecks(c, path);
    const m = c.matcher();
    for (const id of path) m.accept(id);
    assert.ok(m.isAccepting() && !m.canContinue());
    for (const eog of tok.eogIds) assert.ok(m.allows(eog));
    // A digit that would leave the range is refused.
    const m2 = c.matcher();
    for (const id of tok.encode('{"name": "a", "n": 30')) m2.accept(id);
    assert.ok(m2.allows(tok.encode("0")[0]));
    assert.ok(!m2.allows(tok.encode("1")[0]), "301 > 300");
  },
});
