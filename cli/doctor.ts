/**
 * `cflow doctor`: what cflow runs on. Deno and Zig versions, CPU features,
 * the kernel variants this CPU supports and the active one, the backend
 * (the native library over FFI, or its WebAssembly build) and its path,
 * threads, the cache folder, and the permissions the process holds.
 *
 * @module
 */

import {
  type KernelOptions,
  openKernels,
  PANEL_KERNELS,
  panelsByDefault,
  VARIANT_ARCH,
  type VariantName,
  VARIANTS,
} from "../ffi/mod.ts";
import { VERSION } from "../version.ts";
import { cacheRoot } from "../runtime/cache_paths.ts";

/**
 * Everything `cflow doctor` reports.
 *
 * @example
 * ```ts ignore
 * import { diagnose } from "./doctor.ts";
 * const report = diagnose({});
 * console.log(report.kernels.variant);
 * ```
 */
export interface DoctorReport {
  cflow: string;
  deno: { version: string; v8: string; typescript: string };
  zig: { version: string; build: string };
  cpu: { model: string; features: string[]; physicalCores: number };
  kernels: {
    /** "native": the shared library over FFI; "wasm": the WebAssembly build (no FFI). */
    backend: "native" | "wasm";
    /** Why the native library is not used, when the fallback engaged by itself. */
    fallbackReason?: string;
    library: string;
    variant: VariantName;
    variantSource: string;
    supported: VariantName[];
    disabledFeatures: string[];
    /** Whether `--packed auto` packs weights into panels on this variant, and its panel kernel. */
    panels: { default: boolean; kernel: string };
    /** Whether one-token panel kernels prefetch ahead of their reads, the mode and its source. */
    panelPrefetch: { on: boolean; mode: string; source: string };
  };
  threads: { count: number; source: string };
  /**
   * The user-level cache (models/, converted/): its folder, or null and why it cannot be used
   * (a relative CFLOW_CACHE, XDG_CACHE_HOME or HOME).
   */
  cache: { dir: string | null; error?: string };
  /** FFI as granted: "not used" with the WebAssembly kernels under a scoped or no grant. */
  permissions: { ffi: "unscoped" | "kernel library only" | "not used" };
}

/**
 * Loads the kernels with `options` (over the environment) and reports.
 *
 * @example
 * ```ts ignore
 * import { diagnose } from "./doctor.ts";
 * console.log(diagnose({ threads: 1 }).threads.count); // 1
 * ```
 */
export function diagnose(options: KernelOptions): DoctorReport {
  const k = openKernels(options);
  const build = k.buildInfo;
  const zigVersion = /^zig ([^;]+);/.exec(build)?.[1] ?? "unknown";
  const sources = k.sources;
  const threadSource = sources.threads === "option"
    ? "--threads"
    : sources.threads === "env"
    ? "CFLOW_THREADS"
    : "default: one per physical core";
  const variantSource = sources.variant === "option"
    ? "forced by option"
    : sources.variant === "env"
    ? "forced by CFLOW_KERNEL_VARIANT"
    : "auto: best for this CPU";
  return {
    cflow: VERSION,
    deno: {
      version: Deno.version.deno,
      v8: Deno.version.v8,
      typescript: Deno.version.typescript,
    },
    zig: { version: zigVersion, build },
    cpu: {
      model: k.cpuModel || "unknown",
      features: k.cpuFeatures(),
      physicalCores: k.physicalCores(),
    },
    kernels: {
      backend: k.backend,
      ...(k.fallbackReason === undefined ? {} : { fallbackReason: k.fallbackReason }),
      library: k.libraryPath,
      variant: k.variant,
      variantSource,
      supported: k.supportedVariants(k.disabledFeatures),
      disabledFeatures: [...k.disabledFeatures],
      panels: { default: panelsByDefault(k.variant), kernel: PANEL_KERNELS[k.variant] },
      panelPrefetch: k.panelPrefetch,
    },
    threads: { count: k.threads, source: threadSource },
    cache: cacheReport(),
    permissions: {
      ffi: Deno.permissions.querySync({ name: "ffi" }).state === "granted"
        ? "unscoped"
        : k.backend === "native"
        ? "kernel library only"
        : "not used",
    },
  };
}

function cacheReport(): DoctorReport["cache"] {
  try {
    return { dir: cacheRoot() };
  } catch (error) {
    return { dir: null, error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Formats a report for a terminal.
 *
 * @example
 * ```ts ignore
 * import { diagnose, formatReport } from "./doctor.ts";
 * console.log(formatReport(diagnose({})));
 * ```
 */
export function formatReport(r: DoctorReport): string {
  // The variants of this build's architecture (the library holds no others).
  const all = (Object.keys(VARIANTS) as VariantName[]).filter((v) =>
    VARIANT_ARCH[v] === "any" || VARIANT_ARCH[v] === Deno.build.arch
  );
  const variants = all.map((v) => r.kernels.supported.includes(v) ? v : `${v} (unsupported)`);
  const lines = [
    `cflow       ${r.cflow}`,
    `deno        ${r.deno.version} (v8 ${r.deno.v8}, typescript ${r.deno.typescript})`,
    `zig         ${r.zig.version} (library: ${r.zig.build})`,
    `cpu         ${r.cpu.model}, ${r.cpu.physicalCores} physical core(s) available`,
    `features    ${r.cpu.features.join(" ")}`,
    `variants    ${variants.join(", ")}`,
    `kernel      ${r.kernels.variant} (${r.kernels.variantSource})`,
    `weights     ${
      r.kernels.panels.default ? "packed into panels at load" : "tiles read in place"
    } (--packed auto; panel kernel: ${r.kernels.panels.kernel})`,
    `prefetch    one-token panel kernels ${
      r.kernels.panelPrefetch.on ? "prefetch ahead" : "leave it to the hardware"
    } (${
      r.kernels.panelPrefetch.mode === "auto"
        ? "auto: off on AMD, on elsewhere"
        : `${r.kernels.panelPrefetch.mode}, from ${
          r.kernels.panelPrefetch.source === "env" ? "CFLOW_PANEL_PREFETCH" : "the options"
        }`
    })`,
    `backend     ${
      r.kernels.backend === "native"
        ? "native library (FFI)"
        : `WebAssembly, no threads (${r.kernels.fallbackReason ?? "forced by CFLOW_KERNELS"})`
    }`,
    `library     ${r.kernels.library}`,
    `threads     ${r.threads.count} (${r.threads.source})`,
    `cache       ${r.cache.dir ?? `unusable: ${r.cache.error}`}`,
    `ffi         ${r.permissions.ffi}`,
  ];
  if (r.kernels.disabledFeatures.length > 0) {
    lines.splice(6, 0, `disabled    ${r.kernels.disabledFeatures.join(" ")} (CFLOW_CPU_DISABLE)`);
  }
  return lines.join("\n");
}
