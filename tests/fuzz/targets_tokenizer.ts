/**
 * Fuzz targets for the tokenizers: loading `tokenizer.json` and GGUF
 * tokenizer metadata (mutated small vocabularies), and the real SmolLM2
 * (byte-level BPE) and Gemma 3 (SentencePiece) tokenizers on arbitrary
 * text and arbitrary id sequences.
 *
 * Decoding properties, for ids `ids` and B = the bytes of their pieces in
 * order (each `tokenBytes(id)`):
 *
 * - ids all in [0, vocabSize): `decode` and the {@link StreamDecoder}
 *   never throw; otherwise both throw a RangeError.
 * - The stream's pieces concatenate to `decode(ids)`, and after every
 *   push the text so far is a prefix of that result: nothing is emitted
 *   that a later token would change (no early U+FFFD for a character
 *   split across tokens).
 * - When B is valid UTF-8, the output is exactly B decoded strictly (less a
 *   leading space that SentencePiece decoding drops), so a U+FFFD appears
 *   only where B itself encodes one; when B is not valid UTF-8, the output
 *   has a U+FFFD.
 *
 * @module
 */

import fc from "fast-check";
import { FormatError } from "../../formats/errors.ts";
import {
  deriveHfTokenizer,
  fixture,
  FIXTURES,
  ggufTokenizerMetadata,
  hfJson,
  modelPath,
  MODELS,
  type Skeleton,
  skipReason,
  smallHfJson,
} from "../../tokenizer/_test_utils.ts";
import { StreamDecoder } from "../../tokenizer/stream_decoder.ts";
import { BYTE_TO_CHAR } from "../../tokenizer/_unicode.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";
import { tokenizerFromGgufMetadata } from "../../tokenizer/tokenizer_from_gguf_metadata.ts";
import { tokenizerFromHfJson } from "../../tokenizer/tokenizer_from_hf_json.ts";
import { describeError, ensure, type Outcome, type Target } from "./harness.ts";
import { weirdJson } from "./targets_formats.ts";

const SAMPLES = ["hi hi!", "", " é😀<bos><eos>\n\t x", "<|endoftext|>héllo 12345 ▁▁"];

/**
 * Encodes and decodes a few strings with a tokenizer the loader accepted.
 * The one error allowed is encode's RangeError for a SentencePiece
 * vocabulary without a token for a byte the text needs (llama.cpp aborts
 * there: `token_to_id.at`).
 */
function exercise(tok: Tokenizer): void {
  ensure(Number.isSafeInteger(tok.vocabSize) && tok.vocabSize > 0, `vocabSize ${tok.vocabSize}`);
  for (const s of SAMPLES) {
    for (const parseSpecial of [false, true]) {
      let ids: number[];
      try {
        ids = tok.encode(s, { parseSpecial, addSpecial: parseSpecial });
      } catch (e) {
        if (e instanceof RangeError && /has no token for byte/.test(e.message)) continue;
        throw e;
      }
      for (const id of ids) {
        ensure(Number.isSafeInteger(id) && id >= 0 && id < tok.vocabSize, `id ${id}`);
      }
      tok.decode(ids);
      tok.decode(ids, { skipSpecial: true });
    }
  }
  const all = Array.from({ length: Math.min(tok.vocabSize, 300) }, (_, i) => i);
  tok.decode(all);
  const stream = new StreamDecoder(tok);
  for (const id of all) stream.push(id);
  stream.flush();
}

/** Loader errors allowed: a FormatError with a field (its offset is 0 for JSON trees). */
function loaderError(e: unknown): "rejected" {
  if (!(e instanceof FormatError)) {
    throw new Error(`threw ${describeError(e)} instead of a FormatError`, { cause: e });
  }
  ensure(e.field.length > 0 && Number.isSafeInteger(e.offset) && e.offset >= 0, e.message);
  return "rejected";
}

/** Every path into a JSON tree, up to `max` of them. */
function paths(v: unknown, max = 4000): (string | number)[][] {
  const out: (string | number)[][] = [];
  const walk = (x: unknown, p: (string | number)[]) => {
    if (out.length >= max) return;
    out.push(p);
    if (Array.isArray(x)) x.forEach((y, i) => walk(y, [...p, i]));
    else if (x !== null && typeof x === "object") {
      for (const [k, y] of Object.entries(x)) walk(y, [...p, k]);
    }
  };
  walk(v, []);
  return out;
}

type Op = { kind: "set"; value: unknown } | { kind: "delete" } | { kind: "dup" };

/** Applies `op` at `path` of a deep copy of `root`. */
function edit(root: unknown, path: (string | number)[], op: Op): unknown {
  if (path.length === 0) return op.kind === "set" ? op.value : root;
  const copy = structuredClone(root);
  let parent = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) {
    if (parent === null || typeof parent !== "object") return copy;
    const next = parent[k];
    // An earlier edit may have removed the path: leave the tree as it is.
    if (next === null || typeof next !== "object") return copy;
    parent = next as Record<string | number, unknown>;
  }
  const last = path[path.length - 1];
  if (parent === null || typeof parent !== "object") return copy;
  if (Array.isArray(parent) !== (typeof last === "number")) return copy;
  if (Array.isArray(parent)) {
    const i = last as number;
    if (op.kind === "set") parent[i] = op.value;
    else if (op.kind === "delete") parent.splice(i, 1);
    else parent.splice(i, 0, structuredClone(parent[i]));
  } else {
    if (op.kind === "set") parent[last] = op.value;
    else if (op.kind === "delete") delete parent[last];
    else parent[`${last}_`] = structuredClone(parent[last]);
  }
  return copy;
}

function opArb(tokenish: string[]): fc.Arbitrary<Op> {
  const value = fc.oneof(
    { arbitrary: weirdJson(), weight: 4 },
    { arbitrary: fc.constantFrom(...tokenish), weight: 2 },
    { arbitrary: fc.integer({ min: -2, max: 520 }), weight: 2 },
    { arbitrary: fc.string({ maxLength: 4, unit: "binary" }), weight: 1 },
  );
  return fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant("set" as const), value }), weight: 6 },
    { arbitrary: fc.constant({ kind: "delete" as const }), weight: 2 },
    { arbitrary: fc.constant({ kind: "dup" as const }), weight: 1 },
  );
}

let hfBases: unknown[] | undefined;

interface TreeEdit {
  base: number;
  edits: { path: number; op: Op }[];
  text: string;
}

/** Tree edits (set/delete/duplicate at any path) of the small and the tiny fixture tokenizers. */
export const hfTokenizerTarget: Target<TreeEdit> = {
  name: "tokenizer.json",
  minAccepted: 0.06, // measured 13%
  init() {
    hfBases ??= [
      smallHfJson(),
      ...["bytelevel", "metaspace", "llama3", "gemma"].map((n) =>
        JSON.parse(Deno.readTextFileSync(new URL(`tiny_${n}.json`, FIXTURES)))
      ),
    ];
  },
  arbitrary() {
    const bases = hfBases!;
    const all = bases.map((b) => paths(b));
    const tokenish = [
      "<0x21>",
      "<0xZZ>",
      "<bos>",
      "Ġ",
      "▁",
      "h i",
      "hi",
      "ByteLevel",
      "Metaspace",
      "BPE",
    ];
    return fc.record({
      base: fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, {
        arbitrary: fc.nat({ max: bases.length - 1 }),
        weight: 1,
      }),
      edits: fc.array(fc.record({ path: fc.nat(), op: opArb(tokenish) }), {
        minLength: 1,
        maxLength: 3,
      }),
    }).map(({ base, edits }) => {
      let tree = bases[base];
      for (const e of edits) {
        const ps = all[base];
        tree = edit(tree, ps[e.path % ps.length], e.op);
      }
      const text = JSON.stringify(tree) ?? "null";
      return { base, edits, text, toString: () => text.slice(0, 2000) };
    });
  },
  check({ text }): Outcome {
    let tok: Tokenizer;
    try {
      tok = tokenizerFromHfJson(text, undefined, { name: "tokenizer.json" });
    } catch (e) {
      return loaderError(e);
    }
    exercise(tok);
    return "accepted";
  },
};

const P = "tokenizer.ggml.";
const GGUF_KEYS = [
  "model",
  "pre",
  "tokens",
  "token_type",
  "scores",
  "merges",
  "bos_token_id",
  "eos_token_id",
  "eot_token_id",
  "eom_token_id",
  "add_bos_token",
  "add_eos_token",
  "add_space_prefix",
];

function ggufBases(): Record<string, unknown>[] {
  return [
    {
      [P + "model"]: "gpt2",
      [P + "pre"]: "smollm",
      [P + "tokens"]: ["<|endoftext|>", "h", "i", "Ġ", "hi", "Ġhi", "Ã", "©"],
      [P + "token_type"]: [3, 1, 1, 1, 1, 1, 1, 1],
      [P + "merges"]: ["h i", "Ġ hi"],
      [P + "eos_token_id"]: 0,
    },
    {
      [P + "model"]: "llama",
      [P + "tokens"]: ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi", "<0xC3>", "<0xA9>"],
      [P + "scores"]: [0, 0, 0, -1, -2, -3, -4, -5, 0, 0],
      [P + "token_type"]: [2, 3, 3, 1, 1, 1, 1, 1, 6, 6],
      [P + "bos_token_id"]: 1,
      [P + "eos_token_id"]: 2,
      [P + "add_bos_token"]: true,
    },
  ];
}

interface MetaEdit {
  base: number;
  edits: { key: string; index: number | null; op: Op }[];
}

/** GGUF tokenizer metadata: whole keys or single array elements replaced, removed or duplicated. */
export const ggufTokenizerTarget: Target<MetaEdit> = {
  name: "gguf-tokenizer",
  minAccepted: 0.1, // measured 19%
  arbitrary() {
    const tokenish = [
      "<0xC3>",
      "<0x1>",
      "<0xZZ>",
      "Ġ",
      "▁",
      "h i",
      "hi",
      "x y",
      "smollm",
      "llama3",
      "gpt2",
      "llama",
    ];
    return fc.record({
      base: fc.nat({ max: 1 }),
      edits: fc.array(
        fc.record({
          key: fc.constantFrom(...GGUF_KEYS),
          index: fc.option(fc.nat({ max: 12 })),
          op: opArb(tokenish),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    });
  },
  check({ base, edits }): Outcome {
    const m: Record<string, unknown> = ggufBases()[base];
    for (const e of edits) {
      const key = P + e.key;
      const v = m[key];
      if (e.index !== null && Array.isArray(v) && v.length > 0) {
        m[key] = edit(v, [e.index % v.length], e.op);
      } else if (e.op.kind === "set") m[key] = e.op.value;
      else if (e.op.kind === "delete") delete m[key];
    }
    let tok: Tokenizer;
    try {
      tok = tokenizerFromGgufMetadata(m, { name: "t.gguf" });
    } catch (e) {
      return loaderError(e);
    }
    exercise(tok);
    return "accepted";
  },
};

// ---------------------------------------------------------------- real models

const real = new Map<string, Tokenizer>();

/** How a real tokenizer is built: from the GGUF metadata, or the tokenizer.json transformers derives. */
export type Via = "gguf" | "hf";

function realTokenizer(model: keyof typeof MODELS, via: Via = "gguf"): Tokenizer {
  let t = real.get(`${via}:${model}`);
  if (t === undefined) {
    const meta = ggufTokenizerMetadata(modelPath(model));
    if (via === "gguf") t = tokenizerFromGgufMetadata(meta, { name: MODELS[model] });
    else {
      const skeleton = fixture<Skeleton>(`hf_${model}_skeleton.json`);
      t = tokenizerFromHfJson(hfJson(skeleton, deriveHfTokenizer(model, meta)), undefined, {
        name: `${model} tokenizer.json`,
      });
    }
    real.set(`${via}:${model}`, t);
  }
  return t;
}

/** Strings with any code point, lone surrogates sometimes, and special-token texts. */
function textArb(): fc.Arbitrary<string> {
  const piece = fc.oneof(
    { arbitrary: fc.string({ unit: "binary", maxLength: 12 }), weight: 6 },
    { arbitrary: fc.string({ unit: "grapheme", maxLength: 6 }), weight: 2 },
    {
      arbitrary: fc.constantFrom(
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "▁",
        "<|endoftext|>",
        "<|im_start|>",
        "<start_of_turn>",
        "<bos>",
        "<eos>",
        "123456",
        "'s",
        "\u0000",
        "\ufeff",
        "\ufffd",
      ),
      weight: 2,
    },
    {
      arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
      weight: 1,
    },
  );
  return fc.array(piece, { maxLength: 8 }).map((a) => a.join(""));
}

/**
 * What decode(encode(text)) must give for `model`: the text (lone
 * surrogates as U+FFFD, as UTF-8 encoding makes them), except that
 *
 * - a SentencePiece vocabulary (Gemma 3) writes spaces as U+2581, so a
 *   U+2581 comes back a space;
 * - a byte-level BPE vocabulary (SmolLM2) drops the bytes its alphabet has
 *   no token for (SmolLM2 lacks 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0,
 *   0xC1, 0xF1, 0xF2 and 0xF5 to 0xFF), as llama.cpp and HF tokenizers do;
 *   what is left is decoded with U+FFFD for broken characters.
 */
function expectedRoundTrip(model: keyof typeof MODELS, tok: Tokenizer, text: string): string {
  const t = text.toWellFormed();
  if (model === "gemma3") return t.replaceAll("\u2581", " ");
  const kept = new TextEncoder().encode(t).filter((b) =>
    tok.tokenId(BYTE_TO_CHAR[b]) !== undefined
  );
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(kept);
}

/** encode then decode gives the text back (well-formed; U+2581 → space for Gemma 3). */
export function roundTripTarget(
  model: keyof typeof MODELS,
  via: Via = "gguf",
): Target<{ text: string; special: boolean }> {
  return {
    name: `${model}${via === "hf" ? "-hf" : ""}.roundtrip`,
    minAccepted: 1, // every text must come back: nothing is refused
    skip: () => skipReason(model),
    init() {
      realTokenizer(model, via);
    },
    arbitrary: () => fc.record({ text: textArb(), special: fc.boolean() }),
    check({ text, special }): Outcome {
      const tok = realTokenizer(model, via);
      const ids = tok.encode(text, { parseSpecial: special });
      for (const id of ids) {
        ensure(Number.isSafeInteger(id) && id >= 0 && id < tok.vocabSize, `id ${id}`);
      }
      const back = tok.decode(ids);
      const want = expectedRoundTrip(model, tok, text);
      ensure(
        back === want,
        () =>
          `decode(encode(x)) = ${JSON.stringify(back)}, want ${JSON.stringify(want)}; ids ${ids}`,
      );
      return "accepted";
    },
  };
}

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Arbitrary id sequences into decode and the stream decoder (see the module doc). */
export function decodeTarget(
  model: keyof typeof MODELS,
  via: Via = "gguf",
): Target<{ ids: number[]; skip: boolean }> {
  return {
    name: `${model}${via === "hf" ? "-hf" : ""}.decode`,
    minAccepted: 0.8, // measured 90% (the rest are ids outside the vocabulary)
    skip: () => skipReason(model),
    init() {
      realTokenizer(model, via);
    },
    arbitrary() {
      const n = model === "gemma3" ? 262144 : 49152;
      const id = fc.oneof(
        { arbitrary: fc.nat({ max: 600 }), weight: 6 }, // byte tokens live low in both vocabularies
        { arbitrary: fc.nat({ max: n - 1 }), weight: 3 },
        { arbitrary: fc.constantFrom(-1, n, n + 1, 0.5, 2 ** 32, NaN), weight: 1 },
      );
      return fc.record({
        ids: fc.oneof(
          { arbitrary: fc.array(fc.nat({ max: 600 }), { maxLength: 24 }), weight: 2 },
          { arbitrary: fc.array(id, { maxLength: 24 }), weight: 1 },
        ),
        skip: fc.boolean(),
      });
    },
    check({ ids, skip }): Outcome {
      const tok = realTokenizer(model, via);
      const valid = ids.every((id) => Number.isInteger(id) && id >= 0 && id < tok.vocabSize);
      let whole: string;
      try {
        whole = tok.decode(ids, { skipSpecial: skip });
      } catch (e) {
        ensure(!valid && e instanceof RangeError, `decode threw ${describeError(e)}`);
        const stream = new StreamDecoder(tok, { skipSpecial: skip });
        try {
          for (const id of ids) stream.push(id);
          throw new Error("the stream decoder took an id decode refused");
        } catch (e2) {
          ensure(e2 instanceof RangeError, `push threw ${describeError(e2)}`);
        }
        return "rejected";
      }
      ensure(valid, "decode took an id outside the vocabulary");
      const stream = new StreamDecoder(tok, { skipSpecial: skip });
      let text = "";
      for (const id of ids) {
        const piece = stream.push(id);
        ensure(piece.isWellFormed(), "a piece with a lone surrogate");
        text += piece;
        ensure(
          whole.startsWith(text),
          () => `stream ${JSON.stringify(text)} is not a prefix of ${JSON.stringify(whole)}`,
        );
      }
      text += stream.flush();
      ensure(
        text === whole,
        () => `stream ${JSON.stringify(text)} != decode ${JSON.stringify(whole)}`,
      );
      const parts = ids.filter((id) => !(skip && tok.isSpecial(id))).map((id) =>
        tok.tokenBytes(id)
      );
      const bytes = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
      let at = 0;
      for (const p of parts) {
        bytes.set(p, at);
        at += p.length;
      }
      let exact: string | undefined;
      try {
        exact = strict.decode(bytes);
      } catch {
        exact = undefined;
      }
      if (exact === undefined) {
        ensure(whole.includes("\ufffd"), "invalid UTF-8 decoded without U+FFFD");
      } else {
        const drop = (s: string) => (model === "gemma3" ? s.replace(/^ /, "") : s);
        ensure(
          drop(whole) === drop(exact),
          () => `decode ${JSON.stringify(whole)} != bytes ${JSON.stringify(exact)}`,
        );
      }
      return "accepted";
    },
  };
}

/** Every tokenizer target. */
export const TOKENIZER_TARGETS: readonly Target<never>[] = [
  hfTokenizerTarget,
  ggufTokenizerTarget,
  roundTripTarget("smollm2"),
  roundTripTarget("gemma3"),
  decodeTarget("smollm2"),
  decodeTarget("gemma3"),
  roundTripTarget("smollm2", "hf"),
  roundTripTarget("gemma3", "hf"),
  decodeTarget("smollm2", "hf"),
  decodeTarget("gemma3", "hf"),
] as unknown as Target<never>[];
