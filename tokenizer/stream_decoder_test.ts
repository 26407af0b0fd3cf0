import assert from "node:assert/strict";
import { Rng } from "../tests/util/rng.ts";
import { corpus, FIXTURES } from "./_test_utils.ts";
import { BYTE_TO_CHAR } from "./_unicode.ts";
import { StreamDecoder } from "./stream_decoder.ts";
import type { Tokenizer } from "./tokenizer.ts";
import { tokenizerFromGgufMetadata } from "./tokenizer_from_gguf_metadata.ts";
import { tokenizerFromHfJson } from "./tokenizer_from_hf_json.ts";

/** A byte-level vocabulary without merges: token b is byte b; 256 is a control token. */
const BYTES = tokenizerFromGgufMetadata({
  "tokenizer.ggml.model": "gpt2",
  "tokenizer.ggml.tokens": [...BYTE_TO_CHAR, "<|end|>"],
  "tokenizer.ggml.token_type": [...BYTE_TO_CHAR.map(() => 1), 3],
  "tokenizer.ggml.merges": [],
});

const TEXT = "aé€😀 ZWJ:👩‍💻 中文 عربى हिन्दी\n";

function streamAll(tok: Tokenizer, ids: readonly number[], skipSpecial = false): string[] {
  const s = new StreamDecoder(tok, { skipSpecial });
  const out = ids.map((id) => s.push(id));
  out.push(s.flush());
  return out;
}

Deno.test("StreamDecoder: every prefix of a multi-byte text yields only whole characters", () => {
  const bytes = new TextEncoder().encode(TEXT);
  const ids = Array.from(bytes);
  assert.deepEqual(BYTES.encode(TEXT), ids);
  for (let k = 0; k <= ids.length; k++) {
    const s = new StreamDecoder(BYTES);
    let got = "";
    for (const id of ids.slice(0, k)) got += s.push(id);
    // What has come out is exactly the complete characters of the first k bytes.
    const whole = new TextDecoder().decode(bytes.subarray(0, k), { stream: true });
    assert.equal(got, whole, `prefix of ${k} bytes`);
    assert.ok(!got.includes("\ufffd"), `prefix of ${k} bytes`);
    assert.ok(TEXT.startsWith(got));
    // Flushing adds U+FFFD for a character cut in the middle, as a one-shot decode would.
    assert.equal(got + s.flush(), new TextDecoder().decode(bytes.subarray(0, k)));
  }
});

Deno.test("StreamDecoder: invalid bytes become U+FFFD as soon as they are provably invalid, or at flush", () => {
  const s = new StreamDecoder(BYTES);
  assert.equal(s.push(0xe2), ""); // could start "€"
  assert.equal(s.push(0x28), "\ufffd("); // cannot continue it
  assert.equal(s.push(0x80), "\ufffd"); // a continuation byte with no lead
  assert.equal(s.push(0xf0), "");
  assert.equal(s.push(0x9f), "");
  assert.equal(s.flush(), "\ufffd"); // incomplete at the end
  // The decoder starts over after flush.
  assert.equal(s.push(0x41), "A");
  assert.equal(s.flush(), "");
});

Deno.test("StreamDecoder: concatenated output equals decode(), on random byte soup and token splits", () => {
  const rng = new Rng(7);
  for (let n = 0; n < 300; n++) {
    const ids: number[] = [];
    const len = rng.int(0, 30);
    for (let i = 0; i < len; i++) {
      const r = rng.next();
      ids.push(r < 0.05 ? 256 : r < 0.5 ? rng.int(0x80, 0xff) : rng.int(0, 0x7f));
    }
    for (const skipSpecial of [false, true]) {
      const parts = streamAll(BYTES, ids, skipSpecial);
      assert.equal(parts.join(""), BYTES.decode(ids, { skipSpecial }), JSON.stringify(ids));
    }
  }
});

Deno.test("StreamDecoder: skips special tokens when asked and follows the decoder's leading-space rule", () => {
  assert.deepEqual(streamAll(BYTES, [0x68, 256, 0x69], true), ["h", "", "i", ""]);
  assert.deepEqual(streamAll(BYTES, [0x68, 256, 0x69]), ["h", "<|end|>", "i", ""]);
  const spm = tokenizerFromGgufMetadata({
    "tokenizer.ggml.model": "llama",
    "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi", "▁there"],
  });
  for (const ids of [[3, 4], [1, 3, 4]]) {
    for (const skipSpecial of [false, true]) {
      assert.equal(streamAll(spm, ids, skipSpecial).join(""), spm.decode(ids, { skipSpecial }));
    }
  }
  assert.equal(streamAll(spm, [3, 4]).join(""), "hi there");
});

Deno.test("StreamDecoder: tokenizer.json decoders (byte fallback, Metaspace-style and whole-text Strip) stream like decode()", () => {
  for (const name of ["gemma", "metaspace", "bytelevel"]) {
    const tok = tokenizerFromHfJson(Deno.readTextFileSync(new URL(`tiny_${name}.json`, FIXTURES)));
    for (const c of corpus()) {
      const ids = tok.encode(c.text, { parseSpecial: true, addSpecial: true });
      for (const skipSpecial of [false, true]) {
        assert.equal(
          streamAll(tok, ids, skipSpecial).join(""),
          tok.decode(ids, { skipSpecial }),
          `${name} ${c.name}`,
        );
      }
    }
  }
});

Deno.test("StreamDecoder works with any Tokenizer implementation (through tokenBytes)", () => {
  const foreign: Tokenizer = {
    vocabSize: 2,
    addBos: false,
    addEos: false,
    eogIds: [],
    encode: () => [],
    decode: () => "",
    tokenBytes: (id) => (id === 0 ? Uint8Array.of(0xc3) : Uint8Array.of(0xa9)),
    tokenText: () => "",
    tokenId: () => undefined,
    isEog: () => false,
    isSpecial: () => false,
  };
  const s = new StreamDecoder(foreign);
  assert.equal(s.push(0) + s.push(1) + s.flush(), "é");
});
