/**
 * The parts of a `tokenizer.json` pipeline cflow runs: normalizers,
 * pre-tokenizers and the BPE model (decoders: _hf_decoder.ts), each following the
 * `tokenizers` implementation of the same name. Every reader checks its JSON
 * and throws a {@link FormatError} naming the path (`pre_tokenizer.pretokenizers[1].behavior`).
 *
 * @module
 */

import { FormatError } from "../formats/errors.ts";
import { mergeSymbols, MergeTable } from "./_bpe.ts";
import { GPT2_PATTERN, onigToRegExp } from "./_hf_regex.ts";
import { BYTE_TO_CHAR, cpFlags, NUMBER, utf8, WHITESPACE } from "./_unicode.ts";

/** A JSON object being read, with its path for error messages. */
export class Node {
  /** File name for errors. */
  readonly file: string;
  /** JSON path of this node. */
  readonly path: string;
  /** The value. */
  readonly value: Record<string, unknown>;

  /** Wraps `value`, which must be an object. */
  constructor(file: string, path: string, value: unknown) {
    this.file = file;
    this.path = path;
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new FormatError(file, path || "(root)", 0, `expected an object, found ${kind(value)}`);
    }
    this.value = value as Record<string, unknown>;
  }

  /** The path of a key below this node. */
  at(key: string | number): string {
    return typeof key === "number"
      ? `${this.path}[${key}]`
      : this.path
      ? `${this.path}.${key}`
      : key;
  }

  /** An error about `key`. */
  fail(key: string | number | undefined, detail: string): FormatError {
    return new FormatError(
      this.file,
      key === undefined ? this.path || "(root)" : this.at(key),
      0,
      detail,
    );
  }

  /** A raw value (undefined when missing). */
  raw(key: string): unknown {
    return Object.hasOwn(this.value, key) ? this.value[key] : undefined;
  }

  /** A child object, or undefined when missing or null. */
  child(key: string): Node | undefined {
    const v = this.raw(key);
    return v === undefined || v === null ? undefined : new Node(this.file, this.at(key), v);
  }

  /** An array of child objects. */
  children(key: string): Node[] {
    const v = this.raw(key);
    if (!Array.isArray(v)) throw this.fail(key, `expected an array, found ${kind(v)}`);
    return v.map((x, i) => new Node(this.file, `${this.at(key)}[${i}]`, x));
  }

  /** A string (optionally with a fallback when missing or null). */
  string(key: string, fallback?: string): string {
    const v = this.raw(key);
    if ((v === undefined || v === null) && fallback !== undefined) return fallback;
    if (typeof v !== "string") throw this.fail(key, `expected a string, found ${kind(v)}`);
    return v;
  }

  /** A string or null/missing. */
  optString(key: string): string | undefined {
    const v = this.raw(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") throw this.fail(key, `expected a string or null, found ${kind(v)}`);
    return v;
  }

  /** A boolean with a fallback when missing or null. */
  bool(key: string, fallback: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "boolean") throw this.fail(key, `expected a boolean, found ${kind(v)}`);
    return v;
  }

  /** A non-negative integer with a fallback when missing. */
  uint(key: string, fallback?: number): number {
    const v = this.raw(key);
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw this.fail(key, `expected a non-negative integer, found ${kind(v)}`);
    }
    return v;
  }

  /** The `type` field. */
  type(): string {
    return this.string("type");
  }
}

/** A short description of a JSON value for messages. */
export function kind(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "nothing";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

/** A `{ "String": … }` or `{ "Regex": … }` pattern. */
type Pattern = { readonly literal: string } | { readonly regex: RegExp };

export function pattern(node: Node, key: string): Pattern {
  const p = node.child(key);
  if (p === undefined) throw node.fail(key, "required pattern is missing");
  if (p.raw("String") !== undefined) return { literal: p.string("String") };
  if (p.raw("Regex") !== undefined) {
    const src = p.string("Regex");
    try {
      return { regex: onigToRegExp(src) };
    } catch (e) {
      throw p.fail("Regex", (e as Error).message);
    }
  }
  throw node.fail(key, "expected { String } or { Regex }");
}

/** Match ranges [start, end) of a pattern, leftmost and non-overlapping. */
function findAll(text: string, p: Pattern): [number, number][] {
  const out: [number, number][] = [];
  if ("literal" in p) {
    if (p.literal.length === 0) return out;
    for (
      let i = text.indexOf(p.literal);
      i >= 0;
      i = text.indexOf(p.literal, i + p.literal.length)
    ) {
      out.push([i, i + p.literal.length]);
    }
    return out;
  }
  const re = p.regex;
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push([m.index, m.index + m[0].length]);
    if (m[0].length === 0) re.lastIndex += text.codePointAt(re.lastIndex)! > 0xffff ? 2 : 1;
  }
  return out;
}

export function replaceAll(text: string, p: Pattern, content: string): string {
  if ("literal" in p) return p.literal.length === 0 ? text : text.replaceAll(p.literal, content);
  p.regex.lastIndex = 0;
  return text.replace(p.regex, () => content);
}

// ---------------------------------------------------------------- normalizers

/** A normalizer: text in, text out. */
export type Normalizer = (text: string) => string;

const isWs = (cp: number) => (cpFlags(cp) & WHITESPACE) !== 0;

function trimWs(text: string, left: boolean, right: boolean): string {
  let s = 0;
  let e = text.length;
  if (left) {
    while (s < e && isWs(text.codePointAt(s)!)) {
      s += text.codePointAt(s)! > 0xffff ? 2 : 1;
    }
  }
  if (right) {
    while (e > s) {
      const low = text.charCodeAt(e - 1);
      const back = (low & 0xfc00) === 0xdc00 && e - 2 >= s ? 2 : 1;
      if (!isWs(text.codePointAt(e - back)!)) break;
      e -= back;
    }
  }
  return text.slice(s, e);
}

const MAX_DEPTH = 16;

export function checkDepth(node: Node, depth: number): void {
  if (depth > MAX_DEPTH) throw node.fail(undefined, `Sequence nested deeper than ${MAX_DEPTH}`);
}

/** Reads a `normalizer`; undefined for none. */
export function readNormalizer(node: Node | undefined, depth = 0): Normalizer | undefined {
  if (node === undefined) return undefined;
  checkDepth(node, depth);
  const type = node.type();
  switch (type) {
    case "Sequence": {
      const parts = node.children("normalizers").map((n) => readNormalizer(n, depth + 1)!);
      return (t) => parts.reduce((acc, f) => f(acc), t);
    }
    case "Replace": {
      const p = pattern(node, "pattern");
      const content = node.string("content");
      return (t) => replaceAll(t, p, content);
    }
    case "Prepend": {
      const prepend = node.string("prepend");
      return (t) => (t.length > 0 ? prepend + t : t);
    }
    case "NFC":
    case "NFD":
    case "NFKC":
    case "NFKD":
      return (t) => t.normalize(type);
    case "Lowercase":
      return (t) => t.toLowerCase();
    case "Strip": {
      const left = node.bool("strip_left", true);
      const right = node.bool("strip_right", true);
      return (t) => trimWs(t, left, right);
    }
    default:
      throw node.fail("type", `unsupported normalizer "${type}"`);
  }
}

// ------------------------------------------------------------ pre-tokenizers

/** A piece of text being pre-tokenized; `first` marks the piece at offset 0 of the input. */
export interface Piece {
  /** The text. */
  readonly text: string;
  /** Whether it starts at the very beginning of the input. */
  readonly first: boolean;
}

/** A pre-tokenizer: pieces in, finer pieces out (empty pieces are dropped). */
export type PreTokenizer = (pieces: Piece[]) => Piece[];

type Behavior = "Removed" | "Isolated" | "MergedWithPrevious" | "MergedWithNext" | "Contiguous";
const BEHAVIORS = new Set([
  "Removed",
  "Isolated",
  "MergedWithPrevious",
  "MergedWithNext",
  "Contiguous",
]);

/** `NormalizedString::split`: cuts a piece at matches according to `behavior`. */
function splitPiece(
  piece: Piece,
  matches: readonly [number, number][],
  behavior: Behavior,
  invert: boolean,
): Piece[] {
  const text = piece.text;
  // Every range of the text, flagged as match or not.
  const ranges: [number, number, boolean][] = [];
  let prev = 0;
  for (const [s, e] of matches) {
    if (prev !== s) ranges.push([prev, s, false]);
    ranges.push([s, e, true]);
    prev = e;
  }
  if (prev !== text.length || text.length === 0) ranges.push([prev, text.length, false]);
  if (invert) { for (const r of ranges) r[2] = !r[2]; }
  let splits: [number, number, boolean][]; // [start, end, remove]
  switch (behavior) {
    case "Isolated":
      splits = ranges.map(([s, e]) => [s, e, false]);
      break;
    case "Removed":
      splits = ranges;
      break;
    case "Contiguous": {
      splits = [];
      let previous = false;
      for (const [s, e, m] of ranges) {
        if (m === previous && splits.length > 0) splits[splits.length - 1][1] = e;
        else splits.push([s, e, false]);
        previous = m;
      }
      break;
    }
    case "MergedWithPrevious": {
      splits = [];
      let previous = false;
      for (const [s, e, m] of ranges) {
        if (m && !previous && splits.length > 0) splits[splits.length - 1][1] = e;
        else splits.push([s, e, false]);
        previous = m;
      }
      break;
    }
    case "MergedWithNext": {
      splits = [];
      let previous = false;
      for (let k = ranges.length - 1; k >= 0; k--) {
        const [s, e, m] = ranges[k];
        if (m && !previous && splits.length > 0) splits[splits.length - 1][0] = s;
        else splits.push([s, e, false]);
        previous = m;
      }
      splits.reverse();
      break;
    }
  }
  const out: Piece[] = [];
  for (const [s, e, remove] of splits) {
    if (remove || e <= s) continue;
    out.push({ text: text.slice(s, e), first: piece.first && s === 0 });
  }
  return out;
}

function numericRuns(text: string): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    const w = cp > 0xffff ? 2 : 1;
    if (cpFlags(cp) & NUMBER) out.push([i, i + w]);
    i += w;
  }
  return out;
}

/** Reads a `pre_tokenizer`; undefined for none. */
export function readPreTokenizer(node: Node | undefined, depth = 0): PreTokenizer | undefined {
  if (node === undefined) return undefined;
  checkDepth(node, depth);
  const type = node.type();
  switch (type) {
    case "Sequence": {
      const parts = node.children("pretokenizers").map((n) => readPreTokenizer(n, depth + 1)!);
      return (pieces) => parts.reduce((acc, f) => f(acc), pieces);
    }
    case "ByteLevel": {
      const prefix = node.bool("add_prefix_space", true);
      const useRegex = node.bool("use_regex", true);
      const re = onigToRegExp(GPT2_PATTERN);
      return (pieces) =>
        pieces.flatMap((p) => {
          const q = prefix && !p.text.startsWith(" ") ? { text: " " + p.text, first: p.first } : p;
          const parts = useRegex
            ? splitPiece(q, findAll(q.text, { regex: re }), "Isolated", false)
            : [q];
          return parts.map((x) => ({ text: toByteLevel(x.text), first: x.first }));
        });
    }
    case "Split": {
      const p = pattern(node, "pattern");
      const behavior = node.string("behavior");
      if (!BEHAVIORS.has(behavior)) {
        throw node.fail("behavior", `unknown split behavior "${behavior}"`);
      }
      const invert = node.bool("invert", false);
      return (pieces) =>
        pieces.flatMap((x) => splitPiece(x, findAll(x.text, p), behavior as Behavior, invert));
    }
    case "Digits": {
      const individual = node.bool("individual_digits", false);
      return (pieces) =>
        pieces.flatMap((x) =>
          splitPiece(x, numericRuns(x.text), individual ? "Isolated" : "Contiguous", false)
        );
    }
    case "Metaspace": {
      const replacement = node.string("replacement");
      if ([...replacement].length !== 1) throw node.fail("replacement", "must be one character");
      let scheme = node.optString("prepend_scheme");
      if (scheme === undefined) scheme = node.bool("add_prefix_space", true) ? "always" : "never";
      if (!["always", "first", "never"].includes(scheme)) {
        throw node.fail("prepend_scheme", `unknown prepend scheme "${scheme}"`);
      }
      const split = node.bool("split", true);
      return (pieces) =>
        pieces.flatMap((x) => {
          let t = x.text.replaceAll(" ", replacement);
          if (
            !t.startsWith(replacement) &&
            (scheme === "always" || (scheme === "first" && x.first))
          ) {
            t = replacement + t;
          }
          const q = { text: t, first: x.first };
          return split
            ? splitPiece(q, findAll(t, { literal: replacement }), "MergedWithNext", false)
            : [q];
        });
    }
    case "WhitespaceSplit": {
      const re = onigToRegExp("\\s+");
      return (pieces) =>
        pieces.flatMap((x) => splitPiece(x, findAll(x.text, { regex: re }), "Removed", false));
    }
    case "Whitespace": {
      const re = onigToRegExp("\\w+|[^\\w\\s]+");
      return (pieces) =>
        pieces.flatMap((x) => splitPiece(x, findAll(x.text, { regex: re }), "Removed", true));
    }
    default:
      throw node.fail("type", `unsupported pre-tokenizer "${type}"`);
  }
}

function toByteLevel(text: string): string {
  let s = "";
  for (const b of utf8(text)) s += BYTE_TO_CHAR[b];
  return s;
}

// ---------------------------------------------------------------------- model

/** The BPE model: a word (pre-tokenized piece) to ids. */
export interface BpeModel {
  /** Token ids by text (model vocabulary only). */
  readonly vocab: ReadonlyMap<string, number>;
  /** Tokenizes one piece. */
  tokenize(word: string): number[];
}

/** Reads `model` (type BPE). */
export function readBpe(node: Node): BpeModel {
  const type = node.raw("type") === undefined ? "BPE" : node.type();
  if (type !== "BPE") throw node.fail("type", `unsupported model "${type}" (supported: BPE)`);
  const dropout = node.raw("dropout");
  if (dropout !== undefined && dropout !== null && dropout !== 0) {
    throw node.fail("dropout", "BPE dropout is not supported (it makes encoding random)");
  }
  const vocabRaw = node.raw("vocab");
  if (vocabRaw === null || typeof vocabRaw !== "object" || Array.isArray(vocabRaw)) {
    throw node.fail("vocab", `expected an object of token ids, found ${kind(vocabRaw)}`);
  }
  const vocab = new Map<string, number>();
  const byId = new Map<number, string>();
  for (const [tok, id] of Object.entries(vocabRaw)) {
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0 || id >= 2 ** 31) {
      throw node.fail("vocab", `token ${kind(tok)} has id ${kind(id)}`);
    }
    const other = byId.get(id);
    if (other !== undefined) {
      throw node.fail("vocab", `tokens ${kind(other)} and ${kind(tok)} share id ${id}`);
    }
    byId.set(id, tok);
    vocab.set(tok, id);
  }
  const prefix = node.optString("continuing_subword_prefix") ?? "";
  const suffix = node.optString("end_of_word_suffix") ?? "";
  const unk = node.optString("unk_token");
  const unkId = unk === undefined ? undefined : vocab.get(unk);
  if (unk !== undefined && unkId === undefined) {
    throw node.fail("unk_token", `${kind(unk)} is not in the vocabulary`);
  }
  const fuseUnk = node.bool("fuse_unk", false);
  const byteFallback = node.bool("byte_fallback", false);
  const ignoreMerges = node.bool("ignore_merges", false);

  const merges = node.raw("merges") ?? [];
  if (!Array.isArray(merges)) throw node.fail("merges", `expected an array, found ${kind(merges)}`);
  const table = new MergeTable();
  // Looking tokens up in the parsed JSON object is several times faster than
  // in the Map for strings seen for the first time (V8 internalizes them).
  const vocabObj = vocabRaw as Record<string, unknown>;
  const idOf = (t: string): number | undefined => {
    const v = vocabObj[t];
    return typeof v === "number" && Object.hasOwn(vocabObj, t) ? v : undefined;
  };
  for (let i = 0; i < merges.length; i++) {
    const m = merges[i];
    let a: unknown;
    let b: unknown;
    if (typeof m === "string") {
      const sp = m.indexOf(" ");
      if (sp < 0 || m.indexOf(" ", sp + 1) >= 0) {
        throw node.fail(`merges[${i}]`, `${kind(m)} is not two tokens separated by one space`);
      }
      a = m.slice(0, sp);
      b = m.slice(sp + 1);
    } else if (Array.isArray(m) && m.length === 2) {
      a = m[0];
      b = m[1];
    }
    if (typeof a !== "string" || typeof b !== "string") {
      throw node.fail(`merges[${i}]`, `expected "a b" or ["a", "b"], found ${kind(m)}`);
    }
    const ia = idOf(a);
    const ib = idOf(b);
    const ir = idOf(a + (prefix && b.startsWith(prefix) ? b.slice(prefix.length) : b));
    if (ia === undefined || ib === undefined || ir === undefined) {
      const missing = ia === undefined ? a : ib === undefined ? b : a + b;
      throw node.fail(`merges[${i}]`, `names ${kind(missing)}, which is not in the vocabulary`);
    }
    table.add(ia, ib, ir, "last");
  }
  const byteIds: (number | undefined)[] = [];
  for (let b = 0; b < 256; b++) {
    byteIds.push(vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
  }

  const cache = new Map<string, number[]>();
  const merge = (word: string): number[] => {
    if (ignoreMerges) {
      const id = vocab.get(word);
      if (id !== undefined) return [id];
    }
    const syms: number[] = [];
    // A pending unknown symbol: written when a known character follows, at
    // the end, or (fuse_unk off) when another unknown one starts. Byte
    // fallback tokens do not flush it, as in `tokenizers`.
    let pending = false;
    const chars = [...word];
    for (let k = 0; k < chars.length; k++) {
      let s = chars[k];
      if (k > 0) s = prefix + s;
      if (k === chars.length - 1) s += suffix;
      const id = vocab.get(s);
      if (id !== undefined) {
        if (pending) syms.push(unkId!);
        pending = false;
        syms.push(id);
        continue;
      }
      if (byteFallback) {
        const bytes = utf8(chars[k]);
        if (bytes.every((x) => byteIds[x] !== undefined)) {
          for (const x of bytes) syms.push(byteIds[x]!);
          continue;
        }
      }
      if (unkId !== undefined) {
        if (pending && !fuseUnk) syms.push(unkId);
        pending = true;
      }
    }
    if (pending) syms.push(unkId!);
    return mergeSymbols(syms, table);
  };
  return {
    vocab,
    tokenize(word: string): number[] {
      if (word.length === 0) return [];
      let got = cache.get(word);
      if (got === undefined) {
        got = merge(word);
        if (cache.size >= 65536) cache.clear();
        cache.set(word, got);
      }
      return got;
    },
  };
}
