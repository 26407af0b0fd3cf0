/**
 * {@link StreamDecoder}: text from token ids one at a time, for streaming
 * generation.
 *
 * @module
 */

import { PIECES, type PieceWriter } from "./_core.ts";
import type { DecodeOptions, Tokenizer } from "./tokenizer.ts";

/**
 * Turns token ids into text as they arrive. A token can end in the middle of
 * a UTF-8 character; those bytes are held back until the character is
 * complete, so the pieces {@link push} returns never contain a broken
 * character. Bytes that cannot start or continue a character become U+FFFD
 * as soon as that is certain; an incomplete character left at the end
 * becomes U+FFFD at {@link flush}. The concatenation of everything returned
 * equals `tokenizer.decode(ids, options)` for the same ids (for a
 * `tokenizer.json` whose decoder rewrites the whole text after `Fuse`, such
 * as a trailing `Strip`, only `decode` applies that rewrite).
 *
 * @example
 * ```ts
 * import { StreamDecoder, tokenizerFromGgufMetadata } from "./mod.ts";
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "llama",
 *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁h", "<0xC3>", "<0xA9>"],
 *   "tokenizer.ggml.token_type": [2, 3, 3, 1, 6, 6],
 *   "tokenizer.ggml.add_space_prefix": false,
 * });
 * const stream = new StreamDecoder(tok);
 * console.log(JSON.stringify(stream.push(3))); // "\" h\""
 * console.log(JSON.stringify(stream.push(4))); // "\"\"" (half of "é" is held back)
 * console.log(JSON.stringify(stream.push(5))); // "\"é\""
 * console.log(JSON.stringify(stream.flush())); // "\"\""
 * ```
 */
export class StreamDecoder {
  readonly #tokenizer: Tokenizer;
  readonly #skipSpecial: boolean;
  #write: PieceWriter | undefined;
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  /**
   * A decoder for ids of `tokenizer`; `options` are those of {@link Tokenizer.decode}.
   *
   * @example
   * ```ts
   * import { StreamDecoder, tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi"],
   * });
   * const stream = new StreamDecoder(tok, { skipSpecial: true });
   * console.log(stream.push(1) + stream.push(3) + stream.flush()); // " hi"
   * ```
   */
  constructor(tokenizer: Tokenizer, options?: DecodeOptions) {
    this.#tokenizer = tokenizer;
    this.#skipSpecial = options?.skipSpecial ?? false;
  }

  #writer(): PieceWriter {
    if (this.#write !== undefined) return this.#write;
    const t = this.#tokenizer as Tokenizer & { [PIECES]?: (skip: boolean) => PieceWriter };
    const own = t[PIECES];
    this.#write = own !== undefined
      ? own.call(t, this.#skipSpecial)
      : (id: number) => this.#skipSpecial && t.isSpecial(id) ? new Uint8Array(0) : t.tokenBytes(id);
    return this.#write;
  }

  /**
   * Adds one token; returns the text it completes (possibly empty).
   *
   * @example
   * ```ts
   * import { StreamDecoder, tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁hi"],
   *   "tokenizer.ggml.add_space_prefix": false,
   * });
   * console.log(new StreamDecoder(tok).push(3)); // " hi"
   * ```
   */
  push(id: number): string {
    return this.#decoder.decode(this.#writer()(id), { stream: true });
  }

  /**
   * Ends the sequence: returns U+FFFD for an incomplete character held back
   * (or "" when there is none) and starts over, so the decoder can be reused
   * for a new sequence.
   *
   * @example
   * ```ts
   * import { StreamDecoder, tokenizerFromGgufMetadata } from "./mod.ts";
   * const tok = tokenizerFromGgufMetadata({
   *   "tokenizer.ggml.model": "llama",
   *   "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "<0xE2>"],
   *   "tokenizer.ggml.token_type": [2, 3, 3, 6],
   * });
   * const stream = new StreamDecoder(tok);
   * stream.push(3);
   * console.log(stream.flush()); // "\ufffd"
   * ```
   */
  flush(): string {
    const rest = this.#decoder.decode();
    this.#decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    this.#write = undefined;
    return rest;
  }
}
