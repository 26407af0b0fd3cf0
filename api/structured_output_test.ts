/**
 * The library's structured outputs on SmolLM2: `jsonSchema`, `grammar` and `constraint`; the
 * same tokens with prompt-lookup speculation as without (each drafted token is checked against
 * the constrained draw); a budget that ends before the value is complete says "max_tokens";
 * mistakes are typed errors.
 */
import assert from "node:assert/strict";
import { loadModel } from "../mod.ts";
import { GrammarError, GrammarMatcher, SchemaError } from "../grammar/mod.ts";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE } from "../tests/util/test_models.ts";

const SCHEMA = {
  type: "object",
  properties: {
    items: { type: "array", items: { enum: ["apple", "pear", "fig"] }, minItems: 2, maxItems: 4 },
    total: { type: "integer", minimum: 1, maximum: 40 },
  },
  required: ["items", "total"],
};

async function run(
  it: AsyncGenerator<{ id: number; text: string }, { stopReason: string }>,
): Promise<{ ids: number[]; text: string; reason: string }> {
  const ids: number[] = [];
  let text = "";
  for (let r = await it.next();; r = await it.next()) {
    if (r.done) return { ids, text, reason: r.value.stopReason };
    if (r.value.id >= 0) ids.push(r.value.id);
    text += r.value.text;
  }
}

Deno.test({
  name: "library: jsonSchema/grammar/constraint; speculation gives the same tokens; max_tokens",
  ignore: !smollm2Present,
  async fn() {
    using model = await loadModel(SMOLLM2_GGUF, {
      quant: "q4_0",
      cache: `${TEST_CACHE}/converted`,
      contextLength: 512,
    });
    const prompt = 'Fruit list as JSON: {"items": ["apple", "pear"], "total": 2}\nAnother one: ';
    for (const temperature of [0, 0.8]) {
      const opts = { jsonSchema: SCHEMA, temperature, seed: 21, maxTokens: 120 };
      const plain = await run(model.generate(prompt, opts));
      assert.equal(plain.reason, "grammar", plain.text);
      const v = JSON.parse(plain.text);
      assert.ok(v.items.length >= 2 && v.items.length <= 4 && v.total >= 1 && v.total <= 40);
      const spec = await run(model.generate(prompt, { ...opts, lookupNgram: 3 }));
      assert.deepEqual(spec.ids, plain.ids, "speculation changes nothing");
    }
    const g = 'root ::= "Answer: " ("yes" | "no")';
    const a = await run(model.generate("Is the sky blue?", { grammar: g, temperature: 0 }));
    assert.match(a.text, /^Answer: (yes|no)$/);
    const b = await run(model.chat([{ role: "user", content: "Give an object" }], {
      constraint: { kind: "json_object" },
      temperature: 0,
      maxTokens: 3,
    }));
    assert.equal(b.reason, "max_tokens");
    const m = GrammarMatcher.fromGbnf('root ::= "{" .*');
    assert.ok(m.advance(new TextEncoder().encode(b.text)), "a prefix of an object");
    await assert.rejects(
      () => run(model.generate("x", { jsonSchema: { type: "object", minProperties: 1 } })),
      SchemaError,
    );
    await assert.rejects(() => run(model.generate("x", { grammar: "root ::= [" })), GrammarError);
    await assert.rejects(
      () => run(model.generate("x", { grammar: g, jsonSchema: {} })),
      /at most one of/,
    );
  },
});
