/**
 * The merge loop of byte-pair encoding, shared by llama.cpp's BPE and the
 * Hugging Face BPE model: adjacent symbols merge lowest rank first, ties
 * leftmost first, through a binary heap over a linked list of symbols.
 *
 * A queue entry is stale once either symbol of its pair has changed.
 * llama.cpp tests that by comparing the pair's text, `tokenizers` by the id
 * the pair now merges into; since a symbol only ever grows to the right,
 * both come down to "the pair at this position still has this rank", which
 * is what is checked here.
 *
 * @module
 */

/**
 * Pair ranks and merge results, keyed by the ids of the two symbols: an
 * open-addressing hash table over typed arrays (a `Map` of half a million
 * pairs costs seconds to build and a pointer chase per lookup).
 */
export class MergeTable {
  #left = new Int32Array(1024).fill(-1);
  #right = new Int32Array(1024);
  #rank = new Int32Array(1024);
  #mask = 1023;
  #used = 0;
  #results: number[] = [];

  /** Number of ranks handed out (merges added, duplicates included). */
  get size(): number {
    return this.#results.length;
  }

  #slot(left: number, right: number): number {
    let h = (Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 0x7f4a7c15, 0x85ebca77)) >>> 0;
    h ^= h >>> 15;
    let i = h & this.#mask;
    while (this.#left[i] !== -1 && (this.#left[i] !== left || this.#right[i] !== right)) {
      i = (i + 1) & this.#mask;
    }
    return i;
  }

  #grow(): void {
    const left = this.#left;
    const right = this.#right;
    const rank = this.#rank;
    const cap = left.length * 2;
    this.#left = new Int32Array(cap).fill(-1);
    this.#right = new Int32Array(cap);
    this.#rank = new Int32Array(cap);
    this.#mask = cap - 1;
    for (let i = 0; i < left.length; i++) {
      if (left[i] === -1) continue;
      const j = this.#slot(left[i], right[i]);
      this.#left[j] = left[i];
      this.#right[j] = right[i];
      this.#rank[j] = rank[i];
    }
  }

  /**
   * Adds the merge `left + right → result` (ids ≥ 0) with the next rank. When
   * the pair is already present, `keep: "first"` (llama.cpp) leaves it alone
   * and `keep: "last"` (`tokenizers`, whose map insert overwrites) moves it to
   * the new rank.
   */
  add(left: number, right: number, result: number, keep: "first" | "last"): void {
    const rank = this.#results.length;
    this.#results.push(result);
    if ((this.#used + 1) * 2 > this.#left.length) this.#grow();
    const i = this.#slot(left, right);
    if (this.#left[i] !== -1) {
      if (keep === "last") this.#rank[i] = rank;
      return;
    }
    this.#left[i] = left;
    this.#right[i] = right;
    this.#rank[i] = rank;
    this.#used++;
  }

  /** The rank of a pair, or -1. */
  rank(left: number, right: number): number {
    const i = this.#slot(left, right);
    return this.#left[i] === -1 ? -1 : this.#rank[i];
  }

  /** The token a rank merges into. */
  result(rank: number): number {
    return this.#results[rank];
  }
}

const POS_BITS = 2 ** 26;

/**
 * Merges `ids` (one entry per initial symbol; negative ids never merge) and
 * returns the surviving ids in order.
 */
export function mergeSymbols(ids: readonly number[], table: MergeTable): number[] {
  const n = ids.length;
  if (n < 2) return ids.slice();
  if (n >= POS_BITS) throw new RangeError(`a word of ${n} symbols is too long to merge`);
  const id = Int32Array.from(ids);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  const alive = new Uint8Array(n).fill(1);
  for (let i = 0; i < n; i++) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  // Min-heap of rank * 2^26 + position.
  const heap: number[] = [];
  const push = (key: number) => {
    let i = heap.length;
    heap.push(key);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (heap[p] <= key) break;
      heap[i] = heap[p];
      i = p;
    }
    heap[i] = key;
  };
  const pop = (): number => {
    const top = heap[0];
    const last = heap.pop()!;
    const len = heap.length;
    if (len > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= len) break;
        const r = l + 1;
        const c = r < len && heap[r] < heap[l] ? r : l;
        if (heap[c] >= last) break;
        heap[i] = heap[c];
        i = c;
      }
      heap[i] = last;
    }
    return top;
  };
  const consider = (left: number) => {
    if (left < 0) return;
    const right = next[left];
    if (right < 0 || id[left] < 0 || id[right] < 0) return;
    const rank = table.rank(id[left], id[right]);
    if (rank >= 0) push(rank * POS_BITS + left);
  };
  for (let i = 0; i + 1 < n; i++) consider(i);
  while (heap.length > 0) {
    const key = pop();
    const rank = Math.floor(key / POS_BITS);
    const pos = key - rank * POS_BITS;
    if (!alive[pos]) continue;
    const right = next[pos];
    if (right < 0) continue;
    if (id[pos] < 0 || id[right] < 0 || table.rank(id[pos], id[right]) !== rank) continue;
    id[pos] = table.result(rank);
    alive[right] = 0;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;
    consider(prev[pos]);
    consider(pos);
  }
  const out: number[] = [];
  for (let i = 0; i >= 0; i = next[i]) out.push(id[i]);
  return out;
}
