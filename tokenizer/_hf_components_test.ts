// Expected values in the hand-written cases were printed by tokenizers 0.23.3
// (pre_tokenize_str, normalize_str, decoders.*.decode); see the commands in
// tests/reference/gen_tokenizer_hf.py for the environment.

import assert from "node:assert/strict";
import { FormatError } from "../formats/errors.ts";
import { corpus, fixture, short } from "./_test_utils.ts";
import { Node, type Piece, readNormalizer, readPreTokenizer } from "./_hf_components.ts";
import { readDecoder, renderToken } from "./_hf_decoder.ts";
import { GPT2_PATTERN, onigToRegExp } from "./_hf_regex.ts";

function pre(json: unknown): (text: string) => string[] {
  const f = readPreTokenizer(new Node("t.json", "pre_tokenizer", json))!;
  return (text) => f([{ text, first: true }]).map((p: Piece) => p.text);
}

function norm(json: unknown): (text: string) => string {
  return readNormalizer(new Node("t.json", "normalizer", json))!;
}

Deno.test("Split: every behavior, inverted or not, as tokenizers cuts 'a-b--c-'", () => {
  const cases: [string, boolean, string[]][] = [
    ["Removed", false, ["a", "b", "c"]],
    ["Removed", true, ["-", "-", "-", "-"]],
    ["Isolated", false, ["a", "-", "b", "-", "-", "c", "-"]],
    ["Isolated", true, ["a", "-", "b", "-", "-", "c", "-"]],
    ["MergedWithPrevious", false, ["a-", "b-", "-", "c-"]],
    ["MergedWithPrevious", true, ["a", "-b", "-", "-c", "-"]],
    ["MergedWithNext", false, ["a", "-b", "-", "-c", "-"]],
    ["MergedWithNext", true, ["a-", "b-", "-", "c-"]],
    ["Contiguous", false, ["a", "-", "b", "--", "c", "-"]],
    ["Contiguous", true, ["a", "-", "b", "--", "c", "-"]],
  ];
  for (const [behavior, invert, want] of cases) {
    const split = pre({ type: "Split", pattern: { String: "-" }, behavior, invert });
    assert.deepEqual(split("a-b--c-"), want, `${behavior} invert=${invert}`);
  }
});

Deno.test("pre-tokenizers: Metaspace, Digits, ByteLevel, Whitespace, WhitespaceSplit, regex \\s", () => {
  assert.deepEqual(
    pre({ type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: true })(
      "hello  big world",
    ),
    ["▁hello", "▁", "▁big", "▁world"],
  );
  assert.deepEqual(
    pre({ type: "Metaspace", replacement: "▁", prepend_scheme: "never", split: false })(
      " hello world",
    ),
    ["▁hello▁world"],
  );
  assert.deepEqual(pre({ type: "Digits", individual_digits: false })("a123b45"), [
    "a",
    "123",
    "b",
    "45",
  ]);
  assert.deepEqual(pre({ type: "Digits", individual_digits: true })("a123b45"), [
    "a",
    "1",
    "2",
    "3",
    "b",
    "4",
    "5",
  ]);
  assert.deepEqual(pre({ type: "ByteLevel", add_prefix_space: true })("hi there"), [
    "Ġhi",
    "Ġthere",
  ]);
  assert.deepEqual(pre({ type: "Whitespace" })("Hey, you  all!"), ["Hey", ",", "you", "all", "!"]);
  assert.deepEqual(pre({ type: "WhitespaceSplit" })("Hey, you \u00a0all!"), [
    "Hey,",
    "you",
    "all!",
  ]);
  // Oniguruma's \s is White_Space: U+0085 yes, U+FEFF no (JavaScript's is the other way round).
  assert.deepEqual(
    pre({ type: "Split", pattern: { Regex: "\\s" }, behavior: "Removed", invert: false })(
      "a\ufeffb\u0085c d",
    ),
    ["a\ufeffb", "c", "d"],
  );
});

Deno.test("normalizers and decoders behave as tokenizers' do", () => {
  assert.equal(
    norm({ type: "Strip", strip_left: true, strip_right: true })("  \u3000hi\u00a0 "),
    "hi",
  );
  assert.equal(
    norm({ type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Lowercase" }] })("ＡＢＣ ﬁ"),
    "abc fi",
  );
  assert.equal(
    norm({
      type: "Sequence",
      normalizers: [{ type: "Prepend", prepend: "▁" }, {
        type: "Replace",
        pattern: { String: " " },
        content: "▁",
      }],
    })(
      "a b",
    ),
    "▁a▁b",
  );
  assert.equal(norm({ type: "Prepend", prepend: "▁" })(""), "");
  assert.equal(
    norm({ type: "Replace", pattern: { Regex: " {2,}" }, content: "$&" })("a   b"),
    "a$&b",
  );
  const d = readDecoder(
    new Node("t.json", "decoder", {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "▁" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 1 },
      ],
    }),
  )!;
  assert.deepEqual(renderToken(d, "▁a"), new TextEncoder().encode(" a"));
  assert.deepEqual(renderToken(d, "<0xC3>"), Uint8Array.of(0xc3));
  assert.deepEqual(d.stripWhole, { char: " ", count: 1 });
  assert.equal(d.finish.length, 1);
});

Deno.test("Oniguruma patterns translate to equivalent RegExps, or are refused by name", () => {
  const re = onigToRegExp(GPT2_PATTERN);
  assert.deepEqual("it's  a test!!".match(re), ["it", "'s", " ", " a", " test", "!!"]);
  assert.deepEqual("I'M".match(onigToRegExp("(?i:'s|'m)|\\p{L}+")), ["I", "'M"]);
  assert.deepEqual("漢字かな".match(onigToRegExp("\\p{Han}+")), ["漢字"]);
  assert.deepEqual("a{b}".match(onigToRegExp("[{}]|a{1}")), ["a", "{", "}"]);
  assert.deepEqual("x\ny".match(onigToRegExp("^.|.$")), ["x", "y"]);
  assert.deepEqual("a_b c".match(onigToRegExp("\\w+")), ["a_b", "c"]);
  for (
    const bad of ["a++", "(?>a)", "[a[b]]", "[a&&b]", "\\S", "[\\S]", "\\p{NotAProperty}", "\\q"]
  ) {
    if (bad === "\\S") {
      assert.doesNotThrow(() => onigToRegExp(bad));
      continue;
    }
    assert.throws(() => onigToRegExp(bad), SyntaxError, bad);
  }
  // Inside a tokenizer.json the error names the path.
  assert.throws(
    () =>
      readPreTokenizer(
        new Node("t.json", "pre_tokenizer", {
          type: "Split",
          pattern: { Regex: "a++" },
          behavior: "Isolated",
        }),
      ),
    (e: unknown) =>
      e instanceof FormatError && e.field === "pre_tokenizer.pattern.Regex" &&
      /possessive/.test(e.message),
  );
});

Deno.test("tokenizers' Split with llama.cpp's regexes splits every corpus chunk as tokenizers does", async () => {
  const split = (p: string) => ({
    type: "Split",
    pattern: { Regex: p },
    behavior: "Isolated",
    invert: false,
  });
  const families: Record<string, unknown> = {
    gpt2: split(GPT2_PATTERN),
    llama3: split(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    qwen2: split(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    smollm: {
      type: "Sequence",
      pretokenizers: [{ type: "Digits", individual_digits: true }, split(GPT2_PATTERN)],
    },
    default: {
      type: "Sequence",
      pretokenizers: [
        split("[\\p{P}\\$\\+<=>\\^~\\|]+"),
        split(GPT2_PATTERN),
        split("\\p{N}+"),
        split("[0-9][0-9][0-9]"),
      ],
    },
  };
  const ref = fixture<{ types: Record<string, Record<string, string>> }>("pretokenize.json");
  for (const [family, json] of Object.entries(families)) {
    const f = pre(json);
    const bad: string[] = [];
    for (const c of corpus()) {
      const lengths = f(c.text).map((w) => w.length).join(",");
      if (await short(lengths) !== ref.types[family][c.name]) bad.push(c.name);
    }
    assert.deepEqual(bad, [], `${family}: ${bad.join(", ")}`);
  }
});
