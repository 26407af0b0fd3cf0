/**
 * llama.cpp's pre-tokenizers for byte-level BPE (`unicode_regex_split` in
 * llama.cpp's `src/unicode.cpp`), ported line by line so that the word
 * boundaries are the ones llama.cpp draws, including where its hand-written
 * matchers differ from the regexes they stand for.
 *
 * A split works on code points and on a list of ranges (lengths in code
 * points) that earlier stages produced; each stage only cuts inside ranges.
 *
 * @module
 */

import { cpFlags, LETTER, NUMBER, PUNCTUATION, WHITESPACE } from "./_unicode.ts";

/** One stage: code points and range lengths in, finer range lengths out. */
export type SplitStage = (cps: Uint32Array, ranges: readonly number[]) => number[];

const OUT = 0xffffffff;
const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const APOS = 0x27;

// unicode_tolower restricted to what the contraction checks compare against.
function lower(cp: number): number {
  return cp >= 0x41 && cp <= 0x5a ? cp + 32 : cp;
}

/** `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` */
export const splitGpt2: SplitStage = (cps: Uint32Array, ranges: readonly number[]): number[] => {
  const out: number[] = [];
  let start = 0;
  for (const len of ranges) {
    const ini = start;
    const end = start + len;
    start = end;
    const cpt = (p: number) => (p >= ini && p < end ? cps[p] : OUT);
    const flags = (p: number) => (p >= ini && p < end ? cpFlags(cps[p]) | 0x100 : 0);
    let prev = ini;
    const add = (e: number): number => {
      const n = e - prev;
      if (n > 0) out.push(n);
      prev = e;
      return n;
    };
    for (let pos = ini; pos < end;) {
      const c = cpt(pos);
      const f = flags(pos);
      if (c === APOS && pos + 1 < end) {
        const n1 = cpt(pos + 1);
        if (n1 === 0x73 || n1 === 0x74 || n1 === 0x6d || n1 === 0x64) {
          pos += add(pos + 2);
          continue;
        }
        if (pos + 2 < end) {
          const n2 = cpt(pos + 2);
          if (
            (n1 === 0x72 && n2 === 0x65) || (n1 === 0x76 && n2 === 0x65) ||
            (n1 === 0x6c && n2 === 0x6c)
          ) {
            pos += add(pos + 3);
            continue;
          }
        }
      }
      let f2 = c === SPACE ? flags(pos + 1) : f;
      if (f2 & LETTER) {
        if (c === SPACE) pos++;
        while (f2 & LETTER) f2 = flags(++pos);
        add(pos);
        continue;
      }
      if (f2 & NUMBER) {
        if (c === SPACE) pos++;
        while (f2 & NUMBER) f2 = flags(++pos);
        add(pos);
        continue;
      }
      if (!(f2 & (WHITESPACE | LETTER | NUMBER)) && f2 !== 0) {
        if (c === SPACE) pos++;
        while (!(f2 & (WHITESPACE | LETTER | NUMBER)) && f2 !== 0) f2 = flags(++pos);
        add(pos);
        continue;
      }
      let ws = 0;
      while (flags(pos + ws) & WHITESPACE) ws++;
      if (ws > 1 && cpt(pos + ws) !== OUT) {
        pos += ws - 1;
        add(pos);
        continue;
      }
      if (ws > 0) {
        pos += ws;
        add(pos);
        continue;
      }
      add(++pos);
    }
  }
  return out;
};

function llama3Like(digitRun: number): SplitStage {
  return (cps, ranges) => {
    const out: number[] = [];
    let start = 0;
    for (const len of ranges) {
      const ini = start;
      const end = start + len;
      start = end;
      const cpt = (p: number) => (p >= ini && p < end ? cps[p] : OUT);
      const flags = (p: number) => (p >= ini && p < end ? cpFlags(cps[p]) | 0x100 : 0);
      let prev = ini;
      const add = (e: number): number => {
        const n = e - prev;
        if (n > 0) out.push(n);
        prev = e;
        return n;
      };
      for (let pos = ini; pos < end;) {
        const c = cpt(pos);
        const f = flags(pos);
        if (c === APOS && pos + 1 < end) {
          const n1 = lower(cpt(pos + 1));
          if (n1 === 0x73 || n1 === 0x74 || n1 === 0x6d || n1 === 0x64) {
            pos += add(pos + 2);
            continue;
          }
          if (pos + 2 < end) {
            const n2 = lower(cpt(pos + 2));
            if (
              (n1 === 0x72 && n2 === 0x65) || (n1 === 0x76 && n2 === 0x65) ||
              (n1 === 0x6c && n2 === 0x6c)
            ) {
              pos += add(pos + 3);
              continue;
            }
          }
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (!(c === CR || c === LF || (f & NUMBER))) {
          if ((f & LETTER) || (flags(pos + 1) & LETTER)) {
            pos++;
            while (flags(pos) & LETTER) pos++;
            add(pos);
            continue;
          }
        }
        // \p{N}{1,3} (llama3) or \p{N} (qwen2)
        if (f & NUMBER) {
          if (digitRun === 1) {
            pos++;
            add(pos);
            continue;
          }
          let ini2 = pos;
          while (flags(pos) & NUMBER) {
            if (++pos - ini2 >= digitRun) {
              add(pos);
              ini2 = pos;
            }
          }
          add(pos);
          continue;
        }
        // <space>?[^\s\p{L}\p{N}]+[\r\n]*
        let f2 = c === SPACE ? flags(pos + 1) : f;
        if (!(f2 & (WHITESPACE | LETTER | NUMBER)) && f !== 0) {
          if (c === SPACE) pos++;
          while (!(f2 & (WHITESPACE | LETTER | NUMBER)) && f2 !== 0) f2 = flags(++pos);
          let c2 = cpt(pos);
          while (c2 === CR || c2 === LF) c2 = cpt(++pos);
          add(pos);
          continue;
        }
        let ws = 0;
        let lastCrLf = 0;
        while (flags(pos + ws) & WHITESPACE) {
          const c2 = cpt(pos + ws);
          if (c2 === CR || c2 === LF) lastCrLf = pos + ws + 1;
          ws++;
        }
        if (lastCrLf > 0) {
          pos = lastCrLf;
          add(pos);
          continue;
        }
        if (ws > 1 && cpt(pos + ws) !== OUT) {
          pos += ws - 1;
          add(pos);
          continue;
        }
        if (ws > 0) {
          pos += ws;
          add(pos);
          continue;
        }
        add(++pos);
      }
    }
    return out;
  };
}

/** Llama 3's `(?i:'s|…)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`. */
export const splitLlama3: SplitStage = llama3Like(3);

/** Qwen 2's pattern: Llama 3's with single digits (`\p{N}`). */
export const splitQwen2: SplitStage = llama3Like(1);

/**
 * A stage that cuts out every leftmost, non-overlapping match of `match`
 * (which returns the match length at a position, 0 for none), as llama.cpp's
 * std::regex fallback does: matches and the text between them become ranges.
 */
export function matchStage(
  match: (cps: Uint32Array, pos: number, end: number) => number,
): SplitStage {
  return (cps, ranges) => {
    const out: number[] = [];
    let start = 0;
    for (const len of ranges) {
      const end = start + len;
      let last = start;
      for (let pos = start; pos < end;) {
        const n = match(cps, pos, end);
        if (n > 0) {
          if (pos > last) out.push(pos - last);
          out.push(n);
          pos += n;
          last = pos;
        } else {
          pos++;
        }
      }
      if (end > last) out.push(end - last);
      start = end;
    }
    return out;
  };
}

function run(pred: (cp: number) => boolean, max = Infinity) {
  return (cps: Uint32Array, pos: number, end: number): number => {
    let n = 0;
    while (pos + n < end && n < max && pred(cps[pos + n])) n++;
    return n;
  };
}

const isNumber = (cp: number) => (cpFlags(cp) & NUMBER) !== 0;

/** `\p{N}`: every number code point on its own. */
export const splitEachNumber: SplitStage = matchStage(run(isNumber, 1));
/** `\p{N}+` */
export const splitNumberRuns: SplitStage = matchStage(run(isNumber));
/** `[\p{P}\$\+<=>\^~\|]+` */
export const splitPunctRuns: SplitStage = matchStage(
  run((cp) =>
    (cpFlags(cp) & PUNCTUATION) !== 0 || cp === 0x24 || cp === 0x2b || cp === 0x3c ||
    cp === 0x3d || cp === 0x3e || cp === 0x5e || cp === 0x7e || cp === 0x7c
  ),
);
/** `[0-9][0-9][0-9]` */
export const splitThreeDigits: SplitStage = matchStage((cps, pos, end) => {
  if (pos + 3 > end) return 0;
  for (let i = 0; i < 3; i++) if (cps[pos + i] < 0x30 || cps[pos + i] > 0x39) return 0;
  return 3;
});

/** The stage lists llama.cpp uses, by its pre-tokenizer family. */
export const LLAMA_PRE_STAGES: Readonly<Record<string, readonly SplitStage[]>> = {
  default: [splitPunctRuns, splitGpt2, splitNumberRuns, splitThreeDigits],
  gpt2: [splitGpt2],
  llama3: [splitLlama3],
  qwen2: [splitQwen2],
  smollm: [splitEachNumber, splitGpt2],
};

/** Splits `cps` with the stages in turn; returns range lengths. */
export function splitWords(cps: Uint32Array, stages: readonly SplitStage[]): number[] {
  let ranges: number[] = cps.length > 0 ? [cps.length] : [];
  for (const stage of stages) ranges = stage(cps, ranges);
  return ranges;
}
