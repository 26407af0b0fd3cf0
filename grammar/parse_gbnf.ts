/**
 * {@link parseGbnf}: llama.cpp's GBNF grammar text to a syntax tree, bounded in every
 * dimension, with errors that name the line and column.
 *
 * @module
 */

import { GrammarError } from "./grammar_error.ts";

/**
 * One expression of a grammar rule.
 *
 * - `chars`: one code point in one of the sorted, merged, inclusive `ranges` (`[lo, hi]` pairs);
 * - `seq`: the items one after the other (`items: []` matches the empty string);
 * - `alt`: any one of the alternatives;
 * - `ref`: the rule `name` (with its position, for errors);
 * - `rep`: `expr` from `min` to `max` times (`max` Infinity: no bound).
 *
 * @example
 * ```ts
 * import type { GbnfExpr } from "./parse_gbnf.ts";
 * const digit: GbnfExpr = { k: "chars", ranges: [0x30, 0x39] };
 * ```
 */
export type GbnfExpr =
  | { k: "chars"; ranges: number[] }
  | { k: "seq"; items: GbnfExpr[] }
  | { k: "alt"; alts: GbnfExpr[] }
  | { k: "ref"; name: string; line: number; column: number }
  | { k: "rep"; expr: GbnfExpr; min: number; max: number };

/**
 * Bounds of {@link parseGbnf}.
 *
 * @example
 * ```ts
 * import { GBNF_LIMITS, type GbnfLimits } from "./parse_gbnf.ts";
 * const l: GbnfLimits = { ...GBNF_LIMITS, maxRules: 100 };
 * ```
 */
export interface GbnfLimits {
  /** Longest grammar text, in UTF-16 code units. */
  maxTextLength: number;
  /** Most rules defined. */
  maxRules: number;
  /** Deepest nesting of groups. */
  maxDepth: number;
  /** Largest repetition bound (`{m,n}`). */
  maxRepetition: number;
  /** Most elements once repetitions are expanded (the compiled program's size). */
  maxElements: number;
}

/**
 * The default {@link GbnfLimits}: 256 KiB of text, 4096 rules, 64 levels of groups,
 * repetition bounds up to 1000, 2^20 elements.
 *
 * @example
 * ```ts
 * import { GBNF_LIMITS } from "./parse_gbnf.ts";
 * console.log(GBNF_LIMITS.maxRules); // 4096
 * ```
 */
export const GBNF_LIMITS: Readonly<GbnfLimits> = Object.freeze({
  maxTextLength: 256 * 1024,
  maxRules: 4096,
  maxDepth: 64,
  maxRepetition: 1000,
  maxElements: 1 << 20,
});

/** The highest Unicode code point. */
export const MAX_CP = 0x10ffff;

/**
 * Sorts and merges inclusive `[lo, hi]` range pairs.
 *
 * @example
 * ```ts
 * import { normalizeRanges } from "./parse_gbnf.ts";
 * console.log(normalizeRanges([5, 9, 0, 5])); // [0, 9]
 * ```
 */
export function normalizeRanges(ranges: readonly number[]): number[] {
  const pairs: [number, number][] = [];
  for (let i = 0; i < ranges.length; i += 2) pairs.push([ranges[i], ranges[i + 1]]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [lo, hi] of pairs) {
    const n = out.length;
    if (n > 0 && lo <= out[n - 1] + 1) out[n - 1] = Math.max(out[n - 1], hi);
    else out.push(lo, hi);
  }
  return out;
}

/**
 * The complement of normalized ranges within [0, 0x10FFFF].
 *
 * @example
 * ```ts
 * import { complementRanges } from "./parse_gbnf.ts";
 * console.log(complementRanges([0, 9])); // [10, 1114111]
 * ```
 */
export function complementRanges(ranges: readonly number[]): number[] {
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    if (ranges[i] > next) out.push(next, ranges[i] - 1);
    next = ranges[i + 1] + 1;
  }
  if (next <= MAX_CP) out.push(next, MAX_CP);
  return out;
}

/** A parsed grammar: its rules by name, in definition order. */
export interface GbnfGrammar {
  /** Rule name to its expression. */
  rules: Map<string, GbnfExpr>;
  /** Where each rule was defined (for errors). */
  at: Map<string, { line: number; column: number }>;
}

const NAME = /[a-zA-Z0-9_-]/;

class Parser {
  readonly #s: string;
  readonly #limits: GbnfLimits;
  #i = 0;

  constructor(s: string, limits: GbnfLimits) {
    this.#s = s;
    this.#limits = limits;
  }

  fail(reason: string, at = this.#i): never {
    let line = 1, col = 1;
    for (let j = 0; j < at && j < this.#s.length; j++) {
      if (this.#s[j] === "\n") {
        line++;
        col = 1;
      } else col++;
    }
    throw new GrammarError(reason, line, col);
  }

  /** Skips spaces, tabs, comments and (when `newlines`) line breaks. */
  ws(newlines: boolean): void {
    const s = this.#s;
    while (this.#i < s.length) {
      const c = s[this.#i];
      if (c === " " || c === "\t" || c === "\r") this.#i++;
      else if (c === "#") {
        while (this.#i < s.length && s[this.#i] !== "\n") this.#i++;
      } else if (c === "\n" && newlines) this.#i++;
      else if (
        c === "\n" && this.#i + 1 < s.length && (s[this.#i + 1] === " " || s[this.#i + 1] === "\t")
      ) {
        // A line break followed by indentation continues the rule.
        this.#i++;
      } else break;
    }
  }

  parse(): GbnfGrammar {
    const rules = new Map<string, GbnfExpr>();
    const at = new Map<string, { line: number; column: number }>();
    const s = this.#s;
    this.ws(true);
    while (this.#i < s.length) {
      const start = this.#i;
      const name = this.name();
      this.ws(false);
      if (!s.startsWith("::=", this.#i)) this.fail("expected '::=' after the rule name");
      this.#i += 3;
      if (rules.has(name)) this.fail(`rule '${name}' is defined twice`, start);
      if (rules.size >= this.#limits.maxRules) {
        this.fail(`more than ${this.#limits.maxRules} rules`, start);
      }
      this.ws(false);
      const body = this.alternatives(0);
      rules.set(name, body);
      const p = this.pos(start);
      at.set(name, p);
      this.ws(false);
      if (this.#i < s.length && s[this.#i] !== "\n") this.fail(`unexpected '${s[this.#i]}'`);
      this.ws(true);
    }
    return { rules, at };
  }

  pos(at: number): { line: number; column: number } {
    let line = 1, column = 1;
    for (let j = 0; j < at; j++) {
      if (this.#s[j] === "\n") {
        line++;
        column = 1;
      } else column++;
    }
    return { line, column };
  }

  name(): string {
    const start = this.#i;
    while (this.#i < this.#s.length && NAME.test(this.#s[this.#i])) this.#i++;
    if (this.#i === start) this.fail("expected a rule name");
    return this.#s.slice(start, this.#i);
  }

  alternatives(depth: number): GbnfExpr {
    if (depth > this.#limits.maxDepth) {
      this.fail(`groups nested deeper than ${this.#limits.maxDepth}`);
    }
    const alts = [this.sequence(depth)];
    while (this.#i < this.#s.length && this.#s[this.#i] === "|") {
      this.#i++;
      this.ws(true);
      alts.push(this.sequence(depth));
    }
    return alts.length === 1 ? alts[0] : { k: "alt", alts };
  }

  sequence(depth: number): GbnfExpr {
    const items: GbnfExpr[] = [];
    const s = this.#s;
    const inGroup = depth > 0;
    while (this.#i < s.length) {
      const c = s[this.#i];
      let item: GbnfExpr;
      const start = this.#i;
      if (c === '"') {
        this.#i++;
        const cps: number[] = [];
        while (true) {
          if (this.#i >= s.length) this.fail("unterminated string literal", start);
          const d = s[this.#i];
          if (d === '"') break;
          if (d === "\n") this.fail("line break in a string literal");
          cps.push(this.char());
        }
        this.#i++;
        item = {
          k: "seq",
          items: cps.map((cp): GbnfExpr => ({ k: "chars", ranges: [cp, cp] })),
        };
      } else if (c === "[") {
        this.#i++;
        let negated = false;
        if (s[this.#i] === "^") {
          negated = true;
          this.#i++;
        }
        const ranges: number[] = [];
        while (true) {
          if (this.#i >= s.length) this.fail("unterminated character class", start);
          if (s[this.#i] === "]") break;
          if (s[this.#i] === "\n") this.fail("line break in a character class");
          const lo = this.char();
          let hi = lo;
          if (s[this.#i] === "-" && this.#i + 1 < s.length && s[this.#i + 1] !== "]") {
            this.#i++;
            hi = this.char();
            if (hi < lo) this.fail("character range out of order");
          }
          ranges.push(lo, hi);
        }
        this.#i++;
        const norm = normalizeRanges(ranges);
        item = { k: "chars", ranges: negated ? complementRanges(norm) : norm };
        if (item.ranges.length === 0) this.fail("character class matches nothing", start);
      } else if (c === ".") {
        this.#i++;
        item = { k: "chars", ranges: [0, MAX_CP] };
      } else if (c === "(") {
        this.#i++;
        this.ws(true);
        item = this.alternatives(depth + 1);
        this.ws(true);
        if (s[this.#i] !== ")") this.fail("expected ')'");
        this.#i++;
      } else if (NAME.test(c)) {
        // A name followed by ::= starts the next rule.
        const save = this.#i;
        const name = this.name();
        const after = this.#i;
        this.ws(false);
        if (s.startsWith("::=", this.#i)) {
          this.#i = save;
          break;
        }
        this.#i = after;
        const p = this.pos(save);
        item = { k: "ref", name, line: p.line, column: p.column };
      } else break;
      // Postfix repetition operators.
      while (this.#i < s.length) {
        const op = s[this.#i];
        if (op === "*" || op === "+" || op === "?") {
          this.#i++;
          item = {
            k: "rep",
            expr: item,
            min: op === "+" ? 1 : 0,
            max: op === "?" ? 1 : Infinity,
          };
        } else if (op === "{") {
          this.#i++;
          this.ws(false);
          const min = this.int();
          this.ws(false);
          let max = min;
          if (s[this.#i] === ",") {
            this.#i++;
            this.ws(false);
            max = s[this.#i] === "}" ? Infinity : this.int();
            this.ws(false);
          }
          if (s[this.#i] !== "}") this.fail("expected '}'");
          this.#i++;
          if (max < min) this.fail(`repetition {${min},${max}} has max < min`, start);
          item = { k: "rep", expr: item, min, max };
        } else break;
      }
      items.push(item);
      this.ws(inGroup);
    }
    return items.length === 1 ? items[0] : { k: "seq", items };
  }

  int(): number {
    const start = this.#i;
    while (this.#i < this.#s.length && /[0-9]/.test(this.#s[this.#i])) this.#i++;
    if (this.#i === start) this.fail("expected a number");
    if (this.#i - start > 7) this.fail(`repetition bound above ${this.#limits.maxRepetition}`);
    const n = Number(this.#s.slice(start, this.#i));
    if (n > this.#limits.maxRepetition) {
      this.fail(`repetition bound ${n} above ${this.#limits.maxRepetition}`, start);
    }
    return n;
  }

  /** One character of a literal or class, with escapes; returns its code point. */
  char(): number {
    const s = this.#s;
    const start = this.#i;
    if (s[this.#i] !== "\\") {
      const cp = s.codePointAt(this.#i)!;
      this.#i += cp > 0xffff ? 2 : 1;
      if (cp >= 0xd800 && cp <= 0xdfff) this.fail("lone surrogate", start);
      return cp;
    }
    this.#i++;
    const e = s[this.#i++];
    switch (e) {
      case "n":
        return 10;
      case "t":
        return 9;
      case "r":
        return 13;
      case "\\":
      case '"':
      case "[":
      case "]":
      case "-":
      case "^":
        return e.charCodeAt(0);
      case "x":
        return this.hex(2, start);
      case "u":
        return this.hex(4, start);
      case "U":
        return this.hex(8, start);
      default:
        return this.fail(`unknown escape '\\${e ?? ""}'`, start);
    }
  }

  hex(n: number, start: number): number {
    const h = this.#s.slice(this.#i, this.#i + n);
    if (h.length !== n || !/^[0-9a-fA-F]+$/.test(h)) this.fail(`expected ${n} hex digits`, start);
    this.#i += n;
    const cp = parseInt(h, 16);
    if (cp > MAX_CP || (cp >= 0xd800 && cp <= 0xdfff)) {
      this.fail(`escape \\${h} is not a Unicode scalar value`, start);
    }
    return cp;
  }
}

/**
 * Parses GBNF text (llama.cpp's grammar format) into its rules: `name ::= ...` definitions with
 * alternatives `|`, sequences, string literals with escapes (`\n \t \r \" \\ \xNN \uNNNN
 * \UNNNNNNNN`), character classes `[a-z]` and `[^...]`, `.`, groups, repetitions `* + ?`,
 * `{m}`, `{m,}`, `{m,n}`, and `#` comments. A rule continues on the next line when that line
 * is indented or inside a group. Checks syntax and bounds only; {@link compileGrammar} checks
 * references, `root` and left recursion.
 *
 * @example
 * ```ts
 * import { parseGbnf } from "./parse_gbnf.ts";
 *
 * const g = parseGbnf('root ::= "a" [0-9]+ # one letter, digits');
 * console.log([...g.rules.keys()]); // ["root"]
 * ```
 *
 * @param text The grammar.
 * @param limits Bounds; {@link GBNF_LIMITS} by default.
 * @throws {GrammarError} On a syntax error or an exceeded bound.
 */
export function parseGbnf(text: string, limits: GbnfLimits = GBNF_LIMITS): GbnfGrammar {
  if (typeof text !== "string") throw new GrammarError("the grammar is not a string", 0, 0);
  if (text.length > limits.maxTextLength) {
    throw new GrammarError(
      `the grammar is ${text.length} characters long, more than ${limits.maxTextLength}`,
      0,
      0,
    );
  }
  return new Parser(text, limits).parse();
}
