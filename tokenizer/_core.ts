/**
 * The {@link Tokenizer} both loaders return: vocabulary lookups, special
 * tokens, decoding and the per-token pieces the stream decoder reads. The
 * loaders supply the encoder and how each token renders.
 *
 * @module
 */

import {
  type DecodeOptions,
  type EncodeOptions,
  LITERAL_BASE,
  MAX_LITERALS,
  type Tokenizer,
} from "./tokenizer.ts";

/**
 * How decoding drops a leading space:
 * - `none`: never;
 * - `llama`: one leading space of the first token's piece, unless the ids
 *   start with BOS and special tokens are skipped (llama.cpp's
 *   `add_space_prefix` detokenizer);
 * - `first`: one leading space of the first token written (a `Metaspace`
 *   decoder);
 * - `whole`: up to `count` leading copies of `char` from the decoded text
 *   (a `Strip` decoder after `Fuse`).
 */
export type LeadingStrip =
  | { readonly mode: "none" }
  | { readonly mode: "llama" }
  | { readonly mode: "first" }
  | { readonly mode: "whole"; readonly bytes: Uint8Array; readonly count: number };

/** What a loader hands the core. */
export interface CoreParts {
  /** Number of ids. */
  readonly vocabSize: number;
  /** Token text by id. */
  text(id: number): string;
  /** The id of a token text. */
  id(text: string): number | undefined;
  /** The bytes a token decodes to (not called for ids out of range). */
  piece(id: number): Uint8Array;
  /** Whether a token is special (skipped by `skipSpecial`). */
  special(id: number): boolean;
  /** Tokenizes text without sequence-level special tokens. */
  encode(text: string, parseSpecial: boolean): number[];
  /** Ids `addSpecial` puts before the text. */
  readonly prefix: readonly number[];
  /** Ids `addSpecial` puts after the text. */
  readonly suffix: readonly number[];
  /** BOS id. */
  readonly bosId?: number;
  /** EOS id. */
  readonly eosId?: number;
  /** Whether the prefix holds BOS. */
  readonly addBos: boolean;
  /** Whether the suffix holds EOS. */
  readonly addEos: boolean;
  /** Chat template. */
  readonly chatTemplate?: string;
  /** End-of-generation ids. */
  readonly eog: ReadonlySet<number>;
  /** Leading-space rule of the decoder. */
  readonly leading: LeadingStrip;
  /** Bytes written between tokens (a `tokenizers` tokenizer without decoder joins with a space). */
  readonly joiner?: Uint8Array;
  /** Whole-text rewrite at the end of decoding (a decoder's steps after `Fuse`). */
  readonly finish?: (bytes: Uint8Array) => Uint8Array;
}

/** Key of the per-sequence piece writer on tokenizers built here. */
export const PIECES: unique symbol = Symbol("cflow.tokenizer.pieces");

/** Writes the pieces of one id sequence, token by token, applying the leading-space rule. */
export type PieceWriter = (id: number) => Uint8Array;

const EMPTY = new Uint8Array(0);

function concat(parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The shared tokenizer implementation. */
export class CoreTokenizer implements Tokenizer {
  readonly #p: CoreParts;
  readonly #pieces = new Map<number, Uint8Array>();
  readonly vocabSize: number;
  readonly bosId?: number;
  readonly eosId?: number;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly chatTemplate?: string;
  readonly eogIds: readonly number[];

  /** Wraps loader-provided parts. */
  constructor(parts: CoreParts) {
    this.#p = parts;
    this.vocabSize = parts.vocabSize;
    if (parts.bosId !== undefined) this.bosId = parts.bosId;
    if (parts.eosId !== undefined) this.eosId = parts.eosId;
    this.addBos = parts.addBos;
    this.addEos = parts.addEos;
    if (parts.chatTemplate !== undefined) this.chatTemplate = parts.chatTemplate;
    this.eogIds = Object.freeze([...parts.eog].sort((a, b) => a - b));
  }

  #check(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new RangeError(`token id ${id} is outside [0, ${this.vocabSize})`);
    }
  }

  encode(text: string, options?: EncodeOptions): number[] {
    if (typeof text !== "string") throw new TypeError("encode: text must be a string");
    const parseSpecial = options?.parseSpecial ?? false;
    const literals = options?.literals;
    const ids = literals === undefined
      ? this.#p.encode(text, parseSpecial)
      : this.#encodeLiterals(text, parseSpecial, literals);
    if (!options?.addSpecial) return ids;
    return [...this.#p.prefix, ...ids, ...this.#p.suffix];
  }

  /**
   * `text` cut at its placeholders: the text between them encoded with `parseSpecial`, each
   * placeholder's literal as plain text.
   */
  #encodeLiterals(text: string, parseSpecial: boolean, literals: readonly string[]): number[] {
    if (!Array.isArray(literals)) throw new TypeError("encode: literals must be an array");
    if (literals.length > MAX_LITERALS) {
      throw new RangeError(`encode: ${literals.length} literals, more than ${MAX_LITERALS}`);
    }
    for (let i = 0; i < literals.length; i++) {
      if (typeof literals[i] !== "string") {
        throw new TypeError(`encode: literals[${i}] must be a string`);
      }
    }
    const out: number[] = [];
    let from = 0;
    for (let i = 0; i < text.length; i++) {
      // U+F0000..U+FFFFF are the surrogate pairs whose high half is 0xDB80..0xDBBF.
      const c = text.charCodeAt(i);
      if (c < 0xDB80 || c > 0xDBBF) continue;
      const cp = text.codePointAt(i)!;
      if (cp < LITERAL_BASE) continue; // a lone high surrogate: text (made U+FFFD)
      const index = cp - LITERAL_BASE;
      if (index >= literals.length) {
        throw new RangeError(
          `encode: U+${cp.toString(16).toUpperCase()} at offset ${i} is a literal placeholder ` +
            `but there are ${literals.length} literals`,
        );
      }
      if (i > from) {
        for (const id of this.#p.encode(text.slice(from, i), parseSpecial)) out.push(id);
      }
      for (const id of this.#p.encode(literals[index], false)) out.push(id);
      i++;
      from = i + 1;
    }
    if (from < text.length) {
      for (const id of this.#p.encode(text.slice(from), parseSpecial)) out.push(id);
    }
    return out;
  }

  /** A writer for one sequence: call it with each id in order. */
  [PIECES](skipSpecial: boolean): PieceWriter {
    const lead = this.#p.leading;
    const joiner = this.#p.joiner;
    let index = 0;
    let written = 0;
    let stripLeft = lead.mode === "whole" ? lead.count : lead.mode === "none" ? 0 : 1;
    return (id: number): Uint8Array => {
      this.#check(id);
      const at = index++;
      if (lead.mode === "llama" && at === 0 && skipSpecial && this.addBos && id === this.bosId) {
        stripLeft = 0;
        return EMPTY;
      }
      let piece: Uint8Array = EMPTY;
      if (!(skipSpecial && this.#p.special(id))) piece = this.#piece(id);
      else if (lead.mode !== "llama") return EMPTY;
      if (stripLeft > 0) {
        if (lead.mode === "llama" || lead.mode === "first") {
          if (piece[0] === 0x20) piece = piece.subarray(1);
          stripLeft = 0;
        } else if (lead.mode === "whole") {
          const b = lead.bytes;
          let cut = 0;
          while (
            stripLeft > 0 && cut + b.length <= piece.length &&
            b.every((x, i) => piece[cut + i] === x)
          ) {
            cut += b.length;
            stripLeft--;
          }
          if (cut < piece.length) stripLeft = 0;
          piece = piece.subarray(cut);
        }
      }
      if (joiner !== undefined && written++ > 0) return concat([joiner, piece]);
      return piece;
    };
  }

  decode(ids: readonly number[], options?: DecodeOptions): string {
    const write = this[PIECES](options?.skipSpecial ?? false);
    const parts: Uint8Array[] = [];
    for (const id of ids) parts.push(write(id));
    let bytes = concat(parts);
    if (this.#p.finish !== undefined) bytes = this.#p.finish(bytes);
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
  }

  #piece(id: number): Uint8Array {
    let p = this.#pieces.get(id);
    if (p === undefined) this.#pieces.set(id, p = this.#p.piece(id));
    return p;
  }

  tokenBytes(id: number): Uint8Array {
    this.#check(id);
    return this.#piece(id).slice();
  }

  tokenText(id: number): string {
    this.#check(id);
    return this.#p.text(id);
  }

  tokenId(text: string): number | undefined {
    return this.#p.id(text);
  }

  isEog(id: number): boolean {
    return this.#p.eog.has(id);
  }

  isSpecial(id: number): boolean {
    this.#check(id);
    return this.#p.special(id);
  }
}

/** Texts llama.cpp treats as end of generation (`special_eog_ids`), shared by both loaders. */
export const EOG_TEXTS: ReadonlySet<string> = new Set([
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<|flush|>",
  "<|calls|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "</s>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "[EOS]",
  "<|end_of_text|>",
  "<end_of_utterance>",
  "<eos>",
  "<turn|>",
  "<|tool_response>",
  "<｜end▁of▁sentence｜>",
  "[e~[",
]);
