/**
 * {@link compileGrammar}: a parsed GBNF grammar to a flat program of rule alternatives (the
 * form the pushdown matcher runs), with repetitions expanded into helper rules, every reference
 * resolved, `root` required and left recursion refused.
 *
 * @module
 */

import { GrammarError } from "./grammar_error.ts";
import { GBNF_LIMITS, type GbnfExpr, type GbnfLimits, parseGbnf } from "./parse_gbnf.ts";

/**
 * Marks the end of an alternative in {@link GrammarProgram.code}.
 *
 * @example
 * ```ts
 * import { compileGrammar, END } from "./compile_grammar.ts";
 * const p = compileGrammar('root ::= "a"');
 * console.log(p.code[p.alts[p.root][0] + 1] === END); // true
 * ```
 */
export const END: number = -1;

/**
 * A grammar compiled for the matcher. `code` holds every alternative as a run of elements
 * ended by {@link END}: an even element `2c` matches one code point of class `c`
 * (`classes[c]`: sorted inclusive `[lo, hi]` pairs); an odd one `2r + 1` expands rule `r`.
 * `alts[r]` lists where rule `r`'s alternatives start.
 *
 * @example
 * ```ts
 * import { compileGrammar } from "./compile_grammar.ts";
 *
 * const p = compileGrammar('root ::= "ab" | "c"');
 * console.log(p.alts[p.root].length); // 2
 * ```
 */
export interface GrammarProgram {
  /** Every alternative's elements, each run ended by {@link END}. */
  readonly code: Int32Array;
  /** Per rule, where its alternatives start in `code`. */
  readonly alts: readonly (readonly number[])[];
  /** Character classes: sorted inclusive `[lo, hi]` code point pairs. */
  readonly classes: readonly (readonly number[])[];
  /** Rule names (helper rules: the rule they come from, a dash and a number). */
  readonly names: readonly string[];
  /** The `root` rule's id. */
  readonly root: number;
}

class Lowering {
  readonly code: number[] = [];
  readonly alts: number[][] = [];
  readonly names: string[] = [];
  readonly classes: number[][] = [];
  readonly #classIds = new Map<string, number>();
  readonly #ids = new Map<string, number>();
  readonly #limits: GbnfLimits;
  #elements = 0;

  constructor(names: string[], limits: GbnfLimits) {
    this.#limits = limits;
    for (const n of names) this.#newRule(n);
  }

  #newRule(name: string): number {
    const id = this.names.length;
    this.names.push(name);
    this.alts.push([]);
    this.#ids.set(name, id);
    return id;
  }

  id(name: string): number | undefined {
    return this.#ids.get(name);
  }

  #count(n: number): void {
    this.#elements += n;
    if (this.#elements > this.#limits.maxElements) {
      throw new GrammarError(
        `the grammar expands to more than ${this.#limits.maxElements} elements`,
        0,
        0,
      );
    }
  }

  #cls(ranges: number[]): number {
    const key = ranges.join(",");
    let c = this.#classIds.get(key);
    if (c === undefined) {
      c = this.classes.length;
      this.classes.push(ranges);
      this.#classIds.set(key, c);
    }
    return c;
  }

  /** Defines rule `id` from a list of alternatives (element runs). */
  define(id: number, alternatives: number[][]): void {
    for (const a of alternatives) {
      this.alts[id].push(this.code.length);
      this.#count(a.length + 1);
      this.code.push(...a, END);
    }
  }

  /** The alternatives of an expression. */
  alternativesOf(e: GbnfExpr, owner: string): number[][] {
    if (e.k === "alt") return e.alts.map((a) => this.seq(a, owner, []));
    return [this.seq(e, owner, [])];
  }

  /** Appends the elements matching `e` to `out`. */
  seq(e: GbnfExpr, owner: string, out: number[]): number[] {
    switch (e.k) {
      case "chars":
        out.push(2 * this.#cls(e.ranges));
        break;
      case "seq":
        for (const item of e.items) this.seq(item, owner, out);
        break;
      case "alt": {
        const r = this.#newRule(`${owner}-${this.names.length}`);
        this.define(r, this.alternativesOf(e, owner));
        out.push(2 * r + 1);
        break;
      }
      case "ref": {
        const r = this.#ids.get(e.name);
        if (r === undefined) throw new GrammarError(`undefined rule '${e.name}'`, e.line, e.column);
        out.push(2 * r + 1);
        break;
      }
      case "rep": {
        const body = this.seq(e.expr, owner, []);
        this.#count(body.length * Math.max(e.min, 1));
        for (let i = 0; i < e.min; i++) out.push(...body);
        if (e.max === Infinity) {
          const r = this.#newRule(`${owner}-${this.names.length}`);
          this.define(r, [[...body, 2 * r + 1], []]);
          out.push(2 * r + 1);
        } else if (e.max > e.min) {
          // x{0,k} as nested optionals: o_1 ::= x | ε; o_j ::= x o_{j-1} | ε.
          let prev = -1;
          for (let j = 1; j <= e.max - e.min; j++) {
            const r = this.#newRule(`${owner}-${this.names.length}`);
            this.define(r, [prev < 0 ? body : [...body, 2 * prev + 1], []]);
            prev = r;
          }
          out.push(2 * prev + 1);
        }
        break;
      }
    }
    return out;
  }
}

/**
 * Compiles GBNF text (or its parse) into a {@link GrammarProgram}.
 *
 * @example
 * ```ts
 * import { compileGrammar } from "./compile_grammar.ts";
 * import { GrammarError } from "./grammar_error.ts";
 *
 * try {
 *   compileGrammar("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"");
 * } catch (e) {
 *   console.log(e instanceof GrammarError); // true: expr is left-recursive
 * }
 * ```
 *
 * @param text GBNF text.
 * @param limits Bounds; {@link GBNF_LIMITS} by default.
 * @throws {GrammarError} On a syntax error, an undefined rule, no `root` rule, left recursion
 *   or an exceeded bound.
 */
export function compileGrammar(text: string, limits: GbnfLimits = GBNF_LIMITS): GrammarProgram {
  const g = parseGbnf(text, limits);
  if (!g.rules.has("root")) throw new GrammarError("there is no 'root' rule", 0, 0);
  const low = new Lowering([...g.rules.keys()], limits);
  for (const [name, expr] of g.rules) low.define(low.id(name)!, low.alternativesOf(expr, name));
  const program: GrammarProgram = {
    code: Int32Array.from(low.code),
    alts: low.alts,
    classes: low.classes,
    names: low.names,
    root: low.id("root")!,
  };
  checkLeftRecursion(program, (name) => g.at.get(name.replace(/-\d+$/, "")));
  return program;
}

/** Refuses a rule that can reach itself without consuming input (the matcher would loop). */
function checkLeftRecursion(
  p: GrammarProgram,
  at: (name: string) => { line: number; column: number } | undefined,
): void {
  const n = p.names.length;
  const nullable = new Uint8Array(n);
  for (let changed = true; changed;) {
    changed = false;
    for (let r = 0; r < n; r++) {
      if (nullable[r]) continue;
      for (const a of p.alts[r]) {
        let i = a;
        while (p.code[i] !== END && (p.code[i] & 1) === 1 && nullable[p.code[i] >> 1]) i++;
        if (p.code[i] === END) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Edges to the rules each rule can start with; a cycle is left recursion.
  const edges: number[][] = Array.from({ length: n }, () => []);
  for (let r = 0; r < n; r++) {
    for (const a of p.alts[r]) {
      for (let i = a; p.code[i] !== END; i++) {
        const el = p.code[i];
        if ((el & 1) === 0) break;
        edges[r].push(el >> 1);
        if (!nullable[el >> 1]) break;
      }
    }
  }
  const state = new Uint8Array(n); // 0 new, 1 on the path, 2 done
  for (let start = 0; start < n; start++) {
    if (state[start] !== 0) continue;
    // Iterative depth-first search.
    const stack: [number, number][] = [[start, 0]];
    state[start] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const [r, k] = top;
      if (k < edges[r].length) {
        top[1]++;
        const s = edges[r][k];
        if (state[s] === 1) {
          const name = p.names[s].replace(/-\d+$/, "");
          const where = at(p.names[s]) ?? { line: 0, column: 0 };
          throw new GrammarError(
            `rule '${name}' is left-recursive (it can reach itself without consuming input; ` +
              `a repetition of something that can be empty does too)`,
            where.line,
            where.column,
          );
        }
        if (state[s] === 0) {
          state[s] = 1;
          stack.push([s, 0]);
        }
      } else {
        state[r] = 2;
        stack.pop();
      }
    }
  }
}
