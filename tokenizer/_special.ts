/**
 * Cutting special and added tokens out of text before the model sees it, the
 * two ways the references do it:
 *
 * - llama.cpp (`tokenizer_st_partition`): tokens are taken longest first;
 *   each one claims every leftmost non-overlapping occurrence that lies
 *   wholly inside text no longer token claimed.
 * - `tokenizers` (`AddedVocabulary::find_matches`): one left-to-right scan,
 *   leftmost-longest, honouring `single_word`, `lstrip` and `rstrip`; a
 *   special token that is treated as text still consumes its match.
 *
 * @module
 */

import { cpFlags, WHITESPACE } from "./_unicode.ts";

/** Raw text, or a token id. */
export type Fragment = string | number;

interface Node {
  children: Map<number, Node>;
  /** Index of the pattern ending here, or -1. */
  pattern: number;
}

/** A trie over UTF-16 code units, for finding many patterns at once. */
export class Trie {
  readonly #root: Node = { children: new Map(), pattern: -1 };

  /** Builds a trie of `patterns` (a pattern's index is its position; empty ones are skipped). */
  constructor(patterns: readonly string[]) {
    patterns.forEach((p, index) => {
      if (p.length === 0) return;
      let node = this.#root;
      for (let i = 0; i < p.length; i++) {
        const c = p.charCodeAt(i);
        let child = node.children.get(c);
        if (child === undefined) {
          child = { children: new Map(), pattern: -1 };
          node.children.set(c, child);
        }
        node = child;
      }
      if (node.pattern < 0) node.pattern = index;
    });
  }

  /** Calls `found(pattern)` for every pattern that starts at `pos`, shortest first. */
  eachAt(text: string, pos: number, found: (pattern: number) => void): void {
    let node: Node | undefined = this.#root;
    for (let i = pos; i < text.length; i++) {
      node = node.children.get(text.charCodeAt(i));
      if (node === undefined) return;
      if (node.pattern >= 0) found(node.pattern);
    }
  }

  /** The longest pattern starting at `pos`, or -1. */
  longestAt(text: string, pos: number): number {
    let best = -1;
    this.eachAt(text, pos, (p) => best = p);
    return best;
  }
}

/** llama.cpp's special tokens, in the order it tries them. */
export interface LlamaSpecials {
  /** Texts, longest (in UTF-8 bytes) first. */
  readonly texts: readonly string[];
  /** Ids, parallel to `texts`. */
  readonly ids: readonly number[];
  /** Whether each is matched even when special tokens are not parsed (user-defined tokens). */
  readonly always: readonly boolean[];
  /** A trie over `texts`. */
  readonly trie: Trie;
}

/** llama.cpp's partition of `text` into raw fragments and special token ids. */
export function partitionLlama(text: string, sp: LlamaSpecials, parseSpecial: boolean): Fragment[] {
  if (text.length === 0) return [];
  const occurrences = new Map<number, number[]>();
  for (let i = 0; i < text.length; i++) {
    sp.trie.eachAt(text, i, (p) => {
      if (!parseSpecial && !sp.always[p]) return;
      let list = occurrences.get(p);
      if (list === undefined) occurrences.set(p, list = []);
      list.push(i);
    });
  }
  if (occurrences.size === 0) return [text];
  const claimed = new Uint8Array(text.length);
  const spans: [number, number, number][] = [];
  for (const p of [...occurrences.keys()].sort((a, b) => a - b)) {
    const len = sp.texts[p].length;
    let lastEnd = -1;
    for (const s of occurrences.get(p)!) {
      if (s < lastEnd) continue;
      let free = true;
      for (let i = s; i < s + len; i++) {
        if (claimed[i]) {
          free = false;
          break;
        }
      }
      if (!free) continue;
      claimed.fill(1, s, s + len);
      spans.push([s, s + len, sp.ids[p]]);
      lastEnd = s + len;
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const out: Fragment[] = [];
  let at = 0;
  for (const [s, e, id] of spans) {
    if (s > at) out.push(text.slice(at, s));
    out.push(id);
    at = e;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

/** A `tokenizers` added token. */
export interface AddedToken {
  /** Its id. */
  readonly id: number;
  /** Its text. */
  readonly content: string;
  /** Only matches a whole word. */
  readonly singleWord: boolean;
  /** Takes the white space on its left. */
  readonly lstrip: boolean;
  /** Takes the white space on its right. */
  readonly rstrip: boolean;
  /** Matches the normalized text rather than the raw text. */
  readonly normalized: boolean;
  /** Is special (skipped when decoding with skipSpecial; text unless special tokens are parsed). */
  readonly special: boolean;
}

/** A set of added tokens matched together, with the pattern text each is found by. */
export interface AddedSet {
  /** The tokens, parallel to the trie's patterns. */
  readonly tokens: readonly AddedToken[];
  /** Length of each pattern. */
  readonly lengths: readonly number[];
  /** A trie over the patterns. */
  readonly trie: Trie;
}

const isWs = (c: number) => (cpFlags(c) & WHITESPACE) !== 0;
// Rust regex's Unicode `\w`.
const WORD = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u;
const isWordChar = (cp: number) => WORD.test(String.fromCodePoint(cp));

function cpBefore(text: string, i: number): number {
  return text.codePointAt(
    i - 1 > 0 && (text.charCodeAt(i - 1) & 0xfc00) === 0xdc00 ? i - 2 : i - 1,
  )!;
}

/** A piece of `tokenizers`' added-token split: text to tokenize, or a token. */
export interface AddedSplit {
  /** The text (for a token: the text it covers, white space it took included). */
  readonly text: string;
  /** The token id, when this split is an added token. */
  readonly id?: number;
}

/** `tokenizers`' leftmost-longest added-token split of `text`. */
export function splitAdded(text: string, set: AddedSet, parseSpecial: boolean): AddedSplit[] {
  if (text.length === 0) return [{ text }];
  const out: AddedSplit[] = [];
  let cursor = 0;
  for (let i = 0; i < text.length;) {
    const p = set.trie.longestAt(text, i);
    if (p < 0) {
      i++;
      continue;
    }
    const tok = set.tokens[p];
    let start = i;
    let stop = i + set.lengths[p];
    i = stop;
    if (tok.special && !parseSpecial) continue;
    if (tok.singleWord) {
      const startOk = start === 0 || !isWordChar(cpBefore(text, start));
      const stopOk = stop === text.length || !isWordChar(text.codePointAt(stop)!);
      if (!startOk || !stopOk) continue;
    }
    if (tok.lstrip) {
      let s = start;
      while (s > 0 && isWs(cpBefore(text, s))) s -= cpBefore(text, s) > 0xffff ? 2 : 1;
      start = Math.max(s, cursor);
    }
    if (tok.rstrip) {
      while (stop < text.length && isWs(text.codePointAt(stop)!)) {
        stop += text.codePointAt(stop)! > 0xffff ? 2 : 1;
      }
    }
    if (cursor < start) out.push({ text: text.slice(cursor, start) });
    out.push({ text: text.slice(start, stop), id: tok.id });
    cursor = stop;
  }
  if (cursor < text.length) out.push({ text: text.slice(cursor) });
  return out;
}

/** Builds an {@link AddedSet} matching each token by `pattern(token)`. */
export function addedSet(
  tokens: readonly AddedToken[],
  pattern: (t: AddedToken) => string,
): AddedSet {
  const patterns = tokens.map(pattern);
  return { tokens, lengths: patterns.map((p) => p.length), trie: new Trie(patterns) };
}
