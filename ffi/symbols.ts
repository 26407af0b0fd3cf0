/**
 * The C ABI of `libcflow_kernels.so`, declared once. Each entry carries the C
 * signature it binds; `kernels-zig/src/root.zig` is the other side, and
 * `kernels-zig/src/abi.zig` holds the numbers mirrored below.
 *
 * @module
 */

/** ABI version this binding was written for; the library must report it. */
export const ABI_VERSION: number = 7;

/**
 * The symbol table passed to `Deno.dlopen`.
 *
 * @example
 * ```ts ignore
 * import { symbols } from "./symbols.ts";
 * const lib = Deno.dlopen("kernels-zig/zig-out/lib/libcflow_kernels.so", symbols);
 * console.log(lib.symbols.cf_abi_version());
 * ```
 */
export const symbols = {
  // uint32_t cf_abi_version(void)
  cf_abi_version: { parameters: [], result: "u32" },
  // size_t cf_build_info(uint8_t *buf, size_t len)
  cf_build_info: { parameters: ["buffer", "usize"], result: "usize" },
  // size_t cf_cpu_model(uint8_t *buf, size_t len)
  cf_cpu_model: { parameters: ["buffer", "usize"], result: "usize" },
  // uint64_t cf_cpu_features(void)
  cf_cpu_features: { parameters: [], result: "u64" },
  // int32_t cf_variant_supported(uint32_t variant, uint64_t disable_mask)
  cf_variant_supported: { parameters: ["u32", "u64"], result: "i32" },
  // uint64_t cf_peak_rss(void)
  cf_peak_rss: { parameters: [], result: "u64" },
  // int32_t cf_trim_heap(void): glibc's malloc_trim(0); 1 released, 0 none, or a status
  cf_trim_heap: { parameters: [], result: "i32" },
  // int32_t cf_set_prefetch(uint32_t on)
  cf_set_prefetch: { parameters: ["u32"], result: "i32" },
  // int32_t cf_set_panel_prefetch(uint32_t mode): 0 auto (by CPU), 1 on, 2 off; returns 1/0 or a status
  cf_set_panel_prefetch: { parameters: ["u32"], result: "i32" },
  // int32_t cf_memory_usage(uint64_t *out, size_t out_len): RSS, PSS, Pss_File, Pss_Anon
  cf_memory_usage: { parameters: ["buffer", "usize"], result: "i32" },
  // uint32_t cf_physical_cores(void)
  cf_physical_cores: { parameters: [], result: "u32" },
  // int32_t cf_init(uint32_t variant, uint32_t threads, uint64_t disable_mask)
  cf_init: { parameters: ["u32", "u32", "u64"], result: "i32" },
  // uint32_t cf_variant(void)
  cf_variant: { parameters: [], result: "u32" },
  // uint32_t cf_threads(void)
  cf_threads: { parameters: [], result: "u32" },
  // void cf_shutdown(void)
  cf_shutdown: { parameters: [], result: "void" },
  // int32_t cf_quantize_q8_0(const float *x, size_t n, uint8_t *out, size_t out_len)
  cf_quantize_q8_0: { parameters: ["buffer", "usize", "buffer", "usize"], result: "i32" },
  // int32_t cf_block_dots_q4_0_q8_0(const uint8_t *w, size_t w_len, const uint8_t *x,
  //     size_t x_len, size_t n_blocks, int32_t *out, size_t out_len)
  cf_block_dots_q4_0_q8_0: {
    parameters: ["buffer", "usize", "buffer", "usize", "usize", "buffer", "usize"],
    result: "i32",
  },
  // int32_t cf_block_dots_q8_0_q8_0(same as above)
  cf_block_dots_q8_0_q8_0: {
    parameters: ["buffer", "usize", "buffer", "usize", "usize", "buffer", "usize"],
    result: "i32",
  },
  // int32_t cf_dot_q4_0_q8_0(const uint8_t *w, size_t w_len, const uint8_t *x, size_t x_len,
  //     size_t n, float *out)
  cf_dot_q4_0_q8_0: {
    parameters: ["buffer", "usize", "buffer", "usize", "usize", "buffer"],
    result: "i32",
  },
  // int32_t cf_dot_q8_0_q8_0(same as above)
  cf_dot_q8_0_q8_0: {
    parameters: ["buffer", "usize", "buffer", "usize", "usize", "buffer"],
    result: "i32",
  },
  // int32_t cf_matvec_q4_0(const uint8_t *w, size_t w_len, size_t rows, size_t cols,
  //     const uint8_t *x, size_t x_len, float *y, size_t y_len)
  cf_matvec_q4_0: {
    parameters: ["buffer", "usize", "usize", "usize", "buffer", "usize", "buffer", "usize"],
    result: "i32",
  },
  // int32_t cf_matvec_q8_0(same as above)
  cf_matvec_q8_0: {
    parameters: ["buffer", "usize", "usize", "usize", "buffer", "usize", "buffer", "usize"],
    result: "i32",
  },
  // int32_t cf_rms_norm(const float *x, const float *weight, size_t n, float eps, float *out)
  cf_rms_norm: { parameters: ["buffer", "buffer", "usize", "f32", "buffer"], result: "i32" },
  // int32_t cf_softmax(float *x, size_t n)
  cf_softmax: { parameters: ["buffer", "usize"], result: "i32" },
  // int32_t cf_argmax_f32(const float *x, size_t n, uint64_t *index)
  cf_argmax_f32: { parameters: ["buffer", "usize", "buffer"], result: "i32" },
  // int32_t cf_rope(float *x, size_t x_len, size_t n_heads, size_t head_dim, size_t n_rot,
  //     uint32_t pos, const float *inv_freq, size_t inv_freq_len, uint32_t mode)
  cf_rope: {
    parameters: ["buffer", "usize", "usize", "usize", "usize", "u32", "buffer", "usize", "u32"],
    result: "i32",
  },
  // int32_t cf_silu_mul(const float *gate, const float *up, float *out, size_t n)
  cf_silu_mul: { parameters: ["buffer", "buffer", "buffer", "usize"], result: "i32" },
  // int32_t cf_gelu_mul(const float *gate, const float *up, float *out, size_t n)
  cf_gelu_mul: { parameters: ["buffer", "buffer", "buffer", "usize"], result: "i32" },
  // int32_t cf_stream_read(const uint8_t *p, size_t len, uint64_t *out)
  cf_stream_read: { parameters: ["buffer", "usize", "buffer"], result: "i32" },
  // int32_t cf_tiles_matvec(int32_t handle, size_t offset, size_t length, uint32_t tile_type,
  //     size_t cols, uint32_t n_members, const uint32_t *member_rows, const uint8_t *xq,
  //     size_t xq_len, const float *xf, size_t xf_len, float *y, size_t y_len)
  cf_tiles_matvec: {
    parameters: [
      "i32",
      "usize",
      "usize",
      "u32",
      "usize",
      "u32",
      "buffer",
      "buffer",
      "usize",
      "buffer",
      "usize",
      "buffer",
      "usize",
    ],
    result: "i32",
  },
  // int32_t cf_attention(const float *q, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
  //     const void *k_cache, const void *v_cache, uint32_t kv_type, size_t cache_len,
  //     uint32_t first, uint32_t n_pos, float scale, float softcap,
  //     float *scores, size_t scores_len, float *out, size_t out_len)
  cf_attention: {
    parameters: [
      "buffer",
      "u32",
      "u32",
      "u32",
      "buffer",
      "buffer",
      "u32",
      "usize",
      "u32",
      "u32",
      "f32",
      "f32",
      "buffer",
      "usize",
      "buffer",
      "usize",
    ],
    result: "i32",
  },
  // int32_t cf_map_file(const uint8_t *path, size_t path_len, uint64_t out[2])
  cf_map_file: { parameters: ["buffer", "usize", "buffer"], result: "i32" },
  // int32_t cf_plan_create(int32_t workspace, const uint32_t *ops, size_t ops_words,
  //     const uint32_t *runs, size_t runs_words, uint32_t max_tokens, uint32_t context,
  //     uint32_t where[2])
  cf_plan_create: {
    parameters: ["i32", "buffer", "usize", "buffer", "usize", "u32", "u32", "buffer"],
    result: "i32",
  },
  // int32_t cf_plan_run(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
  //     uint32_t single_thread)
  cf_plan_run: { parameters: ["i32", "buffer", "usize", "u32", "u32"], result: "i32" },
  // The same function, run on one of Deno's blocking threads (a Promise), so
  // that the event loop stays free and cf_plan_cancel can stop it.
  cf_plan_run_async: {
    name: "cf_plan_run",
    parameters: ["i32", "buffer", "usize", "u32", "u32"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t cf_plan_run_ops(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
  //     uint32_t first, uint32_t last)
  cf_plan_run_ops: {
    parameters: ["i32", "buffer", "usize", "u32", "u32", "u32"],
    result: "i32",
  },
  // int32_t cf_plan_run_rows(int32_t plan, const uint32_t *tokens, size_t n_tokens,
  //     const uint32_t *bases, const uint32_t *positions, uint32_t first, uint32_t last)
  cf_plan_run_rows: {
    parameters: ["i32", "buffer", "usize", "buffer", "buffer", "u32", "u32"],
    result: "i32",
  },
  // The same function on one of Deno's blocking threads (a Promise).
  cf_plan_run_rows_async: {
    name: "cf_plan_run_rows",
    parameters: ["i32", "buffer", "usize", "buffer", "buffer", "u32", "u32"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t cf_plan_cancel(int32_t plan, uint32_t value)
  cf_plan_cancel: { parameters: ["i32", "u32"], result: "i32" },
  // int32_t cf_plan_destroy(int32_t plan)
  cf_plan_destroy: { parameters: ["i32"], result: "i32" },
  // int32_t cf_pack(const uint32_t *run, size_t run_words, int32_t dst, size_t dst_offset,
  //     size_t dst_len, uint32_t evict)
  cf_pack: { parameters: ["buffer", "usize", "i32", "usize", "usize", "u32"], result: "i32" },
  // int32_t cf_write(int32_t handle, size_t offset, const uint8_t *src, size_t len)
  cf_write: { parameters: ["i32", "usize", "buffer", "usize"], result: "i32" },
  // int32_t cf_alloc(size_t len, size_t alignment, uint64_t out[2])
  cf_alloc: { parameters: ["usize", "usize", "buffer"], result: "i32" },
  // int32_t cf_release(int32_t handle)
  cf_release: { parameters: ["i32"], result: "i32" },
  // int32_t cf_copy(int32_t handle, size_t offset, uint8_t *dst, size_t len)
  cf_copy: { parameters: ["i32", "usize", "buffer", "usize"], result: "i32" },
  // int32_t cf_madvise(int32_t handle, size_t offset, size_t len, uint32_t advice)
  cf_madvise: { parameters: ["i32", "usize", "usize", "u32"], result: "i32" },
  // int32_t cf_io_open(const uint8_t *path, size_t path_len, uint64_t out_info[4])
  cf_io_open: { parameters: ["buffer", "usize", "buffer"], result: "i32" },
  // int32_t cf_io_close(int32_t file)
  cf_io_close: { parameters: ["i32"], result: "i32" },
  // int32_t cf_stage_create(int32_t file, size_t slot_bytes, uint32_t n_slots, uint64_t out[4])
  cf_stage_create: { parameters: ["i32", "usize", "u32", "buffer"], result: "i32" },
  // int32_t cf_stage_destroy(int32_t stage)
  cf_stage_destroy: { parameters: ["i32"], result: "i32" },
  // int32_t cf_stage_fetch(int32_t stage, uint32_t layer, uint32_t expert, uint64_t file_offset,
  //     size_t length, uint32_t out[2])
  cf_stage_fetch: {
    parameters: ["i32", "u32", "u32", "u64", "usize", "buffer"],
    result: "i32",
  },
  // int32_t cf_stage_wait(int32_t stage, uint32_t slot)
  cf_stage_wait: { parameters: ["i32", "u32"], result: "i32" },
  // int32_t cf_stage_copy(int32_t stage, uint32_t slot, size_t offset, uint8_t *dst, size_t len)
  cf_stage_copy: { parameters: ["i32", "u32", "usize", "buffer", "usize"], result: "i32" },
  // int32_t cf_stage_release(int32_t stage, uint32_t slot)
  cf_stage_release: { parameters: ["i32", "u32"], result: "i32" },
  // int32_t cf_stage_stats(int32_t stage, uint64_t out[4])
  cf_stage_stats: { parameters: ["i32", "buffer"], result: "i32" },
  // int32_t cf_stage_reset_stats(int32_t stage)
  cf_stage_reset_stats: { parameters: ["i32"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/**
 * The loaded library's symbol functions.
 *
 * @example
 * ```ts ignore
 * import type { KernelSymbols } from "./symbols.ts";
 * function abi(s: KernelSymbols): number {
 *   return s.cf_abi_version();
 * }
 * ```
 */
export type KernelSymbols = Deno.DynamicLibrary<typeof symbols>["symbols"];

/**
 * Status codes returned by the library (`abi.Status`); I/O failures are
 * `IO_BASE - errno`.
 *
 * @example
 * ```ts
 * import { STATUS } from "./symbols.ts";
 * console.log(STATUS.LENGTH); // -2
 * ```
 */
export const STATUS = {
  OK: 0,
  INVALID_ARG: -1,
  LENGTH: -2,
  ALIGNMENT: -3,
  RANGE: -4,
  UNSUPPORTED: -5,
  NOT_INITIALIZED: -6,
  NONFINITE: -7,
  NO_MEMORY: -9,
  HANDLE: -10,
  OVERFLOW: -11,
  LIMIT: -12,
  BUSY: -13,
  /** A mapped file was truncated or rewritten since it was mapped. */
  CHANGED: -14,
  /** A plan run stopped early because it was cancelled. */
  CANCELLED: -15,
} as const;

/**
 * Base of I/O status codes: the library returns `IO_BASE - errno`.
 *
 * @example
 * ```ts
 * import { IO_BASE } from "./symbols.ts";
 * const enoent = IO_BASE - 2; // -1002
 * ```
 */
export const IO_BASE: number = -1000;

/**
 * Kernel variant names and their ABI ids, in increasing order of ISA needs
 * within each architecture (`avxvnni`, AVX2 with 256-bit VNNI, came after
 * `avx512vnni` and has a higher id). A library holds its architecture's
 * variants only ({@linkcode VARIANT_ARCH}); the others are unsupported there.
 *
 * @example
 * ```ts
 * import { VARIANTS } from "./symbols.ts";
 * console.log(VARIANTS.avx512vnni); // 3
 * ```
 */
export const VARIANTS = {
  scalar: 1,
  avx2: 2,
  avxvnni: 4,
  avx512vnni: 3,
  neon: 5,
  neon_dotprod: 6,
} as const;

/**
 * Name of a kernel variant.
 *
 * @example
 * ```ts
 * import type { VariantName } from "./symbols.ts";
 * const v: VariantName = "avx2";
 * ```
 */
export type VariantName = keyof typeof VARIANTS;

/**
 * The architecture whose library holds each variant (`Deno.build.arch`'s
 * names); `scalar` is in every library.
 *
 * @example
 * ```ts
 * import { VARIANT_ARCH } from "./symbols.ts";
 * console.log(VARIANT_ARCH.neon_dotprod); // "aarch64"
 * ```
 */
export const VARIANT_ARCH: Readonly<Record<VariantName, "x86_64" | "aarch64" | "any">> = {
  scalar: "any",
  avx2: "x86_64",
  avxvnni: "x86_64",
  avx512vnni: "x86_64",
  neon: "aarch64",
  neon_dotprod: "aarch64",
};

/**
 * CPU feature bits reported by `cf_cpu_features` (`cpu.Feature` in Zig).
 *
 * @example
 * ```ts
 * import { CPU_FEATURES } from "./symbols.ts";
 * console.log(CPU_FEATURES.avx512vnni); // 19
 * ```
 */
export const CPU_FEATURES = {
  sse3: 0,
  ssse3: 1,
  sse4_1: 2,
  sse4_2: 3,
  popcnt: 4,
  cx16: 5,
  avx: 6,
  avx2: 7,
  fma: 8,
  f16c: 9,
  bmi1: 10,
  bmi2: 11,
  lzcnt: 12,
  movbe: 13,
  avx512f: 14,
  avx512bw: 15,
  avx512cd: 16,
  avx512dq: 17,
  avx512vl: 18,
  avx512vnni: 19,
  avxvnni: 20,
  lahf_lm: 21,
  xsave: 22,
  // aarch64, from getauxval(AT_HWCAP) and AT_HWCAP2
  asimd: 23,
  fphp: 24,
  asimdhp: 25,
  asimddp: 26,
  i8mm: 27,
} as const;

/**
 * Name of a CPU feature the library detects.
 *
 * @example
 * ```ts
 * import type { CpuFeature } from "./symbols.ts";
 * const f: CpuFeature = "avx2";
 * ```
 */
export type CpuFeature = keyof typeof CPU_FEATURES;

/**
 * madvise advice accepted by `cf_madvise` (Linux numbering).
 *
 * @example
 * ```ts
 * import { ADVICE } from "./symbols.ts";
 * console.log(ADVICE.dontneed); // 4
 * ```
 */
export const ADVICE = {
  normal: 0,
  random: 1,
  sequential: 2,
  willneed: 3,
  dontneed: 4,
  hugepage: 14,
} as const;

/**
 * A madvise hint name.
 *
 * @example
 * ```ts
 * import type { Advice } from "./symbols.ts";
 * const a: Advice = "willneed";
 * ```
 */
export type Advice = keyof typeof ADVICE;
