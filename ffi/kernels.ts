/**
 * Typed wrappers over the native kernels. Every wrapper checks types, lengths
 * and alignment first and throws `TypeError`/`RangeError` before crossing into
 * native code; the library checks again and its status codes become
 * {@link KernelError}s. Nothing outside `ffi/` sees a pointer.
 *
 * The library has process-wide state (the selected variant, the worker pool),
 * so there is one {@link Kernels} instance per process: {@link openKernels}
 * loads it once and (re)configures it.
 *
 * @module
 */

import { KernelError, KernelLoadError } from "./errors.ts";
import {
  type KernelOptions,
  kernelOptionsFromEnv,
  type PanelPrefetch,
  parseThreads,
  type SettingSource,
} from "./kernel_options.ts";
import type { KernelBackend, OpenedLibrary } from "./loader.ts";
import type { WasmLibrary } from "./wasm_backend.ts";
import {
  CPU_FEATURES,
  type CpuFeature,
  type KernelSymbols,
  STATUS,
  type VariantName,
  VARIANTS,
} from "./symbols.ts";
import {
  checkBlocks,
  checkInt,
  checkLen,
  checkType,
  featureMask,
  Q8_0_BYTES,
  sz,
  variantName,
  weightBlockBytes,
} from "./_kernel_args.ts";

export {
  kernelOptionsFromEnv,
  MAX_THREADS,
  PANEL_KERNELS,
  panelsByDefault,
  parseFeatures,
  parseThreads,
  parseVariant,
} from "./kernel_options.ts";
export type { KernelOptions, PanelPrefetch, SettingSource } from "./kernel_options.ts";

/** Largest RoPE position (positions are exact in f32). */
export const ROPE_MAX_POS = 1 << 24;

/**
 * Weight block formats the dot and matvec kernels take (ggml layouts).
 *
 * @example
 * ```ts
 * import type { WeightType } from "./kernels.ts";
 * const t: WeightType = "q4_0";
 * ```
 */
export type WeightType = "q4_0" | "q8_0";

/**
 * The loaded, configured kernel library. Obtain it from {@link openKernels}.
 *
 * @example
 * ```ts ignore
 * import { openKernels } from "./open_kernels.ts";
 * const k = openKernels({ threads: 1 });
 * const q = k.quantizeQ8_0(new Float32Array(64).fill(0.5));
 * console.log(k.variant, q.length); // e.g. "avx512vnni" 68
 * ```
 */
export class Kernels {
  readonly #s: KernelSymbols;
  readonly #argmaxAt = new BigUint64Array(1);
  /** Path of the loaded library (or of the `.wasm` build). */
  readonly libraryPath: string;
  /** Which build runs the kernels: native (FFI) or WebAssembly. */
  readonly backend: KernelBackend;
  /** Why the native library is not used, when the fallback engaged by itself. */
  readonly fallbackReason: string | undefined;
  /** @internal The WebAssembly instance (wasm backend only); ffi/ only. */
  readonly wasm: WasmLibrary | undefined;
  #sources: { variant: SettingSource; threads: SettingSource } = {
    variant: "default",
    threads: "default",
  };
  #disabled: readonly CpuFeature[] = [];
  #prefetch = false;
  #panelPrefetch: { on: boolean; mode: PanelPrefetch; source: SettingSource } = {
    on: false,
    mode: "auto",
    source: "default",
  };
  readonly #one = new Float32Array(1);
  readonly #u64 = new BigUint64Array(1);

  /** @internal Use {@link openKernels}. */
  constructor(opened: OpenedLibrary) {
    this.#s = opened.lib.symbols;
    this.libraryPath = opened.path;
    this.backend = opened.backend ?? "native";
    this.fallbackReason = opened.fallbackReason;
    this.wasm = opened.wasm;
  }

  /** @internal The raw symbols, for the other ffi/ modules only. */
  get symbols(): KernelSymbols {
    return this.#s;
  }

  /**
   * Selects the variant and the thread count. Explicit options win over the
   * environment, which wins over the defaults.
   */
  configure(options: KernelOptions = {}): void {
    const env = kernelOptionsFromEnv();
    const variant = options.variant ?? env.variant ?? "auto";
    const threads = options.threads ?? env.threads ?? 0;
    const disable = options.disable ?? env.disable ?? [];
    if (options.threads !== undefined && threads !== 0) parseThreads(String(threads), "threads");
    const mask = featureMask(disable);
    const panelMode = options.panelPrefetch ?? env.panelPrefetch ?? "auto";
    if (!["auto", "on", "off"].includes(panelMode)) {
      throw new RangeError(`panelPrefetch: "${panelMode}" is not auto, on or off`);
    }
    const id = variant === "auto" ? 0 : VARIANTS[variant];
    const rc = this.#s.cf_init(id, threads, mask);
    if (rc === STATUS.UNSUPPORTED) {
      const have = this.cpuFeatures().filter((f) => !disable.includes(f));
      throw new KernelLoadError(
        `kernel variant "${variant}" cannot run on this CPU` +
          (disable.length > 0 ? ` with ${disable.join(", ")} disabled` : "") +
          `; it supports ${this.supportedVariants(disable).join(", ")} ` +
          `(features: ${have.join(" ")})`,
        [],
      );
    }
    if (rc < 0) throw new KernelError("cf_init", rc);
    const prefetch = options.prefetch ?? env.prefetch ?? false;
    if (this.backend !== "wasm") {
      const p = this.#s.cf_set_prefetch(prefetch ? 1 : 0);
      if (p !== STATUS.OK) throw new KernelError("cf_set_prefetch", p);
    }
    this.#prefetch = prefetch;
    const on = this.#s.cf_set_panel_prefetch({ auto: 0, on: 1, off: 2 }[panelMode]);
    if (on < 0) throw new KernelError("cf_set_panel_prefetch", on);
    this.#panelPrefetch = {
      on: on === 1,
      mode: panelMode,
      source: options.panelPrefetch !== undefined
        ? "option"
        : env.panelPrefetch !== undefined
        ? "env"
        : "default",
    };
    this.#disabled = [...disable];
    this.#sources = {
      variant: options.variant !== undefined
        ? "option"
        : env.variant !== undefined
        ? "env"
        : "default",
      threads: options.threads !== undefined
        ? "option"
        : env.threads !== undefined
        ? "env"
        : "default",
    };
  }

  /**
   * Whether the one-token panel kernels prefetch ahead of the panels they stream, the mode
   * asked for ("auto": as the CPU suggests) and where that came from.
   */
  get panelPrefetch(): { on: boolean; mode: PanelPrefetch; source: SettingSource } {
    return { ...this.#panelPrefetch };
  }

  /** The active kernel variant. */
  get variant(): VariantName {
    const id = this.#s.cf_variant();
    if (id === 0) throw new KernelError("cf_variant", STATUS.NOT_INITIALIZED);
    return variantName(id);
  }

  /** Threads in the pool, the calling thread included. */
  get threads(): number {
    return this.#s.cf_threads();
  }

  /** Where the variant and thread settings came from. */
  get sources(): { variant: SettingSource; threads: SettingSource } {
    return { ...this.#sources };
  }

  /** Features disabled by configuration. */
  get disabledFeatures(): readonly CpuFeature[] {
    return this.#disabled;
  }

  /** Whether the explicit prefetch thread is on ({@link KernelOptions.prefetch}). */
  get prefetch(): boolean {
    return this.#prefetch;
  }

  /** Compiler, mode and target the library was built with. */
  get buildInfo(): string {
    return this.#text(this.#s.cf_build_info);
  }

  /** The CPU's brand string as cpuid reports it ("" if none). */
  get cpuModel(): string {
    return this.#text(this.#s.cf_cpu_model);
  }

  #text(f: (buf: Uint8Array | null, len: bigint) => number | bigint): string {
    const n = Number(f(null, 0n));
    const buf = new Uint8Array(Math.min(n, 4096));
    f(buf, BigInt(buf.length));
    return new TextDecoder().decode(buf);
  }

  /** CPU features detected (and enabled by the OS). */
  cpuFeatures(): CpuFeature[] {
    const bits = BigInt(this.#s.cf_cpu_features());
    return (Object.keys(CPU_FEATURES) as CpuFeature[]).filter((f) =>
      ((bits >> BigInt(CPU_FEATURES[f])) & 1n) === 1n
    );
  }

  /** Variants this CPU can run, with the given features treated as absent. */
  supportedVariants(disable: readonly CpuFeature[] = []): VariantName[] {
    const mask = featureMask(disable);
    return (Object.keys(VARIANTS) as VariantName[]).filter((v) =>
      this.#s.cf_variant_supported(VARIANTS[v], mask) === 1
    );
  }

  /**
   * Peak resident set size of this process in bytes (VmHWM of /proc/self/status, else
   * getrusage, whose figure Linux carries over from a parent process). The wasm
   * build cannot ask the OS: there it is the current RSS, which linear
   * memory (never shrinking) keeps close to the peak.
   */
  peakRss(): number {
    if (this.backend === "wasm") return Deno.memoryUsage().rss;
    return Number(this.#s.cf_peak_rss());
  }

  /**
   * Hands the C heap's free pages back to the OS (glibc's `malloc_trim(0)`), as after a
   * model's load, whose temporaries glibc would otherwise keep resident in the arenas of the
   * threads that freed them. True if pages were released; false if none were, or where the C
   * library cannot (not glibc) and under the wasm build.
   *
   * @example
   * ```ts ignore
   * import { openKernels } from "./mod.ts";
   * openKernels().trimHeap();
   * ```
   */
  trimHeap(): boolean {
    if (this.backend === "wasm") return false;
    const rc = this.#s.cf_trim_heap();
    if (rc < 0 && rc !== STATUS.UNSUPPORTED) throw new KernelError("cf_trim_heap", rc);
    return rc === 1;
  }

  /**
   * This process's RSS, PSS and PSS of file-backed and of anonymous pages,
   * in bytes (/proc/self/smaps_rollup, read by the library); undefined where
   * that file does not exist or under the wasm build.
   */
  memoryUsage(): { rss: number; pss: number; pssFile: number; pssAnon: number } | undefined {
    if (this.backend === "wasm") return undefined;
    const out = new BigUint64Array(4);
    const rc = this.#s.cf_memory_usage(new Uint8Array(out.buffer), 32n);
    if (rc !== STATUS.OK) return undefined;
    const [rss, pss, pssFile, pssAnon] = [...out].map(Number);
    return { rss, pss, pssFile, pssAnon };
  }

  /** Physical cores available to this process. */
  physicalCores(): number {
    return this.#s.cf_physical_cores();
  }

  #check(op: string, rc: number): void {
    if (rc !== STATUS.OK) throw new KernelError(op, rc);
  }

  /**
   * Quantizes `x` (a multiple of 32 long) to Q8_0 blocks, into `out` when
   * given. Throws a KernelError (status NONFINITE) on NaN or infinities.
   */
  quantizeQ8_0(x: Float32Array, out?: Uint8Array): Uint8Array {
    const fn = "quantizeQ8_0";
    checkType(fn, "x", x, Float32Array);
    const nb = checkBlocks(fn, "x.length", x.length);
    const dst = out ?? new Uint8Array(nb * Q8_0_BYTES);
    checkType(fn, "out", dst, Uint8Array);
    checkLen(fn, "out", dst.length, nb * Q8_0_BYTES);
    this.#check("cf_quantize_q8_0", this.#s.cf_quantize_q8_0(x, sz(x.length), dst, sz(dst.length)));
    return dst;
  }

  /** Per-block integer dot products of Q4_0 or Q8_0 weights with Q8_0 activations. */
  blockDots(
    type: WeightType,
    w: Uint8Array,
    x: Uint8Array,
    nBlocks: number,
    out?: Int32Array,
  ): Int32Array {
    const fn = `blockDots(${type})`;
    checkType(fn, "w", w, Uint8Array);
    checkType(fn, "x", x, Uint8Array);
    checkInt(fn, "nBlocks", nBlocks, 1);
    checkLen(fn, "w", w.length, nBlocks * weightBlockBytes(type));
    checkLen(fn, "x", x.length, nBlocks * Q8_0_BYTES);
    const dst = out ?? new Int32Array(nBlocks);
    checkType(fn, "out", dst, Int32Array);
    checkLen(fn, "out", dst.length, nBlocks);
    const f = type === "q4_0" ? this.#s.cf_block_dots_q4_0_q8_0 : this.#s.cf_block_dots_q8_0_q8_0;
    this.#check(
      `cf_block_dots_${type}_q8_0`,
      f(w, sz(w.length), x, sz(x.length), sz(nBlocks), dst, sz(dst.length)),
    );
    return dst;
  }

  /** Dot product of one quantized row of n weights with Q8_0 activations. */
  dot(type: WeightType, w: Uint8Array, x: Uint8Array, n: number): number {
    const fn = `dot(${type})`;
    checkType(fn, "w", w, Uint8Array);
    checkType(fn, "x", x, Uint8Array);
    const nb = checkBlocks(fn, "n", n);
    checkLen(fn, "w", w.length, nb * weightBlockBytes(type));
    checkLen(fn, "x", x.length, nb * Q8_0_BYTES);
    const f = type === "q4_0" ? this.#s.cf_dot_q4_0_q8_0 : this.#s.cf_dot_q8_0_q8_0;
    this.#check(`cf_dot_${type}_q8_0`, f(w, sz(w.length), x, sz(x.length), sz(n), this.#one));
    return this.#one[0];
  }

  /** y = W x for a row-major quantized W (rows x cols), spread over the pool. */
  matvec(
    type: WeightType,
    w: Uint8Array,
    rows: number,
    cols: number,
    x: Uint8Array,
    y?: Float32Array,
  ): Float32Array {
    const fn = `matvec(${type})`;
    checkType(fn, "w", w, Uint8Array);
    checkType(fn, "x", x, Uint8Array);
    checkInt(fn, "rows", rows, 1);
    const nb = checkBlocks(fn, "cols", cols);
    checkLen(fn, "w", w.length, rows * nb * weightBlockBytes(type));
    checkLen(fn, "x", x.length, nb * Q8_0_BYTES);
    const dst = y ?? new Float32Array(rows);
    checkType(fn, "y", dst, Float32Array);
    checkLen(fn, "y", dst.length, rows);
    const f = type === "q4_0" ? this.#s.cf_matvec_q4_0 : this.#s.cf_matvec_q8_0;
    this.#check(
      `cf_matvec_${type}`,
      f(w, sz(w.length), sz(rows), sz(cols), x, sz(x.length), dst, sz(dst.length)),
    );
    return dst;
  }

  /** out = x / sqrt(mean(x^2) + eps) * weight. */
  rmsNorm(x: Float32Array, weight: Float32Array, eps: number, out?: Float32Array): Float32Array {
    const fn = "rmsNorm";
    checkType(fn, "x", x, Float32Array);
    checkType(fn, "weight", weight, Float32Array);
    checkInt(fn, "x.length", x.length, 1);
    checkLen(fn, "weight", weight.length, x.length);
    if (!Number.isFinite(eps) || eps < 0) {
      throw new RangeError(`${fn}: eps ${eps} is not a finite number >= 0`);
    }
    const dst = out ?? new Float32Array(x.length);
    checkType(fn, "out", dst, Float32Array);
    checkLen(fn, "out", dst.length, x.length);
    this.#check("cf_rms_norm", this.#s.cf_rms_norm(x, weight, sz(x.length), eps, dst));
    return dst;
  }

  /** Softmax of x in place. -Infinity entries become 0. */
  softmax(x: Float32Array): Float32Array {
    checkType("softmax", "x", x, Float32Array);
    checkInt("softmax", "x.length", x.length, 1);
    this.#check("cf_softmax", this.#s.cf_softmax(x, sz(x.length)));
    return x;
  }

  /**
   * The greedy pick over `x` (logits): the first index of its largest value (ties go to the
   * lowest index; -0 equals +0), or -1 when every value is -Infinity (masked). Throws a
   * RangeError naming the first NaN or +Infinity. One pass of the variant's vectors over x and
   * one up to the maximum, against a JavaScript loop's one value at a time.
   */
  argmax(x: Float32Array): number {
    checkType("argmax", "x", x, Float32Array);
    checkInt("argmax", "x.length", x.length, 1);
    const at = this.#argmaxAt;
    const rc = this.#s.cf_argmax_f32(x, sz(x.length), at);
    const i = Number(at[0]);
    if (rc === STATUS.NONFINITE && i < x.length) {
      throw new RangeError(`argmax: x[${i}] is ${x[i]}`);
    }
    this.#check("cf_argmax_f32", rc);
    if (i > x.length) throw new KernelError("cf_argmax_f32", STATUS.RANGE);
    return i === x.length ? -1 : i;
  }

  /** RoPE in place on nHeads heads of headDim; the first nRot dims rotate. */
  rope(
    x: Float32Array,
    nHeads: number,
    headDim: number,
    nRot: number,
    pos: number,
    invFreq: Float32Array,
    mode: "neox" | "normal",
  ): Float32Array {
    const fn = "rope";
    checkType(fn, "x", x, Float32Array);
    checkType(fn, "invFreq", invFreq, Float32Array);
    checkInt(fn, "nHeads", nHeads, 1);
    checkInt(fn, "headDim", headDim, 1);
    checkInt(fn, "nRot", nRot, 2);
    if (nRot % 2 !== 0 || nRot > headDim) {
      throw new RangeError(`${fn}: nRot ${nRot} must be even and at most headDim ${headDim}`);
    }
    checkInt(fn, "pos", pos, 0);
    if (pos > ROPE_MAX_POS) throw new RangeError(`${fn}: pos ${pos} exceeds ${ROPE_MAX_POS}`);
    if (mode !== "neox" && mode !== "normal") throw new RangeError(`${fn}: unknown mode ${mode}`);
    checkLen(fn, "x", x.length, nHeads * headDim);
    checkLen(fn, "invFreq", invFreq.length, nRot / 2);
    const rc = this.#s.cf_rope(
      x,
      sz(x.length),
      sz(nHeads),
      sz(headDim),
      sz(nRot),
      pos,
      invFreq,
      sz(invFreq.length),
      mode === "neox" ? 1 : 0,
    );
    this.#check("cf_rope", rc);
    return x;
  }

  /** out = silu(gate) * up. */
  siluMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
    return this.#gated("siluMul", gate, up, out);
  }

  /** out = gelu_tanh(gate) * up. */
  geluMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
    return this.#gated("geluMul", gate, up, out);
  }

  #gated(
    fn: "siluMul" | "geluMul",
    gate: Float32Array,
    up: Float32Array,
    out?: Float32Array,
  ): Float32Array {
    checkType(fn, "gate", gate, Float32Array);
    checkType(fn, "up", up, Float32Array);
    checkInt(fn, "gate.length", gate.length, 1);
    checkLen(fn, "up", up.length, gate.length);
    const dst = out ?? new Float32Array(gate.length);
    checkType(fn, "out", dst, Float32Array);
    checkLen(fn, "out", dst.length, gate.length);
    const f = fn === "siluMul" ? this.#s.cf_silu_mul : this.#s.cf_gelu_mul;
    this.#check(
      fn === "siluMul" ? "cf_silu_mul" : "cf_gelu_mul",
      f(gate, up, dst, sz(gate.length)),
    );
    return dst;
  }

  /**
   * Reads every byte of `bytes` once over the pool and returns an XOR fold:
   * the memory-bandwidth yardstick the benchmarks compare kernels against.
   */
  streamRead(bytes: Uint8Array): bigint {
    checkType("streamRead", "bytes", bytes, Uint8Array);
    checkInt("streamRead", "bytes.length", bytes.length, 1);
    this.#check("cf_stream_read", this.#s.cf_stream_read(bytes, sz(bytes.length), this.#u64));
    return this.#u64[0];
  }

  /** Stops the worker threads. {@link configure} starts them again. */
  shutdown(): void {
    this.#s.cf_shutdown();
  }
}
