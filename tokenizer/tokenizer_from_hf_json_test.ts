import assert from "node:assert/strict";
import { FormatError } from "../formats/errors.ts";
import { corpus, fixture, FIXTURES, short, smallHfJson, unvarint } from "./_test_utils.ts";
import { tokenizerFromHfJson } from "./tokenizer_from_hf_json.ts";

// Edge strings carry full ids (varint base64) and decoded text; long chunks carry 16-hex sha256s.
interface TinyCase {
  plain: string;
  special: string;
  added: string;
  decoded: string;
  skipped: string;
}

const TINY = fixture<{ tokenizers: Record<string, Record<string, TinyCase>> }>("tiny_ids.json");

for (const [name, cases] of Object.entries(TINY.tokenizers)) {
  Deno.test(`tiny_${name}.json (trained by tokenizers): ids, template and decoding match tokenizers on the corpus`, async () => {
    const json = await Deno.readTextFile(new URL(`tiny_${name}.json`, FIXTURES));
    const tok = tokenizerFromHfJson(json, undefined, { name: `tiny_${name}.json` });
    const bad: string[] = [];
    for (const c of corpus()) {
      const want = cases[c.name];
      const special = tok.encode(c.text, { parseSpecial: true });
      const got: Record<keyof TinyCase, number[] | string> = {
        plain: tok.encode(c.text),
        special,
        added: tok.encode(c.text, { parseSpecial: true, addSpecial: true }),
        decoded: tok.decode(special),
        skipped: tok.decode(special, { skipSpecial: true }),
      };
      for (const key of Object.keys(got) as (keyof TinyCase)[]) {
        const g = got[key];
        const w = want[key];
        const edge = c.name.startsWith("edge");
        const ok = edge
          ? JSON.stringify(g) === JSON.stringify(Array.isArray(g) ? unvarint(w) : w)
          : await short(Array.isArray(g) ? g.join(",") : g) === w;
        if (!ok) {
          bad.push(
            `${c.name}.${key}${
              edge ? `: got ${JSON.stringify(g)}, want ${JSON.stringify(w)}` : ""
            }`,
          );
        }
      }
    }
    assert.deepEqual(bad, [], bad.slice(0, 5).join("\n"));
  });
}

/** A tokenizer.json with a byte-fallback BPE, as the examples use. */
function json(patch: (j: Record<string, unknown>) => void = () => {}): string {
  const j = smallHfJson();
  patch(j);
  return JSON.stringify(j);
}

Deno.test("tokenizer.json: template, config flags and special ids", () => {
  const tok = tokenizerFromHfJson(json());
  assert.equal(tok.vocabSize, 8);
  assert.deepEqual(tok.encode("hi hi!", { addSpecial: true }), [7, 4, 5, 6]);
  assert.equal(tok.bosId, 7);
  assert.equal(tok.addBos, true);
  assert.equal(tok.eosId, undefined);
  assert.equal(tok.isEog(0), true); // "<eos>" is an end-of-generation text
  const cfg = JSON.stringify({
    add_bos_token: false,
    add_eos_token: true,
    bos_token: { content: "<bos>" },
    eos_token: "<eos>",
    chat_template: [{ name: "default", template: "{{ x }}" }, { name: "tool_use", template: "t" }],
  });
  const tok2 = tokenizerFromHfJson(json(), cfg);
  assert.deepEqual(tok2.encode("hi", { addSpecial: true }), [4, 0]);
  assert.equal(tok2.chatTemplate, "{{ x }}");
  assert.equal(tok2.eosId, 0);
  assert.equal(tok2.decode([7, 4, 0], { skipSpecial: true }), "hi");
  assert.equal(tok2.decode([7, 4, 0]), "<bos>hi<eos>");
});

Deno.test("tokenizer.json: a tokenizer without decoder joins tokens with spaces, as tokenizers does", () => {
  const tok = tokenizerFromHfJson(json((j) => j.decoder = null));
  assert.equal(tok.decode([4, 1, 2]), "hi h i");
});

Deno.test("tokenizer.json: merges given as [a, b] pairs, a repeated merge is accepted", () => {
  const tok = tokenizerFromHfJson(json((j) => {
    const m = j.model as Record<string, unknown>;
    m.merges = [["h", "i"], ["▁", "hi"], ["h", "i"]];
  }));
  assert.deepEqual(tok.encode("hi hi"), [4, 5]);
});

function rejects(
  text: string,
  config: string | undefined,
  field: string | RegExp,
  detail: RegExp,
): void {
  assert.throws(
    () => tokenizerFromHfJson(text, config),
    (e: unknown) => {
      assert.ok(e instanceof FormatError, `expected a FormatError, got ${e}`);
      if (typeof field === "string") assert.equal(e.field, field);
      else assert.match(e.field, field);
      assert.match(e.message, detail);
      return true;
    },
  );
}

Deno.test("hostile tokenizer.json / tokenizer_config.json: FormatErrors naming the JSON path", () => {
  assert.throws(() => tokenizerFromHfJson(3 as unknown as string), TypeError);
  rejects("{", undefined, "(root)", /not valid JSON/);
  rejects("[]", undefined, "(root)", /expected an object/);
  rejects("{}", undefined, "model", /missing/);
  rejects(
    json((j) => (j.model as Record<string, unknown>).type = "WordPiece"),
    undefined,
    "model.type",
    /unsupported model/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).vocab = [1]),
    undefined,
    "model.vocab",
    /object of token ids/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).vocab = { a: 1, b: 1 }),
    undefined,
    "model.vocab",
    /share id 1/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).vocab = { a: -1 }),
    undefined,
    "model.vocab",
    /has id/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).merges = ["h i", "h  i"]),
    undefined,
    "model.merges[1]",
    /one space/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).merges = ["h x"]),
    undefined,
    "model.merges[0]",
    /"x", which is not/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).merges = ["i h"]),
    undefined,
    "model.merges[0]",
    /"ih", which is not/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).merges = [["h"]]),
    undefined,
    "model.merges[0]",
    /expected/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).dropout = 0.1),
    undefined,
    "model.dropout",
    /dropout/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).unk_token = "<unk>"),
    undefined,
    "model.unk_token",
    /not in the vocabulary/,
  );
  rejects(
    json((j) => (j.model as Record<string, unknown>).byte_fallback = "yes"),
    undefined,
    "model.byte_fallback",
    /boolean/,
  );
  rejects(
    json((j) => j.normalizer = { type: "BertNormalizer" }),
    undefined,
    "normalizer.type",
    /unsupported normalizer/,
  );
  rejects(
    json((j) => j.normalizer = { type: "Replace", content: "x" }),
    undefined,
    "normalizer.pattern",
    /missing/,
  );
  rejects(
    json((j) => j.pre_tokenizer = { type: "Punctuation" }),
    undefined,
    "pre_tokenizer.type",
    /unsupported pre-tokenizer/,
  );
  rejects(
    json((j) =>
      j.pre_tokenizer = {
        type: "Sequence",
        pretokenizers: [{ type: "Split", pattern: { String: "x" }, behavior: "Sideways" }],
      }
    ),
    undefined,
    "pre_tokenizer.pretokenizers[0].behavior",
    /unknown split behavior/,
  );
  rejects(
    json((j) =>
      j.pre_tokenizer = { type: "Split", pattern: { Regex: "(?>x)" }, behavior: "Isolated" }
    ),
    undefined,
    "pre_tokenizer.pattern.Regex",
    /atomic group/,
  );
  rejects(
    json((j) => j.decoder = { type: "WordPiece" }),
    undefined,
    "decoder.type",
    /unsupported decoder/,
  );
  rejects(
    json((j) => j.post_processor = { type: "Weird" }),
    undefined,
    "post_processor.type",
    /unsupported post-processor/,
  );
  rejects(
    json((j) => (j.post_processor as Record<string, unknown>).special_tokens = {}),
    undefined,
    "post_processor.single[0]",
    /not in special_tokens/,
  );
  rejects(
    json((j) => j.added_tokens = [{ id: 9, content: "" }]),
    undefined,
    "added_tokens[0].content",
    /empty/,
  );
  rejects(
    json((j) => j.added_tokens = [{ id: -2, content: "x" }]),
    undefined,
    "added_tokens[0].id",
    /non-negative/,
  );
  let deep: unknown = { type: "NFC" };
  for (let i = 0; i < 40; i++) deep = { type: "Sequence", normalizers: [deep] };
  rejects(
    json((j) => j.normalizer = deep),
    undefined,
    /^normalizer(\.normalizers\[0\])+$/,
    /nested deeper/,
  );
  rejects(
    json((j) => j.added_tokens = [{ id: 2 ** 40, content: "x" }]),
    undefined,
    "added_tokens[0].id",
    /too large/,
  );
  rejects(json(), "{oops", "(root)", /not valid JSON/);
  rejects(json(), JSON.stringify({ add_bos_token: true }), "add_bos_token", /bos_token is not set/);
  rejects(json(), JSON.stringify({ bos_token: "<nope>" }), "bos_token", /not a token/);
  rejects(json(), JSON.stringify({ add_eos_token: "no" }), "add_eos_token", /boolean/);
});
