// The Sampler's candidate selection: the ranking of tokens (higher logit, then lower id), the
// bounded heap behind top-k and logprobs, the top-p quickselect, the greedy argmax and the
// softmax's log normalizer that logprobs use. Internal to sampling/. Nothing here allocates:
// selectTop and topPCut rearrange the caller's candidate array in place.

/** `a` ranks before `b`: a higher logit, or the same logit and a lower id. */
export function before(w: Float32Array, a: number, b: number): boolean {
  const x = w[a], y = w[b];
  return x > y || (x === y && a < b);
}

/** Sift `cand[base + i]` down a heap of `size` whose root is the candidate ranked last. */
function siftDown(cand: Int32Array, w: Float32Array, base: number, i: number, size: number): void {
  const x = cand[base + i];
  for (;;) {
    let c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && before(w, cand[base + c], cand[base + c + 1])) c++;
    if (before(w, cand[base + c], x)) break;
    cand[base + i] = cand[base + c];
    i = c;
  }
  cand[base + i] = x;
}

/**
 * Rearranges `cand[base, base + n)` so that its first `m` entries are its `m` best-ranked ids,
 * best first (a bounded heap, O(n log m), in place).
 */
export function selectTop(
  cand: Int32Array,
  w: Float32Array,
  base: number,
  n: number,
  m: number,
): void {
  for (let i = (m >> 1) - 1; i >= 0; i--) siftDown(cand, w, base, i, m);
  for (let j = base + m; j < base + n; j++) {
    if (before(w, cand[j], cand[base])) {
      const t = cand[base];
      cand[base] = cand[j];
      cand[j] = t;
      siftDown(cand, w, base, 0, m);
    }
  }
  for (let end = m - 1; end > 0; end--) {
    const t = cand[base];
    cand[base] = cand[base + end];
    cand[base + end] = t;
    siftDown(cand, w, base, 0, end);
  }
}

/**
 * Top-p cut: the smallest `c` such that the best-ranked `c` of `cand[0, n)` have mass (by
 * `mass[id]`) >= `target`, or `n` if none does (rounding). Rearranges `cand[0, n)` so that
 * those `c` come first, in no particular order. Expected O(n): quickselect by rank with
 * median-of-three pivots, summing masses as it goes; ranges of 32 or fewer, and ranges still
 * open after 64 rounds, are sorted with the heap.
 */
export function topPCut(
  cand: Int32Array,
  w: Float32Array,
  mass: Float64Array,
  n: number,
  target: number,
): number {
  let lo = 0, hi = n, acc = 0;
  for (let round = 0; hi - lo > 32 && round < 64; round++) {
    // Median of three (by rank) to the end of the range, as the pivot.
    const a = lo, b = (lo + hi) >>> 1, c = hi - 1;
    const ia = cand[a], ib = cand[b], ic = cand[c];
    const m = before(w, ia, ib)
      ? (before(w, ib, ic) ? b : before(w, ia, ic) ? c : a)
      : (before(w, ia, ic) ? a : before(w, ib, ic) ? c : b);
    const pivot = cand[m];
    cand[m] = cand[c];
    cand[c] = pivot;
    let store = lo, sum = 0;
    for (let i = lo; i < c; i++) {
      const id = cand[i];
      if (before(w, id, pivot)) {
        cand[i] = cand[store];
        cand[store++] = id;
        sum += mass[id];
      }
    }
    cand[c] = cand[store];
    cand[store] = pivot;
    sum += mass[pivot];
    // cand[lo, store) ranks before the pivot at `store`, cand(store, hi) after it.
    if (acc + sum >= target) {
      hi = store + 1;
    } else {
      acc += sum;
      lo = store + 1;
    }
  }
  if (hi > lo) selectTop(cand, w, lo, hi - lo, hi - lo);
  for (let i = lo; i < hi; i++) {
    acc += mass[cand[i]];
    if (acc >= target) return i + 1;
  }
  return hi;
}

/** The highest-logit token (lowest id on ties) among those `mask` allows (all when null); -1 if none. */
export function argmax(w: Float32Array, mask: Uint8Array | null): number {
  let best = -1, max = -Infinity;
  for (let i = 0; i < w.length; i++) {
    if (w[i] > max && (mask === null || mask[i] === 1)) {
      max = w[i];
      best = i;
    }
  }
  return best;
}

/**
 * `[max, log Σ exp(w - max)]` over w's finite entries (max -Infinity when there are none):
 * `w_i - max - logSum` keeps full precision even for huge logits.
 */
export function logNormalizer(w: Float32Array): [number, number] {
  let max = -Infinity;
  for (let i = 0; i < w.length; i++) if (w[i] > max) max = w[i];
  if (max === -Infinity) return [max, 0];
  let s = 0;
  for (let i = 0; i < w.length; i++) s += Math.exp(w[i] - max);
  return [max, Math.log(s)];
}
