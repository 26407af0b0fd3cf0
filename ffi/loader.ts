/**
 * Finds and opens the kernels. The one place that calls `Deno.dlopen`:
 * first `CFLOW_KERNELS` when set, then the local build under
 * `kernels-zig/zig-out/lib/`. A failure names every path tried.
 *
 * {@link openBackend} picks the backend: the native library when FFI is
 * permitted for it and it loads, else the WebAssembly build of the same
 * kernels (`wasm_backend.ts`), with a one-line notice on stderr.
 * `CFLOW_KERNELS=wasm` (or a path ending in `.wasm`) forces WebAssembly; a
 * `CFLOW_KERNELS` naming a native library is used or refused, never
 * replaced.
 *
 * @module
 */

import { KernelLoadError } from "./errors.ts";
import { ABI_VERSION, type KernelSymbols, symbols } from "./symbols.ts";
import { localWasmPath, openWasmLibrary, type WasmLibrary } from "./wasm_backend.ts";

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
  /** The dlopen handle (or the WebAssembly instance's equivalent). */
  lib: { readonly symbols: KernelSymbols; close(): void };
  /** The path it was loaded from. */
  path: string;
  /** Which build runs the kernels ("native" when absent). */
  backend?: KernelBackend;
  /** The WebAssembly instance, for the wasm backend. */
  wasm?: WasmLibrary;
  /** Why the native library is not used, when it was not forced away. */
  fallbackReason?: string;
}

/**
 * Which build runs the kernels: the native shared library (FFI) or the
 * WebAssembly one (no FFI).
 *
 * @example
 * ```ts
 * import type { KernelBackend } from "./loader.ts";
 * const b: KernelBackend = "wasm";
 * ```
 */
export type KernelBackend = "native" | "wasm";

/**
 * The `.wasm` path `CFLOW_KERNELS` asks for: `wasm` means the local build, a
 * path ending in `.wasm` that file; undefined for anything else.
 *
 * @example
 * ```ts
 * import { wasmRequested } from "./loader.ts";
 * console.log(wasmRequested("wasm")?.endsWith("cflow_kernels.wasm")); // true
 * console.log(wasmRequested("/x/libcflow_kernels.so")); // undefined
 * ```
 */
export function wasmRequested(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === "wasm") return localWasmPath();
  return value.endsWith(".wasm") ? value : undefined;
}

/**
 * Opens the WebAssembly build at `path`.
 *
 * @example
 * ```ts ignore
 * import { openWasm } from "./loader.ts";
 * const { lib } = openWasm();
 * console.log(lib.symbols.cf_abi_version());
 * ```
 */
export function openWasm(path: string = localWasmPath(), fallbackReason?: string): OpenedLibrary {
  const wasm = openWasmLibrary(path);
  return { lib: wasm, path, backend: "wasm", wasm, fallbackReason };
}

/**
 * Opens the kernels: `CFLOW_KERNELS` when set (a `.wasm` build or a native
 * library), else the local native library when FFI is permitted for it and
 * it loads, else the local WebAssembly build, saying why on stderr.
 *
 * @example
 * ```ts ignore
 * import { openBackend } from "./loader.ts";
 * const opened = openBackend();
 * console.log(opened.backend, opened.path);
 * ```
 */
export function openBackend(): OpenedLibrary {
  if (prepared !== undefined) return prepared;
  const override = readEnv("CFLOW_KERNELS");
  const forcedWasm = wasmRequested(override);
  if (forcedWasm !== undefined) return openWasm(forcedWasm);
  if (override !== undefined) return { ...openLibrary([override]), backend: "native" };
  const path = localLibraryPath();
  let reason: string;
  if (Deno.permissions.querySync({ name: "ffi", path }).state !== "granted") {
    reason = "FFI is not permitted";
  } else {
    try {
      return { ...openLibrary([path]), backend: "native" };
    } catch (error) {
      if (!(error instanceof KernelLoadError)) throw error;
      reason = error.message;
    }
  }
  const opened = openWasm(localWasmPath(), reason);
  console.error(`cflow: native kernels not used (${reason}); running the WebAssembly build`);
  return opened;
}

let prepared: OpenedLibrary | undefined;

/**
 * Makes {@link openBackend} return `opened` (the kernels chosen
 * asynchronously for a package loaded from a registry: remote_kernels.ts).
 *
 * @example
 * ```ts ignore
 * import { openWasm, setPreparedBackend } from "./loader.ts";
 * setPreparedBackend(openWasm());
 * ```
 */
export function setPreparedBackend(opened: OpenedLibrary): void {
  prepared = opened;
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
