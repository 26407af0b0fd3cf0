import assert from "node:assert/strict";
import { FormatError } from "../formats/errors.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { parseGguf } from "../formats/gguf/parse_gguf.ts";
import { writeGguf } from "../formats/gguf/write_gguf.ts";
import { Rng } from "../tests/util/rng.ts";
import { BYTE_TO_CHAR } from "./_unicode.ts";
import { tokenizerFromGgufMetadata } from "./tokenizer_from_gguf_metadata.ts";

const P = "tokenizer.ggml.";

/** A small SentencePiece-style vocabulary with byte fallback (like Gemma's, in miniature). */
function spmMeta(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const tokens = [
    "<unk>",
    "<s>",
    "</s>",
    "<ctrl>",
    "<user>",
    "▁",
    "h",
    "i",
    "▁h",
    "▁hi",
    "hi",
    "▁▁",
  ];
  const types = [2, 3, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1];
  const scores = [0, 0, 0, 0, 0, -1, -2, -3, -4, -5, -6, -7];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
    scores.push(0);
  }
  return {
    [P + "model"]: "llama",
    [P + "tokens"]: tokens,
    [P + "token_type"]: types,
    [P + "scores"]: scores,
    ...extra,
  };
}

const BYTES = BYTE_TO_CHAR.length; // byte tokens are ids 0..255 in bpeMeta

/** A small byte-level BPE vocabulary: the 256 byte tokens, some merges, special tokens. */
function bpeMeta(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const tokens = [...BYTE_TO_CHAR];
  const merges: string[] = [];
  const merge = (a: string, b: string) => {
    merges.push(`${a} ${b}`);
    if (!tokens.includes(a + b)) tokens.push(a + b);
  };
  merge("h", "e");
  merge("Ġ", "t");
  merge("Ġt", "he");
  merge("i", "n");
  merge("in", "g");
  merge("Ġ", "Ġ");
  merge("Ã", "©"); // "é"
  merge("1", "2");
  merge("Ġ", "1");
  const types = tokens.map(() => 1);
  tokens.push("<|im_start|>", "<|im_end|>", "<tool>");
  types.push(3, 3, 4);
  return {
    [P + "model"]: "gpt2",
    [P + "pre"]: "gpt-2",
    [P + "tokens"]: tokens,
    [P + "token_type"]: types,
    [P + "merges"]: merges,
    [P + "bos_token_id"]: tokens.length - 3,
    [P + "eos_token_id"]: tokens.length - 2,
    ...extra,
  };
}

Deno.test("SPM: space prefix, ▁ merging by score, byte fallback for characters outside the vocabulary", () => {
  const tok = tokenizerFromGgufMetadata(spmMeta());
  assert.deepEqual(tok.encode("hi"), [9]); // " hi" → "▁hi"
  assert.deepEqual(tok.encode("hi hi"), [9, 9]);
  assert.deepEqual(tok.encode("  hi"), [11, 9]); // "▁▁▁hi": "▁▁" then "▁hi"
  const e = tok.encode("hé");
  assert.deepEqual(e.map((id) => tok.tokenText(id)), ["▁h", "<0xC3>", "<0xA9>"]);
  assert.equal(tok.decode(e), "hé"); // the prefix space is dropped again
  assert.deepEqual(tok.encode("hi", { addSpecial: true }), [1, 9]);
  assert.equal(tok.decode([1, 9]), "<s> hi"); // llama.cpp keeps the space after a rendered BOS
  assert.equal(tok.decode([1, 9], { skipSpecial: true }), " hi");
  assert.equal(tok.addBos, true);
  assert.equal(tok.addEos, false);
});

Deno.test("SPM: add_space_prefix false and add_bos/add_eos flags are honoured", () => {
  const tok = tokenizerFromGgufMetadata(spmMeta({
    [P + "add_space_prefix"]: false,
    [P + "add_bos_token"]: false,
    [P + "add_eos_token"]: true,
  }));
  assert.deepEqual(tok.encode("hi"), [10]);
  assert.deepEqual(tok.encode("hi", { addSpecial: true }), [10, 2]);
  assert.equal(tok.decode(tok.encode(" hi")), " hi");
});

Deno.test("special tokens: control only with parseSpecial, user-defined always, longest first as llama.cpp", () => {
  const tok = tokenizerFromGgufMetadata(spmMeta({ [P + "add_space_prefix"]: false }));
  // <ctrl> is control: text unless parsed; <user> is user-defined: always a token.
  assert.ok(tok.encode("<ctrl>").length > 1);
  assert.deepEqual(tok.encode("<ctrl>", { parseSpecial: true }), [3]);
  assert.deepEqual(tok.encode("<user>"), [4]);
  assert.deepEqual(tok.encode("hi<user>hi"), [10, 4, 10]);
  // After a special token SPM adds the space prefix again (when enabled).
  const withPrefix = tokenizerFromGgufMetadata(spmMeta());
  assert.deepEqual(withPrefix.encode("hi<ctrl>hi", { parseSpecial: true }), [9, 3, 9]);

  // llama.cpp takes the longest special token everywhere first, not the leftmost match:
  // with "bcd" and "ab" in "abcd", "bcd" wins although "ab" starts earlier.
  const meta = spmMeta({ [P + "add_space_prefix"]: false });
  const tokens = [...meta[P + "tokens"] as string[], "ab", "bcd"];
  const types = [...meta[P + "token_type"] as number[], 3, 3];
  const scores = [...meta[P + "scores"] as number[], 0, 0];
  const t2 = tokenizerFromGgufMetadata({
    ...meta,
    [P + "tokens"]: tokens,
    [P + "token_type"]: types,
    [P + "scores"]: scores,
  });
  const abcd = t2.encode("abcd", { parseSpecial: true });
  assert.equal(abcd[abcd.length - 1], tokens.length - 1);
  assert.equal(t2.tokenText(abcd[0]), "<0x61>");
});

Deno.test("BPE: merges by rank, special tokens, decode back to the text", () => {
  const tok = tokenizerFromGgufMetadata(bpeMeta());
  const ids = tok.encode("the thing");
  assert.deepEqual(ids.map((id) => tok.tokenText(id)), ["t", "he", "Ġt", "h", "ing"]);
  assert.equal(tok.decode(ids), "the thing");
  assert.deepEqual(tok.encode("é").map((id) => tok.tokenText(id)), ["Ã©"]);
  assert.deepEqual(tok.encode("<|im_start|>x", { parseSpecial: true })[0], BYTES + 9);
  assert.equal(tok.encode("<|im_start|>x").length, 13); // one token per byte: no merge applies
  assert.deepEqual(tok.encode("<tool>"), [BYTES + 11]);
  assert.equal(tok.isSpecial(BYTES + 9), true);
  assert.equal(tok.isSpecial(BYTES + 11), false);
  assert.equal(tok.decode([BYTES + 9, 104], { skipSpecial: true }), "h");
  assert.equal(tok.isEog(BYTES + 10), true); // <|im_end|>: EOS and in llama.cpp's end-of-generation list
  assert.deepEqual(tok.tokenBytes(BYTES + 1), Uint8Array.of(0x20, 0x74)); // "Ġt"
  assert.equal(tok.tokenId("Ġt"), BYTES + 1);
});

Deno.test("BPE: every llama.cpp pre-tokenizer family name loads and round-trips", () => {
  for (
    const pre of [
      "default",
      "gpt2",
      "gpt-2",
      "llama-bpe",
      "llama3",
      "qwen2",
      "smollm",
      "starcoder",
      "dbrx",
    ]
  ) {
    const tok = tokenizerFromGgufMetadata(bpeMeta({ [P + "pre"]: pre }));
    const text = "I'M here: 12345 apples,  \n\n it's   ok!! 中文 🤖";
    assert.equal(tok.decode(tok.encode(text)), text, pre);
  }
  // llama3 splits digits in threes, qwen2 one by one, gpt2 keeps runs.
  const words = (pre: string) => {
    const tok = tokenizerFromGgufMetadata(bpeMeta({ [P + "pre"]: pre }));
    return tok.encode("12345").length;
  };
  assert.equal(words("gpt2"), 4); // "12" merges: 12|3|4|5
  assert.equal(words("qwen2"), 5);
});

Deno.test("property: decode(encode(x)) == x on seeded random strings, every pre-tokenizer", () => {
  const rng = new Rng(20250511);
  const blocks: [number, number][] = [
    [0x20, 0x7e],
    [0x09, 0x0d],
    [0xa0, 0x24f],
    [0x370, 0x3ff],
    [0x400, 0x4ff],
    [0x600, 0x6ff],
    [0x900, 0x97f],
    [0x3000, 0x30ff],
    [0x4e00, 0x9fff],
    [0xac00, 0xd7a3],
    [0x1f300, 0x1faff],
    [0x2000, 0x206f],
    [0xd800, 0xdfff], // lone surrogates: encoded as U+FFFD
  ];
  const pieces = [
    "<|im_start|>",
    "<|im_end|>",
    "<tool>",
    "'s",
    "'LL",
    "  ",
    "\n\n",
    "12345",
    "é",
    "\u200d",
  ];
  const tokenizers = ["default", "gpt2", "llama3", "qwen2", "smollm"].map((pre) =>
    tokenizerFromGgufMetadata(bpeMeta({ [P + "pre"]: pre }))
  );
  const spm = tokenizerFromGgufMetadata(spmMeta({ [P + "add_space_prefix"]: false }));
  for (let n = 0; n < 300; n++) {
    let s = "";
    const len = rng.int(0, 40);
    for (let i = 0; i < len; i++) {
      if (rng.next() < 0.15) s += pieces[rng.int(0, pieces.length - 1)];
      else {
        const [lo, hi] = blocks[rng.int(0, blocks.length - 1)];
        const cp = rng.int(lo, hi);
        s += cp >= 0xd800 && cp <= 0xdfff ? String.fromCharCode(cp) : String.fromCodePoint(cp);
      }
    }
    const want = s.toWellFormed();
    for (const tok of tokenizers) {
      for (const parseSpecial of [false, true]) {
        assert.equal(tok.decode(tok.encode(s, { parseSpecial })), want, JSON.stringify(s));
      }
    }
    assert.equal(spm.decode(spm.encode(s, { parseSpecial: true })), want.replaceAll("\u2581", " "));
  }
});

Deno.test("metadata may be parsed GGUF values, typed arrays, bigints or decimal strings", () => {
  const base = spmMeta();
  const bytes = writeGguf({
    metadata: [
      [P + "model", { type: "string", value: "llama" }],
      [P + "tokens", {
        type: "array",
        elementType: "string",
        value: base[P + "tokens"] as string[],
      }],
      [P + "scores", {
        type: "array",
        elementType: "f32",
        value: Float32Array.from(base[P + "scores"] as number[]),
      }],
      [P + "token_type", {
        type: "array",
        elementType: "i32",
        value: Int32Array.from(base[P + "token_type"] as number[]),
      }],
      [P + "bos_token_id", { type: "u64", value: 1n }],
      [P + "eos_token_id", { type: "u32", value: 2 }],
    ],
  });
  const gguf = parseGguf(bytesSource("t.gguf", bytes));
  const tok = tokenizerFromGgufMetadata(Object.fromEntries(gguf.metadata));
  assert.deepEqual(tok.encode("hi hi"), [9, 9]);
  assert.equal(tok.bosId, 1);
  // As convert/ stores it in .cflow metadata: u64 ids become decimal strings.
  const fromCflow = tokenizerFromGgufMetadata(
    spmMeta({ [P + "bos_token_id"]: "1", [P + "eos_token_id"]: 2n }),
  );
  assert.equal(fromCflow.bosId, 1);
  assert.equal(fromCflow.eosId, 2);
});

function rejects(meta: unknown, field: RegExp | string, detail?: RegExp): void {
  assert.throws(
    () => tokenizerFromGgufMetadata(meta as Record<string, unknown>, { name: "m.cflow" }),
    (e: unknown) => {
      assert.ok(e instanceof FormatError, `expected a FormatError, got ${e}`);
      assert.equal(e.file, "m.cflow");
      if (typeof field === "string") assert.equal(e.field, field);
      else assert.match(e.field, field);
      if (detail) assert.match(e.message, detail);
      return true;
    },
  );
}

Deno.test("hostile metadata: every malformed field is a FormatError naming the key", () => {
  assert.throws(
    () => tokenizerFromGgufMetadata(null as unknown as Record<string, unknown>),
    TypeError,
  );
  rejects({}, P + "model", /missing/);
  rejects(spmMeta({ [P + "model"]: "bert" }), P + "model", /unsupported/);
  rejects(spmMeta({ [P + "model"]: 7 }), P + "model", /expected a string/);
  rejects(spmMeta({ [P + "tokens"]: undefined }), P + "tokens", /missing/);
  rejects(spmMeta({ [P + "tokens"]: "abc" }), P + "tokens", /array of strings/);
  rejects(spmMeta({ [P + "tokens"]: [] }), P + "tokens", /empty/);
  rejects(spmMeta({ [P + "tokens"]: ["a", 3, "c"] }), P + "tokens[1]", /expected a string/);
  rejects(
    spmMeta({
      [P + "tokens"]: ["a", "b", "a"],
      [P + "token_type"]: [1, 1, 1],
      [P + "scores"]: [0, 0, 0],
    }),
    P + "tokens[2]",
    /duplicates token 0/,
  );
  rejects(
    spmMeta({ [P + "token_type"]: [1, 2, 3] }),
    P + "token_type",
    /has 3 entries for 268 tokens/,
  );
  rejects(spmMeta({ [P + "scores"]: new Float32Array(5) }), P + "scores", /5 entries/);
  const badType = [...spmMeta()[P + "token_type"] as number[]];
  badType[7] = 9;
  rejects(spmMeta({ [P + "token_type"]: badType }), P + "token_type[7]", /unknown token type 9/);
  badType[7] = 1.5;
  rejects(spmMeta({ [P + "token_type"]: badType }), P + "token_type[7]", /integer/);
  const badScore = [...spmMeta()[P + "scores"] as number[]];
  badScore[3] = NaN;
  rejects(spmMeta({ [P + "scores"]: badScore }), P + "scores[3]", /finite/);
  const badByte = [...spmMeta()[P + "tokens"] as string[]];
  badByte[12] = "<0xZZ>";
  rejects(spmMeta({ [P + "tokens"]: badByte }), P + "tokens[12]", /byte token/);
  for (const id of [-1, 268, 2 ** 40, 1.5, "abc", true, null]) {
    rejects(spmMeta({ [P + "bos_token_id"]: id }), P + "bos_token_id");
  }
  rejects(spmMeta({ [P + "eos_token_id"]: 10n ** 20n }), P + "eos_token_id", /token id/);
  rejects(spmMeta({ [P + "add_bos_token"]: "yes" }), P + "add_bos_token", /boolean/);
  rejects(spmMeta({ [P + "add_space_prefix"]: 1 }), P + "add_space_prefix", /boolean/);
  rejects(spmMeta({ "tokenizer.chat_template": ["x"] }), "tokenizer.chat_template", /string/);
  rejects(
    { [P + "model"]: "llama", [P + "tokens"]: ["a"], [P + "add_bos_token"]: true },
    P + "add_bos_token",
    /no BOS/,
  );
  rejects(bpeMeta({ [P + "merges"]: undefined }), P + "merges", /missing/);
  rejects(bpeMeta({ [P + "merges"]: ["h e", "nospace"] }), P + "merges[1]", /separated by a space/);
  rejects(
    bpeMeta({ [P + "merges"]: ["h e", "Ġ zzz"] }),
    P + "merges[1]",
    /"zzz", which is not a token/,
  );
  rejects(bpeMeta({ [P + "merges"]: ["x y"] }), P + "merges[0]", /"xy", which is not a token/);
  rejects(bpeMeta({ [P + "pre"]: "falcon" }), P + "pre", /unsupported pre-tokenizer "falcon"/);
  rejects(bpeMeta({ [P + "pre"]: 3 }), P + "pre", /string/);
});

Deno.test("bad arguments: RangeError for ids outside the vocabulary, TypeError for non-strings", () => {
  const tok = tokenizerFromGgufMetadata(spmMeta());
  for (const id of [-1, 268, 1.5, NaN]) {
    assert.throws(() => tok.decode([5, id]), RangeError);
    assert.throws(() => tok.tokenBytes(id), RangeError);
    assert.throws(() => tok.tokenText(id), RangeError);
    assert.throws(() => tok.isSpecial(id), RangeError);
  }
  assert.equal(tok.isEog(-1), false);
  assert.throws(() => tok.encode(3 as unknown as string), TypeError);
  // A SentencePiece vocabulary without byte tokens cannot spell an unknown character.
  const noBytes = tokenizerFromGgufMetadata({
    [P + "model"]: "llama",
    [P + "tokens"]: ["<unk>", "<s>", "</s>", "▁", "a"],
  });
  assert.deepEqual(noBytes.encode("a"), [3, 4]);
  assert.throws(() => noBytes.encode("é"), RangeError);
});

Deno.test("end-of-generation tokens follow llama.cpp's rules (EOS, EOT texts, FIM separators)", () => {
  const tok = tokenizerFromGgufMetadata({
    [P + "model"]: "gpt2",
    [P + "tokens"]: [
      ...BYTE_TO_CHAR,
      "<|endoftext|>",
      "<|im_end|>",
      "<|file_sep|>",
      "<|fim_prefix|>",
      "<x>",
    ],
    [P + "token_type"]: [...BYTE_TO_CHAR.map(() => 1), 3, 1, 1, 1, 3],
    [P + "merges"]: [],
    [P + "eos_token_id"]: 260,
  });
  assert.deepEqual(tok.eogIds, [256, 257, 258, 260]);
  // Texts llama.cpp recognises become control tokens even when typed normal.
  assert.equal(tok.isSpecial(257), true);
  assert.equal(tok.isSpecial(259), true);
  assert.deepEqual(tok.encode("<|im_end|>", { parseSpecial: true }), [257]);
});
