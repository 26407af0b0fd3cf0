/**
 * GBNF for JSON numbers and integers within bounds, exactly: digit-range grammars for the
 * integer part (as llama.cpp's json-schema-to-grammar builds them) and, for non-integers,
 * digit-by-digit comparisons of the fraction against the bounds' fractions where the integer
 * part equals a bound's. Bounded numbers are written without an exponent.
 *
 * @module
 */

/** Most digits of an integer part (magnitudes below 10^16). */
export const MAX_INT_DIGITS = 16;
/** Fraction digits of an output: runs of free digits are bounded by this (a model cannot loop). */
export const MAX_FRACTION_DIGITS = 16;
const FREE = `[0-9]{0,${MAX_FRACTION_DIGITS}}`;
const FREE1 = `[0-9]{1,${MAX_FRACTION_DIGITS}}`;
/** Most fraction digits a bound may have. */
const MAX_BOUND_FRACTION = 40;
const LIMIT = 10n ** BigInt(MAX_INT_DIGITS);

/** A non-negative decimal: integer part and fraction digits without trailing zeros. */
export interface Dec {
  int: bigint;
  frac: string;
}

/** The exact decimal of |x| (finite). Null when its integer part is 10^16 or more. */
export function decOf(x: number): Dec | null {
  const a = Math.abs(x);
  if (a >= 1e16) return null;
  // toPrecision/toString may use an exponent; rebuild the plain digits from it.
  const [mant, expS] = a.toExponential().split("e");
  const exp = Number(expS);
  const digits = mant.replace(".", "");
  const point = 1 + exp; // digits before the decimal point
  let intPart: string, frac: string;
  if (point <= 0) {
    intPart = "0";
    frac = "0".repeat(-point) + digits;
  } else if (point >= digits.length) {
    intPart = digits + "0".repeat(point - digits.length);
    frac = "";
  } else {
    intPart = digits.slice(0, point);
    frac = digits.slice(point);
  }
  frac = frac.replace(/0+$/, "");
  if (frac.length > MAX_BOUND_FRACTION) {
    throw new RangeError(`a bound with more than ${MAX_BOUND_FRACTION} fraction digits`);
  }
  return { int: BigInt(intPart), frac };
}

const ANY = "[0-9]";

function digitClass(a: number, b: number): string {
  return a === b ? `"${a}"` : `[${a}-${b}]`;
}

function rep(n: number): string {
  return n === 0 ? "" : n === 1 ? ANY : `${ANY}{${n}}`;
}

/** Same-length digit strings >= s. */
function geq(s: string): string {
  if (s === "") return '""';
  if (/^0*$/.test(s)) return rep(s.length);
  const d = Number(s[0]);
  const alts = [`"${d}" ${geq(s.slice(1))}`];
  if (d < 9) alts.push(`${digitClass(d + 1, 9)} ${rep(s.length - 1)}`);
  return "(" + alts.join(" | ") + ")";
}

/** Same-length digit strings <= s. */
function leq(s: string): string {
  if (s === "") return '""';
  if (/^9*$/.test(s)) return rep(s.length);
  const d = Number(s[0]);
  const alts = [`"${d}" ${leq(s.slice(1))}`];
  if (d > 0) alts.push(`${digitClass(0, d - 1)} ${rep(s.length - 1)}`);
  return "(" + alts.join(" | ") + ")";
}

/** Same-length digit strings in [lo, hi]. */
function fixedRange(lo: string, hi: string): string {
  let i = 0;
  while (i < lo.length && lo[i] === hi[i]) i++;
  const prefix = lo.slice(0, i);
  const p = prefix === "" ? "" : `"${prefix}" `;
  if (i === lo.length) return `"${lo}"`;
  const a = Number(lo[i]), b = Number(hi[i]);
  const rest = lo.length - i - 1;
  const alts = [`"${a}" ${geq(lo.slice(i + 1))}`];
  if (b - a > 1) alts.push(`${digitClass(a + 1, b - 1)} ${rep(rest)}`);
  alts.push(`"${b}" ${leq(hi.slice(i + 1))}`);
  return `(${p}(${alts.join(" | ")}))`;
}

/**
 * GBNF for JSON integer magnitudes (no sign, no leading zeros) in [a, b] (b null: no upper
 * bound but 16 digits); null if empty.
 */
export function uintRange(a: bigint, b: bigint | null): string | null {
  const hi = b === null || b >= LIMIT ? LIMIT - 1n : b;
  if (a > hi) return null;
  const alts: string[] = [];
  for (let n = String(a).length; n <= String(hi).length; n++) {
    const low = n === 1 ? 0n : 10n ** BigInt(n - 1);
    const high = 10n ** BigInt(n) - 1n;
    const lo = a > low ? a : low;
    const h = hi < high ? hi : high;
    if (lo > h) continue;
    alts.push(fixedRange(String(lo), String(h)));
  }
  return alts.length === 1 ? alts[0] : "(" + alts.join(" | ") + ")";
}

/**
 * GBNF for non-empty fraction digit strings F with lo <= 0.F <= hi (either bound absent;
 * `loExcl`/`hiExcl` make it strict); null if none.
 */
export function fracRange(
  lo: string | null,
  loExcl: boolean,
  hi: string | null,
  hiExcl: boolean,
): string | null {
  const L = lo?.length ?? 0, H = hi?.length ?? 0;
  const top = Math.max(L, H);
  const gen = (i: number, tl: boolean, th: boolean): string | null => {
    const first = i === 0;
    if (i >= top) {
      const zeros = first ? `"0"{1,${MAX_FRACTION_DIGITS}}` : `"0"{0,${MAX_FRACTION_DIGITS}}`;
      if (tl && th) return loExcl || hiExcl ? null : zeros;
      if (tl) return loExcl ? `"0"{0,${MAX_FRACTION_DIGITS}} [1-9] ${FREE}` : first ? FREE1 : FREE;
      if (th) return hiExcl ? null : zeros;
      return first ? FREE1 : FREE;
    }
    if (!tl && !th) return first ? FREE1 : FREE;
    const alts: string[] = [];
    // Ending here: F (padded with zeros) compared with the bounds.
    if (!first) {
      const okLo = !tl || (i >= L && !loExcl);
      const okHi = !th || i < H || !hiExcl;
      if (okLo && okHi) alts.push('""');
    }
    const l = tl ? (i < L ? Number(lo![i]) : 0) : 0;
    const h = th ? (i < H ? Number(hi![i]) : 0) : 9;
    if (l > h) return alts.length === 0 ? null : alts.join(" | ");
    for (const c of new Set([l, h])) {
      const next = gen(i + 1, tl && c === l, th && c === h);
      if (next !== null) alts.push(`"${c}" ${next}`);
    }
    if (h - l > 1) alts.push(`${digitClass(l + 1, h - 1)} ${FREE}`);
    return alts.length === 0 ? null : "(" + alts.join(" | ") + ")";
  };
  return gen(0, lo !== null, hi !== null);
}

/** A bound of a magnitude range. */
interface MagBound {
  dec: Dec;
  excl: boolean;
}

/** GBNF for JSON number magnitudes (integer part, optional fraction) in [lo, hi]; null if none. */
function magRange(lo: MagBound, hi: MagBound | null): string | null {
  const alts: string[] = [];
  const frac = (f: string | null) => f === null ? null : `"." ${f}`;
  const join = (intG: string | null, f: string | null, intOnly: boolean) => {
    if (intG === null) return;
    const parts: string[] = [];
    if (intOnly) parts.push('""');
    if (f !== null) parts.push(f);
    if (parts.length > 0) alts.push(`${intG} (${parts.join(" | ")})`);
  };
  const L = lo.dec.int, H = hi?.dec.int ?? null;
  if (H !== null && L > H) return null;
  if (H !== null && L === H) {
    join(
      uintRange(L, L),
      frac(fracRange(lo.dec.frac, lo.excl, hi!.dec.frac, hi!.excl)),
      lo.dec.frac === "" && !lo.excl && (hi!.dec.frac !== "" || !hi!.excl),
    );
  } else {
    join(
      uintRange(L, L),
      frac(fracRange(lo.dec.frac, lo.excl, null, false)),
      lo.dec.frac === "" && !lo.excl,
    );
    join(uintRange(L + 1n, H === null ? null : H - 1n), `"." ${FREE1}`, true);
    if (H !== null) {
      join(
        uintRange(H, H),
        frac(fracRange(null, false, hi!.dec.frac, hi!.excl)),
        hi!.dec.frac !== "" || !hi!.excl,
      );
    }
  }
  return alts.length === 0 ? null : "(" + alts.join(" | ") + ")";
}

/** A bound as the schema gives it. */
export interface NumBound {
  value: number;
  excl: boolean;
}

const ZERO: Dec = { int: 0n, frac: "" };

/**
 * GBNF for JSON numbers in the bounds (no exponent); null if none can be written. A lower
 * bound at or beyond -10^16 or an upper one at or beyond 10^16 counts as none.
 *
 * @throws {RangeError} If a bound has more than 40 fraction digits or cannot be reached within
 *   16 integer digits.
 */
export function numberRange(min: NumBound | null, max: NumBound | null): string | null {
  const decOrNull = (b: NumBound | null) => b === null ? null : decOf(b.value);
  const minD = decOrNull(min), maxD = decOrNull(max);
  const lowOpen = min === null || (minD === null && min.value < 0);
  const highOpen = max === null || (maxD === null && max.value > 0);
  if (!lowOpen && minD === null) throw new RangeError("a lower bound of 10^16 or more");
  if (!highOpen && maxD === null) throw new RangeError("an upper bound of -10^16 or less");
  const alts: string[] = [];
  // Negative values: "-" then magnitudes m = -x, m > 0.
  const minNeg = !lowOpen && min!.value < 0;
  if (lowOpen || minNeg) {
    let mlo: MagBound;
    if (!highOpen && max!.value < 0) mlo = { dec: maxD!, excl: max!.excl };
    else mlo = { dec: ZERO, excl: true };
    const mhi: MagBound | null = lowOpen ? null : { dec: minD!, excl: min!.excl };
    const g = magRange(mlo, mhi);
    if (g !== null) alts.push(`"-" ${g}`);
  }
  // Values >= 0.
  if (highOpen || max!.value >= 0) {
    const plo: MagBound = lowOpen || min!.value < 0
      ? { dec: ZERO, excl: false }
      : { dec: minD!, excl: min!.excl };
    const phi: MagBound | null = highOpen ? null : { dec: maxD!, excl: max!.excl };
    const g = magRange(plo, phi);
    if (g !== null) alts.push(g);
  }
  return alts.length === 0 ? null : "(" + alts.join(" | ") + ")";
}

/**
 * GBNF for JSON integers in [lo, hi] (null: unbounded, within 16 digits); null if none.
 */
export function intRange(lo: bigint | null, hi: bigint | null): string | null {
  const alts: string[] = [];
  if (lo === null || lo < 0n) {
    const mlo = hi !== null && hi < 0n ? -hi : 1n;
    const g = uintRange(mlo, lo === null ? null : -lo);
    if (g !== null) alts.push(`"-" ${g}`);
  }
  if (hi === null || hi >= 0n) {
    const g = uintRange(lo === null || lo < 0n ? 0n : lo, hi);
    if (g !== null) alts.push(g);
  }
  return alts.length === 0 ? null : "(" + alts.join(" | ") + ")";
}
