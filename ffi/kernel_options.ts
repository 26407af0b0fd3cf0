/**
 * Kernel options: the {@link KernelOptions} that `Kernels.configure` and `openKernels` take,
 * how they are read from the environment ({@link kernelOptionsFromEnv}), the parsers of their
 * values ({@link parseVariant}, {@link parseThreads}, {@link parseFeatures}) and each variant's
 * panel kernel ({@link PANEL_KERNELS}, {@link panelsByDefault}). Nothing here loads the library
 * or touches a pointer; `./kernels.ts` re-exports all of it.
 *
 * @module
 */

import { readEnv } from "./loader.ts";
import { CPU_FEATURES, type CpuFeature, type VariantName, VARIANTS } from "./symbols.ts";

/** Largest thread count the pool accepts. */
export const MAX_THREADS = 256;

/**
 * How to configure the kernels. Unset fields fall back to the environment
 * (`CFLOW_KERNEL_VARIANT`, `CFLOW_THREADS`, `CFLOW_CPU_DISABLE`, `CFLOW_PREFETCH`,
 * `CFLOW_PANEL_PREFETCH`), then to the defaults: the best variant for this CPU, one thread per
 * physical core, panel prefetch as the CPU suggests.
 *
 * @example
 * ```ts
 * import type { KernelOptions } from "./kernel_options.ts";
 * const options: KernelOptions = { variant: "avx2", threads: 2 };
 * ```
 */
export interface KernelOptions {
  /** A variant to force, or "auto". */
  variant?: VariantName | "auto";
  /** Worker threads including the caller; 0 or unset = physical cores. */
  threads?: number;
  /** CPU features to treat as absent (to exercise lower variants). */
  disable?: readonly CpuFeature[];
  /**
   * The explicit prefetch thread (report claim 6; env `CFLOW_PREFETCH=1`):
   * plans post the next matrix and the next selected expert to a thread
   * that touches them with PREFETCHT0. Off by default.
   */
  prefetch?: boolean;
  /**
   * Whether the one-token panel kernels prefetch ahead of the panels they stream (env
   * `CFLOW_PANEL_PREFETCH=auto|on|off`; several tokens always do). "auto" (the default) as the
   * CPU suggests: off on AMD, whose hardware prefetchers did better alone (Zen 4:
   * Qwen2.5-Coder-1.5B decode 14.9 -> 22 tok/s at 1 thread), on elsewhere (Ice Lake gained
   * 20-35% read speed with it).
   */
  panelPrefetch?: PanelPrefetch;
}

/**
 * The panel kernels' prefetch setting ({@link KernelOptions.panelPrefetch}).
 *
 * @example
 * ```ts
 * import type { PanelPrefetch } from "./kernel_options.ts";
 * const p: PanelPrefetch = "off";
 * ```
 */
export type PanelPrefetch = "auto" | "on" | "off";

/**
 * Where each effective setting came from.
 *
 * @example
 * ```ts
 * import type { SettingSource } from "./kernel_options.ts";
 * const s: SettingSource = "env";
 * ```
 */
export type SettingSource = "option" | "env" | "default";

/**
 * Parses kernel settings from the environment; throws a RangeError naming
 * the variable when a value is malformed.
 *
 * @example
 * ```ts
 * import { kernelOptionsFromEnv } from "./kernel_options.ts";
 * const fromEnv = kernelOptionsFromEnv();
 * ```
 */
export function kernelOptionsFromEnv(
  get: (name: string) => string | undefined = readEnv,
): KernelOptions {
  const options: KernelOptions = {};
  const variant = get("CFLOW_KERNEL_VARIANT");
  if (variant !== undefined) options.variant = parseVariant(variant, "CFLOW_KERNEL_VARIANT");
  const threads = get("CFLOW_THREADS");
  if (threads !== undefined) options.threads = parseThreads(threads, "CFLOW_THREADS");
  const disable = get("CFLOW_CPU_DISABLE");
  if (disable !== undefined) options.disable = parseFeatures(disable, "CFLOW_CPU_DISABLE");
  const prefetch = get("CFLOW_PREFETCH");
  if (prefetch !== undefined) {
    if (prefetch !== "0" && prefetch !== "1") {
      throw new RangeError(`CFLOW_PREFETCH: "${prefetch}" is not 0 or 1`);
    }
    options.prefetch = prefetch === "1";
  }
  const panelPrefetch = get("CFLOW_PANEL_PREFETCH");
  if (panelPrefetch !== undefined) {
    if (panelPrefetch !== "auto" && panelPrefetch !== "on" && panelPrefetch !== "off") {
      throw new RangeError(`CFLOW_PANEL_PREFETCH: "${panelPrefetch}" is not auto, on or off`);
    }
    options.panelPrefetch = panelPrefetch;
  }
  return options;
}

/**
 * The packed-panel kernel of each variant (docs/KERNELS.md, "Packed 16-row
 * panels"): its dot-product primitive and the panel rows one vector holds.
 *
 * @example
 * ```ts
 * import { PANEL_KERNELS } from "./kernel_options.ts";
 * console.log(PANEL_KERNELS.avx2); // "vpmaddubsw + vpmaddwd, 8 rows per ymm"
 * ```
 */
export const PANEL_KERNELS: Readonly<Record<VariantName, string>> = {
  scalar: "scalar loop, one value at a time",
  avx2: "vpmaddubsw + vpmaddwd, 8 rows per ymm",
  avxvnni: "vpdpbusd, 8 rows per ymm",
  avx512vnni: "vpdpbusd, 16 rows per zmm",
  neon: "smull + pairwise adds, 4 rows per 128-bit vector",
  neon_dotprod: "sdot, 4 rows per 128-bit vector",
};

/**
 * Whether weights are packed into panels at load by default on a variant:
 * where panels measured faster than the row kernels over tiles (every SIMD
 * variant; the scalar loop over panels is slower than the scalar rows).
 *
 * @example
 * ```ts
 * import { panelsByDefault } from "./kernel_options.ts";
 * console.log(panelsByDefault("avx2"), panelsByDefault("scalar")); // true false
 * ```
 */
export function panelsByDefault(variant: VariantName): boolean {
  return variant !== "scalar";
}

/**
 * Parses a variant name ("auto", "scalar", "avx2", "avxvnni", "avx512vnni").
 *
 * @example
 * ```ts
 * import { parseVariant } from "./kernel_options.ts";
 * console.log(parseVariant("avx2", "--variant")); // "avx2"
 * ```
 */
export function parseVariant(text: string, what: string): VariantName | "auto" {
  const v = text.trim();
  if (v === "auto" || Object.hasOwn(VARIANTS, v)) return v as VariantName | "auto";
  throw new RangeError(
    `${what}: unknown kernel variant "${text}"; expected auto, ${Object.keys(VARIANTS).join(", ")}`,
  );
}

/**
 * Parses a thread count: an integer from 1 to {@link MAX_THREADS}.
 *
 * @example
 * ```ts
 * import { parseThreads } from "./kernel_options.ts";
 * console.log(parseThreads("2", "--threads")); // 2
 * ```
 */
export function parseThreads(text: string, what: string): number {
  const t = text.trim();
  const n = /^[0-9]+$/.test(t) ? Number(t) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_THREADS) {
    throw new RangeError(`${what}: "${text}" is not a thread count from 1 to ${MAX_THREADS}`);
  }
  return n;
}

/**
 * Parses a comma-separated list of CPU feature names.
 *
 * @example
 * ```ts
 * import { parseFeatures } from "./kernel_options.ts";
 * console.log(parseFeatures("avx512f,avx2", "CFLOW_CPU_DISABLE")); // ["avx512f", "avx2"]
 * ```
 */
export function parseFeatures(text: string, what: string): CpuFeature[] {
  const out: CpuFeature[] = [];
  for (const part of text.split(",")) {
    const name = part.trim();
    if (name === "") continue;
    if (!Object.hasOwn(CPU_FEATURES, name)) {
      throw new RangeError(
        `${what}: unknown CPU feature "${name}"; known: ${Object.keys(CPU_FEATURES).join(", ")}`,
      );
    }
    out.push(name as CpuFeature);
  }
  return out;
}
