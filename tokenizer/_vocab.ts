/**
 * A vocabulary's token texts held compactly: every text's UTF-16 code units in one array, and an
 * open-addressing hash table of ids over them. A JavaScript string per token and a `Map` from
 * text to id took ~19 MB of V8 heap for Gemma 3's 262,144 tokens (strings 8.5 MB, the Map's
 * table 7.3 MB, the array of strings 2.1 MB); this takes ~7 MB of typed arrays.
 *
 * @module
 */

/** The table's fill is at most one half. */
const MIN_SLOTS = 16;

/** 32-bit FNV-1a over the UTF-16 code units of `s[from, to)`. */
function hashOf(s: string, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The ids of a vocabulary by text, and the text of each id. */
export class TokenVocab {
  /** Number of tokens. */
  readonly size: number;
  /** Length (UTF-16 code units) of the longest token text. */
  readonly maxLength: number;
  readonly #units: Uint16Array;
  /** Text i is units [starts[i], starts[i + 1]). */
  readonly #starts: Uint32Array;
  /** Slot -> id + 1; 0 is empty. */
  readonly #slots: Int32Array;
  readonly #mask: number;

  /**
   * Indexes `texts` (id i has text i). A text seen before is reported by `duplicate(i, first)`,
   * which must throw.
   */
  constructor(texts: readonly string[], duplicate: (id: number, first: number) => never) {
    const n = texts.length;
    let units = 0;
    let maxLength = 0;
    for (let i = 0; i < n; i++) {
      units += texts[i].length;
      if (texts[i].length > maxLength) maxLength = texts[i].length;
    }
    if (units > 0xffff_ffff) throw new RangeError(`vocabulary: ${units} code units of text`);
    this.size = n;
    this.maxLength = maxLength;
    this.#units = new Uint16Array(units);
    this.#starts = new Uint32Array(n + 1);
    let slots = MIN_SLOTS;
    while (slots < 2 * n) slots *= 2;
    this.#slots = new Int32Array(slots);
    this.#mask = slots - 1;
    let at = 0;
    for (let i = 0; i < n; i++) {
      const t = texts[i];
      this.#starts[i] = at;
      for (let k = 0; k < t.length; k++) this.#units[at + k] = t.charCodeAt(k);
      at += t.length;
      this.#starts[i + 1] = at;
      const slot = this.#find(t, 0, t.length);
      const found = this.#slots[slot];
      if (found !== 0) duplicate(i, found - 1);
      this.#slots[slot] = i + 1;
    }
  }

  /** The slot holding `s[from, to)`, or the empty slot where it would go. */
  #find(s: string, from: number, to: number): number {
    const units = this.#units, starts = this.#starts, slots = this.#slots;
    const len = to - from;
    let slot = hashOf(s, from, to) & this.#mask;
    for (;;) {
      const e = slots[slot];
      if (e === 0) return slot;
      const a = starts[e - 1];
      if (starts[e] - a === len) {
        let k = 0;
        while (k < len && units[a + k] === s.charCodeAt(from + k)) k++;
        if (k === len) return slot;
      }
      slot = (slot + 1) & this.#mask;
    }
  }

  /** The id whose text is `s`, if any. */
  get(s: string): number | undefined {
    return this.getSlice(s, 0, s.length);
  }

  /** The id whose text is `s.substr(from, length)`, if any, without making that string. */
  getSlice(s: string, from: number, length: number): number | undefined {
    const e = this.#slots[this.#find(s, from, from + length)];
    return e === 0 ? undefined : e - 1;
  }

  /** Whether some token's text is `s`. */
  has(s: string): boolean {
    return this.getSlice(s, 0, s.length) !== undefined;
  }

  /** The text of token `id` (an integer in [0, size)). */
  text(id: number): string {
    if (!Number.isInteger(id) || id < 0 || id >= this.size) {
      throw new RangeError(`token id ${id} is outside [0, ${this.size})`);
    }
    const a = this.#starts[id], b = this.#starts[id + 1];
    let out = "";
    for (let at = a; at < b; at += 4096) {
      out += String.fromCharCode(...this.#units.subarray(at, Math.min(b, at + 4096)));
    }
    return out;
  }
}
