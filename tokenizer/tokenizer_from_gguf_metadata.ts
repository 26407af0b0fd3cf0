/**
 * {@link tokenizerFromGgufMetadata}: a tokenizer from GGUF `tokenizer.ggml.*`
 * metadata that gives the ids llama.cpp gives.
 *
 * @module
 */

import { FormatError } from "../formats/errors.ts";
import { mergeSymbols, MergeTable } from "./_bpe.ts";
import { CoreTokenizer, EOG_TEXTS } from "./_core.ts";
import { LLAMA_PRE_STAGES, type SplitStage, splitWords } from "./_llama_pretokenize.ts";
import { type LlamaSpecials, partitionLlama, Trie } from "./_special.ts";
import { spmTokenize, type SpmVocab } from "./_spm.ts";
import { TokenVocab } from "./_vocab.ts";
import { BYTE_TO_CHAR, CHAR_TO_BYTE, codePoints, fromCodePoints, utf8 } from "./_unicode.ts";
import type { Tokenizer } from "./tokenizer.ts";

/**
 * Options of {@link tokenizerFromGgufMetadata}.
 *
 * @example
 * ```ts
 * import type { GgufTokenizerOptions } from "./tokenizer_from_gguf_metadata.ts";
 * const o: GgufTokenizerOptions = { name: "model.cflow" };
 * console.log(o.name); // "model.cflow"
 * ```
 */
export interface GgufTokenizerOptions {
  /**
   * Name used in error messages (default `"tokenizer metadata"`).
   *
   * @example
   * ```ts
   * import type { GgufTokenizerOptions } from "./tokenizer_from_gguf_metadata.ts";
   * const o: GgufTokenizerOptions = { name: "smollm2.gguf" };
   * console.log(o.name); // "smollm2.gguf"
   * ```
   */
  name?: string;
}

// llama.cpp's token attributes (llama_token_attr).
const UNKNOWN = 1 << 0;
const UNUSED = 1 << 1;
const NORMAL = 1 << 2;
const CONTROL = 1 << 3;
const USER_DEFINED = 1 << 4;
const BYTE = 1 << 5;
const TYPE_ATTR = [0, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE];

interface PreFamily {
  readonly stages: readonly SplitStage[];
  readonly ignoreMerges: boolean;
  readonly addBos: boolean;
}

function family(stages: string, ignoreMerges = false, addBos = false): PreFamily {
  return { stages: LLAMA_PRE_STAGES[stages], ignoreMerges, addBos };
}

// tokenizer.ggml.pre → llama.cpp's pre-tokenizer (llama_vocab::impl::load).
const PRE: ReadonlyMap<string, PreFamily> = new Map([
  ["default", family("default")],
  ...[
    "gpt2",
    "gpt-2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "jina-v1-en",
    "jina-v2-code",
    "roberta-bpe",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "granite-docling",
    "exaone4",
  ].map((n): [string, PreFamily] => [n, family("gpt2")]),
  ...[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
  ].map((n): [string, PreFamily] => [n, family("llama3", true, true)]),
  ...["dbrx", "smaug-bpe"].map((n): [string, PreFamily] => [n, family("llama3")]),
  ...[
    "qwen2",
    "deepseek-r1-qwen",
    "kormo",
    "f2llmv2",
    "megrez",
    "stablelm2",
    "hunyuan",
    "grok-2",
    "solar-open",
  ].map((n): [string, PreFamily] => [n, family("qwen2")]),
  ...[
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva-7b",
    "mellum2",
  ].map((n): [string, PreFamily] => [n, family("smollm")]),
]);

const P = "tokenizer.ggml.";

/** Reads and checks metadata values, naming the key in every error. */
class Meta {
  readonly #m: Record<string, unknown>;
  readonly #name: string;

  constructor(m: Record<string, unknown>, name: string) {
    this.#m = m;
    this.#name = name;
  }

  fail(field: string, detail: string): FormatError {
    return new FormatError(this.#name, field, 0, detail);
  }

  #get(key: string): unknown {
    if (!Object.hasOwn(this.#m, key)) return undefined;
    let v = this.#m[key];
    // A parsed GGUF value ({ type, value }) is accepted as well as the plain value.
    if (
      v !== null && typeof v === "object" && !Array.isArray(v) && !ArrayBuffer.isView(v) &&
      "type" in v && "value" in v
    ) {
      v = (v as { value: unknown }).value;
    }
    return v;
  }

  string(key: string): string | undefined {
    const v = this.#get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw this.fail(key, `expected a string, found ${describe(v)}`);
    return v;
  }

  bool(key: string): boolean | undefined {
    const v = this.#get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") throw this.fail(key, `expected a boolean, found ${describe(v)}`);
    return v;
  }

  id(key: string, n: number): number | undefined {
    const v = this.#get(key);
    if (v === undefined) return undefined;
    const x = toInteger(v);
    if (x === undefined) throw this.fail(key, `expected a token id, found ${describe(v)}`);
    if (x < 0 || x >= n) throw this.fail(key, `token id ${x} is outside the vocabulary [0, ${n})`);
    return x;
  }

  strings(key: string): string[] | undefined {
    const v = this.#get(key);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) {
      throw this.fail(key, `expected an array of strings, found ${describe(v)}`);
    }
    for (let i = 0; i < v.length; i++) {
      if (typeof v[i] !== "string") {
        throw this.fail(`${key}[${i}]`, `expected a string, found ${describe(v[i])}`);
      }
    }
    return v as string[];
  }

  numbers(key: string, n: number, integer: boolean): ArrayLike<number> | undefined {
    const v = this.#get(key);
    if (v === undefined) return undefined;
    let arr: ArrayLike<unknown>;
    if (Array.isArray(v)) arr = v;
    else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      arr = v as unknown as ArrayLike<unknown>;
    } else throw this.fail(key, `expected an array of numbers, found ${describe(v)}`);
    if (arr.length !== n) {
      throw this.fail(key, `has ${arr.length} entries for ${n} tokens`);
    }
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const x = integer ? toInteger(arr[i]) : toFinite(arr[i]);
      if (x === undefined) {
        throw this.fail(
          `${key}[${i}]`,
          `expected ${integer ? "an integer" : "a finite number"}, found ${describe(arr[i])}`,
        );
      }
      out[i] = x;
    }
    return out;
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (ArrayBuffer.isView(v)) return "a typed array";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

function toInteger(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isSafeInteger(v) ? v : undefined;
  if (typeof v === "bigint") {
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(v)
      : undefined;
  }
  if (typeof v === "string" && /^-?\d{1,15}$/.test(v)) return Number(v);
  return undefined;
}

function toFinite(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

const HEX = "0123456789ABCDEF";

/**
 * A tokenizer from GGUF tokenizer metadata, as cflow keeps it: the
 * `tokenizer` object of a `.cflow` file's metadata (keys
 * `tokenizer.ggml.model`, `tokenizer.ggml.pre`, `tokenizer.ggml.tokens`,
 * `tokenizer.ggml.token_type`, `tokenizer.ggml.scores`,
 * `tokenizer.ggml.merges`, `tokenizer.ggml.bos_token_id`, …,
 * `tokenizer.chat_template`). Values may be plain (arrays, typed arrays,
 * numbers, bigints or decimal strings for ids) or parsed GGUF values
 * (`{ type, value }`).
 *
 * Encoding follows llama.cpp (`llama_tokenize` in `src/llama-vocab.cpp`)
 * step for step: special-token partition (longest token first; control
 * tokens only with `parseSpecial`, user-defined ones always), then for
 * `tokenizer.ggml.model` = `gpt2` its pre-tokenizer (by
 * `tokenizer.ggml.pre`: `default`, the `gpt2` family, the `llama3` family
 * (`llama-bpe`, with `ignore_merges`), the `qwen2` family, the `smollm`
 * family (`starcoder`…)) and byte-level BPE by merge rank; for `llama` its
 * SentencePiece-style merging by token score with `<0xXX>` byte fallback,
 * `▁` for spaces and `add_space_prefix`. Decoding follows
 * `llama_detokenize` without its optional space clean-up.
 *
 * Everything is checked: arrays of the wrong type or length, token ids out
 * of range, duplicate tokens, merges naming unknown tokens and malformed
 * byte tokens are `FormatError`s (`formats/errors.ts`) naming the key.
 *
 * @example
 * ```ts
 * import { tokenizerFromGgufMetadata } from "./tokenizer_from_gguf_metadata.ts";
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "gpt2",
 *   "tokenizer.ggml.pre": "smollm",
 *   "tokenizer.ggml.tokens": ["<|endoftext|>", "h", "i", "Ġ", "hi", "Ġhi"],
 *   "tokenizer.ggml.token_type": [3, 1, 1, 1, 1, 1],
 *   "tokenizer.ggml.merges": ["h i", "Ġ hi"],
 *   "tokenizer.ggml.eos_token_id": 0,
 * });
 * console.log(tok.encode("hi hi<|endoftext|>", { parseSpecial: true })); // [4, 5, 0]
 * console.log(tok.decode([4, 5])); // "hi hi"
 * ```
 */
export function tokenizerFromGgufMetadata(
  metadata: Record<string, unknown>,
  options?: GgufTokenizerOptions,
): Tokenizer {
  if (metadata === null || typeof metadata !== "object") {
    throw new TypeError("tokenizerFromGgufMetadata: metadata must be an object");
  }
  const m = new Meta(metadata, options?.name ?? "tokenizer metadata");
  const model = m.string(P + "model");
  if (model === undefined) throw m.fail(P + "model", "required key is missing");
  if (model !== "gpt2" && model !== "llama") {
    throw m.fail(P + "model", `unsupported tokenizer model "${model}" (supported: gpt2, llama)`);
  }
  const spm = model === "llama";
  const tokens = m.strings(P + "tokens");
  if (tokens === undefined) throw m.fail(P + "tokens", "required key is missing");
  const n = tokens.length;
  if (n === 0) throw m.fail(P + "tokens", "the vocabulary is empty");
  const types = m.numbers(P + "token_type", n, true);
  const scores = m.numbers(P + "scores", n, false);

  // Every text in one array of code units, indexed by a hash table (_vocab.ts): a JavaScript
  // string per token and a Map took ~19 MB of heap for a 262,144-token vocabulary. The strings
  // stay in this block, so that no closure made below keeps them alive.
  let vocab: TokenVocab;
  {
    const texts = tokens.map((t, i) => t === "" ? `[EMPTY_${i}]` : t);
    vocab = new TokenVocab(texts, (i, first) => {
      throw m.fail(`${P}tokens[${i}]`, `duplicates token ${first} (${describe(texts[i])})`);
    });
  }
  const maxLength = vocab.maxLength;
  const attr = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const type = types === undefined ? 1 : types[i];
    if (type < 0 || type >= TYPE_ATTR.length) {
      throw m.fail(`${P}token_type[${i}]`, `unknown token type ${type}`);
    }
    attr[i] = TYPE_ATTR[type];
    if (attr[i] & BYTE) {
      const t = vocab.text(i);
      if (!/^<0x[0-9A-Fa-f]{2}>$/.test(t)) {
        throw m.fail(`${P}tokens[${i}]`, `byte token ${describe(t)} is not of the form <0xXX>`);
      }
    }
  }

  // Special ids: llama.cpp's defaults, then the keys.
  const inRange = (x: number) => (x < n ? x : undefined);
  const bosId = m.id(P + "bos_token_id", n) ?? (spm ? inRange(1) : inRange(11));
  const eosId = m.id(P + "eos_token_id", n) ?? (spm ? inRange(2) : inRange(11));
  for (const key of ["unknown_token_id", "padding_token_id", "seperator_token_id"]) {
    m.id(P + key, n);
  }
  const eotId = m.id(P + "eot_token_id", n);
  const eomId = m.id(P + "eom_token_id", n);

  let pre: PreFamily | undefined;
  if (!spm) {
    const name = m.string(P + "pre") ?? "default";
    pre = PRE.get(name);
    if (pre === undefined) {
      throw m.fail(P + "pre", `unsupported pre-tokenizer "${name}"`);
    }
  }
  const addBos = m.bool(P + "add_bos_token") ?? (spm ? true : pre!.addBos);
  const addEos = m.bool(P + "add_eos_token") ?? false;
  const addSpacePrefix = m.bool(P + "add_space_prefix") ?? spm;
  if (addBos && bosId === undefined) {
    throw m.fail(P + "add_bos_token", "is true but the model has no BOS token");
  }
  if (addEos && eosId === undefined) {
    throw m.fail(P + "add_eos_token", "is true but the model has no EOS token");
  }
  const chatTemplate = m.string("tokenizer.chat_template");

  // End-of-generation tokens and the control attribute llama.cpp forces on them.
  const eog = new Set<number>();
  const forceControl = (id: number) => attr[id] |= CONTROL;
  for (const t of FIM_CONTROL) {
    const id = vocab.get(t);
    if (id !== undefined) forceControl(id);
  }
  for (const t of [...FIM_EOG, ...EOG_TEXTS]) {
    const id = vocab.get(t);
    if (id === undefined) continue;
    eog.add(id);
    forceControl(id);
  }
  for (const t of ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]) {
    const id = vocab.get(t);
    if (id !== undefined) attr[id] = USER_DEFINED;
  }
  for (const id of [eosId, eotId, eomId]) if (id !== undefined) eog.add(id);
  const has = (t: string) => vocab.has(t) && eog.has(vocab.get(t)!);
  if (
    (has("<|return|>") || has("<|calls|>")) && (has("<|call|>") || has("<|flush|>")) &&
    has("<|end|>")
  ) {
    const id = vocab.get("<|end|>")!;
    eog.delete(id);
    attr[id] = USER_DEFINED;
  }
  if (has("<|tool_response>") && has("</s>")) {
    const id = vocab.get("</s>")!;
    eog.delete(id);
    attr[id] = NORMAL;
  }

  // Special tokens, longest (UTF-8 bytes) first.
  const specialIds: number[] = [];
  for (let i = 0; i < n; i++) if (attr[i] & (CONTROL | USER_DEFINED | UNKNOWN)) specialIds.push(i);
  const byteLen = specialIds.map((i) => utf8(vocab.text(i)).length);
  const order = specialIds.map((_, k) => k).sort((a, b) => byteLen[b] - byteLen[a] || a - b);
  const specials: LlamaSpecials = {
    texts: order.map((k) => vocab.text(specialIds[k])),
    ids: order.map((k) => specialIds[k]),
    always: order.map((k) => (attr[specialIds[k]] & (CONTROL | UNKNOWN)) === 0),
    trie: new Trie(order.map((k) => vocab.text(specialIds[k]))),
  };

  const encode = spm
    ? spmEncoder(vocab, scores, maxLength, specials, addSpacePrefix)
    : bpeEncoder(m, vocab, pre!, specials);

  const piece = (id: number): Uint8Array => {
    const a = attr[id];
    const t = vocab.text(id);
    if (a & (UNKNOWN | CONTROL | USER_DEFINED)) return utf8(t);
    if (a & NORMAL) return spm ? utf8(t.replaceAll("\u2581", " ")) : decodeByteLevel(t);
    if (a & BYTE) return Uint8Array.of(parseInt(t.slice(3, 5), 16));
    return new Uint8Array(0);
  };

  return new CoreTokenizer({
    vocabSize: n,
    text: (id) => vocab.text(id),
    id: (t) => vocab.get(t),
    piece,
    special: (id) => (attr[id] & (UNKNOWN | CONTROL)) !== 0,
    encode,
    prefix: addBos ? [bosId!] : [],
    suffix: addEos ? [eosId!] : [],
    ...(bosId !== undefined ? { bosId } : {}),
    ...(eosId !== undefined ? { eosId } : {}),
    addBos,
    addEos,
    ...(chatTemplate !== undefined ? { chatTemplate } : {}),
    eog,
    leading: addSpacePrefix ? { mode: "llama" } : { mode: "none" },
  });
}

// Tokens llama.cpp marks as control by their text (FIM prefix/suffix/middle).
const FIM_CONTROL = [
  "<|fim_prefix|>",
  "<fim-prefix>",
  "<fim_prefix>",
  "<｜fim▁begin｜>",
  "<PRE>",
  "▁<PRE>",
  "<|code_prefix|>",
  "<|prefix|>",
  "<|fim_suffix|>",
  "<fim-suffix>",
  "<fim_suffix>",
  "<｜fim▁hole｜>",
  "<SUF>",
  "▁<SUF>",
  "<|code_suffix|>",
  "<|suffix|>",
  "<|fim_middle|>",
  "<fim-middle>",
  "<fim_middle>",
  "<｜fim▁end｜>",
  "<MID>",
  "▁<MID>",
  "<|code_middle|>",
  "<|middle|>",
];

// FIM pad/repo/separator tokens: control and end of generation.
const FIM_EOG = [
  "<|fim_pad|>",
  "<fim-pad>",
  "<fim_pad>",
  "<PAD>",
  "[PAD]",
  "<|fim_repo|>",
  "<|repo_name|>",
  "<fim-repo>",
  "<REPO>",
  "<reponame>",
  "<|file_sep|>",
];

/** llama_decode_text: a byte-level token's characters back to bytes. */
function decodeByteLevel(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    const b = ch.length === 1 ? CHAR_TO_BYTE.get(ch.charCodeAt(0)) : undefined;
    if (b !== undefined) {
      out.push(b);
      continue;
    }
    // llama.cpp writes characters outside the byte alphabet this way.
    const hex = [...utf8(ch)].map((x) => x.toString(16).padStart(2, "0")).join("");
    out.push(...utf8(`[UNK_BYTE_0x${hex}${text}]`));
  }
  return Uint8Array.from(out);
}

type Encode = (text: string, parseSpecial: boolean) => number[];

function bpeEncoder(
  m: Meta,
  ids: TokenVocab,
  pre: PreFamily,
  specials: LlamaSpecials,
): Encode {
  const merges = m.strings(P + "merges");
  if (merges === undefined) throw m.fail(P + "merges", "required key is missing");
  const table = new MergeTable();
  for (let i = 0; i < merges.length; i++) {
    const s = merges[i];
    const sp = s.indexOf(" ", 1);
    if (sp < 0) {
      throw m.fail(`${P}merges[${i}]`, `${describe(s)} is not two tokens separated by a space`);
    }
    const a = s.slice(0, sp);
    const b = s.slice(sp + 1);
    const ia = ids.get(a);
    const ib = ids.get(b);
    const ir = ids.get(a + b);
    if (ia === undefined || ib === undefined || ir === undefined) {
      const missing = ia === undefined ? a : ib === undefined ? b : a + b;
      throw m.fail(`${P}merges[${i}]`, `names ${describe(missing)}, which is not a token`);
    }
    table.add(ia, ib, ir, "first");
  }
  const byteId = BYTE_TO_CHAR.map((c) => ids.get(c) ?? -1);
  const cache = new Map<string, number[]>();
  const word = (w: string): number[] => {
    const bytes = utf8(w);
    if (pre.ignoreMerges) {
      let spelled = "";
      for (const b of bytes) spelled += BYTE_TO_CHAR[b];
      const id = ids.get(spelled);
      if (id !== undefined) return [id];
    }
    const init: number[] = new Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) init[i] = byteId[bytes[i]];
    return mergeSymbols(init, table).filter((id) => id >= 0);
  };
  return (text, parseSpecial) => {
    const out: number[] = [];
    for (const frag of partitionLlama(text.toWellFormed(), specials, parseSpecial)) {
      if (typeof frag === "number") {
        out.push(frag);
        continue;
      }
      const cps = codePoints(frag);
      let at = 0;
      for (const len of splitWords(cps, pre.stages)) {
        const w = fromCodePoints(cps, at, at + len);
        at += len;
        let got = cache.get(w);
        if (got === undefined) {
          got = word(w);
          if (cache.size >= 65536) cache.clear();
          cache.set(w, got);
        }
        for (const id of got) out.push(id);
      }
    }
    return out;
  };
}

function spmEncoder(
  ids: TokenVocab,
  scores: ArrayLike<number> | undefined,
  maxLength: number,
  specials: LlamaSpecials,
  addSpacePrefix: boolean,
): Encode {
  const n = ids.size;
  const byteIds = new Int32Array(256).fill(-1);
  for (let b = 0; b < 256; b++) {
    const id = ids.get(`<0x${HEX[b >> 4]}${HEX[b & 15]}>`) ??
      (b < 0x80 ? ids.get(String.fromCharCode(b)) : undefined);
    if (id !== undefined) byteIds[b] = id;
  }
  const vocab: SpmVocab = {
    idOf: (s, from, length) => ids.getSlice(s, from, length),
    scores: scores === undefined ? new Float32Array(n) : Float32Array.from(scores),
    maxLength,
    byteToken(b: number): number {
      const id = byteIds[b];
      if (id < 0) {
        throw new RangeError(
          `the vocabulary has no token for byte 0x${HEX[b >> 4]}${
            HEX[b & 15]
          } (<0x..> or the byte itself)`,
        );
      }
      return id;
    },
  };
  return (text, parseSpecial) => {
    const out: number[] = [];
    let prevSpecial = true;
    for (const frag of partitionLlama(text.toWellFormed(), specials, parseSpecial)) {
      if (typeof frag === "number") {
        out.push(frag);
        prevSpecial = true;
        continue;
      }
      const t = (addSpacePrefix && prevSpecial ? " " : "") + frag;
      spmTokenize(t.replaceAll(" ", "\u2581"), vocab, out);
      prevSpecial = false;
    }
    return out;
  };
}
