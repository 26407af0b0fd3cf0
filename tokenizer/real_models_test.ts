// The real SmolLM2-135M-Instruct, Gemma-3-270M and Qwen2.5-Coder-0.5B-Instruct
// (`tokenizer.ggml.pre = qwen2`) tokenizers against ids nobody here computed:
// llama.cpp's (through node-llama-cpp, all three) and Hugging Face tokenizers'
// (the tokenizer transformers builds from each GGUF; SmolLM2 and Gemma 3), on
// the mixed corpus in tests/fixtures/tokenizer/. The GGUFs live in the
// git-ignored cache/models/ (bash scripts/fetch-models.sh smollm2 gemma3 qwen05b);
// without them these tests are skipped, saying so. Only each GGUF's header,
// metadata and tensor infos are read, never its tensor data.

import assert from "node:assert/strict";
import {
  type Chunk,
  corpus,
  deriveHfTokenizer,
  fixture,
  ggufTokenizerMetadata,
  hfJson,
  type MetadataRead,
  metadataReadBound,
  modelPath,
  MODELS,
  sha256,
  type Skeleton,
  skipReason,
  unvarint,
} from "./_test_utils.ts";
import { StreamDecoder } from "./stream_decoder.ts";
import type { Tokenizer } from "./tokenizer.ts";
import { tokenizerFromGgufMetadata } from "./tokenizer_from_gguf_metadata.ts";
import { tokenizerFromHfJson } from "./tokenizer_from_hf_json.ts";

type Model = keyof typeof MODELS;
interface IdsFile {
  models: Record<
    string,
    { chunks: Record<string, { plain: string; special?: string }>; disagree?: string[] }
  >;
}

const CHUNKS: Chunk[] = corpus();
const LLAMACPP = fixture<IdsFile>("llamacpp_ids.json");
const HF = fixture<IdsFile>("hf_ids.json");

function llamacppIds(model: Model, chunk: string, special: boolean): number[] {
  const e = LLAMACPP.models[model].chunks[chunk];
  return unvarint(special ? e.special ?? e.plain : e.plain);
}

function hfIds(model: Model, variant: string, chunk: string, special: boolean): number[] {
  const e = HF.models[variant].chunks[chunk];
  const v = special ? e.special! : e.plain;
  return v === "=" ? llamacppIds(model, chunk, special) : unvarint(v);
}

/** Every chunk where `tok` differs from `want`, described. */
function mismatches(tok: Tokenizer, want: (chunk: string, special: boolean) => number[]): string[] {
  const out: string[] = [];
  for (const c of CHUNKS) {
    for (const special of [false, true]) {
      const got = tok.encode(c.text, { parseSpecial: special });
      const exp = want(c.name, special);
      if (got.length === exp.length && got.every((x, i) => x === exp[i])) continue;
      let i = 0;
      while (got[i] === exp[i]) i++;
      out.push(
        `${c.name} (parseSpecial ${special}): first difference at token ${i}: ` +
          `got ${JSON.stringify(got.slice(i, i + 6))}, want ${JSON.stringify(exp.slice(i, i + 6))}`,
      );
    }
  }
  return out;
}

const cache = new Map<string, Tokenizer>();

function ggufTokenizer(model: Model): Tokenizer {
  let t = cache.get(`gguf:${model}`);
  if (t === undefined) {
    t = tokenizerFromGgufMetadata(ggufTokenizerMetadata(modelPath(model)), { name: MODELS[model] });
    cache.set(`gguf:${model}`, t);
  }
  return t;
}

for (const model of ["smollm2", "gemma3", "qwen05b"] as const) {
  const skip = skipReason(model);
  const suffix = skip ? ` (skipped: ${skip})` : "";

  Deno.test({
    name: `${model}: GGUF tokenizer gives llama.cpp's ids on every corpus chunk${suffix}`,
    ignore: skip !== undefined,
    fn() {
      const t0 = performance.now();
      const tok = ggufTokenizer(model);
      console.log(
        `${model}: loaded ${tok.vocabSize} tokens in ${(performance.now() - t0).toFixed(0)} ms`,
      );
      const chunks = LLAMACPP.models[model].chunks;
      assert.equal(Object.keys(chunks).length, CHUNKS.length, "fixture and corpus differ");
      const bad = mismatches(tok, (c, s) => llamacppIds(model, c, s));
      assert.deepEqual(bad, [], bad.slice(0, 5).join("\n"));
      const withSpecial = CHUNKS.filter((c) => chunks[c.name].special !== undefined).length;
      console.log(
        `${model}: ${CHUNKS.length} chunks × (plain, parseSpecial) match llama.cpp; ` +
          `${withSpecial} chunks tokenize differently with special tokens parsed`,
      );
    },
  });

  Deno.test({
    name: `${model}: loading the GGUF tokenizer reads only the metadata${suffix}`,
    ignore: skip !== undefined,
    fn() {
      const read: MetadataRead = { bytesRead: 0, fileSize: 0, dataStart: 0 };
      ggufTokenizerMetadata(modelPath(model), read);
      console.log(
        `${model}: read ${read.bytesRead} of ${read.fileSize} bytes (tensor data from ${read.dataStart})`,
      );
      assert.ok(read.dataStart < read.fileSize / 2, `tensor data starts at ${read.dataStart}`);
      assert.ok(
        read.bytesRead <= metadataReadBound(read.dataStart),
        `${read.bytesRead} bytes read, past the metadata (${read.dataStart} bytes)`,
      );
    },
  });

  Deno.test({
    name: `${model}: decode(encode(x)) == x and the stream decoder agrees, on every chunk${suffix}`,
    ignore: skip !== undefined,
    fn() {
      const tok = ggufTokenizer(model);
      for (const c of CHUNKS) {
        // A SentencePiece vocabulary writes spaces as U+2581, so a U+2581 in the text comes back a space.
        const want: string = model === "gemma3" ? c.text.replaceAll("\u2581", " ") : c.text;
        for (const parseSpecial of [false, true]) {
          const ids = tok.encode(c.text, { parseSpecial });
          assert.equal(tok.decode(ids), want, `${c.name} (parseSpecial ${parseSpecial})`);
        }
        const ids = tok.encode(c.text);
        for (const skipSpecial of [false, true]) {
          const stream = new StreamDecoder(tok, { skipSpecial });
          let text = "";
          for (const id of ids) text += stream.push(id);
          text += stream.flush();
          assert.equal(text, tok.decode(ids, { skipSpecial }), c.name);
        }
      }
    },
  });

  Deno.test({
    name: `${model}: encoding 100 KB takes well under a second${suffix}`,
    ignore: skip !== undefined,
    fn() {
      // A fresh tokenizer, so that no word cache is warm; the first 100 KB (UTF-8) of the corpus.
      const tok = tokenizerFromGgufMetadata(ggufTokenizerMetadata(modelPath(model)));
      const all = new TextEncoder().encode(CHUNKS.map((c) => c.text).join(""));
      let cut = 100_000;
      while ((all[cut] & 0xc0) === 0x80) cut--;
      const text = new TextDecoder().decode(all.subarray(0, cut));
      tok.encode("A few words to compile the hot paths."); // warm up
      const t0 = performance.now();
      const ids = tok.encode(text);
      const ms = performance.now() - t0;
      console.log(
        `${model}: ${new TextEncoder().encode(text).length} bytes → ${ids.length} tokens in ${
          ms.toFixed(0)
        } ms`,
      );
      assert.ok(ms < 1000, `${ms} ms`);
    },
  });

  if (model === "qwen05b") continue; // no transformers fixture (hf_ids.json) for it

  Deno.test({
    name:
      `${model}: tokenizer.json transformers derives gives HF's ids on every corpus chunk${suffix}`,
    ignore: skip !== undefined,
    async fn() {
      const skeleton = fixture<Skeleton>(`hf_${model}_skeleton.json`);
      const meta = ggufTokenizerMetadata(modelPath(model));
      const d = deriveHfTokenizer(model, meta);
      const byId = [...d.vocab].sort((a, b) => a[1] - b[1]).map(([t]) => t);
      assert.equal(byId.length, skeleton.vocab_size);
      assert.equal(
        await sha256(byId.join("\0")),
        skeleton.vocab_sha256,
        "vocabulary differs from transformers'",
      );
      assert.equal(d.merges.length, skeleton.merges_count);
      assert.equal(
        await sha256(d.merges.map(([a, b]) => `${a}\x01${b}\x00`).join("")),
        skeleton.merges_sha256,
        "merges differ from transformers'",
      );
      assert.equal(d.added.length, skeleton.added_tokens_count);
      assert.equal(
        await sha256(
          d.added.map((a) => `${a.id}\x01${a.content}\x01${a.special ? 1 : 0}\x00`).join(""),
        ),
        skeleton.added_tokens_sha256,
        "added tokens differ from transformers'",
      );
      const t0 = performance.now();
      const tok = tokenizerFromHfJson(hfJson(skeleton, d), undefined, {
        name: `${model} tokenizer.json`,
      });
      console.log(`${model}: tokenizer.json loaded in ${(performance.now() - t0).toFixed(0)} ms`);
      const bad = mismatches(tok, (c, s) => hfIds(model, model, c, s));
      assert.deepEqual(bad, [], bad.slice(0, 5).join("\n"));
      for (const [text, ids] of Object.entries(skeleton.with_special)) {
        assert.deepEqual(tok.encode(text, { addSpecial: true, parseSpecial: true }), ids, text);
      }
      const disagree = HF.models[model].disagree ?? [];
      console.log(
        `${model}: llama.cpp and HF disagree on ${disagree.length} chunks (both matched): ${
          disagree.join(", ")
        }`,
      );
      if (model === "smollm2") {
        // With the digit-isolating pre-tokenizer of SmolLM2's published tokenizer.json.
        const json = skeleton.tokenizer_json;
        const withDigits = tokenizerFromHfJson(
          hfJson({
            ...skeleton,
            tokenizer_json: { ...json, pre_tokenizer: skeleton.digits_pre_tokenizer },
          }, d),
        );
        const bad2 = mismatches(withDigits, (c, s) => hfIds(model, "smollm2_digits", c, s));
        assert.deepEqual(bad2, [], bad2.slice(0, 5).join("\n"));
        assert.deepEqual(HF.models.smollm2_digits.disagree, []);
        console.log(
          "smollm2 with Digits + ByteLevel: HF agrees with llama.cpp on every chunk, and so do we",
        );
      }
    },
  });
}

Deno.test({
  name: `gemma3 and smollm2: special ids and flags match llama.cpp's reading of the GGUFs${
    skipReason("gemma3") ?? skipReason("smollm2") ? " (skipped: a model is absent)" : ""
  }`,
  ignore: skipReason("gemma3") !== undefined || skipReason("smollm2") !== undefined,
  fn() {
    const g = ggufTokenizer("gemma3");
    assert.equal(g.vocabSize, 262144);
    assert.equal(g.bosId, 2);
    assert.equal(g.eosId, 1);
    assert.equal(g.addBos, true);
    assert.deepEqual(g.encode("Hello", { addSpecial: true }), [2, 9259]);
    assert.ok(g.isEog(1) && g.isEog(106)); // <eos>, <end_of_turn>
    assert.equal(g.tokenText(106), "<end_of_turn>");
    assert.equal(g.isSpecial(106), true);
    assert.equal(g.isSpecial(107), false); // "\n" is user-defined, not control
    const s = ggufTokenizer("smollm2");
    assert.equal(s.vocabSize, 49152);
    assert.equal(s.bosId, 1);
    assert.equal(s.eosId, 2);
    assert.equal(s.addBos, false);
    assert.deepEqual(s.eogIds, [0, 2, 4]); // <|endoftext|>, <|im_end|>, <reponame> (llama.cpp's FIM repo rule)
    assert.match(s.chatTemplate ?? "", /<\|im_start\|>/);
    assert.deepEqual(s.encode("<|im_start|>user", { parseSpecial: true }), [1, 4093]);
  },
});

Deno.test({
  name: `qwen05b: special ids and flags match llama.cpp's reading of the GGUF${
    skipReason("qwen05b") ? ` (skipped: ${skipReason("qwen05b")})` : ""
  }`,
  ignore: skipReason("qwen05b") !== undefined,
  fn() {
    // The values node-llama-cpp 3.21.1 reports for this file (model.tokens, isEogToken, isSpecialToken).
    const q = ggufTokenizer("qwen05b");
    assert.equal(q.vocabSize, 151936);
    assert.equal(q.bosId, 151643); // <|endoftext|>
    assert.equal(q.eosId, 151645); // <|im_end|>
    assert.equal(q.addBos, false);
    assert.deepEqual(q.encode("Hello", { addSpecial: true }), [9707]);
    // </s> (llama.cpp's EOG-by-text rule), <|endoftext|>, <|im_end|>, <|fim_pad|>, <|repo_name|>,
    // <|file_sep|> (its FIM rules)
    assert.deepEqual(q.eogIds, [128247, 151643, 151645, 151662, 151663, 151664]);
    assert.equal(q.tokenText(128247), "</s>");
    assert.equal(q.isSpecial(128247), true); // made control by that rule
    assert.equal(q.tokenText(151644), "<|im_start|>");
    assert.equal(q.isSpecial(151644), true);
    assert.equal(q.isSpecial(151657), false); // <tool_call> is user-defined, not control
    assert.match(q.chatTemplate ?? "", /<\|im_start\|>/);
    assert.deepEqual(
      q.encode("<|im_start|>user\nHi<|im_end|>", { parseSpecial: true }),
      [151644, 872, 198, 13048, 151645],
    );
  },
});
