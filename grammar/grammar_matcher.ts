/**
 * {@link GrammarMatcher}: a pushdown matcher over a {@link GrammarProgram}, advanced by bytes
 * (a UTF-8 character may arrive split over several calls), with memoized transitions: the
 * matcher's state is an interned set of parse stacks, so a state seen before costs one array
 * lookup per byte.
 *
 * @module
 */

import { compileGrammar, END, type GrammarProgram } from "./compile_grammar.ts";
import { GrammarError } from "./grammar_error.ts";

/** Most parse stacks one state may hold before the grammar is refused as too ambiguous. */
export const MAX_STACKS = 1024;
/** Deepest parse stack: deeper nesting is not followed (the matcher treats it as no match). */
export const MAX_STACK_DEPTH = 1024;
/** States kept memoized before the memo is restarted (bounds memory). */
const MAX_STATES = 8_000;
/** Stack nodes kept interned before the table is restarted. */
const MAX_NODES = 500_000;

/**
 * One parse stack, as a persistent linked list: `pos` is the element on top (a character
 * class element, once normalized), `parent` the rest. Interned by {@link GrammarRuntime}, so
 * equal stacks are one object with one id.
 *
 * @example
 * ```ts
 * import { compileGrammar, GrammarRuntime } from "./mod.ts";
 * const rt = new GrammarRuntime(compileGrammar('root ::= "a"'));
 * console.log(rt.start.nodes[0].depth); // 1
 * ```
 */
export class StackNode {
  /** Unique id (per runtime). */
  readonly id: number;
  /** The element on top, an index into the program's code. */
  readonly pos: number;
  /** The rest of the stack (null: none). */
  readonly parent: StackNode | null;
  /** Number of nodes in the stack. */
  readonly depth: number;
  /** Normalized stacks after this node's top element matched (memo). */
  succ: StackNode[] | undefined;
  /** Normalized stacks this node stands for (memo). */
  norm: StackNode[] | undefined;
  /** @internal Use the runtime. */
  constructor(id: number, pos: number, parent: StackNode | null) {
    this.id = id;
    this.pos = pos;
    this.parent = parent;
    this.depth = parent === null ? 1 : parent.depth + 1;
  }
}

/**
 * A matcher state: a set of normalized parse stacks (`nodes`, by id; the empty stack is
 * {@link GrammarRuntime.accept}) and, between the bytes of one UTF-8 character, the partial
 * code point (`acc`, `need` more bytes, `len` bytes in all).
 */
export class MatchState {
  /** Unique id (per runtime). */
  readonly id: number;
  /** The stacks; a character's bytes are matched against their top elements. */
  readonly nodes: readonly StackNode[];
  /** The code point's bits so far (0 when `need` is 0). */
  readonly acc: number;
  /** Continuation bytes still expected. */
  readonly need: number;
  /** Length of the character in progress. */
  readonly len: number;
  /** The output so far is a complete match. */
  readonly accepting: boolean;
  /** More input can follow. */
  readonly canContinue: boolean;
  /** The state the character in progress started from (this state when `need` is 0). */
  readonly base: MatchState;
  /** Byte transitions (memo): undefined unknown, null no match. */
  trans: (MatchState | null | undefined)[] | undefined;
  /**
   * Transitions by whole non-ASCII characters (memo, full states only), keyed by the bit set of
   * the stacks the character matches (or -1 - code point for states of more than 30 stacks).
   */
  chars: Map<number, MatchState | null> | undefined;
  /** Opaque per-state memo for the token masker. */
  mask: Uint8Array | undefined;
  /** @internal */
  constructor(
    id: number,
    nodes: readonly StackNode[],
    acc: number,
    need: number,
    len: number,
    accept: StackNode,
    base?: MatchState,
  ) {
    this.id = id;
    this.base = base ?? this;
    this.chars = undefined;
    this.nodes = nodes;
    this.acc = acc;
    this.need = need;
    this.len = len;
    this.accepting = need === 0 && nodes.includes(accept);
    this.canContinue = need > 0 || nodes.some((n) => n !== accept);
    this.trans = undefined;
    this.mask = undefined;
  }
}

const MIN_CP = [0, 0, 0x80, 0x800, 0x10000];

/**
 * The shared, memoized machinery of one grammar: interned stacks and states and their
 * transitions. Many matchers (generations) share one runtime.
 *
 * @example
 * ```ts
 * import { compileGrammar } from "./compile_grammar.ts";
 * import { GrammarRuntime } from "./grammar_matcher.ts";
 *
 * const rt = new GrammarRuntime(compileGrammar('root ::= "hi"'));
 * console.log(rt.start.accepting); // false
 * ```
 */
export class GrammarRuntime {
  /** The compiled grammar. */
  readonly program: GrammarProgram;
  /** The empty stack: the grammar has matched completely. */
  readonly accept: StackNode;
  /** The state before any input. */
  readonly start: MatchState;
  #nodeIds = 1;
  #nodes = new Map<number, StackNode>();
  #stateIds = 0;
  #states = new Map<string, MatchState>();
  /** Per class, a 128-entry ASCII table. */
  readonly #ascii: Uint8Array[];

  /**
   * The runtime of a compiled grammar, at its start state.
   *
   * @example
   * ```ts
   * import { compileGrammar, GrammarRuntime } from "./mod.ts";
   * console.log(new GrammarRuntime(compileGrammar('root ::= "a"?')).start.accepting); // true
   * ```
   *
   * @param program A compiled grammar.
   * @throws {GrammarError} If the start state has too many stacks.
   */
  constructor(program: GrammarProgram) {
    this.program = program;
    this.accept = new StackNode(0, END, null);
    this.#ascii = program.classes.map((r) => {
      const t = new Uint8Array(128);
      for (let i = 0; i < r.length; i += 2) {
        for (let c = r[i]; c <= Math.min(r[i + 1], 127); c++) t[c] = 1;
      }
      return t;
    });
    const roots: StackNode[] = [];
    for (const a of program.alts[program.root]) {
      roots.push(
        ...(program.code[a] === END ? [this.accept] : this.#normalize(this.#node(a, null))),
      );
    }
    this.start = this.#state(roots, 0, 0, 0)!;
  }

  #node(pos: number, parent: StackNode | null): StackNode {
    const key = pos * 1073741824 + (parent === null ? 0 : parent.id);
    let n = this.#nodes.get(key);
    if (n === undefined) {
      if (this.#nodes.size >= MAX_NODES) this.#nodes = new Map();
      n = new StackNode(this.#nodeIds++, pos, parent);
      this.#nodes.set(key, n);
    }
    return n;
  }

  /** The stacks, with a character class on top, that `node` (top at any element) stands for. */
  #normalize(node: StackNode | null): StackNode[] {
    if (node === null) return [this.accept];
    if (node.norm !== undefined) return node.norm;
    if (node.depth > MAX_STACK_DEPTH) return (node.norm = []);
    const code = this.program.code;
    const el = code[node.pos];
    let out: StackNode[];
    if ((el & 1) === 0) out = [node];
    else {
      out = [];
      const cont = code[node.pos + 1] === END ? node.parent : this.#node(node.pos + 1, node.parent);
      for (const a of this.program.alts[el >> 1]) {
        const next = code[a] === END ? this.#normalize(cont) : this.#normalize(this.#node(a, cont));
        for (const s of next) if (!out.includes(s)) out.push(s);
        if (out.length > MAX_STACKS) this.#tooMany();
      }
    }
    node.norm = out;
    return out;
  }

  #tooMany(): never {
    throw new GrammarError(
      `the grammar is too ambiguous: more than ${MAX_STACKS} parse stacks at once`,
      0,
      0,
    );
  }

  /** The normalized stacks after `node`'s top character matched. */
  #succ(node: StackNode): StackNode[] {
    if (node.succ !== undefined) return node.succ;
    const code = this.program.code;
    const s = code[node.pos + 1] === END
      ? this.#normalize(node.parent)
      : this.#normalize(this.#node(node.pos + 1, node.parent));
    node.succ = s;
    return s;
  }

  #state(nodes: StackNode[], acc: number, need: number, len: number): MatchState | null {
    if (nodes.length === 0) return null;
    if (nodes.length > MAX_STACKS) this.#tooMany();
    nodes.sort((a, b) => a.id - b.id);
    let key = "";
    for (const n of nodes) key += n.id + ",";
    let s = this.#states.get(key);
    if (s === undefined) {
      if (this.#states.size >= MAX_STATES) this.#states = new Map();
      s = new MatchState(this.#stateIds++, nodes, acc, need, len, this.accept);
      this.#states.set(key, s);
    }
    return s;
  }

  #matches(node: StackNode, cp: number): boolean {
    if (node === this.accept) return false;
    const c = this.program.code[node.pos] >> 1;
    if (cp < 128) return this.#ascii[c][cp] === 1;
    const r = this.program.classes[c];
    for (let i = 0; i < r.length; i += 2) {
      if (cp < r[i]) return false;
      if (cp <= r[i + 1]) return true;
    }
    return false;
  }

  /** Some stack's class meets [lo, hi]. */
  #overlaps(nodes: readonly StackNode[], lo: number, hi: number): boolean {
    for (const node of nodes) {
      if (node === this.accept) continue;
      const r = this.program.classes[this.program.code[node.pos] >> 1];
      for (let i = 0; i < r.length; i += 2) if (r[i] <= hi && r[i + 1] >= lo) return true;
    }
    return false;
  }

  /** A state in the middle of a character begun at full state `base`. */
  #partial(base: MatchState, acc: number, need: number, len: number): MatchState {
    const key = `${base.id}/${acc}/${need}/${len}`;
    let s = this.#states.get(key);
    if (s === undefined) {
      if (this.#states.size >= MAX_STATES) this.#states = new Map();
      s = new MatchState(this.#stateIds++, base.nodes, acc, need, len, this.accept, base);
      this.#states.set(key, s);
    }
    return s;
  }

  /**
   * The full state after the whole character `cp` from full state `s` (memoized), or null.
   *
   * @example
   * ```ts
   * import { compileGrammar, GrammarRuntime } from "./mod.ts";
   * const rt = new GrammarRuntime(compileGrammar('root ::= [à-ÿ]'));
   * console.log(rt.charStep(rt.start, 0xe9)!.accepting); // true
   * ```
   */
  charStep(s: MatchState, cp: number): MatchState | null {
    if (cp < 0x80) return this.step(s, cp);
    // Keyed by which stacks match: characters that match the same stacks lead to the same
    // state (most characters of a string body, say), so the work is done once per set.
    const nodes = s.nodes;
    let key: number;
    if (nodes.length <= 30) {
      key = 0;
      for (let i = 0; i < nodes.length; i++) if (this.#matches(nodes[i], cp)) key |= 1 << i;
      if (key === 0) return null;
    } else key = -1 - cp;
    let m = s.chars;
    if (m === undefined) m = s.chars = new Map();
    const memo = m.get(key);
    if (memo !== undefined) return memo;
    const next = this.#char(s, cp);
    m.set(key, next);
    return next;
  }

  /**
   * Whether some character the state's stacks allow starts with the bytes of a partial one
   * (`acc`: its bits so far, `need` bytes to come, `len` bytes in all).
   *
   * @example
   * ```ts
   * import { compileGrammar, GrammarRuntime } from "./mod.ts";
   * const rt = new GrammarRuntime(compileGrammar('root ::= "é"'));
   * console.log(rt.partialOk(rt.start, 0x03, 1, 2), rt.partialOk(rt.start, 0x04, 1, 2)); // true false
   * ```
   */
  partialOk(s: MatchState, acc: number, need: number, len: number): boolean {
    const lo = Math.max(acc * (1 << (6 * need)), MIN_CP[len]);
    const hi = Math.min(acc * (1 << (6 * need)) + (1 << (6 * need)) - 1, 0x10ffff);
    return lo <= hi && this.#overlaps(s.nodes, lo, hi);
  }

  #char(s: MatchState, cp: number): MatchState | null {
    const out: StackNode[] = [];
    for (const node of s.nodes) {
      if (!this.#matches(node, cp)) continue;
      for (const n of this.#succ(node)) if (!out.includes(n)) out.push(n);
    }
    return this.#state(out, 0, 0, 0);
  }

  /**
   * The state after byte `b` from `s`, or null when no continuation of the output matches.
   *
   * @example
   * ```ts
   * import { compileGrammar } from "./compile_grammar.ts";
   * import { GrammarRuntime } from "./grammar_matcher.ts";
   *
   * const rt = new GrammarRuntime(compileGrammar('root ::= "é"'));
   * const half = rt.step(rt.start, 0xc3)!; // first byte of é
   * console.log(rt.step(half, 0xa9)!.accepting, rt.step(rt.start, 0x41)); // true null
   * ```
   */
  step(s: MatchState, b: number): MatchState | null {
    let t = s.trans;
    if (t === undefined) t = s.trans = new Array(256);
    const memo = t[b];
    if (memo !== undefined) return memo;
    const next = this.#byte(s, b);
    t[b] = next;
    return next;
  }

  #byte(s: MatchState, b: number): MatchState | null {
    let acc: number, need: number, len: number;
    if (s.need === 0) {
      if (b < 0x80) return this.#char(s, b);
      if (b >= 0xc2 && b <= 0xdf) [acc, need, len] = [b & 0x1f, 1, 2];
      else if (b >= 0xe0 && b <= 0xef) [acc, need, len] = [b & 0x0f, 2, 3];
      else if (b >= 0xf0 && b <= 0xf4) [acc, need, len] = [b & 0x07, 3, 4];
      else return null;
    } else {
      if ((b & 0xc0) !== 0x80) return null;
      acc = (s.acc << 6) | (b & 0x3f);
      need = s.need - 1;
      len = s.len;
      if (need === 0) {
        if (acc < MIN_CP[len] || acc > 0x10ffff || (acc >= 0xd800 && acc <= 0xdfff)) return null;
        return this.charStep(s.base, acc);
      }
    }
    if (!this.partialOk(s, acc, need, len)) return null;
    return this.#partial(s.base, acc, need, len);
  }
}

/**
 * A matcher over one grammar: feed it the output's bytes; it says whether they can still be
 * part of a match ({@link GrammarMatcher.advance} returns false when not), whether they are
 * a complete match and whether more may follow. Cheap to clone.
 *
 * @example
 * ```ts
 * import { GrammarMatcher } from "./grammar_matcher.ts";
 *
 * const m = GrammarMatcher.fromGbnf('root ::= [0-9]+ ("." [0-9]+)?');
 * console.log(m.advance(new TextEncoder().encode("3.1"))); // true
 * console.log(m.isAccepting(), m.canContinue()); // true true
 * console.log(m.clone().advance(new TextEncoder().encode("x"))); // false
 * ```
 */
export class GrammarMatcher {
  /** The shared runtime. */
  readonly runtime: GrammarRuntime;
  #state: MatchState;

  /**
   * A matcher in the given state of a runtime.
   *
   * @param runtime The grammar's runtime (shared by its matchers).
   * @param state Where to start; the runtime's start state by default.
   *
   * @example
   * ```ts
   * import { compileGrammar, GrammarMatcher, GrammarRuntime } from "./mod.ts";
   * const m = new GrammarMatcher(new GrammarRuntime(compileGrammar('root ::= "a"')));
   * console.log(m.isAccepting()); // false
   * ```
   */
  constructor(runtime: GrammarRuntime, state: MatchState = runtime.start) {
    this.runtime = runtime;
    this.#state = state;
  }

  /**
   * A matcher for GBNF text.
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * console.log(GrammarMatcher.fromGbnf('root ::= "a"?').isAccepting()); // true
   * ```
   *
   * @throws {GrammarError} If the grammar is refused.
   */
  static fromGbnf(text: string): GrammarMatcher {
    return new GrammarMatcher(new GrammarRuntime(compileGrammar(text)));
  }

  /**
   * The current state (interned: equal states are one object).
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * console.log(typeof GrammarMatcher.fromGbnf('root ::= "a"').state.id); // "number"
   * ```
   */
  get state(): MatchState {
    return this.#state;
  }

  /**
   * Consumes `bytes` if they can continue the output; otherwise leaves the matcher as it was.
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * const m = GrammarMatcher.fromGbnf('root ::= "ab"');
   * console.log(m.advance(new Uint8Array([0x61])), m.advance(new Uint8Array([0x61]))); // true false
   * ```
   *
   * @returns Whether the bytes were consumed.
   */
  advance(bytes: Uint8Array): boolean {
    const rt = this.runtime;
    let s: MatchState | null = this.#state;
    for (let i = 0; i < bytes.length && s !== null; i++) s = rt.step(s, bytes[i]);
    if (s === null) return false;
    this.#state = s;
    return true;
  }

  /**
   * The output so far is a complete match.
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * console.log(GrammarMatcher.fromGbnf('root ::= "a"').isAccepting()); // false
   * ```
   */
  isAccepting(): boolean {
    return this.#state.accepting;
  }

  /**
   * More input can extend the output (a UTF-8 character in progress counts).
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * const m = GrammarMatcher.fromGbnf('root ::= "a"');
   * m.advance(new Uint8Array([0x61]));
   * console.log(m.canContinue()); // false
   * ```
   */
  canContinue(): boolean {
    return this.#state.canContinue;
  }

  /**
   * An independent matcher in the same state (O(1): states are immutable and shared).
   *
   * @example
   * ```ts
   * import { GrammarMatcher } from "./grammar_matcher.ts";
   * const a = GrammarMatcher.fromGbnf('root ::= "ab"');
   * const b = a.clone();
   * a.advance(new Uint8Array([0x61]));
   * console.log(a.state === b.state); // false
   * ```
   */
  clone(): GrammarMatcher {
    return new GrammarMatcher(this.runtime, this.#state);
  }
}
