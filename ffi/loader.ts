/**
 * Finds and opens `libcflow_kernels.so`. The one place that calls
 * `Deno.dlopen`: first `CFLOW_KERNELS` when set, then the local build under
 * `kernels-zig/zig-out/lib/`. A failure names every path tried.
 *
 * @module
 */

import { KernelLoadError } from "./errors.ts";
import { ABI_VERSION, symbols } from "./symbols.ts";

/** File name of the kernel library. */
export const LIBRARY_FILE = "libcflow_kernels.so";

/**
 * Path of the library built by `deno task build:kernels` in this checkout.
 *
 * @example
 * ```ts
 * import { localLibraryPath } from "./loader.ts";
 * console.log(localLibraryPath().endsWith("zig-out/lib/libcflow_kernels.so")); // true
 * ```
 */
export function localLibraryPath(): string {
  const url = new URL(`../kernels-zig/zig-out/lib/${LIBRARY_FILE}`, import.meta.url);
  if (url.protocol !== "file:") {
    // Loaded from a remote module: there is no local build to find.
    return url.href;
  }
  return decodeURIComponent(url.pathname);
}

/**
 * Reads an environment variable, treating "not permitted" as unset (the
 * launcher grants exactly the variables cflow reads).
 *
 * @example
 * ```ts
 * import { readEnv } from "./loader.ts";
 * const override = readEnv("CFLOW_KERNELS");
 * ```
 */
export function readEnv(name: string): string | undefined {
  const status = Deno.permissions.querySync({ name: "env", variable: name });
  if (status.state !== "granted") return undefined;
  const value = Deno.env.get(name);
  return value === "" ? undefined : value;
}

/**
 * Library paths to try, in order.
 *
 * @example
 * ```ts
 * import { libraryCandidates } from "./loader.ts";
 * console.log(libraryCandidates().length >= 1); // true
 * ```
 */
export function libraryCandidates(): string[] {
  const override = readEnv("CFLOW_KERNELS");
  return override === undefined ? [localLibraryPath()] : [override];
}

/**
 * An opened kernel library and the path it came from.
 *
 * @example
 * ```ts ignore
 * import { openLibrary } from "./loader.ts";
 * const { lib, path } = openLibrary();
 * ```
 */
export interface OpenedLibrary {
  /** The dlopen handle. */
  lib: Deno.DynamicLibrary<typeof symbols>;
  /** The path it was loaded from. */
  path: string;
}

/**
 * Opens the first loadable candidate and checks its ABI version.
 *
 * @example
 * ```ts ignore
 * import { openLibrary } from "./loader.ts";
 * const { path } = openLibrary();
 * console.log(`kernels from ${path}`);
 * ```
 */
export function openLibrary(candidates: string[] = libraryCandidates()): OpenedLibrary {
  const tried: string[] = [];
  let lastError: unknown;
  for (const path of candidates) {
    tried.push(path);
    let lib: Deno.DynamicLibrary<typeof symbols>;
    try {
      lib = Deno.dlopen(path, symbols);
    } catch (error) {
      lastError = error;
      continue;
    }
    const abi = lib.symbols.cf_abi_version();
    if (abi !== ABI_VERSION) {
      lib.close();
      throw new KernelLoadError(
        `kernel library ${path} has ABI version ${abi}, this cflow needs ${ABI_VERSION}; ` +
          "rebuild it with `deno task build:kernels`",
        tried,
      );
    }
    return { lib, path };
  }
  const hint = lastError instanceof Deno.errors.NotCapable
    ? " (FFI permission was not granted for it: pass --allow-ffi=<library path>)"
    : " (build it with `deno task build:kernels`, or point CFLOW_KERNELS at a built library)";
  const detail = lastError instanceof Error ? `: ${lastError.message}` : "";
  throw new KernelLoadError(`cannot load the cflow kernel library${hint}${detail}`, tried, {
    cause: lastError,
  });
}
