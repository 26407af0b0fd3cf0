/**
 * A JSON Schema `pattern` (a documented subset of ECMAScript regular expressions, with the `u`
 * flag as validators use it) to a GBNF expression over the pattern's characters as they are
 * written inside a JSON string.
 *
 * Supported: literals; escapes `\n \t \r \f \v \0 \xNN \uNNNN \u{...}` and escaped punctuation;
 * `\d \D \w \W \s \S`; `.`; classes `[...]`, `[^...]` with ranges and those escapes; groups
 * `(...)`, `(?:...)`; alternation; `* + ? {m} {m,} {m,n}` (lazy forms too: same language);
 * `^` at the start and `$` at the end (without them any text may come before or after: the
 * pattern is searched for). Refused, naming the construct: lookaround, backreferences, named
 * groups, word boundaries, `\p{...}`, anchors elsewhere.
 *
 * @module
 */

import { complementRanges, MAX_CP, normalizeRanges } from "./parse_gbnf.ts";
import { jsonChars } from "./_gbnf_text.ts";

/** Thrown for an unsupported or malformed pattern; `construct` names it. */
export class PatternError extends Error {
  readonly construct: string;
  constructor(construct: string) {
    super(`unsupported or malformed pattern: ${construct}`);
    this.construct = construct;
  }
}

const DIGIT = [0x30, 0x39];
const WORD = normalizeRanges([0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a]);
const SPACE = normalizeRanges([
  9,
  13,
  0x20,
  0x20,
  0xa0,
  0xa0,
  0x1680,
  0x1680,
  0x2000,
  0x200a,
  0x2028,
  0x2029,
  0x202f,
  0x202f,
  0x205f,
  0x205f,
  0x3000,
  0x3000,
  0xfeff,
  0xfeff,
]);
const DOT = complementRanges(normalizeRanges([10, 10, 13, 13, 0x2028, 0x2029]));
/** Surrogates are not characters of a JSON string's value here. */
const NO_SURROGATES = [0, 0xd7ff, 0xe000, MAX_CP];

const MAX_REPEAT = 1000;
const MAX_DEPTH = 32;

class RegexParser {
  readonly #s: string;
  #i = 0;
  constructor(s: string) {
    this.#s = s;
  }

  parse(): string {
    const s = this.#s;
    let anchoredStart = false, anchoredEnd = false;
    let body = s;
    if (body.startsWith("^")) {
      anchoredStart = true;
      body = body.slice(1);
    }
    if (body.endsWith("$") && !body.endsWith("\\$")) {
      anchoredEnd = true;
      body = body.slice(0, -1);
    }
    const p = new RegexParser(body);
    const e = p.alternation(0);
    if (p.#i < body.length) throw new PatternError(`unexpected '${body[p.#i]}'`);
    const any = `${jsonChars(NO_SURROGATES)}*`;
    return `(${anchoredStart ? "" : any + " "}${e}${anchoredEnd ? "" : " " + any})`;
  }

  alternation(depth: number): string {
    if (depth > MAX_DEPTH) throw new PatternError("groups nested too deeply");
    const alts = [this.sequence(depth)];
    while (this.#s[this.#i] === "|") {
      this.#i++;
      alts.push(this.sequence(depth));
    }
    return alts.length === 1 ? alts[0] : "(" + alts.join(" | ") + ")";
  }

  sequence(depth: number): string {
    const items: string[] = [];
    const s = this.#s;
    while (this.#i < s.length && s[this.#i] !== "|" && s[this.#i] !== ")") {
      let atom = this.atom(depth);
      // Quantifiers.
      const q = s[this.#i];
      if (q === "*" || q === "+" || q === "?") {
        this.#i++;
        atom = `${atom}${q}`;
        if (s[this.#i] === "?") this.#i++;
      } else if (q === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(s.slice(this.#i));
        if (m === null) throw new PatternError("'{' that is not a quantifier");
        this.#i += m[0].length;
        const min = Number(m[1]);
        const max = m[2] === undefined ? min : m[3] === "" ? Infinity : Number(m[3]);
        if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) {
          throw new PatternError(`quantifier bound above ${MAX_REPEAT}`);
        }
        if (max < min) throw new PatternError("quantifier {m,n} with n < m");
        atom = `${atom}{${min},${max === Infinity ? "" : max}}`;
        if (s[this.#i] === "?") this.#i++;
      }
      items.push(atom);
    }
    return items.length === 0 ? '""' : items.length === 1 ? items[0] : "(" + items.join(" ") + ")";
  }

  atom(depth: number): string {
    const s = this.#s;
    const c = s[this.#i];
    if (c === "(") {
      this.#i++;
      if (s[this.#i] === "?") {
        if (s[this.#i + 1] === ":") this.#i += 2;
        else if (s.startsWith("?=", this.#i) || s.startsWith("?!", this.#i)) {
          throw new PatternError("lookahead");
        } else if (s.startsWith("?<=", this.#i) || s.startsWith("?<!", this.#i)) {
          throw new PatternError("lookbehind");
        } else if (s.startsWith("?<", this.#i)) throw new PatternError("named group");
        else throw new PatternError("group modifier '(?'");
      }
      const e = this.alternation(depth + 1);
      if (s[this.#i] !== ")") throw new PatternError("unbalanced '('");
      this.#i++;
      return "(" + e + ")";
    }
    if (c === "[") return this.set(this.charClass());
    if (c === ".") {
      this.#i++;
      return this.set(DOT);
    }
    if (c === "^" || c === "$") throw new PatternError(`anchor '${c}' inside the pattern`);
    if (c === "*" || c === "+" || c === "?" || c === "{" || c === "}" || c === "]") {
      if (c === "}" || c === "]") {
        this.#i++;
        return this.set([c.charCodeAt(0), c.charCodeAt(0)]);
      }
      throw new PatternError(`quantifier '${c}' with nothing to repeat`);
    }
    if (c === "\\") return this.set(this.escape(false));
    const cp = s.codePointAt(this.#i)!;
    this.#i += cp > 0xffff ? 2 : 1;
    return this.set([cp, cp]);
  }

  set(ranges: number[]): string {
    const norm = normalizeRanges(ranges);
    const clean: number[] = [];
    for (let i = 0; i < norm.length; i += 2) {
      // Drop surrogates.
      const lo = norm[i], hi = norm[i + 1];
      if (hi < 0xd800 || lo > 0xdfff) clean.push(lo, hi);
      else {
        if (lo < 0xd800) clean.push(lo, 0xd7ff);
        if (hi > 0xdfff) clean.push(0xe000, hi);
      }
    }
    const g = jsonChars(clean);
    if (g === null) throw new PatternError("a character class that matches nothing");
    return g;
  }

  charClass(): number[] {
    const s = this.#s;
    this.#i++; // [
    let negated = false;
    if (s[this.#i] === "^") {
      negated = true;
      this.#i++;
    }
    const ranges: number[] = [];
    while (true) {
      if (this.#i >= s.length) throw new PatternError("unterminated '['");
      if (s[this.#i] === "]") break;
      const lo = this.classAtom();
      if (s[this.#i] === "-" && s[this.#i + 1] !== "]" && this.#i + 1 < s.length) {
        this.#i++;
        const hi = this.classAtom();
        if (lo.length !== 2 || hi.length !== 2 || lo[0] !== lo[1] || hi[0] !== hi[1]) {
          throw new PatternError("a range with a class escape as an end");
        }
        if (hi[0] < lo[0]) throw new PatternError("a range out of order");
        ranges.push(lo[0], hi[0]);
      } else ranges.push(...lo);
    }
    this.#i++;
    const norm = normalizeRanges(ranges);
    return negated ? complementRanges(norm) : norm;
  }

  classAtom(): number[] {
    const s = this.#s;
    if (s[this.#i] === "\\") return this.escape(true);
    if (s[this.#i] === "[") throw new PatternError("nested '[' in a class");
    const cp = s.codePointAt(this.#i)!;
    this.#i += cp > 0xffff ? 2 : 1;
    return [cp, cp];
  }

  escape(inClass: boolean): number[] {
    const s = this.#s;
    this.#i++;
    const e = s[this.#i++];
    if (e === undefined) throw new PatternError("a trailing '\\'");
    const one = (cp: number) => [cp, cp];
    switch (e) {
      case "d":
        return DIGIT;
      case "D":
        return complementRanges(DIGIT);
      case "w":
        return WORD;
      case "W":
        return complementRanges(WORD);
      case "s":
        return SPACE;
      case "S":
        return complementRanges(SPACE);
      case "n":
        return one(10);
      case "t":
        return one(9);
      case "r":
        return one(13);
      case "f":
        return one(12);
      case "v":
        return one(11);
      case "0":
        if (/[0-9]/.test(s[this.#i] ?? "")) throw new PatternError("octal escape");
        return one(0);
      case "b":
        if (inClass) return one(8);
        throw new PatternError("word boundary '\\b'");
      case "B":
        throw new PatternError("word boundary '\\B'");
      case "k":
        throw new PatternError("backreference '\\k'");
      case "p":
      case "P":
        throw new PatternError(`Unicode property '\\${e}'`);
      case "c":
        throw new PatternError("control escape '\\c'");
      case "x": {
        const h = s.slice(this.#i, this.#i + 2);
        if (!/^[0-9a-fA-F]{2}$/.test(h)) throw new PatternError("'\\x' without 2 hex digits");
        this.#i += 2;
        return one(parseInt(h, 16));
      }
      case "u": {
        let h: string;
        if (s[this.#i] === "{") {
          const end = s.indexOf("}", this.#i);
          h = end < 0 ? "" : s.slice(this.#i + 1, end);
          if (!/^[0-9a-fA-F]{1,6}$/.test(h)) throw new PatternError("bad '\\u{...}'");
          this.#i = end + 1;
        } else {
          h = s.slice(this.#i, this.#i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(h)) throw new PatternError("'\\u' without 4 hex digits");
          this.#i += 4;
        }
        const cp = parseInt(h, 16);
        if (cp > MAX_CP) throw new PatternError("'\\u' above U+10FFFF");
        return one(cp);
      }
      default:
        if (/[1-9]/.test(e)) throw new PatternError(`backreference '\\${e}'`);
        if (/[\^$\\.*+?()[\]{}|\/-]/.test(e)) return one(e.charCodeAt(0));
        throw new PatternError(`escape '\\${e}'`);
    }
  }
}

/**
 * GBNF for the contents (between the quotes) of a JSON string whose value matches `pattern`.
 *
 * @throws {PatternError} For a construct outside the subset.
 */
export function patternToGbnf(pattern: string): string {
  if (pattern.length > 4096) throw new PatternError("a pattern longer than 4096 characters");
  return new RegexParser(pattern).parse();
}
