/**
 * Kernels for a package loaded from a registry (`deno run jsr:@cflow/run`),
 * where there is no checkout to build in. The package carries, under
 * `dist/`, the native library and the WebAssembly build, pinned by SHA-256
 * in `dist.ts` (which the registry's own integrity check covers):
 *
 * - Native, when the caller permits it: the library is fetched from the
 *   package (`--allow-net` for the registry's host), checked against its
 *   pinned SHA-256, and kept in `$CFLOW_CACHE/kernels/<sha256>/` (else
 *   `$HOME/.cache/cflow/kernels/…`), folders created 0700, written to a
 *   temporary file and renamed; later runs check the cached copy's SHA-256
 *   before loading it. Loading it needs `--allow-ffi` for that file.
 * - Otherwise the WebAssembly build, imported as a module (no FFI, no
 *   network permission: Deno loads it like the package's other modules),
 *   with a one-line notice on stderr.
 *
 * `CFLOW_KERNELS` still overrides both. In a checkout (a `file:` URL) this
 * does nothing: the local builds are used, as before.
 *
 * @module
 */

import { DIST, type DistFile } from "./dist.ts";
import { KernelLoadError } from "./errors.ts";
import { openLibrary, readEnv, setPreparedBackend } from "./loader.ts";
import { wasmLibraryFromExports } from "./wasm_backend.ts";

let prepared = false;

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The folder cached kernel libraries live in. */
function cacheRoot(): string {
  const explicit = readEnv("CFLOW_CACHE");
  if (explicit !== undefined) return `${explicit}/kernels`;
  const home = readEnv("HOME");
  if (home === undefined) throw new Error("no CFLOW_CACHE or HOME to keep the kernel library in");
  return `${home}/.cache/cflow/kernels`;
}

async function readPinned(path: string, want: DistFile): Promise<boolean> {
  try {
    const bytes = await Deno.readFile(path);
    return bytes.length === want.size && (await sha256Hex(bytes)) === want.sha256;
  } catch {
    return false;
  }
}

/** Fetches the package's native library (bounded), checks it and caches it; returns its path. */
async function cachedNative(want: DistFile): Promise<string> {
  const dir = `${cacheRoot()}/${want.sha256}`;
  const path = `${dir}/${want.file}`;
  if (await readPinned(path, want)) return path;
  const url = new URL(`../dist/${want.file}`, import.meta.url);
  const response = await fetch(url);
  if (!response.ok || response.body === null) {
    await response.body?.cancel();
    throw new Error(`${url.href}: HTTP ${response.status}`);
  }
  const bytes = new Uint8Array(want.size);
  let got = 0;
  for await (const chunk of response.body) {
    if (got + chunk.length > want.size) {
      throw new Error(`${url.href} is larger than its pinned ${want.size} bytes`);
    }
    bytes.set(chunk, got);
    got += chunk.length;
  }
  const sha = await sha256Hex(bytes.subarray(0, got));
  if (got !== want.size || sha !== want.sha256) {
    throw new Error(
      `${url.href} does not match its pinned SHA-256 (${got} bytes, sha256 ${sha}); not used`,
    );
  }
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  for (const d of [cacheRoot(), dir]) await Deno.chmod(d, 0o700);
  const tmp = `${path}.tmp-${Deno.pid}`;
  const file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o700 });
  try {
    let off = 0;
    while (off < bytes.length) off += await file.write(bytes.subarray(off));
    await file.syncData();
  } finally {
    file.close();
  }
  await Deno.rename(tmp, path);
  return path;
}

/**
 * Chooses the kernels of a package loaded from a registry (see the module
 * doc); does nothing in a checkout or when `CFLOW_KERNELS` is set. Call it
 * before the first kernel call of a program (the CLI and `loadModel` do).
 *
 * @example
 * ```ts ignore
 * import { prepareKernels } from "./remote_kernels.ts";
 * await prepareKernels();
 * ```
 */
export async function prepareKernels(): Promise<void> {
  if (prepared || new URL(import.meta.url).protocol === "file:") return;
  if (readEnv("CFLOW_KERNELS") !== undefined) return;
  prepared = true;
  let reason = "this package carries no native library for this platform";
  if (DIST.native !== undefined && Deno.build.os === "linux" && Deno.build.arch === "x86_64") {
    try {
      const path = await cachedNative(DIST.native);
      if (Deno.permissions.querySync({ name: "ffi", path }).state !== "granted") {
        reason = `FFI is not permitted for ${path}`;
      } else {
        setPreparedBackend({ ...openLibrary([path]), backend: "native" });
        return;
      }
    } catch (error) {
      reason = error instanceof Error ? error.message : String(error);
    }
  }
  if (DIST.wasm === undefined) {
    throw new KernelLoadError(
      `no kernels: ${reason}, and this package carries no WebAssembly build`,
      [],
    );
  }
  const url = new URL(`../dist/${DIST.wasm.file}`, import.meta.url).href;
  const wasm = wasmLibraryFromExports(await import(url), url);
  setPreparedBackend({ lib: wasm, path: url, backend: "wasm", wasm, fallbackReason: reason });
  console.error(`cflow: native kernels not used (${reason}); running the WebAssembly build`);
}
