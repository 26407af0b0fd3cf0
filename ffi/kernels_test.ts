import assert from "node:assert/strict";
import * as ref from "../reference/mod.ts";
import { Rng } from "../tests/util/rng.ts";
import { KernelError, KernelLoadError } from "./errors.ts";
import { kernelOptionsFromEnv, parseFeatures, parseThreads, parseVariant } from "./kernels.ts";
import { openKernels, openWasmKernels } from "./open_kernels.ts";
import { STATUS, type VariantName } from "./symbols.ts";
import { Sampler } from "../sampling/mod.ts";

const k = openKernels();
const VARIANTS: VariantName[] = k.supportedVariants();
// Block counts that hit every tail of every variant (pairs, singles, vectors).
const BLOCK_COUNTS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 67];
const REL = 1e-5;

/** Random Q8_0 blocks: random f16 scales and any byte, -128 included. */
function randomQ8(rng: Rng, nb: number): Uint8Array {
  const b = rng.bytes(nb * 34);
  for (let i = 0; i < nb; i++) {
    const d = ref.f32ToF16Bits(rng.next() * 0.05 + 1e-4);
    b[i * 34] = d & 0xff;
    b[i * 34 + 1] = d >> 8;
  }
  return b;
}

function randomQ4(rng: Rng, nb: number): Uint8Array {
  const b = rng.bytes(nb * 18);
  for (let i = 0; i < nb; i++) {
    const d = ref.f32ToF16Bits(rng.next() * 0.05 + 1e-4);
    b[i * 18] = d & 0xff;
    b[i * 18 + 1] = d >> 8;
  }
  return b;
}

/** sum_j |w_j x_j| * scale: any summation order stays within a small multiple of it. */
function absTerms(type: "q4_0" | "q8_0", w: Uint8Array, x: Uint8Array, nb: number): number {
  const wb = type === "q4_0" ? 18 : 34;
  let m = 0;
  for (let b = 0; b < nb; b++) {
    const dw = ref.f16BitsToF32(w[b * wb] | (w[b * wb + 1] << 8));
    const dx = ref.f16BitsToF32(x[b * 34] | (x[b * 34 + 1] << 8));
    let t = 0;
    for (let j = 0; j < 32; j++) {
      const xq = (x[b * 34 + 2 + j] << 24) >> 24;
      let wq: number;
      if (type === "q8_0") wq = (w[b * wb + 2 + j] << 24) >> 24;
      else {
        const byte = w[b * wb + 2 + (j % 16)];
        wq = (j < 16 ? byte & 15 : byte >> 4) - 8;
      }
      t += Math.abs(wq * xq);
    }
    m += t * Math.abs(dw * dx);
  }
  return m;
}

function assertClose(actual: number, expected: number, magnitude: number, what: string): void {
  const diff = Math.abs(actual - expected);
  if (!(diff <= REL * magnitude + 1e-12)) {
    assert.fail(
      `${what}: got ${actual}, expected ${expected} (diff ${diff}, magnitude ${magnitude})`,
    );
  }
}

function assertAllClose(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < actual.length; i++) {
    const mag = Math.max(Math.abs(actual[i]), Math.abs(expected[i]));
    assertClose(actual[i], expected[i], mag, `${what}[${i}]`);
  }
}

for (const variant of VARIANTS) {
  Deno.test(`${variant}: integer block dots equal the reference exactly`, () => {
    k.configure({ variant, threads: 1 });
    assert.equal(k.variant, variant);
    const rng = new Rng(11);
    for (const nb of BLOCK_COUNTS) {
      const x = randomQ8(rng, nb);
      const w8 = randomQ8(rng, nb);
      const w4 = randomQ4(rng, nb);
      assert.deepEqual(
        k.blockDots("q8_0", w8, x, nb),
        ref.blockDotsQ8_0Q8_0(w8, x, nb),
        `q8 nb=${nb}`,
      );
      assert.deepEqual(
        k.blockDots("q4_0", w4, x, nb),
        ref.blockDotsQ4_0Q8_0(w4, x, nb),
        `q4 nb=${nb}`,
      );
    }
  });

  Deno.test(`${variant}: extreme bytes (-128 x -128 everywhere) stay exact`, () => {
    k.configure({ variant, threads: 1 });
    for (const nb of [1, 2, 3]) {
      const x = new Uint8Array(nb * 34).fill(0x80);
      const w4 = new Uint8Array(nb * 18).fill(0x00);
      assert.deepEqual(k.blockDots("q8_0", x, x, nb), new Int32Array(nb).fill(32 * 128 * 128));
      assert.deepEqual(k.blockDots("q4_0", w4, x, nb), new Int32Array(nb).fill(32 * 8 * 128));
    }
  });

  Deno.test(`${variant}: f32 dots within 1e-5 of the reference`, () => {
    k.configure({ variant, threads: 1 });
    const rng = new Rng(12);
    for (const nb of BLOCK_COUNTS) {
      const x = randomQ8(rng, nb);
      const w8 = randomQ8(rng, nb);
      const w4 = randomQ4(rng, nb);
      const n = nb * 32;
      assertClose(
        k.dot("q8_0", w8, x, n),
        ref.dotQ8_0Q8_0(w8, x, n),
        absTerms("q8_0", w8, x, nb),
        `q8 nb=${nb}`,
      );
      assertClose(
        k.dot("q4_0", w4, x, n),
        ref.dotQ4_0Q8_0(w4, x, n),
        absTerms("q4_0", w4, x, nb),
        `q4 nb=${nb}`,
      );
    }
  });

  Deno.test(`${variant}: Q8_0 activation quantization is byte-identical to the reference`, () => {
    k.configure({ variant, threads: 1 });
    const rng = new Rng(13);
    for (const nb of BLOCK_COUNTS) {
      const x = rng.floats(nb * 32, 3);
      x.fill(0, 0, 32); // an all-zero block
      if (nb > 2) { for (let i = 32; i < 64; i++) x[i] = i % 2 === 0 ? 1e-39 : -3e-38; // 1/d overflows
       }
      assert.deepEqual(k.quantizeQ8_0(x), ref.quantizeActivationsQ8_0(x), `nb=${nb}`);
    }
    // Ties go to even, as ggml's x86 quantize_row_q8_0 (_MM_ROUND_NEAREST) rounds them, where
    // its scalar _ref (ref.quantizeQ8_0, the weights' rule) rounds them away from zero.
    const tie = new Float32Array(32);
    tie.set([127, 2.5, -2.5, 3.5, 0.5, -126.5]);
    const got = k.quantizeQ8_0(tie);
    assert.deepEqual([...new Int8Array(got.buffer, 2, 6)], [127, 2, -2, 4, 0, -126]);
    assert.deepEqual(got, ref.quantizeActivationsQ8_0(tie));
    assert.notDeepEqual(got, ref.quantizeQ8_0(tie));
  });

  Deno.test(`${variant}: float kernels within 1e-5 of the reference`, () => {
    k.configure({ variant, threads: 1 });
    const rng = new Rng(14);
    for (const n of [1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 100, 576]) {
      const x = rng.floats(n, 4);
      const w = rng.floats(n);
      assertAllClose(k.rmsNorm(x, w, 1e-6), ref.rmsNorm(x, w, 1e-6), `rmsNorm n=${n}`);
      assertAllClose(k.siluMul(x, w), ref.siluMul(x, w), `siluMul n=${n}`);
      assertAllClose(k.geluMul(x, w), ref.geluMul(x, w), `geluMul n=${n}`);
      const s = Float32Array.from(x);
      if (n > 2) s[1] = -Infinity; // a masked entry
      assertAllClose(k.softmax(Float32Array.from(s)), ref.softmax(s), `softmax n=${n}`);
    }
  });

  Deno.test(`${variant}: argmax is a plain loop's first maximum; NaN and +inf named`, () => {
    k.configure({ variant, threads: 1 });
    const rng = new Rng(16);
    for (let trial = 0; trial < 600; trial++) {
      const n = 1 + Math.floor(rng.next() * 300);
      // Few distinct values, so that ties are common; -0 beside +0.
      const x = Float32Array.from({ length: n }, () => Math.floor(rng.next() * 7) - 3);
      if (trial % 3 === 0) x[Math.floor(rng.next() * n)] = -0;
      if (trial % 5 === 0) x.forEach((_, i) => rng.next() < 0.5 && (x[i] = -Infinity));
      if (trial % 11 === 0) x.fill(-Infinity);
      let bad = -1;
      if (trial % 7 === 0) {
        bad = Math.floor(rng.next() * n);
        x[bad] = rng.next() < 0.5 ? NaN : Infinity;
      }
      let best = -1, max = -Infinity;
      for (let i = 0; i < n; i++) {
        if (x[i] > max) max = x[best = i];
      }
      if (bad >= 0) {
        assert.throws(() => k.argmax(x), new RangeError(`argmax: x[${bad}] is ${x[bad]}`));
      } else {
        assert.equal(k.argmax(x), best, `trial ${trial}, n ${n}`);
      }
    }
  });

  Deno.test(`${variant}: RoPE in both conventions with partial rotation`, () => {
    k.configure({ variant, threads: 1 });
    const rng = new Rng(15);
    for (
      const [heads, dim, rot] of [[1, 2, 2], [3, 64, 64], [4, 64, 32], [2, 80, 20], [9, 64, 64]]
    ) {
      const invFreq = ref.ropeInvFreq(rot, 10000);
      for (const mode of ["neox", "normal"] as const) {
        for (const pos of [0, 1, 17, 4095, 100000]) {
          const x = rng.floats(heads * dim);
          const got = k.rope(Float32Array.from(x), heads, dim, rot, pos, invFreq, mode);
          const want = ref.rope(Float32Array.from(x), heads, dim, rot, pos, invFreq, mode);
          assertAllClose(got, want, `rope ${mode} h=${heads} d=${dim} r=${rot} pos=${pos}`);
        }
      }
    }
  });

  Deno.test(`${variant}: matvec is bit-identical for every thread count`, () => {
    const rng = new Rng(16);
    for (const [rows, cols] of [[1, 32], [7, 96], [100, 576], [513, 64], [64, 2048]]) {
      const nb = cols / 32;
      const x = k.quantizeQ8_0(rng.floats(cols));
      const w8 = randomQ8(rng, rows * nb);
      const w4 = randomQ4(rng, rows * nb);
      for (const type of ["q4_0", "q8_0"] as const) {
        const w = type === "q4_0" ? w4 : w8;
        k.configure({ variant, threads: 1 });
        const one = k.matvec(type, w, rows, cols, x);
        const want = type === "q4_0"
          ? ref.matvecQ4_0(w, rows, cols, x)
          : ref.matvecQ8_0(w, rows, cols, x);
        for (let r = 0; r < rows; r++) {
          const wr = w.subarray(r * nb * (type === "q4_0" ? 18 : 34));
          assertClose(
            one[r],
            want[r],
            absTerms(type, wr, x, nb),
            `${type} ${rows}x${cols} row ${r}`,
          );
        }
        for (const threads of [2, 3, 4]) {
          k.configure({ variant, threads });
          const many = k.matvec(type, w, rows, cols, x);
          assert.deepEqual(
            new Uint8Array(many.buffer),
            new Uint8Array(one.buffer),
            `${type} ${rows}x${cols} threads=${threads}`,
          );
        }
      }
    }
    k.configure({ variant, threads: 1 });
  });
}

Deno.test("the best variant is chosen by default", () => {
  k.configure({ variant: "auto", threads: 1 });
  assert.equal(k.variant, VARIANTS[VARIANTS.length - 1]);
  if (k.cpuFeatures().includes("avx512vnni")) assert.equal(k.variant, "avx512vnni");
});

Deno.test("disabled features select a lower variant; forcing an impossible one is refused", () => {
  k.configure({ variant: "auto", threads: 1, disable: ["avx512vnni"] });
  assert.notEqual(k.variant, "avx512vnni");
  // Without AVX-512 VNNI, AVX-VNNI (256-bit vpdpbusd) is next, then plain AVX2.
  const features = k.cpuFeatures();
  if (features.includes("avxvnni") && features.includes("avx2")) {
    assert.equal(k.variant, "avxvnni");
  } else {
    console.log("avxvnni not run: this CPU lacks AVX-VNNI");
  }
  k.configure({ variant: "auto", threads: 1, disable: ["avx512vnni", "avxvnni"] });
  if (features.includes("avx2")) assert.equal(k.variant, "avx2");
  assert.throws(() => k.configure({ variant: "avxvnni", disable: ["avxvnni"] }), KernelLoadError);
  k.configure({ variant: "auto", threads: 1, disable: ["avx2", "avx512f"] });
  assert.equal(k.variant, "scalar");
  assert.throws(
    () => k.configure({ variant: "avx512vnni", disable: ["avx512vnni"] }),
    (e: unknown) =>
      e instanceof KernelLoadError && /"avx512vnni" cannot run on this CPU/.test(e.message),
  );
  assert.throws(() => k.configure({ variant: "avx2", disable: ["fma"] }), KernelLoadError);
  k.configure({ variant: "auto", threads: 1, disable: [] });
  assert.deepEqual(k.disabledFeatures, []);
});

Deno.test("wrappers refuse bad arguments before crossing", () => {
  k.configure({ variant: "auto", threads: 1 });
  assert.throws(() => k.quantizeQ8_0(new Float32Array(33)), RangeError);
  assert.throws(() => k.quantizeQ8_0(new Float32Array(0)), RangeError);
  assert.throws(() => k.quantizeQ8_0(new Float32Array(64), new Uint8Array(67)), RangeError);
  // deno-lint-ignore no-explicit-any
  assert.throws(() => k.quantizeQ8_0(new Float64Array(64) as any), TypeError);
  assert.throws(
    () => k.matvec("q4_0", new Uint8Array(18 * 2 - 1), 2, 32, new Uint8Array(34)),
    RangeError,
  );
  assert.throws(() => k.matvec("q8_0", new Uint8Array(68), 2, 32, new Uint8Array(33)), RangeError);
  assert.throws(
    () => k.matvec("q8_0", new Uint8Array(68), 2, 32, new Uint8Array(34), new Float32Array(1)),
    RangeError,
  );
  assert.throws(() => k.blockDots("q8_0", new Uint8Array(34), new Uint8Array(34), 1.5), RangeError);
  const inv = new Float32Array(4);
  assert.throws(() => k.rope(new Float32Array(8), 1, 8, 3, 0, inv, "neox"), RangeError);
  assert.throws(() => k.rope(new Float32Array(8), 1, 8, 10, 0, inv, "neox"), RangeError);
  assert.throws(() => k.rope(new Float32Array(8), 1, 8, 8, 2 ** 24 + 1, inv, "neox"), RangeError);
  assert.throws(() => k.rope(new Float32Array(7), 1, 8, 8, 0, inv, "neox"), RangeError);
  assert.throws(() => k.rmsNorm(new Float32Array(4), new Float32Array(3), 1e-5), RangeError);
  assert.throws(() => k.rmsNorm(new Float32Array(4), new Float32Array(4), NaN), RangeError);
  assert.throws(() => k.siluMul(new Float32Array(4), new Float32Array(3)), RangeError);
});

Deno.test("the library re-checks lengths itself", () => {
  const s = k.symbols;
  const x = new Float32Array(64);
  const q = new Uint8Array(68);
  const y = new Float32Array(4);
  assert.equal(s.cf_quantize_q8_0(x, 64n, q, 67n), STATUS.LENGTH);
  assert.equal(s.cf_quantize_q8_0(x, 63n, q, 68n), STATUS.LENGTH);
  assert.equal(s.cf_quantize_q8_0(null, 64n, q, 68n), STATUS.INVALID_ARG);
  assert.equal(s.cf_matvec_q8_0(q, 68n, 3n, 64n, q, 68n, y, 4n), STATUS.LENGTH);
  assert.equal(s.cf_matvec_q8_0(q, 68n, 2n ** 62n, 64n, q, 68n, y, 4n), STATUS.OVERFLOW);
  assert.equal(s.cf_block_dots_q4_0_q8_0(q, 36n, q, 68n, 3n, new Int32Array(3), 3n), STATUS.LENGTH);
  assert.equal(s.cf_rope(x, 64n, 1n, 64n, 64n, 0, x, 31n, 1), STATUS.LENGTH);
  assert.equal(s.cf_rope(x, 64n, 1n, 64n, 64n, 0, x, 32n, 7), STATUS.INVALID_ARG);
  const misaligned = new Float32Array(new Uint8Array(68).buffer, 4, 16);
  assert.equal(s.cf_softmax(misaligned, 16n), STATUS.OK); // aligned view of 4-byte offset
  const at = new BigUint64Array(1);
  assert.equal(s.cf_argmax_f32(x, 0n, at), STATUS.INVALID_ARG);
  assert.equal(s.cf_argmax_f32(null, 4n, at), STATUS.INVALID_ARG);
  assert.equal(s.cf_argmax_f32(x, 4n, null), STATUS.INVALID_ARG);
  assert.equal(s.cf_argmax_f32(x, 4n, new BigUint64Array(new ArrayBuffer(16), 0, 1)), STATUS.OK);
  assert.equal(s.cf_init(9, 1, 0n), STATUS.INVALID_ARG);
  assert.equal(s.cf_init(0, 100000, 0n), STATUS.LIMIT);
  k.configure({ variant: "auto", threads: 1 });
});

Deno.test("non-finite inputs are reported, not quantized", () => {
  k.configure({ variant: "auto", threads: 1 });
  for (const bad of [NaN, Infinity, -Infinity]) {
    const x = new Float32Array(64);
    x[40] = bad;
    assert.throws(
      () => k.quantizeQ8_0(x),
      (e: unknown) => e instanceof KernelError && e.status === STATUS.NONFINITE,
    );
  }
  assert.throws(
    () => k.softmax(new Float32Array([1, NaN])),
    (e: unknown) => e instanceof KernelError && e.status === STATUS.NONFINITE,
  );
});

Deno.test("the sampler's greedy pick through argmax: the same token and errors as its own loop", () => {
  k.configure({ variant: "auto", threads: 1 });
  const rng = new Rng(18);
  const n = 49_152;
  const native = new Sampler(n, { temperature: 0 });
  // A bias of 0 changes no logit but takes the sampler's JavaScript path.
  const plain = new Sampler(n, { temperature: 0, logitBias: new Map([[0, 0]]) });
  for (let trial = 0; trial < 20; trial++) {
    const x = Float32Array.from({ length: n }, () => Math.round(rng.next() * 40) / 4);
    if (trial % 4 === 1) x.fill(-Infinity, 0, n - 3);
    assert.equal(native.sample(x), plain.sample(x), `trial ${trial}`);
  }
  const masked = new Float32Array(n).fill(-Infinity);
  assert.throws(() => native.sample(masked), /every token is masked or banned/);
  const bad = new Float32Array(n);
  bad[777] = NaN;
  assert.throws(() => native.sample(bad), /logits\[777\] is NaN/);
  bad[777] = 0;
  bad[9] = Infinity;
  assert.throws(() => native.sample(bad), /logits\[9\] is Infinity/);
});

Deno.test("streamRead folds every byte the same way for every thread count", () => {
  const rng = new Rng(17);
  const bytes = rng.bytes((3 << 20) + 77);
  k.configure({ variant: "auto", threads: 1 });
  const one = k.streamRead(bytes);
  k.configure({ variant: "auto", threads: 2 });
  assert.equal(k.streamRead(bytes), one);
  k.configure({ variant: "scalar", threads: 3 });
  assert.equal(k.streamRead(bytes), one);
  k.configure({ variant: "auto", threads: 1 });
});

Deno.test("settings parse strictly and name their source", () => {
  assert.equal(parseVariant("avx2", "x"), "avx2");
  assert.equal(parseVariant("neon_dotprod", "x"), "neon_dotprod");
  assert.equal(parseVariant(" auto ", "x"), "auto");
  assert.throws(
    () => parseVariant("sve2", "CFLOW_KERNEL_VARIANT"),
    /CFLOW_KERNEL_VARIANT: unknown/,
  );
  assert.equal(parseThreads("16", "x"), 16);
  for (const bad of ["0", "-1", "1.5", "", "257", "2x", "1e2"]) {
    assert.throws(() => parseThreads(bad, "CFLOW_THREADS"), /CFLOW_THREADS/);
  }
  assert.deepEqual(parseFeatures("avx2, fma,", "x"), ["avx2", "fma"]);
  assert.throws(() => parseFeatures("sse9", "CFLOW_CPU_DISABLE"), /unknown CPU feature "sse9"/);
  const env: Record<string, string> = {
    CFLOW_KERNEL_VARIANT: "scalar",
    CFLOW_THREADS: "3",
    CFLOW_CPU_DISABLE: "avx512f",
  };
  assert.deepEqual(kernelOptionsFromEnv((n) => env[n]), {
    variant: "scalar",
    threads: 3,
    disable: ["avx512f"],
  });
  assert.deepEqual(kernelOptionsFromEnv(() => undefined), {});
  for (const mode of ["auto", "on", "off"] as const) {
    assert.deepEqual(kernelOptionsFromEnv((n) => n === "CFLOW_PANEL_PREFETCH" ? mode : undefined), {
      panelPrefetch: mode,
    });
  }
  assert.throws(
    () => kernelOptionsFromEnv((n) => n === "CFLOW_PANEL_PREFETCH" ? "1" : undefined),
    /CFLOW_PANEL_PREFETCH: "1" is not auto, on or off/,
  );
});

Deno.test({
  name: "panel prefetch: on and off as asked, auto by the CPU's vendor",
  ignore: openKernels().backend === "wasm",
  fn: () => {
    const k = openKernels();
    try {
      k.configure({ panelPrefetch: "on" });
      assert.deepEqual(k.panelPrefetch, { on: true, mode: "on", source: "option" });
      k.configure({ panelPrefetch: "off" });
      assert.deepEqual(k.panelPrefetch, { on: false, mode: "off", source: "option" });
      k.configure({ panelPrefetch: "auto" });
      const amd = /^AMD /.test(k.cpuModel);
      assert.equal(k.panelPrefetch.on, !amd, `${k.cpuModel}: ${JSON.stringify(k.panelPrefetch)}`);
      assert.throws(
        // deno-lint-ignore no-explicit-any
        () => k.configure({ panelPrefetch: "sometimes" as any }),
        /panelPrefetch: "sometimes" is not auto, on or off/,
      );
    } finally {
      k.configure();
    }
  },
});

Deno.test("trimHeap: glibc's malloc_trim through the native library, false under wasm", () => {
  const k = openKernels();
  if (k.backend === "native" && Deno.build.os === "linux" && Deno.build.env === "gnu") {
    // 1 (pages released) or 0 (none free), never `unsupported` on glibc.
    const rc = k.symbols.cf_trim_heap();
    assert.ok(rc === 0 || rc === 1, `cf_trim_heap returned ${rc}`);
  }
  assert.equal(typeof k.trimHeap(), "boolean");
  assert.equal(openWasmKernels({ threads: 1 }).trimHeap(), false);
});
