import assert from "node:assert/strict";
import {
  geluMul,
  rmsNorm,
  rope,
  ROPE_MAX_POS,
  ropeInvFreq,
  type RopeMode,
  siluMul,
  softmax,
} from "./ops.ts";

const fr = Math.fround;

/** Deterministic uniform values in [-scale, scale), never -0. */
function uniforms(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = ((s + 0.5) / 2147483648 - 1) * scale;
  }
  return out;
}

function close(a: number, b: number, tol: number, what = ""): void {
  assert.ok(Math.abs(a - b) <= tol, `${what} ${a} vs ${b} (tol ${tol})`);
}

// ---------------------------------------------------------------- rmsNorm

Deno.test("rmsNorm of a constant vector is sign(c) * weight", () => {
  const w = uniforms(64, 1, 2);
  for (const c of [3, -0.25, 1e-3, 1234.5]) {
    const y = rmsNorm(new Float32Array(64).fill(c), w, 0);
    for (let i = 0; i < 64; i++) close(y[i], Math.sign(c) * w[i], 4e-7 * Math.abs(w[i]), `c=${c}`);
  }
  // The exact documented formula, for c = 3 and eps = 0: scale = fround(1/3).
  const y = rmsNorm(new Float32Array(4).fill(3), new Float32Array([1, 2, 0.5, -1]), 0);
  const s = fr(1 / 3);
  assert.deepEqual([...y], [1, 2, 0.5, -1].map((wi) => fr(fr(3 * s) * wi)));
});

Deno.test("rmsNorm follows the documented f64 accumulation exactly", () => {
  const x = uniforms(4096, 2, 10);
  const w = uniforms(4096, 3);
  const eps = fr(1e-6);
  let ss = 0;
  for (const v of x) ss += v * v;
  const scale = fr(1 / Math.sqrt(ss / x.length + eps));
  const y = rmsNorm(x, w, eps);
  for (let i = 0; i < x.length; i++) assert.equal(y[i], fr(fr(x[i] * scale) * w[i]));
  // unit weight: the output has mean square ~1
  const u = rmsNorm(x, new Float32Array(x.length).fill(1), 0);
  close(u.reduce((a, v) => a + v * v, 0) / u.length, 1, 1e-5, "mean square");
});

Deno.test("rmsNorm eps, out and in-place", () => {
  const x = new Float32Array([0, 0, 0, 0]);
  assert.deepEqual([...rmsNorm(x, new Float32Array(4).fill(1), 1e-5)], [0, 0, 0, 0]);
  // eps dominates for tiny inputs
  const tiny = rmsNorm(new Float32Array([1e-4, -1e-4]), new Float32Array([1, 1]), 1);
  close(tiny[0], 1e-4 / Math.sqrt(1 + 1e-8), 1e-10);
  const a = uniforms(10, 4);
  const expected = rmsNorm(a, uniforms(10, 5), 1e-6);
  assert.equal(rmsNorm(a, uniforms(10, 5), 1e-6, a), a);
  assert.deepEqual(a, expected);
});

Deno.test("rmsNorm errors", () => {
  const one = new Float32Array(1);
  assert.throws(() => rmsNorm(new Float32Array(0), one, 0), {
    name: "RangeError",
    message: "rmsNorm: x length 0 is not positive",
  });
  assert.throws(() => rmsNorm(new Float32Array(4), new Float32Array(3), 0), {
    name: "RangeError",
    message: "rmsNorm: weight length 3 is less than required 4",
  });
  for (const eps of [-1, NaN, Infinity]) {
    assert.throws(() => rmsNorm(one, one, eps), {
      name: "RangeError",
      message: `rmsNorm: eps ${eps} is not a finite number >= 0`,
    });
  }
  assert.throws(() => rmsNorm(one, one, 0, new Float32Array(0)), RangeError);
  assert.throws(() => rmsNorm([1] as never, one, 0), TypeError);
});

// ---------------------------------------------------------------- softmax

Deno.test("softmax sums to 1, is shift invariant and handles large logits", () => {
  const x = uniforms(1000, 6, 20);
  const p = softmax(x);
  assert.equal(p.length, x.length);
  close(p.reduce((a, v) => a + v, 0), 1, 1e-5, "sum");
  assert.ok(p.every((v) => v >= 0 && v <= 1));
  const shifted = softmax(x.map((v) => v + 1000));
  for (let i = 0; i < x.length; i++) close(shifted[i], p[i], 1e-4 * p[i] + 1e-12, `i=${i}`);
  const big = softmax(new Float32Array([1e30, 1e30, -1e30]));
  assert.deepEqual([...big], [0.5, 0.5, 0]);
  // argmax preserved
  const argmax = (a: Float32Array) => a.indexOf(Math.max(...a));
  assert.equal(argmax(p), argmax(x));
});

Deno.test("softmax known values, masking and in-place", () => {
  const p = softmax(new Float32Array([0, Math.log(3)]));
  close(p[0], 0.25, 1e-7);
  close(p[1], 0.75, 1e-7);
  assert.deepEqual([...softmax(new Float32Array(4).fill(-7))], [0.25, 0.25, 0.25, 0.25]);
  assert.deepEqual([...softmax(new Float32Array([5]))], [1]);
  const masked = softmax(new Float32Array([1, -Infinity, 1]));
  assert.deepEqual([...masked], [0.5, 0, 0.5]);
  const x = new Float32Array([1, 2, 3]);
  const e = [1, Math.E, Math.E ** 2].map((v) => v / (1 + Math.E + Math.E ** 2));
  assert.equal(softmax(x, x), x);
  for (let i = 0; i < 3; i++) close(x[i], e[i], 1e-7);
});

Deno.test("softmax errors", () => {
  assert.throws(() => softmax(new Float32Array(0)), {
    name: "RangeError",
    message: "softmax: x length 0 is not positive",
  });
  assert.throws(() => softmax(new Float32Array([1, NaN])), {
    name: "RangeError",
    message: "softmax: x[1] is NaN",
  });
  assert.throws(() => softmax(new Float32Array([Infinity])), {
    name: "RangeError",
    message: "softmax: x[0] is Infinity",
  });
  assert.throws(() => softmax(new Float32Array([-Infinity, -Infinity])), {
    name: "RangeError",
    message: "softmax: every element is -Infinity",
  });
  assert.throws(() => softmax(new Float32Array(3), new Float32Array(2)), RangeError);
});

// ---------------------------------------------------------------- rope

Deno.test("ropeInvFreq values", () => {
  const f = ropeInvFreq(128, 10000);
  assert.equal(f.length, 64);
  assert.equal(f[0], 1);
  for (let i = 0; i < 64; i++) assert.equal(f[i], fr(1 / Math.pow(10000, (2 * i) / 128)));
  close(f[63], 10000 ** (-126 / 128), 2 ** -36); // within an f32 ulp (~1.4e-11)
  for (let i = 1; i < 64; i++) assert.ok(f[i] < f[i - 1]);
  assert.deepEqual([...ropeInvFreq(2, 500000)], [1]);
});

Deno.test("ropeInvFreq errors", () => {
  assert.throws(() => ropeInvFreq(7, 10000), {
    name: "RangeError",
    message: "ropeInvFreq: nRot 7 is not even",
  });
  assert.throws(() => ropeInvFreq(0, 10000), {
    name: "RangeError",
    message: "ropeInvFreq: nRot 0 is not an integer >= 1",
  });
  for (const base of [0, -1, NaN, Infinity]) {
    assert.throws(() => ropeInvFreq(64, base), {
      name: "RangeError",
      message: `ropeInvFreq: base ${base} is not a finite number > 0`,
    });
  }
});

const H = 3;
const D = 16;
const inv16 = ropeInvFreq(16, 10000);

Deno.test("rope at pos 0 is the identity, for both modes", () => {
  for (const mode of ["neox", "normal"] as RopeMode[]) {
    const x = uniforms(H * D, 7);
    const y = x.slice();
    assert.equal(rope(y, H, D, D, 0, inv16, mode), y);
    assert.deepEqual(y, x);
  }
});

Deno.test("rope follows the documented formula (normal mode, pair (2i, 2i+1))", () => {
  const x = uniforms(D, 8);
  const y = rope(x.slice(), 1, D, D, 5, inv16, "normal");
  for (let i = 0; i < D / 2; i++) {
    const a = fr(5 * inv16[i]);
    const c = fr(Math.cos(a));
    const s = fr(Math.sin(a));
    const x0 = x[2 * i];
    const x1 = x[2 * i + 1];
    assert.equal(y[2 * i], fr(fr(x0 * c) - fr(x1 * s)));
    assert.equal(y[2 * i + 1], fr(fr(x0 * s) + fr(x1 * c)));
  }
});

Deno.test("rope neox matches HF rotate_half: q*cos + rotate_half(q)*sin", () => {
  const x = uniforms(D, 9);
  const pos = 17;
  const y = rope(x.slice(), 1, D, D, pos, inv16, "neox");
  const half = D / 2;
  for (let j = 0; j < D; j++) {
    const theta = pos * inv16[j % half];
    const rotated = j < half ? -x[j + half] : x[j - half];
    close(y[j], x[j] * Math.cos(theta) + rotated * Math.sin(theta), 1e-5, `dim ${j}`);
  }
});

Deno.test("rope preserves the norm of every rotated pair", () => {
  const x = uniforms(H * D, 10, 4);
  for (const mode of ["neox", "normal"] as RopeMode[]) {
    const y = rope(x.slice(), H, D, D, 1234, inv16, mode);
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < D / 2; i++) {
        const [a, b] = mode === "neox" ? [h * D + i, h * D + i + D / 2] : [
          h * D + 2 * i,
          h * D + 2 * i + 1,
        ];
        close(Math.hypot(y[a], y[b]), Math.hypot(x[a], x[b]), 2e-6 * 4, `${mode} h${h} i${i}`);
      }
    }
  }
});

Deno.test("rope neox and normal agree after permuting dims (2i <-> i, 2i+1 <-> i+nRot/2)", () => {
  const nRot = 12; // partial: dims 12..15 untouched
  const inv = ropeInvFreq(nRot, 1e6);
  const half = nRot / 2;
  const x = uniforms(H * D, 11);
  // perm[k] = position in "neox" layout of "normal" dim k (identity beyond nRot)
  const perm = Array.from({ length: D }, (_, k) => {
    if (k >= nRot) return k;
    return k % 2 === 0 ? k / 2 : (k - 1) / 2 + half;
  });
  const xNeox = new Float32Array(H * D);
  for (let h = 0; h < H; h++) {
    for (let k = 0; k < D; k++) xNeox[h * D + perm[k]] = x[h * D + k];
  }
  const yNormal = rope(x.slice(), H, D, nRot, 321, inv, "normal");
  const yNeox = rope(xNeox, H, D, nRot, 321, inv, "neox");
  for (let h = 0; h < H; h++) {
    for (let k = 0; k < D; k++) {
      assert.ok(Object.is(yNeox[h * D + perm[k]], yNormal[h * D + k]), `h${h} dim ${k}`);
    }
  }
});

Deno.test("rope partial rotation leaves dims >= nRot untouched; heads are independent", () => {
  const x = uniforms(H * D, 12);
  const inv = ropeInvFreq(8, 10000);
  for (const mode of ["neox", "normal"] as RopeMode[]) {
    const y = rope(x.slice(), H, D, 8, 99, inv, mode);
    for (let h = 0; h < H; h++) {
      assert.deepEqual(y.subarray(h * D + 8, (h + 1) * D), x.subarray(h * D + 8, (h + 1) * D));
      assert.notDeepEqual(y.subarray(h * D, h * D + 8), x.subarray(h * D, h * D + 8));
      const single = rope(x.slice(h * D, (h + 1) * D), 1, D, 8, 99, inv, mode);
      assert.deepEqual(y.subarray(h * D, (h + 1) * D), single);
    }
  }
  // x longer than nHeads * headDim: the tail is untouched
  const long = uniforms(D + 5, 13);
  const tail = long.slice(D);
  rope(long, 1, D, D, 3, inv16, "neox");
  assert.deepEqual(long.subarray(D), tail);
});

Deno.test("rope(pos a) then rope(pos b) ≈ rope(pos a + b)", () => {
  const x = uniforms(H * D, 14);
  for (const mode of ["neox", "normal"] as RopeMode[]) {
    for (const [a, b] of [[1, 2], [7, 30], [100, 23], [0, 5]]) {
      const twice = rope(rope(x.slice(), H, D, D, a, inv16, mode), H, D, D, b, inv16, mode);
      const once = rope(x.slice(), H, D, D, a + b, inv16, mode);
      for (let i = 0; i < x.length; i++) close(twice[i], once[i], 1e-4, `${mode} ${a}+${b}`);
    }
  }
});

Deno.test("rope known rotation", () => {
  const x = new Float32Array([1, 0, 0, 1]); // neox pairs (0,2) and (1,3)
  rope(x, 1, 4, 4, 2, new Float32Array([0.5, 0.25]), "neox");
  // pair 0 rotated by 1 rad: (1, 0) -> (cos 1, sin 1); pair 1 by 0.5 rad: (0, 1) -> (-sin, cos)
  assert.equal(x[0], fr(Math.cos(1)));
  assert.equal(x[2], fr(Math.sin(1)));
  assert.equal(x[1], -fr(Math.sin(0.5)));
  assert.equal(x[3], fr(Math.cos(0.5)));
  // position 2^24 is accepted
  rope(new Float32Array(4), 1, 4, 4, ROPE_MAX_POS, new Float32Array(2), "normal");
});

Deno.test("rope errors", () => {
  const x = new Float32Array(H * D);
  const call = (over: Partial<Record<string, unknown>>) => () =>
    rope(
      (over.x ?? x) as Float32Array,
      (over.nHeads ?? H) as number,
      (over.headDim ?? D) as number,
      (over.nRot ?? D) as number,
      (over.pos ?? 1) as number,
      (over.invFreq ?? inv16) as Float32Array,
      (over.mode ?? "neox") as RopeMode,
    );
  const cases: Array<[Partial<Record<string, unknown>>, string]> = [
    [{ nRot: 15 }, "rope: nRot 15 is not even"],
    [{ nRot: 0 }, "rope: nRot 0 is not an integer >= 1"],
    [{ nRot: 18 }, "rope: nRot 18 exceeds headDim 16"],
    [{ pos: -1 }, "rope: pos -1 is not an integer >= 0"],
    [{ pos: 2.5 }, "rope: pos 2.5 is not an integer >= 0"],
    [{ pos: ROPE_MAX_POS + 1 }, "rope: pos 16777217 exceeds ROPE_MAX_POS 16777216"],
    [{ invFreq: new Float32Array(7) }, "rope: invFreq length 7 is less than required 8"],
    [{ x: new Float32Array(47) }, "rope: x length 47 is less than required 48"],
    [{ mode: "gptj" }, 'rope: mode gptj is not "neox" or "normal"'],
    [{ headDim: 0 }, "rope: headDim 0 is not an integer >= 1"],
  ];
  for (const [over, message] of cases) {
    assert.throws(call(over), { name: "RangeError", message });
  }
  assert.throws(call({ invFreq: [1, 2] }), TypeError);
});

// ---------------------------------------------------------------- gated activations

Deno.test("siluMul known values", () => {
  const g = new Float32Array([0, 1, -1, 20, -20, -1000, 1000]);
  const u = new Float32Array([3, 1, 2, 0.5, 1, 1, 1]);
  const y = siluMul(g, u);
  assert.equal(y[0], 0);
  assert.equal(y[1], fr(0.7310585786300049));
  assert.equal(y[2], fr(fr(-0.2689414213699951) * 2));
  close(y[3], 10, 1e-6);
  close(y[4], -20 * Math.exp(-20), 1e-12);
  assert.ok(Object.is(y[5], -0)); // -1000 / (1 + e^1000) = -1000 / Infinity
  assert.equal(y[6], 1000);
  for (let i = 0; i < g.length; i++) {
    assert.equal(y[i], fr(fr(g[i] / (1 + Math.exp(-g[i]))) * u[i]));
  }
});

Deno.test("geluMul known values", () => {
  const g = new Float32Array([0, 1, -1, 3, -10, 10]);
  const y = geluMul(g, new Float32Array(6).fill(1));
  assert.equal(y[0], 0);
  assert.equal(y[1], fr(0.8411919906082768));
  assert.equal(y[2], fr(0.8411919906082768 - 1)); // gelu(x) - gelu(-x) = x
  close(y[3], 2.9963627, 1e-6);
  close(y[4], 0, 1e-20);
  assert.equal(y[5], 10);
  const two = geluMul(new Float32Array([1]), new Float32Array([2]));
  assert.equal(two[0], fr(fr(0.8411919906082768) * 2));
});

Deno.test("gated activations: out, aliasing and errors", () => {
  const g = uniforms(50, 15, 5);
  const u = uniforms(50, 16, 5);
  for (const f of [siluMul, geluMul]) {
    const expected = f(g, u);
    const alias = g.slice();
    assert.equal(f(alias, u, alias), alias);
    assert.deepEqual(alias, expected);
    const out = new Float32Array(51).fill(7);
    f(g, u, out);
    assert.deepEqual(out.subarray(0, 50), expected);
    assert.equal(out[50], 7);
    assert.deepEqual(f(g.subarray(0, 10), u), expected.subarray(0, 10));
  }
  assert.throws(() => siluMul(g, u.subarray(1)), {
    name: "RangeError",
    message: "siluMul: up length 49 is less than required 50",
  });
  assert.throws(() => geluMul(g, u, new Float32Array(3)), {
    name: "RangeError",
    message: "geluMul: out length 3 is less than required 50",
  });
  assert.throws(() => geluMul(g, [1] as never), {
    name: "TypeError",
    message: "geluMul: up must be a Float32Array, got Array",
  });
});
