/**
 * Writing GBNF text: literals and character classes with every special character escaped, and
 * a JSON-string view of a set of code points (the escapes a JSON string needs for them).
 *
 * @module
 */

function esc(cp: number, inClass: boolean): string {
  if (cp === 0x22) return '\\"';
  if (cp === 0x5c) return "\\\\";
  if (inClass && (cp === 0x5d || cp === 0x5b || cp === 0x2d || cp === 0x5e)) {
    return "\\" + String.fromCodePoint(cp);
  }
  if (cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp === 0x2028 || cp === 0x2029) {
    return "\\x" + cp.toString(16).padStart(2, "0");
  }
  if (cp > 0xffff) return "\\U" + cp.toString(16).padStart(8, "0");
  if (cp >= 0xd800 && cp <= 0xdfff) return "\\u" + cp.toString(16).padStart(4, "0");
  return String.fromCodePoint(cp);
}

/** GBNF literal for a string. */
export function lit(s: string): string {
  let out = '"';
  for (const ch of s) out += esc(ch.codePointAt(0)!, false);
  return out + '"';
}

/** GBNF class for sorted inclusive `[lo, hi]` pairs. */
export function cls(ranges: readonly number[]): string {
  let out = "[";
  for (let i = 0; i < ranges.length; i += 2) {
    out += esc(ranges[i], true);
    if (ranges[i + 1] !== ranges[i]) out += "-" + esc(ranges[i + 1], true);
  }
  return out + "]";
}

/** Intersection of normalized ranges. */
export function intersect(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    const lo = Math.max(a[i], b[j]), hi = Math.min(a[i + 1], b[j + 1]);
    if (lo <= hi) out.push(lo, hi);
    if (a[i + 1] < b[j + 1]) i += 2;
    else j += 2;
  }
  return out;
}

/** Code points a JSON string may hold unescaped (no quote, backslash or control). */
export const PLAIN: readonly number[] = [0x20, 0x21, 0x23, 0x5b, 0x5d, 0xd7ff, 0xe000, 0x10ffff];

const SHORT: Record<number, string> = { 8: "b", 9: "t", 10: "n", 12: "f", 13: "r" };

/**
 * GBNF for one JSON-string character (as written in JSON text) whose decoded value is a code
 * point in `ranges`: the plain ones as themselves, a quote, a backslash and control characters
 * by their JSON escapes. Null when `ranges` is empty.
 */
export function jsonChars(ranges: readonly number[]): string | null {
  const alts: string[] = [];
  const plain = intersect(ranges, PLAIN);
  if (plain.length > 0) alts.push(cls(plain));
  const has = (cp: number) => intersect(ranges, [cp, cp]).length > 0;
  if (has(0x22)) alts.push(lit('\\"'));
  if (has(0x5c)) alts.push(lit("\\\\"));
  const ctl = intersect(ranges, [0, 0x1f]);
  for (let i = 0; i < ctl.length; i += 2) {
    for (let c = ctl[i]; c <= ctl[i + 1]; c++) {
      alts.push(
        lit(SHORT[c] !== undefined ? "\\" + SHORT[c] : "\\u" + c.toString(16).padStart(4, "0")),
      );
    }
  }
  if (alts.length === 0) return null;
  return alts.length === 1 ? alts[0] : "(" + alts.join(" | ") + ")";
}
