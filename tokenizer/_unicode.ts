/**
 * Code point classes and the GPT-2 byte alphabet, shared by the llama.cpp and
 * Hugging Face pipelines.
 *
 * Classes come from the engine's Unicode tables (`\p{L}`, `\p{N}` …), the
 * same General_Category llama.cpp's `unicode-data.cpp` and the Rust/Oniguruma
 * regex engines behind `tokenizers` use; they can only differ on code points
 * assigned in a Unicode version one of them lacks. White space is the
 * Unicode White_Space property, spelled out because JavaScript's `\s` adds
 * U+FEFF and drops U+0085.
 *
 * @module
 */

/** Letter (`\p{L}`). */
export const LETTER = 1;
/** Number (`\p{N}`). */
export const NUMBER = 2;
/** White_Space (llama.cpp's `unicode_set_whitespace`, Rust's and Oniguruma's `\s`). */
export const WHITESPACE = 4;
/** Punctuation (`\p{P}`). */
export const PUNCTUATION = 8;
/** Symbol (`\p{S}`). */
export const SYMBOL = 16;
/** Mark (`\p{M}`). */
export const MARK = 32;

/** The White_Space code points, as a regex class body. */
export const WHITESPACE_CLASS =
  "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

const WS = new Set([
  0x09,
  0x0a,
  0x0b,
  0x0c,
  0x0d,
  0x20,
  0x85,
  0xa0,
  0x1680,
  0x2000,
  0x2001,
  0x2002,
  0x2003,
  0x2004,
  0x2005,
  0x2006,
  0x2007,
  0x2008,
  0x2009,
  0x200a,
  0x2028,
  0x2029,
  0x202f,
  0x205f,
  0x3000,
]);

const RE_L = /^\p{L}$/u;
const RE_N = /^\p{N}$/u;
const RE_P = /^\p{P}$/u;
const RE_S = /^\p{S}$/u;
const RE_M = /^\p{M}$/u;

// Bit 7 marks "computed"; filled on first use of each code point.
let table: Uint8Array | undefined;

function compute(cp: number): number {
  const s = String.fromCodePoint(cp);
  let f = 0;
  if (RE_L.test(s)) f |= LETTER;
  else if (RE_N.test(s)) f |= NUMBER;
  else if (RE_P.test(s)) f |= PUNCTUATION;
  else if (RE_S.test(s)) f |= SYMBOL;
  else if (RE_M.test(s)) f |= MARK;
  if (WS.has(cp)) f |= WHITESPACE;
  return f;
}

/**
 * The class bits of a code point (0 for anything past U+10FFFF).
 *
 * @example
 * ```ts ignore
 * cpFlags(0x41) & LETTER; // 1
 * ```
 */
export function cpFlags(cp: number): number {
  if (cp < 0 || cp > 0x10ffff) return 0;
  if (table === undefined) table = new Uint8Array(0x110000);
  const v = table[cp];
  if (v !== 0) return v & 0x7f;
  const f = compute(cp);
  table[cp] = f | 0x80;
  return f;
}

/** The code points of a string (lone surrogates become U+FFFD, as UTF-8 encoding would). */
export function codePoints(text: string): Uint32Array {
  const out = new Uint32Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out[n++] = ((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000;
        i++;
        continue;
      }
    }
    out[n++] = c >= 0xd800 && c <= 0xdfff ? 0xfffd : c;
  }
  return out.subarray(0, n);
}

/** A string from a range of code points. */
export function fromCodePoints(cps: Uint32Array, start: number, end: number): string {
  let s = "";
  for (let i = start; i < end; i += 4096) {
    s += String.fromCodePoint(...cps.subarray(i, Math.min(end, i + 4096)));
  }
  return s;
}

/**
 * GPT-2's byte alphabet: byte `b` is written as `BYTE_TO_CHAR[b]`, a printable
 * character (printable Latin-1 bytes stand for themselves, the rest map to
 * U+0100 and up).
 */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const out: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    out[b] = String.fromCharCode(printable ? b : 256 + n++);
  }
  return out;
})();

/** The inverse of {@link BYTE_TO_CHAR}, by UTF-16 code unit. */
export const CHAR_TO_BYTE: ReadonlyMap<number, number> = new Map(
  BYTE_TO_CHAR.map((c, b) => [c.charCodeAt(0), b]),
);

const encoder = new TextEncoder();

/** UTF-8 bytes of a string (lone surrogates become U+FFFD). */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Byte-level (GPT-2 alphabet) spelling of a string's UTF-8 bytes. */
export function byteLevel(text: string): string {
  const bytes = utf8(text);
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += BYTE_TO_CHAR[bytes[i]];
  return s;
}
