/**
 * llama.cpp's SentencePiece-style tokenizer (`llm_tokenizer_spm_session` in
 * `src/llama-vocab.cpp`): start from single characters, repeatedly merge the
 * adjacent pair whose concatenation is the highest-scoring token (ties:
 * leftmost), then spell characters no token covers as byte tokens.
 *
 * @module
 */

/** What the SPM loop needs from a vocabulary. */
export interface SpmVocab {
  /** The id of the token whose text is `s.substr(from, length)`, if any. */
  idOf(s: string, from: number, length: number): number | undefined;
  /** Score by id. */
  readonly scores: Float32Array;
  /** Length (UTF-16 code units) of the longest token. */
  readonly maxLength: number;
  /** The token for a byte, as llama.cpp's byte_to_token finds it (`<0xXX>`, else the byte as text). */
  byteToken(byte: number): number;
}

const encoder = new TextEncoder();

/** Tokenizes one fragment (already with `▁` for spaces) and appends the ids to `out`. */
export function spmTokenize(text: string, vocab: SpmVocab, out: number[]): void {
  // Symbols: one per code point, as UTF-16 start and length.
  const starts: number[] = [];
  const lens: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length &&
      (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    starts.push(i);
    lens.push(pair ? 2 : 1);
    if (pair) i++;
  }
  const n = starts.length;
  if (n === 0) return;
  const len = Int32Array.from(lens);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  // Bigram queue: max score, then smallest left index.
  const bScore: number[] = [];
  const bLeft: number[] = [];
  const bRight: number[] = [];
  const bSize: number[] = [];
  const heap: number[] = [];
  const before = (a: number, b: number) =>
    bScore[a] > bScore[b] || (bScore[a] === bScore[b] && bLeft[a] < bLeft[b]);
  const push = (e: number) => {
    let i = heap.length;
    heap.push(e);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, heap[p])) break;
      heap[i] = heap[p];
      i = p;
    }
    heap[i] = e;
  };
  const pop = (): number => {
    const top = heap[0];
    const last = heap.pop()!;
    const size = heap.length;
    if (size > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= size) break;
        const r = l + 1;
        const c = r < size && before(heap[r], heap[l]) ? r : l;
        if (!before(heap[c], last)) break;
        heap[i] = heap[c];
        i = c;
      }
      heap[i] = last;
    }
    return top;
  };
  const tryAdd = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const size = len[left] + len[right];
    if (size > vocab.maxLength) return;
    const id = vocab.idOf(text, starts[left], size);
    if (id === undefined) return;
    const e = bScore.length;
    bScore.push(vocab.scores[id]);
    bLeft.push(left);
    bRight.push(right);
    bSize.push(size);
    push(e);
  };
  for (let i = 1; i < n; i++) tryAdd(i - 1, i);
  while (heap.length > 0) {
    const e = pop();
    const left = bLeft[e];
    const right = bRight[e];
    if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== bSize[e]) continue;
    len[left] += len[right];
    len[right] = 0;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    tryAdd(prev[left], left);
    tryAdd(left, next[left]);
  }
  for (let i = 0; i >= 0; i = next[i]) {
    const id = vocab.idOf(text, starts[i], len[i]);
    if (id !== undefined) {
      out.push(id);
      continue;
    }
    for (const b of encoder.encode(text.substr(starts[i], len[i]))) out.push(vocab.byteToken(b));
  }
}
