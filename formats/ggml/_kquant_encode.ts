// Internals of formats/ggml: the Q4_K, Q5_K and Q6_K encoders, ports of ggml's C reference
// quantizers `quantize_row_q4_K_ref`, `quantize_row_q5_K_ref` and `quantize_row_q6_K_ref`
// (ggml/src/ggml-quants.c, llama.cpp commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f as vendored
// by PyPI llama_cpp_python 0.3.36), which llama.cpp's quantizer runs for a tensor without an
// importance matrix. Not part of the public API: reach them through quantizeRow.
//
// Bit-exactness: ggml-quants.c is part of ggml-base, which llama.cpp builds without -march flags,
// so on x86-64 every float operation is a separately rounded IEEE f32 operation (no FMA, no
// reassociation). Here each operation is a double operation rounded with Math.fround, which gives
// the same f32 result for + - * / and sqrt of f32 operands. Conditions are written as in C,
// including NaN behaviour (`if (!d)` in C is true only for ±0, so it is `d === 0` here), because
// huge inputs make ggml's search overflow to Infinity and NaN and the bytes must still agree.

import { f16Decode, f32ToF16Bits } from "../../reference/f16.ts";

const fr = Math.fround;

/** ggml's GROUP_MAX_EPS (1e-15f). */
const GROUP_MAX_EPS = fr(1e-15);
/** 0.1f. */
const RDELTA = fr(0.1);
/** 1.5 * 2^23: adding it to an f32 |v| < 2^22 leaves round-half-even(v) in the low mantissa. */
const MAGIC = 12582912;

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** 1.5 * 2^52: adding and subtracting it rounds a double to an integer, ties to even. */
const RNE_SHIFT = 6755399441055744;

/**
 * ggml's `nearest_int`: `fval + 12582912.f` in f32, then the low 23 mantissa bits minus 2^22.
 * That is round-half-to-even for |v| < 4194303 (computed here in double, without the f32
 * rounding); beyond that (ggml only asserts in debug builds) and for ±Infinity and NaN the bit
 * formula is applied as the C code does. `v` must already be an f32 value.
 */
function nearestInt(v: number): number {
  if (v > -4194303 && v < 4194303) return ((v + RNE_SHIFT) - RNE_SHIFT) | 0;
  f32Scratch[0] = v + MAGIC; // stored as f32: the C sum
  return (u32Scratch[0] & 0x7fffff) - 0x400000;
}

// Scratch for one 256-value super-block (no allocation per call).
const L = new Uint8Array(256);
const LAUX = new Uint8Array(32);
const W = new Float32Array(32);
const SCALES = new Float32Array(16);
const MINS = new Float32Array(8);
const LS = new Uint8Array(8);
const LM = new Uint8Array(8);
const SC6 = new Int8Array(16);
// Per-element caches of make_qkx2_quants' trial loop (f32 values held as doubles): x - min for
// the current min, and w*l, w*l*l, w*l*x for the element's level in LAUX.
const XM = new Float64Array(32);
const WL = new Float64Array(32);
const WLL = new Float64Array(32);
const WLX = new Float64Array(32);
// Partial sums of WL, WLL and WLX over elements 0..i for the last trial's levels.
const PL = new Float64Array(32);
const PL2 = new Float64Array(32);
const PXL = new Float64Array(32);
// TH[i]: while iscale * XM[i] < TH[i], element i keeps its level. Between changes of min, XM
// and max - min are fixed and iscale only grows from trial to trial, so for XM >= 0 the level
// (round-half-even of the f32 product, clamped) never decreases, and it cannot reach l + 1
// while the exact product is below l + 0.5 - 2^-16 (the f32 rounding moves a value below 32
// by at most 2^-20); a level at nmax stays (TH = Infinity), and XM < 0 gives level 0 for good.
// NaN and ±Infinity products fail the test and take the exact path.
const TH = new Float64Array(32);
const TH_BELOW = 0.5 - 2 ** -16;
// The screening bound of makeQkx2Quants. In f32 the error term of element i is
// t_i = f32(w_i * f32(d_i * d_i)) with d_i = f32(b_i - x_i), b_i = f32(f32(s * l_i) + m). Computed
// in double, s*l_i is exact and s*l_i + m - x_i is within 2^-52 (|s*l_i| + |m| + |x_i|) of the
// exact value; b_i is within 2^-22 (|s*l_i| + |m|) + 2^-150 of s*l_i + m (two f32 roundings, one
// a product that may be subnormal). So with g_i = |s*l_i + m - x_i| - ERR_SLACK (|s*l_i| + |m|
// + |x_i|) - 2^-148 (in double), |b_i - x_i| >= g_i. Each f32 rounding after that loses at most a
// factor (1 - u), u = 2^-24, or 2^-150 absolute for a subnormal product, and the f32 sum of 32
// terms >= 0 at most (1 - u)^32, so the f32 error is >= (1 - 2^-18) sum(w_i g_i^2)
// - (sum(w) + 32) 2^-149 for the g_i > 0 (sum(w) <= (1 + 2^-19) sumW; the double roundings of
// the bound are far inside the margins). Non-finite scale, min or weights make the f32 error
// Infinity or NaN, which never wins; then the bound is NaN (exact path) or the trial loses,
// as in C.
const ERR_SLACK = 2 ** -21;
// scale * l + min for each level l of the current trial, computed on first use (tag = trial).
const DIFF_BASE = new Float64Array(32);
const DIFF_TAG = new Int32Array(32);
let diffTrial = 0;
/** The `*the_min` output of {@link makeQkx2Quants}. */
let theMin = 0;

/**
 * `make_qkx2_quants(32, nmax, x + o, W, L + lo, &theMin, LAUX, rmin, 0.1f, nstep, false)`:
 * searches a scale and a min (`x ≈ scale * l - theMin`, `l` in 0..nmax) minimizing the
 * W-weighted squared error over `nstep + 1` trial scales. Returns the scale.
 *
 * Every value the C code computes is computed here with the same operands in the same order;
 * what is not recomputed is only what provably has the same value:
 * - `x - min` is kept per element until `min` changes; `w*l`, `w*l*l` and `w*l*x` are kept per
 *   element until its level changes; `scale*l + min` is computed once per level and trial.
 * - A level is recomputed only when the trial scale has grown enough to change it (`TH`).
 * - The sums restart at the first element whose level changed: the partial sums before it are
 *   those of the previous trial.
 * - A trial whose levels all equal the previous trial's has the same sums, scale, min and error
 *   as that trial, which either set bestError to that error or lost to it, so it cannot win and
 *   is skipped.
 * - The error is a sum of terms `w * diff^2 >= 0`; adding a term >= 0 never lowers an f32 sum,
 *   so once the partial sum reaches bestError the trial cannot win and its loop stops. Before
 *   it, a lower bound computed in double (no f32 rounding, see `ERR_SLACK`) settles most
 *   losing trials without the f32 sum.
 */
function makeQkx2Quants(
  x: Float32Array,
  o: number,
  lo: number,
  nmax: number,
  rmin: number,
  nstep: number,
): number {
  const n = 32;
  let min = x[o];
  let max = x[o];
  const sumW0 = W[0];
  let sumW = sumW0;
  let sumX = fr(sumW0 * x[o]);
  for (let i = 1; i < n; i++) {
    const xi = x[o + i];
    if (xi < min) min = xi;
    if (xi > max) max = xi;
    const w = W[i];
    sumW = fr(sumW + w);
    sumX = fr(sumX + fr(w * xi));
  }
  if (min > 0) min = 0;
  if (max === min) {
    for (let i = 0; i < n; i++) L[lo + i] = 0;
    theMin = -min;
    return 0;
  }
  let iscale = fr(nmax / fr(max - min));
  let scale = fr(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const xi = x[o + i];
    const xm = fr(xi - min);
    XM[i] = xm;
    let l = nearestInt(fr(iscale * xm));
    l = l > nmax ? nmax : l < 0 ? 0 : l;
    L[lo + i] = l;
    const diff = fr(fr(fr(scale * l) + min) - xi);
    bestError = fr(bestError + fr(W[i] * fr(diff * diff)));
  }
  let range = fr(max - min);
  TH.fill(-Infinity);
  for (let is = 0; is <= nstep; is++) {
    iscale = fr(fr(fr(rmin + fr(RDELTA * is)) + nmax) / range);
    let first = is === 0 ? 0 : n; // the first element whose level changed
    for (let i = 0; i < n; i++) {
      const p = iscale * XM[i]; // exact: a product of two f32 values fits a double
      if (p < TH[i]) continue; // level unchanged (see TH)
      let l = nearestInt(fr(p));
      l = l > nmax ? nmax : l < 0 ? 0 : l;
      TH[i] = l === nmax ? Infinity : l + TH_BELOW;
      if (is === 0 || LAUX[i] !== l) {
        if (i < first) first = i;
        LAUX[i] = l;
        const wl = fr(W[i] * l);
        WL[i] = wl;
        WLL[i] = fr(wl * l);
        WLX[i] = fr(wl * x[o + i]);
      }
    }
    if (first === n) continue;
    // The sums over elements before `first` are those of the previous trial.
    let sumL = first > 0 ? PL[first - 1] : 0;
    let sumL2 = first > 0 ? PL2[first - 1] : 0;
    let sumXL = first > 0 ? PXL[first - 1] : 0;
    for (let i = first; i < n; i++) {
      sumL = fr(sumL + WL[i]);
      sumL2 = fr(sumL2 + WLL[i]);
      sumXL = fr(sumXL + WLX[i]);
      PL[i] = sumL;
      PL2[i] = sumL2;
      PXL[i] = sumXL;
    }
    const D = fr(fr(sumW * sumL2) - fr(sumL * sumL));
    if (D > 0) {
      let thisScale = fr(fr(fr(sumW * sumXL) - fr(sumX * sumL)) / D);
      let thisMin = fr(fr(fr(sumL2 * sumX) - fr(sumL * sumXL)) / D);
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = fr(sumXL / sumL2);
      }
      // Screening: a lower bound of the f32 error, in double (see ERR_SLACK). When it reaches
      // bestError the trial cannot win, and its exact error is not needed.
      let lb = 0;
      const absMin = Math.abs(thisMin);
      for (let i = 0; i < n; i++) {
        const sl = thisScale * LAUX[i]; // exact
        const xi = x[o + i];
        const g = Math.abs(sl + thisMin - xi) -
          ERR_SLACK * (Math.abs(sl) + absMin + Math.abs(xi)) - 2 ** -148;
        if (g > 0) lb += W[i] * g * g;
      }
      if (lb * (1 - 2 ** -18) - (sumW + 32) * 2 ** -149 >= bestError) continue;
      if (++diffTrial > 0x3fffffff) {
        DIFF_TAG.fill(0);
        diffTrial = 1;
      }
      const tag = diffTrial;
      let curError = 0;
      for (let i = 0; i < n; i++) {
        const l = LAUX[i];
        let base: number;
        if (DIFF_TAG[l] === tag) {
          base = DIFF_BASE[l];
        } else {
          base = fr(fr(thisScale * l) + thisMin);
          DIFF_BASE[l] = base;
          DIFF_TAG[l] = tag;
        }
        const diff = fr(base - x[o + i]);
        curError = fr(curError + fr(W[i] * fr(diff * diff)));
        if (curError >= bestError) break;
      }
      if (curError < bestError) {
        for (let i = 0; i < n; i++) L[lo + i] = LAUX[i];
        bestError = curError;
        scale = thisScale;
        if (thisMin !== min) { // (+0 and -0 give the same x - min)
          range = fr(max - thisMin);
          for (let i = 0; i < n; i++) XM[i] = fr(x[o + i] - thisMin);
          TH.fill(-Infinity); // levels are monotonic only while min stays
        }
        min = thisMin;
      }
    }
  }
  theMin = -min;
  return scale;
}

/**
 * The part Q4_K and Q5_K share (`nmax` 15 or 31): per sub-block of 32 the weights
 * `sqrt(mean(x^2)) + |x|` and the scale/min search, then the 6-bit scales and mins packed into
 * `out[o + 4 .. o + 16)`, the f16 `d` and `dmin` at `o` and `o + 2`, and the final levels in `L`.
 */
function encodeScalesAndLevels(
  x: Float32Array,
  base: number,
  out: Uint8Array,
  o: number,
  nmax: number,
  rmin: number,
  nstep: number,
): void {
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    const xo = base + 32 * j;
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) {
      const v = x[xo + l];
      sumX2 = fr(sumX2 + fr(v * v));
    }
    const avX = fr(Math.sqrt(fr(sumX2 / 32)));
    for (let l = 0; l < 32; l++) W[l] = avX + Math.abs(x[xo + l]); // stored as f32: fround
    const scale = makeQkx2Quants(x, xo, 32 * j, nmax, rmin, nstep);
    SCALES[j] = scale;
    MINS[j] = theMin;
    if (scale > maxScale) maxScale = scale;
    if (theMin > maxMin) maxMin = theMin;
  }
  const invScale = maxScale > 0 ? fr(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? fr(63 / maxMin) : 0;
  for (let j = 0; j < 8; j++) {
    let ls = nearestInt(fr(invScale * SCALES[j])) & 0xff; // C: uint8_t ls = nearest_int(...)
    let lm = nearestInt(fr(invMin * MINS[j])) & 0xff;
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    LS[j] = ls;
    LM[j] = lm;
    if (j < 4) {
      out[o + 4 + j] = ls;
      out[o + 8 + j] = lm;
    } else {
      out[o + 8 + j] = (ls & 0xf) | ((lm & 0xf) << 4);
      out[o + j] |= (ls >> 4) << 6;
      out[o + 4 + j] |= (lm >> 4) << 6;
    }
  }
  const dh = f32ToF16Bits(fr(maxScale / 63));
  const mh = f32ToF16Bits(fr(maxMin / 63));
  out[o] = dh & 0xff;
  out[o + 1] = dh >>> 8;
  out[o + 2] = mh & 0xff;
  out[o + 3] = mh >>> 8;
  const dAll = f16Decode(dh);
  const mAll = f16Decode(mh);
  for (let j = 0; j < 8; j++) {
    const d = fr(dAll * LS[j]);
    if (d === 0) continue; // C: if (!d) continue; NaN goes on
    const dm = fr(mAll * LM[j]);
    const xo = base + 32 * j;
    for (let ii = 0; ii < 32; ii++) {
      const l = nearestInt(fr(fr(x[xo + ii] + dm) / d));
      L[32 * j + ii] = l > nmax ? nmax : l < 0 ? 0 : l;
    }
  }
}

/** `quantize_row_q4_K_ref` for `nBlocks` blocks of 256 (144 bytes each). */
export function encodeQ4_K(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 144;
    encodeScalesAndLevels(x, b * 256, out, o, 15, -1, 20);
    let q = o + 16;
    for (let j = 0; j < 256; j += 64) {
      for (let l = 0; l < 32; l++) out[q + l] = L[j + l] | (L[j + l + 32] << 4);
      q += 32;
    }
  }
}

/** `quantize_row_q5_K_ref` for `nBlocks` blocks of 256 (176 bytes each). */
export function encodeQ5_K(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
    const o = b * 176;
    encodeScalesAndLevels(x, b * 256, out, o, 31, -0.5, 15);
    const qh = o + 16;
    out.fill(0, qh, qh + 32);
    let ql = o + 48;
    let m1 = 1;
    let m2 = 2;
    for (let n = 0; n < 256; n += 64) {
      for (let j = 0; j < 32; j++) {
        let l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          out[qh + j] |= m1;
        }
        let l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          out[qh + j] |= m2;
        }
        out[ql + j] = l1 | (l2 << 4);
      }
      m1 <<= 2;
      m2 <<= 2;
      ql += 32;
    }
  }
}

// Per-element caches of make_qx_quants (f32 values held as doubles): w = x*x and w*x per
// element, w*x*l and w*l*l for the element's level in LQ.
const QW = new Float64Array(16);
const QWX = new Float64Array(16);
const QA = new Float64Array(16);
const QB = new Float64Array(16);
const LQ = new Int8Array(16);

/**
 * `make_qx_quants(16, 32, x + o, L + lo, 1, NULL)`: a symmetric scale for 16 values (levels
 * -32..31, stored + 32 in `L`), refined over 18 trial scales with weights `x^2`.
 *
 * As in {@link makeQkx2Quants}, products are kept per element until its level changes, and a
 * trial whose levels all equal the previous trial's reuses that trial's sums (the comparison
 * itself is evaluated as in C, since `best` may have changed since).
 */
function makeQxQuants(x: Float32Array, o: number, lo: number): number {
  const n = 16;
  const nmax = 32;
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const v = x[o + i];
    const ax = Math.abs(v);
    if (ax > amax) {
      amax = ax;
      max = v;
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < n; i++) L[lo + i] = 0;
    return 0;
  }
  let iscale = fr(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const v = x[o + i];
    let l = nearestInt(fr(iscale * v));
    l = l > nmax - 1 ? nmax - 1 : l < -nmax ? -nmax : l;
    L[lo + i] = l + nmax;
    LQ[i] = l;
    const w = fr(v * v);
    const wx = fr(w * v);
    QW[i] = w;
    QWX[i] = wx;
    const a = fr(wx * l);
    const b = fr(fr(w * l) * l);
    QA[i] = a;
    QB[i] = b;
    sumlx = fr(sumlx + a);
    suml2 = fr(suml2 + b);
  }
  let scale = suml2 !== 0 ? fr(sumlx / suml2) : 0; // C: suml2 ? ... (NaN is true)
  let best = fr(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = fr(-fr(nmax + fr(RDELTA * is)) / max);
    let changed = false;
    for (let i = 0; i < n; i++) {
      let l = nearestInt(fr(iscale * x[o + i]));
      l = l > nmax - 1 ? nmax - 1 : l < -nmax ? -nmax : l;
      if (LQ[i] !== l) {
        changed = true;
        LQ[i] = l;
        QA[i] = fr(QWX[i] * l);
        QB[i] = fr(fr(QW[i] * l) * l);
      }
    }
    if (changed) {
      sumlx = 0;
      suml2 = 0;
      for (let i = 0; i < n; i++) {
        sumlx = fr(sumlx + QA[i]);
        suml2 = fr(suml2 + QB[i]);
      }
    }
    if (suml2 > 0 && fr(sumlx * sumlx) > fr(best * suml2)) {
      for (let i = 0; i < n; i++) L[lo + i] = nmax + LQ[i]; // C recomputes the same levels
      scale = fr(sumlx / suml2);
      best = fr(scale * sumlx);
    }
  }
  return scale;
}

/** `quantize_row_q6_K_ref` for `nBlocks` blocks of 256 (210 bytes each). */
export function encodeQ6_K(x: Float32Array, out: Uint8Array, nBlocks: number): void {
  for (let b = 0; b < nBlocks; b++) {
    const base = b * 256;
    const o = b * 210;
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      const scale = makeQxQuants(x, base + 16 * ib, 16 * ib);
      SCALES[ib] = scale;
      const abs = Math.abs(scale);
      if (abs > maxAbsScale) {
        maxAbsScale = abs;
        maxScale = scale;
      }
    }
    if (maxAbsScale < GROUP_MAX_EPS) {
      out.fill(0, o, o + 210); // memset 0 and d = f16(0)
      continue;
    }
    const iscale = fr(-128 / maxScale);
    const dh = f32ToF16Bits(fr(1 / iscale));
    out[o + 208] = dh & 0xff;
    out[o + 209] = dh >>> 8;
    for (let ib = 0; ib < 16; ib++) {
      const s = nearestInt(fr(iscale * SCALES[ib]));
      SC6[ib] = s > 127 ? 127 : s; // int8_t store: wraps like C's conversion
      out[o + 192 + ib] = SC6[ib] & 0xff;
    }
    const dAll = f16Decode(dh);
    for (let j = 0; j < 16; j++) {
      const d = fr(dAll * SC6[j]);
      if (d === 0) continue; // C: if (!d) continue; NaN goes on
      const xo = base + 16 * j;
      for (let ii = 0; ii < 16; ii++) {
        const l = nearestInt(fr(x[xo + ii] / d));
        L[16 * j + ii] = (l > 31 ? 31 : l < -32 ? -32 : l) + 32;
      }
    }
    let ql = o;
    let qh = o + 128;
    for (let j = 0; j < 256; j += 128) {
      for (let l = 0; l < 32; l++) {
        const a = L[j + l];
        const c = L[j + l + 32];
        const e = L[j + l + 64];
        const g = L[j + l + 96];
        out[ql + l] = (a & 0xf) | ((e & 0xf) << 4);
        out[ql + l + 32] = (c & 0xf) | ((g & 0xf) << 4);
        out[qh + l] = (a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((g >> 4) << 6);
      }
      ql += 64;
      qh += 32;
    }
  }
}
