/**
 * A grammar over a tokenizer's vocabulary: {@link TokenConstraint} (compiled once per grammar
 * and tokenizer) hands out a {@link TokenMatcher} per generation, which checks one token
 * cheaply ({@link TokenMatcher.allows}) and builds the full mask of allowed tokens
 * ({@link TokenMatcher.mask}) by walking a trie of the vocabulary's byte strings, pruned where
 * the grammar refuses a prefix. Masks are memoized per grammar state.
 *
 * @module
 */

import type { GrammarProgram } from "./compile_grammar.ts";
import { GrammarRuntime, type MatchState } from "./grammar_matcher.ts";

/**
 * What the constraint needs of a tokenizer.
 *
 * @example
 * ```ts
 * import type { ConstraintTokenizer } from "./token_constraint.ts";
 * const t: ConstraintTokenizer = {
 *   vocabSize: 2,
 *   tokenBytes: (id) => new TextEncoder().encode(id === 0 ? "a" : ""),
 *   isEog: (id) => id === 1,
 *   isSpecial: (id) => id === 1,
 * };
 * ```
 */
export interface ConstraintTokenizer {
  /** Number of token ids. */
  readonly vocabSize: number;
  /** The bytes a token stands for. */
  tokenBytes(id: number): Uint8Array;
  /** End-of-generation tokens. */
  isEog(id: number): boolean;
  /** Control tokens (never produced under a constraint, except end-of-generation ones). */
  isSpecial(id: number): boolean;
}

/**
 * The vocabulary as a trie of byte strings in flat arrays: node `n`'s children are
 * `childByte/childNode[childStart[n] .. childStart[n + 1])`, the tokens ending at it
 * `tokens[tokStart[n] .. tokStart[n + 1])`. Built once per tokenizer.
 */
export class TokenTrie {
  /** Number of token ids. */
  readonly vocabSize: number;
  /** Per node, where its children start in `childByte`/`childNode` (one extra entry at the end). */
  readonly childStart: Int32Array;
  /** Each child's byte. */
  readonly childByte: Uint8Array;
  /** Each child's node. */
  readonly childNode: Int32Array;
  /** Per node, where the tokens ending at it start in `tokens` (one extra entry at the end). */
  readonly tokStart: Int32Array;
  /** Token ids, grouped by the node they end at. */
  readonly tokens: Int32Array;
  /** The bytes of each token (empty for control and empty tokens). */
  readonly bytes: readonly Uint8Array[];
  /** End-of-generation token ids. */
  readonly eog: Int32Array;
  /** 1 for end-of-generation tokens. */
  readonly isEog: Uint8Array;

  /**
   * Builds the trie of a tokenizer's vocabulary (control tokens and empty tokens left out).
   *
   * @param t The tokenizer.
   *
   * @example
   * ```ts
   * import { TokenTrie } from "./token_constraint.ts";
   * const enc = new TextEncoder();
   * const words = ["a", "ab", "b"];
   * const trie = new TokenTrie({
   *   vocabSize: 3,
   *   tokenBytes: (id) => enc.encode(words[id]),
   *   isEog: () => false,
   *   isSpecial: () => false,
   * });
   * console.log(trie.childStart.length - 1); // 4 nodes: root, a, ab, b
   * ```
   */
  constructor(t: ConstraintTokenizer) {
    const n = t.vocabSize;
    this.vocabSize = n;
    const bytes: Uint8Array[] = new Array(n);
    const eog: number[] = [];
    this.isEog = new Uint8Array(n);
    const empty = new Uint8Array(0);
    const order: number[] = [];
    for (let id = 0; id < n; id++) {
      if (t.isEog(id)) {
        eog.push(id);
        this.isEog[id] = 1;
      }
      bytes[id] = t.isSpecial(id) ? empty : t.tokenBytes(id);
      if (bytes[id].length > 0) order.push(id);
    }
    this.bytes = bytes;
    this.eog = Int32Array.from(eog);
    // Sorted by byte strings: as one-byte-per-unit strings, whose order is the bytes' order.
    const keys = new Array<string>(n);
    for (const id of order) keys[id] = String.fromCharCode(...bytes[id]);
    order.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
    // Nodes in depth-first order from the sorted strings: each string adds the nodes past its
    // common prefix with the previous one.
    const parent: number[] = [-1];
    const byteOf: number[] = [0];
    const tokNode: number[] = new Array(order.length);
    const path: number[] = [0];
    let prev: Uint8Array = empty;
    for (let k = 0; k < order.length; k++) {
      const b = bytes[order[k]];
      let common = 0;
      while (common < prev.length && common < b.length && prev[common] === b[common]) common++;
      path.length = common + 1;
      for (let i = common; i < b.length; i++) {
        const node = parent.length;
        parent.push(path[i]);
        byteOf.push(b[i]);
        path.push(node);
      }
      tokNode[k] = path[b.length];
      prev = b;
    }
    const nodes = parent.length;
    const childCount = new Int32Array(nodes + 1);
    for (let i = 1; i < nodes; i++) childCount[parent[i]]++;
    this.childStart = new Int32Array(nodes + 1);
    for (let i = 0; i < nodes; i++) this.childStart[i + 1] = this.childStart[i] + childCount[i];
    this.childByte = new Uint8Array(nodes);
    this.childNode = new Int32Array(nodes);
    const fill = this.childStart.slice(0, nodes);
    for (let i = 1; i < nodes; i++) {
      const p = parent[i];
      this.childByte[fill[p]] = byteOf[i];
      this.childNode[fill[p]++] = i;
    }
    const tokCount = new Int32Array(nodes);
    for (const node of tokNode) tokCount[node]++;
    this.tokStart = new Int32Array(nodes + 1);
    for (let i = 0; i < nodes; i++) this.tokStart[i + 1] = this.tokStart[i] + tokCount[i];
    this.tokens = new Int32Array(order.length);
    const tfill = this.tokStart.slice(0, nodes);
    for (let k = 0; k < order.length; k++) this.tokens[tfill[tokNode[k]]++] = order[k];
  }
}

const tries = new WeakMap<ConstraintTokenizer, TokenTrie>();

/**
 * The {@link TokenTrie} of a tokenizer, built on first use and cached per tokenizer object.
 *
 * @example
 * ```ts
 * import { tokenTrie } from "./token_constraint.ts";
 * const t = { vocabSize: 1, tokenBytes: () => new Uint8Array([0x61]), isEog: () => false, isSpecial: () => false };
 * console.log(tokenTrie(t) === tokenTrie(t)); // true
 * ```
 */
export function tokenTrie(t: ConstraintTokenizer): TokenTrie {
  let trie = tries.get(t);
  if (trie === undefined) {
    trie = new TokenTrie(t);
    tries.set(t, trie);
  }
  return trie;
}

const MIN_CP = [0, 0, 0x80, 0x800, 0x10000];

/**
 * Masks kept memoized, across every constraint of the process (each is vocabSize bytes: 19 MiB
 * for 128 masks of a 151,936-token vocabulary); the oldest is dropped first.
 */
const MAX_CACHED_MASKS = 128;
const cachedMasks: MatchState[] = [];

/**
 * A grammar compiled against a tokenizer: shared by every generation that uses it (its
 * transitions and masks are memoized across them). {@link TokenConstraint.matcher} starts a
 * generation.
 *
 * @example
 * ```ts
 * import { compileGrammar, TokenConstraint } from "./mod.ts";
 * const enc = new TextEncoder();
 * const words = ["1", "2", "+", "x", "<eos>"];
 * const c = new TokenConstraint(compileGrammar('root ::= [0-9] ("+" [0-9])*'), {
 *   vocabSize: words.length,
 *   tokenBytes: (id) => enc.encode(words[id]),
 *   isEog: (id) => id === 4,
 *   isSpecial: (id) => id === 4,
 * });
 * const m = c.matcher();
 * console.log(m.allows(0), m.allows(2), m.allows(4)); // true false false
 * m.accept(0);
 * console.log([...m.mask()]); // [0, 0, 1, 0, 1]
 * ```
 */
export class TokenConstraint {
  /** The grammar's runtime. */
  readonly runtime: GrammarRuntime;
  /** The vocabulary trie. */
  readonly trie: TokenTrie;

  /**
   * Prepares a grammar for a vocabulary (the trie is shared per tokenizer).
   *
   * @example
   * ```ts ignore
   * const c = new TokenConstraint(compileGrammar('root ::= "x"'), tokenizer);
   * ```
   *
   * @param program The compiled grammar.
   * @param tokenizer The vocabulary.
   * @throws {GrammarError} If the grammar's start state is too ambiguous.
   */
  constructor(program: GrammarProgram, tokenizer: ConstraintTokenizer) {
    this.runtime = new GrammarRuntime(program);
    this.trie = tokenTrie(tokenizer);
  }

  /**
   * Number of token ids.
   *
   * @example
   * ```ts ignore
   * console.log(constraint.vocabSize);
   * ```
   */
  get vocabSize(): number {
    return this.trie.vocabSize;
  }

  /**
   * A fresh matcher, at the start of the output.
   *
   * @example
   * ```ts ignore
   * const m = constraint.matcher();
   * ```
   */
  matcher(): TokenMatcher {
    return new TokenMatcher(this, this.runtime.start);
  }

  /** @internal The state after token `id` from `s`, or null. */
  stepToken(s: MatchState, id: number): MatchState | null {
    const trie = this.trie;
    if (trie.isEog[id] === 1) return s.accepting ? s : null;
    const b = trie.bytes[id];
    if (b === undefined || b.length === 0) return null;
    const rt = this.runtime;
    let t: MatchState | null = s;
    for (let i = 0; i < b.length && t !== null; i++) t = rt.step(t, b[i]);
    return t;
  }

  /** @internal The memoized mask of state `s`. */
  maskOf(s: MatchState): Uint8Array {
    if (s.mask !== undefined) return s.mask;
    const trie = this.trie;
    const rt = this.runtime;
    const mask = new Uint8Array(trie.vocabSize);
    if (s.accepting) { for (const id of trie.eog) mask[id] = 1; }
    const { childStart, childByte, childNode, tokStart, tokens } = trie;
    // Depth-first over the trie, carrying the matcher state of each node's path: a full state,
    // and within a character its bits so far, packed as acc * 64 + need * 8 + len (light: no
    // state objects for the many partial characters of a large vocabulary).
    const nodeStack: number[] = [0];
    const stateStack: MatchState[] = [s.base];
    const partStack: number[] = [s.need === 0 ? 0 : s.acc * 64 + s.need * 8 + s.len];
    while (nodeStack.length > 0) {
      const node = nodeStack.pop()!;
      const st = stateStack.pop()!;
      const part = partStack.pop()!;
      const end = childStart[node + 1];
      let trans = st.trans;
      for (let c = childStart[node]; c < end; c++) {
        const b = childByte[c];
        let next: MatchState | null | undefined = st;
        let nextPart = 0;
        if (part === 0) {
          if (b < 0x80) {
            next = trans === undefined ? undefined : trans[b];
            if (next === undefined) {
              next = rt.step(st, b);
              trans = st.trans;
            }
          } else {
            let acc: number, need: number, len: number;
            if (b >= 0xc2 && b <= 0xdf) [acc, need, len] = [b & 0x1f, 1, 2];
            else if (b >= 0xe0 && b <= 0xef) [acc, need, len] = [b & 0x0f, 2, 3];
            else if (b >= 0xf0 && b <= 0xf4) [acc, need, len] = [b & 0x07, 3, 4];
            else continue;
            if (!rt.partialOk(st, acc, need, len)) continue;
            nextPart = acc * 64 + need * 8 + len;
          }
        } else {
          if ((b & 0xc0) !== 0x80) continue;
          const len = part & 7, need = ((part >> 3) & 7) - 1;
          const acc = (Math.floor(part / 64) << 6) | (b & 0x3f);
          if (need === 0) {
            if (acc < MIN_CP[len] || acc > 0x10ffff || (acc >= 0xd800 && acc <= 0xdfff)) continue;
            next = rt.charStep(st, acc);
          } else {
            if (!rt.partialOk(st, acc, need, len)) continue;
            nextPart = acc * 64 + need * 8 + len;
          }
        }
        if (next === null) continue;
        const child = childNode[c];
        for (let k = tokStart[child], e = tokStart[child + 1]; k < e; k++) mask[tokens[k]] = 1;
        if (childStart[child + 1] > childStart[child]) {
          nodeStack.push(child);
          stateStack.push(next);
          partStack.push(nextPart);
        }
      }
    }
    s.mask = mask;
    cachedMasks.push(s);
    if (cachedMasks.length > MAX_CACHED_MASKS) cachedMasks.shift()!.mask = undefined;
    return mask;
  }
}

/**
 * One generation's position in a {@link TokenConstraint}: which tokens may come next, and the
 * tokens taken so far.
 *
 * @example
 * ```ts ignore
 * const m = constraint.matcher();
 * if (m.allows(id)) m.accept(id);
 * ```
 */
export class TokenMatcher {
  readonly #c: TokenConstraint;
  #s: MatchState;

  /** @internal Use {@link TokenConstraint.matcher}. */
  constructor(c: TokenConstraint, s: MatchState) {
    this.#c = c;
    this.#s = s;
  }

  /**
   * Token `id` can come next (an end-of-generation token only where the output is complete).
   *
   * @example
   * ```ts ignore
   * if (m.allows(id)) m.accept(id);
   * ```
   */
  allows(id: number): boolean {
    return this.#c.stepToken(this.#s, id) !== null;
  }

  /**
   * 1 for every token that can come next, 0 otherwise (memoized per state: do not modify).
   *
   * @example
   * ```ts ignore
   * const allowed = m.mask();
   * ```
   */
  mask(): Uint8Array {
    return this.#c.maskOf(this.#s);
  }

  /**
   * Takes token `id`.
   *
   * @example
   * ```ts ignore
   * m.accept(id);
   * ```
   *
   * @throws {RangeError} If the grammar does not allow it.
   */
  accept(id: number): void {
    const next = this.#c.stepToken(this.#s, id);
    if (next === null) throw new RangeError(`TokenMatcher.accept: token ${id} is not allowed here`);
    this.#s = next;
  }

  /**
   * The output so far is complete.
   *
   * @example
   * ```ts ignore
   * if (m.isAccepting() && !m.canContinue()) stop();
   * ```
   */
  isAccepting(): boolean {
    return this.#s.accepting;
  }

  /**
   * More output can follow.
   *
   * @example
   * ```ts ignore
   * console.log(m.canContinue());
   * ```
   */
  canContinue(): boolean {
    return this.#s.canContinue;
  }

  /**
   * An independent copy (O(1)).
   *
   * @example
   * ```ts ignore
   * const saved = m.clone();
   * ```
   */
  clone(): TokenMatcher {
    return new TokenMatcher(this.#c, this.#s);
  }
}
