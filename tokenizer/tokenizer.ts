/**
 * The {@link Tokenizer} interface every cflow tokenizer implements, and its
 * options.
 *
 * @module
 */

/**
 * Options of {@link Tokenizer.encode}.
 *
 * @example
 * ```ts
 * import type { EncodeOptions } from "./tokenizer.ts";
 * const prompt: EncodeOptions = { addSpecial: true, parseSpecial: true };
 * console.log(prompt.addSpecial); // true
 * ```
 */
export interface EncodeOptions {
  /**
   * Add the tokens the model's metadata asks for around a sequence (BOS and
   * EOS for a GGUF, the post-processor's template for a `tokenizer.json`).
   * Default `false`.
   *
   * @example
   * ```ts
   * import type { EncodeOptions } from "./tokenizer.ts";
   * const o: EncodeOptions = { addSpecial: true };
   * console.log(o.addSpecial); // true
   * ```
   */
  addSpecial?: boolean;
  /**
   * Map the text of special (control) tokens, such as `<|im_start|>`, to
   * their ids. Off by default, so that user text cannot forge control tokens:
   * their text is then tokenized like any other. User-defined (non-special
   * added) tokens match either way, as in llama.cpp and `tokenizers`.
   *
   * @example
   * ```ts
   * import type { EncodeOptions } from "./tokenizer.ts";
   * const o: EncodeOptions = { parseSpecial: true };
   * console.log(o.parseSpecial); // true
   * ```
   */
  parseSpecial?: boolean;
  /**
   * Texts that stand in `text` as placeholders: code point U+F0000 + i is
   * `literals[i]`, tokenized there as plain text (no special token parsed
   * from it) while special tokens are parsed around it. This is how a chat
   * prompt keeps its template's control tokens and a message's text apart
   * (see `SpecialLiterals`). With `literals` given, a code point of
   * U+F0000..U+FFFFD without a literal is a `RangeError`; at most
   * {@link MAX_LITERALS} literals.
   *
   * @example
   * ```ts
   * import type { EncodeOptions } from "./tokenizer.ts";
   * const o: EncodeOptions = { parseSpecial: true, literals: ["<|im_start|>"] };
   * console.log(o.literals?.length); // 1
   * ```
   */
  literals?: readonly string[];
}

/**
 * The first placeholder code point of {@link EncodeOptions.literals}: U+F0000, the start of
 * Unicode's Supplementary Private Use Area-A.
 *
 * @example
 * ```ts
 * import { LITERAL_BASE } from "./tokenizer.ts";
 * console.log(LITERAL_BASE.toString(16)); // "f0000"
 * ```
 */
export const LITERAL_BASE = 0xF0000;

/**
 * The most literals one encode may name: U+F0000..U+FFFFD, 65,534 placeholders.
 *
 * @example
 * ```ts
 * import { MAX_LITERALS } from "./tokenizer.ts";
 * console.log(MAX_LITERALS); // 65534
 * ```
 */
export const MAX_LITERALS = 0xFFFE;

/**
 * Options of {@link Tokenizer.decode}.
 *
 * @example
 * ```ts
 * import type { DecodeOptions } from "./tokenizer.ts";
 * const o: DecodeOptions = { skipSpecial: true };
 * console.log(o.skipSpecial); // true
 * ```
 */
export interface DecodeOptions {
  /**
   * Leave special (control) tokens out instead of writing their text.
   * Default `false`.
   *
   * @example
   * ```ts
   * import type { DecodeOptions } from "./tokenizer.ts";
   * const o: DecodeOptions = { skipSpecial: false };
   * console.log(o.skipSpecial); // false
   * ```
   */
  skipSpecial?: boolean;
}

/**
 * Text to token ids and back, for one model's vocabulary.
 *
 * Built by {@link tokenizerFromGgufMetadata} (byte-exact with llama.cpp) or
 * {@link tokenizerFromHfJson} (byte-exact with Hugging Face `tokenizers`).
 * Ids outside `[0, vocabSize)` are refused with a `RangeError`.
 *
 * @example
 * ```ts
 * import { tokenizerFromGgufMetadata } from "./mod.ts";
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "llama",
 *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"],
 *   "tokenizer.ggml.scores": [0, 0, 0, -1, -2, -3, -4, -5],
 *   "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 1, 1],
 * });
 * console.log(tok.encode("hi", { addSpecial: true })); // [1, 7]
 * console.log(tok.decode(tok.encode("hi hi"))); // "hi hi"
 * ```
 */
export interface Tokenizer {
  /**
   * Number of token ids (one more than the largest id).
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   * });
   * console.log(tok.vocabSize); // 4
   * ```
   */
  readonly vocabSize: number;
  /**
   * The beginning-of-sequence token, when the model has one.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   * });
   * console.log(tok.bosId); // 1
   * ```
   */
  readonly bosId?: number;
  /**
   * The end-of-sequence token, when the model has one.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   * });
   * console.log(tok.eosId); // 2
   * ```
   */
  readonly eosId?: number;
  /**
   * Whether `encode(text, { addSpecial: true })` starts with {@link bosId}.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   *   "tokenizer.ggml.add_bos_token": false,
   * });
   * console.log(tok.addBos); // false
   * ```
   */
  readonly addBos: boolean;
  /**
   * Whether `encode(text, { addSpecial: true })` ends with {@link eosId}.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   * });
   * console.log(tok.addEos); // false
   * ```
   */
  readonly addEos: boolean;
  /**
   * The model's chat template (Jinja source), when its metadata has one.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   *   "tokenizer.chat_template": "{{ messages[0]['content'] }}",
   * });
   * console.log(tok.chatTemplate); // "{{ messages[0]['content'] }}"
   * ```
   */
  readonly chatTemplate?: string;
  /**
   * Every token that ends generation (EOS, end-of-turn and the like).
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "<end_of_turn>"],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 3],
   * });
   * console.log(tok.eogIds); // [2, 3]
   * ```
   */
  readonly eogIds: readonly number[];
  /**
   * Token ids of `text`. Text the vocabulary cannot spell is handled as
   * llama.cpp handles it: a byte-level BPE vocabulary without a token for
   * some byte drops that byte (SmolLM2 lacks 21 of the 256), and a
   * SentencePiece vocabulary without the `<0xNN>` byte token a character
   * needs throws a `RangeError` naming the byte (llama.cpp aborts).
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"],
   *   "tokenizer.ggml.scores": [0, 0, 0, -1, -2, -3, -4, -5],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 1, 1],
   * });
   * console.log(tok.encode("hi hi")); // [7, 7]
   * ```
   */
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * The text of token ids. Bytes that do not form UTF-8 become U+FFFD.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"],
   *   "tokenizer.ggml.scores": [0, 0, 0, -1, -2, -3, -4, -5],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 1, 1],
   * });
   * console.log(tok.decode([7, 7])); // "hi hi" (the space the encoder prefixed is dropped)
   * console.log(tok.decode([1, 7, 7])); // "<s> hi hi" (as llama.cpp: kept after a BOS)
   * ```
   */
  decode(ids: readonly number[], options?: DecodeOptions): string;
  /**
   * The bytes one token stands for when decoded (for a special token: its
   * text). A token may hold part of a UTF-8 character.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi", "<0xC3>"],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 1, 6],
   * });
   * console.log(tok.tokenBytes(3)); // Uint8Array(3) [ 32, 104, 105 ]
   * console.log(tok.tokenBytes(4)); // Uint8Array(1) [ 195 ]
   * ```
   */
  tokenBytes(id: number): Uint8Array;
  /**
   * A token's text as the vocabulary spells it (`Ġhi` in a byte-level
   * vocabulary, `▁hi` in a SentencePiece one).
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi"],
   * });
   * console.log(tok.tokenText(3)); // "▁hi"
   * ```
   */
  tokenText(id: number): string;
  /**
   * The id of a token spelled exactly `text` (as {@link tokenText} returns it), if any.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi"],
   * });
   * console.log(tok.tokenId("</s>"), tok.tokenId("nope")); // 2 undefined
   * ```
   */
  tokenId(text: string): number | undefined;
  /**
   * Whether a token ends generation.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   * });
   * console.log(tok.isEog(2), tok.isEog(3)); // true false
   * ```
   */
  isEog(id: number): boolean;
  /**
   * Whether a token is special (control): left out by
   * `decode(ids, { skipSpecial: true })`.
   *
   * @example
   * ```ts
   * import { tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "a"],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 1],
   * });
   * console.log(tok.isSpecial(1), tok.isSpecial(3)); // true false
   * ```
   */
  isSpecial(id: number): boolean;
}
