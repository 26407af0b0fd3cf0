/**
 * Reference f32 operators: RMS norm, softmax, rotary position embedding (RoPE) and the gated
 * activations SwiGLU (`siluMul`) and GeGLU (`geluMul`).
 *
 * Style: every operator that produces a vector takes an optional trailing `out` array (length
 * at least the input length; only that prefix is written) and returns it, allocating a new
 * `Float32Array` when `out` is omitted. `out` may be the input array itself (in-place).
 * {@link rope} is always in place, as its callers rotate q/k buffers directly.
 *
 * Exactness: {@link rmsNorm} only uses `+ - * /` and `Math.sqrt` (correctly rounded), so it is
 * bit-reproducible by native code following the same order. The others use `Math.exp`,
 * `Math.tanh`, `Math.cos`, `Math.sin` and `Math.pow`, which are not correctly rounded; compare
 * native results with them within a tolerance of a few f32 ulps.
 *
 * @module
 */

import { assertF32, assertInt, assertMinLength } from "./_validate.ts";

const fr = Math.fround;

function outF32(fn: string, n: number, out: Float32Array | undefined): Float32Array {
  if (out === undefined) return new Float32Array(n);
  assertF32(fn, "out", out);
  assertMinLength(fn, "out", out, n);
  return out;
}

/**
 * RMS normalization (Llama/Qwen/Gemma `RMSNorm`, ggml `rms_norm` followed by `mul`):
 * `ss = Σ x_i²` accumulated in f64 in index order (each f32 square is exact in f64);
 * `scale = fround(1 / Math.sqrt(ss / n + eps))`; `out_i = fround(fround(x_i * scale) * w_i)`.
 *
 * @example
 * ```ts
 * import { rmsNorm } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const y = rmsNorm(new Float32Array([3, 3, 3, 3]), new Float32Array([1, 2, 1, 1]), 0);
 * assert.deepEqual([...y], [1, 2, 1, 1]);
 * ```
 *
 * @param x Input vector, `n = x.length > 0`.
 * @param weight Per-element gain, length >= `n`.
 * @param eps Added to the mean square; a finite number >= 0, used as the f64 value given
 *   (GGUF stores it as f32: pass that value).
 * @param out Optional destination (length >= `n`, may be `x`).
 * @returns The normalized vector.
 * @throws {RangeError} If `x` is empty, `weight`/`out` is too short, or `eps` is invalid.
 */
export function rmsNorm(
  x: Float32Array,
  weight: Float32Array,
  eps: number,
  out?: Float32Array,
): Float32Array {
  const fn = "rmsNorm";
  assertF32(fn, "x", x);
  assertF32(fn, "weight", weight);
  const n = x.length;
  if (n === 0) throw new RangeError(`${fn}: x length 0 is not positive`);
  assertMinLength(fn, "weight", weight, n);
  if (typeof eps !== "number" || !Number.isFinite(eps) || eps < 0) {
    throw new RangeError(`${fn}: eps ${eps} is not a finite number >= 0`);
  }
  const y = outF32(fn, n, out);
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[i] * x[i];
  const scale = fr(1 / Math.sqrt(ss / n + eps));
  for (let i = 0; i < n; i++) y[i] = fr(fr(x[i] * scale) * weight[i]);
  return y;
}

/**
 * Numerically stable softmax computed in f64: `m = max x`, `e_i = exp(x_i - m)`,
 * `out_i = fround(e_i / Σ e)` (sum in index order). Elements equal to `-Infinity` (masked)
 * get probability 0.
 *
 * @example
 * ```ts
 * import { softmax } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const p = softmax(new Float32Array([0, Math.log(3)]));
 * assert.ok(Math.abs(p[0] - 0.25) < 1e-7 && Math.abs(p[1] - 0.75) < 1e-7);
 * ```
 *
 * @param x Logits; must be non-empty.
 * @param out Optional destination (length >= `x.length`, may be `x`).
 * @returns The probabilities.
 * @throws {RangeError} If `x` is empty, contains NaN or `+Infinity`, or is entirely
 *   `-Infinity`.
 */
export function softmax(x: Float32Array, out?: Float32Array): Float32Array {
  const fn = "softmax";
  assertF32(fn, "x", x);
  const n = x.length;
  if (n === 0) throw new RangeError(`${fn}: x length 0 is not positive`);
  let m = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = x[i];
    if (Number.isNaN(v)) throw new RangeError(`${fn}: x[${i}] is NaN`);
    if (v === Infinity) throw new RangeError(`${fn}: x[${i}] is Infinity`);
    if (v > m) m = v;
  }
  if (m === -Infinity) throw new RangeError(`${fn}: every element is -Infinity`);
  const y = outF32(fn, n, out);
  // Two passes over exp() keep `out` usable as `x` without a scratch buffer.
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(x[i] - m);
  for (let i = 0; i < n; i++) y[i] = fr(Math.exp(x[i] - m) / sum);
  return y;
}

/**
 * RoPE inverse frequencies: `invFreq[i] = fround(1 / base ** ((2 * i) / nRot))` for
 * `i` in `0 .. nRot/2 - 1` (computed in f64, `Math.pow`).
 *
 * @example
 * ```ts
 * import { ropeInvFreq } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const f = ropeInvFreq(4, 10000);
 * assert.deepEqual([...f], [1, 0.009999999776482582]); // 1, fround(0.01)
 * ```
 *
 * @param nRot Number of rotated dimensions per head; even and > 0.
 * @param base The RoPE base θ (e.g. 10000, 500000, 1000000); finite and > 0.
 * @returns A Float32Array of length `nRot / 2`.
 * @throws {RangeError} If `nRot` is not a positive even integer or `base` is invalid.
 */
export function ropeInvFreq(nRot: number, base: number): Float32Array {
  const fn = "ropeInvFreq";
  assertInt(fn, "nRot", nRot, 1);
  if (nRot % 2 !== 0) throw new RangeError(`${fn}: nRot ${nRot} is not even`);
  if (typeof base !== "number" || !Number.isFinite(base) || base <= 0) {
    throw new RangeError(`${fn}: base ${base} is not a finite number > 0`);
  }
  const half = nRot / 2;
  const f = new Float32Array(half);
  for (let i = 0; i < half; i++) f[i] = fr(1 / Math.pow(base, (2 * i) / nRot));
  return f;
}

/**
 * How RoPE pairs the dimensions of a head.
 * - `"neox"`: split halves, dims `(i, i + nRot/2)` (HF Llama / Qwen / Gemma; llama.cpp
 *   `LLAMA_ROPE_TYPE_NEOX`).
 * - `"normal"`: adjacent dims `(2i, 2i + 1)` (GPT-J; llama.cpp `LLAMA_ROPE_TYPE_NORM`, which
 *   llama.cpp also uses for Llama GGUFs whose q/k weights were permuted at conversion).
 */
export type RopeMode = "neox" | "normal";

/**
 * The largest position {@link rope} accepts: 2^24, so that `pos` is exact in f32.
 *
 * @example
 * ```ts
 * import { ROPE_MAX_POS } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(Math.fround(ROPE_MAX_POS), ROPE_MAX_POS); // 2 ** 24 is exact in f32
 * ```
 */
export const ROPE_MAX_POS = 16777216;

/**
 * Applies rotary position embedding in place to `nHeads` heads of `headDim` values each
 * (head `h` occupies `x[h * headDim .. (h + 1) * headDim)`). For each head and each
 * `i` in `0 .. nRot/2 - 1`: `angle = fround(pos * invFreq[i])`, `c = fround(cos(angle))`,
 * `s = fround(sin(angle))`, and the pair `(x0, x1)` chosen by `mode` becomes
 * `x0' = fround(fround(x0 * c) - fround(x1 * s))`, `x1' = fround(fround(x0 * s) + fround(x1 * c))`.
 * Dimensions `>= nRot` of each head are left untouched (partial rotary).
 *
 * @example
 * ```ts
 * import { rope, ropeInvFreq } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new Float32Array([1, 0, 5, 7]); // 1 head of 4 dims, rotate the first 2
 * rope(x, 1, 4, 2, 1, ropeInvFreq(2, 10000), "normal"); // angle = 1 rad
 * assert.equal(x[0], Math.fround(Math.cos(1)));
 * assert.equal(x[1], Math.fround(Math.sin(1)));
 * assert.deepEqual([x[2], x[3]], [5, 7]);
 * ```
 *
 * @param x Values, length >= `nHeads * headDim`; modified in place.
 * @param nHeads Number of heads (>= 0).
 * @param headDim Dimensions per head (>= 1).
 * @param nRot Rotated dimensions per head: even, `0 < nRot <= headDim`.
 * @param pos Token position: an integer in `[0, ROPE_MAX_POS]`.
 * @param invFreq Inverse frequencies (see {@link ropeInvFreq}), length >= `nRot / 2`.
 * @param mode Pairing convention, see {@link RopeMode}.
 * @returns `x`.
 * @throws {RangeError} On invalid dimensions, position, mode or too-short arrays.
 */
export function rope(
  x: Float32Array,
  nHeads: number,
  headDim: number,
  nRot: number,
  pos: number,
  invFreq: Float32Array,
  mode: RopeMode,
): Float32Array {
  const fn = "rope";
  assertF32(fn, "x", x);
  assertF32(fn, "invFreq", invFreq);
  assertInt(fn, "nHeads", nHeads);
  assertInt(fn, "headDim", headDim, 1);
  assertInt(fn, "nRot", nRot, 1);
  if (nRot % 2 !== 0) throw new RangeError(`${fn}: nRot ${nRot} is not even`);
  if (nRot > headDim) throw new RangeError(`${fn}: nRot ${nRot} exceeds headDim ${headDim}`);
  assertInt(fn, "pos", pos);
  if (pos > ROPE_MAX_POS) {
    throw new RangeError(`${fn}: pos ${pos} exceeds ROPE_MAX_POS ${ROPE_MAX_POS}`);
  }
  if (mode !== "neox" && mode !== "normal") {
    throw new RangeError(`${fn}: mode ${String(mode)} is not "neox" or "normal"`);
  }
  const half = nRot / 2;
  assertMinLength(fn, "invFreq", invFreq, half);
  assertMinLength(fn, "x", x, nHeads * headDim);

  const cos = new Float32Array(half);
  const sin = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    const angle = fr(pos * invFreq[i]);
    cos[i] = fr(Math.cos(angle));
    sin[i] = fr(Math.sin(angle));
  }
  const neox = mode === "neox";
  for (let h = 0; h < nHeads; h++) {
    const base = h * headDim;
    for (let i = 0; i < half; i++) {
      const i0 = neox ? base + i : base + 2 * i;
      const i1 = neox ? i0 + half : i0 + 1;
      const x0 = x[i0];
      const x1 = x[i1];
      const c = cos[i];
      const s = sin[i];
      x[i0] = fr(fr(x0 * c) - fr(x1 * s));
      x[i1] = fr(fr(x0 * s) + fr(x1 * c));
    }
  }
  return x;
}

function checkGated(
  fn: string,
  gate: Float32Array,
  up: Float32Array,
  out: Float32Array | undefined,
): Float32Array {
  assertF32(fn, "gate", gate);
  assertF32(fn, "up", up);
  assertMinLength(fn, "up", up, gate.length);
  return outF32(fn, gate.length, out);
}

/**
 * SwiGLU gating: `out_i = fround(silu(g_i) * u_i)` with
 * `silu(g) = fround(g / (1 + exp(-g)))` evaluated in f64.
 *
 * @example
 * ```ts
 * import { siluMul } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const y = siluMul(new Float32Array([0, 1]), new Float32Array([5, 1]));
 * assert.equal(y[0], 0);
 * assert.equal(y[1], Math.fround(1 / (1 + Math.exp(-1))));
 * ```
 *
 * @param gate Gate projections `g`.
 * @param up Up projections `u`, length >= `gate.length`.
 * @param out Optional destination (length >= `gate.length`, may alias an input).
 * @returns The gated activations, `gate.length` values.
 * @throws {RangeError} If `up` or `out` is too short.
 */
export function siluMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
  const y = checkGated("siluMul", gate, up, out);
  const n = gate.length;
  for (let i = 0; i < n; i++) {
    const g = gate[i];
    y[i] = fr(fr(g / (1 + Math.exp(-g))) * up[i]);
  }
  return y;
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const GELU_COEF_A = 0.044715;

/**
 * GeGLU gating with the tanh approximation of GELU (Gemma, llama.cpp `ggml_gelu`):
 * `gelu(g) = fround(0.5 * g * (1 + tanh(sqrt(2/π) * (g + 0.044715 * g³))))` in f64, and
 * `out_i = fround(gelu(g_i) * u_i)`.
 *
 * @example
 * ```ts
 * import { geluMul } from "./ops.ts";
 * import assert from "node:assert/strict";
 *
 * const y = geluMul(new Float32Array([1]), new Float32Array([1]));
 * assert.ok(Math.abs(y[0] - 0.8411919906082768) < 1e-7);
 * ```
 *
 * @param gate Gate projections `g`.
 * @param up Up projections `u`, length >= `gate.length`.
 * @param out Optional destination (length >= `gate.length`, may alias an input).
 * @returns The gated activations, `gate.length` values.
 * @throws {RangeError} If `up` or `out` is too short.
 */
export function geluMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
  const y = checkGated("geluMul", gate, up, out);
  const n = gate.length;
  for (let i = 0; i < n; i++) {
    const g = gate[i];
    const gelu = fr(0.5 * g * (1 + Math.tanh(SQRT_2_OVER_PI * (g + GELU_COEF_A * g * g * g))));
    y[i] = fr(gelu * up[i]);
  }
  return y;
}
