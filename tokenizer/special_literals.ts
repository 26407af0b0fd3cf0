/**
 * {@link SpecialLiterals}: untrusted text put into a prompt whose special tokens are parsed,
 * without any of it becoming a special token.
 *
 * @module
 */

import { Trie } from "./_special.ts";
import { LITERAL_BASE, MAX_LITERALS, type Tokenizer } from "./tokenizer.ts";

interface Specials {
  readonly texts: readonly string[];
  readonly trie: Trie;
}

/** The special-token texts of each tokenizer, found once (a vocabulary walk). */
const SPECIALS = new WeakMap<Tokenizer, Specials>();

function specialsOf(tokenizer: Tokenizer): Specials {
  const hit = SPECIALS.get(tokenizer);
  if (hit !== undefined) return hit;
  const texts: string[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    if (!tokenizer.isSpecial(id)) continue;
    const text = tokenizer.tokenText(id);
    if (text.length > 0) texts.push(text);
  }
  const specials = { texts, trie: new Trie(texts) };
  SPECIALS.set(tokenizer, specials);
  return specials;
}

/**
 * Hides the text of a tokenizer's special tokens inside untrusted strings (chat messages,
 * tool definitions), so that a prompt rendered around them can be encoded with its own
 * special tokens parsed and none from them: {@link SpecialLiterals.escape} replaces each
 * special token's text (leftmost, longest first) by a placeholder code point of
 * U+F0000..U+FFFFD, and every code point of that range already there by one too; passing
 * {@link SpecialLiterals.literals} as the `literals` option of `Tokenizer.encode` turns each
 * placeholder back into its text, tokenized as plain text. One instance per prompt; it holds
 * at most {@link MAX_LITERALS} distinct literals (a `RangeError` past that).
 *
 * @example
 * ```ts
 * import { SpecialLiterals, tokenizerFromGgufMetadata } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "gpt2",
 *   "tokenizer.ggml.pre": "smollm",
 *   "tokenizer.ggml.tokens": ["<s>", "<", "s", ">", "h", "i"],
 *   "tokenizer.ggml.token_type": [3, 1, 1, 1, 1, 1],
 *   "tokenizer.ggml.merges": [],
 * });
 * const lit = new SpecialLiterals(tok);
 * const prompt = "<s>" + lit.escape("hi<s>") + "<s>";
 * const ids = tok.encode(prompt, { parseSpecial: true, literals: lit.literals });
 * assert.deepEqual(ids, [0, 4, 5, 1, 2, 3, 0]);
 * ```
 */
export class SpecialLiterals {
  readonly #specials: Specials;
  readonly #literals: string[] = [];
  readonly #index = new Map<string, number>();

  /**
   * Escapes the special tokens of `tokenizer` (those `isSpecial` names: the ones
   * `parseSpecial` maps to ids).
   *
   * @example
   * ```ts ignore
   * const lit = new SpecialLiterals(tokenizer);
   * ```
   */
  constructor(tokenizer: Tokenizer) {
    this.#specials = specialsOf(tokenizer);
  }

  /**
   * The literals placeholders stand for so far, for `Tokenizer.encode`'s `literals` option.
   *
   * @example
   * ```ts ignore
   * tokenizer.encode(prompt, { parseSpecial: true, literals: lit.literals });
   * ```
   */
  get literals(): readonly string[] {
    return this.#literals;
  }

  /**
   * `text` with every special token's text and every placeholder-range code point replaced
   * by a placeholder.
   *
   * @example
   * ```ts ignore
   * const safe = lit.escape(userMessage);
   * ```
   */
  escape(text: string): string {
    if (typeof text !== "string") {
      throw new TypeError("SpecialLiterals.escape: text must be a string");
    }
    const trie = this.#specials.trie;
    let out = "";
    let from = 0;
    for (let i = 0; i < text.length;) {
      const c = text.charCodeAt(i);
      // Placeholder range already in the text: U+F0000..U+FFFFF (high surrogates DB80..DBBF).
      if (c >= 0xDB80 && c <= 0xDBBF && text.codePointAt(i)! >= LITERAL_BASE) {
        out += text.slice(from, i) + this.#placeholder(text.slice(i, i + 2));
        i += 2;
        from = i;
        continue;
      }
      const p = trie.longestAt(text, i);
      if (p < 0) {
        i++;
        continue;
      }
      const special = this.#specials.texts[p];
      out += text.slice(from, i) + this.#placeholder(special);
      i += special.length;
      from = i;
    }
    return from === 0 ? text : out + text.slice(from);
  }

  #placeholder(literal: string): string {
    let index = this.#index.get(literal);
    if (index === undefined) {
      index = this.#literals.length;
      if (index >= MAX_LITERALS) {
        throw new RangeError(`SpecialLiterals: more than ${MAX_LITERALS} distinct literals`);
      }
      this.#literals.push(literal);
      this.#index.set(literal, index);
    }
    return String.fromCodePoint(LITERAL_BASE + index);
  }
}
