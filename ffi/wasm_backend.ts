/**
 * The WebAssembly fallback: the same Zig kernels (`kernels-zig/src/root.zig`
 * and the scalar variant) built for wasm32 with simd128 (`zig build wasm`),
 * run inside Deno's sandbox. It needs read access to the `.wasm` file and no
 * `--allow-ffi` at all.
 *
 * {@link openWasmLibrary} gives the same `symbols` object a `Deno.dlopen` of
 * the native library gives, derived from the one symbol table in
 * `symbols.ts` (no shim is written by hand):
 *
 * - `buffer` arguments are copied into a scratch area of wasm memory before
 *   the call and back after it (arguments that share an ArrayBuffer are
 *   copied once, as one range, so aliasing behaves as natively); views of
 *   wasm memory itself are passed as their address; `null` is a null
 *   pointer.
 * - `usize` arguments (bigint) become wasm32 addresses and sizes; one that
 *   does not fit in 32 bits makes the call return `OVERFLOW` (-11) without
 *   running. `u64` arguments and results stay bigints.
 * - Nonblocking symbols (`cf_plan_run_async`) run synchronously and return a
 *   resolved Promise: a wasm call cannot be interrupted, so `cf_plan_cancel`
 *   only stops a run that has not started.
 *
 * What differs from the native library: no worker threads (jobs run on the
 * caller, `cf_threads` is 1), no cpuid (`cf_variant` is scalar, the only
 * variant built), no mmap: {@link WasmLibrary.mapFile} copies a file into
 * linear memory with bounded reads, so a later change to the file is never
 * seen (and never reported as `CHANGED`), and `cf_madvise` only checks its
 * arguments (except `dontneed` on an allocation, which zeroes its pages as
 * the OS does). Zero-copy views cannot be detached one by one: a view kept
 * past `close()` may show memory reused by a later allocation. Linear
 * memory never shrinks.
 *
 * @module
 */

import { KernelError, KernelLoadError } from "./errors.ts";
import { ABI_VERSION, IO_BASE, type KernelSymbols, STATUS, symbols } from "./symbols.ts";

/** File name of the WebAssembly build. */
export const WASM_FILE = "cflow_kernels.wasm";

/**
 * Path of the WebAssembly build made by `zig build wasm` in this checkout.
 *
 * @example
 * ```ts
 * import { localWasmPath } from "./wasm_backend.ts";
 * console.log(localWasmPath().endsWith("zig-out/wasm/cflow_kernels.wasm")); // true
 * ```
 */
export function localWasmPath(): string {
  const url = new URL(`../kernels-zig/zig-out/wasm/${WASM_FILE}`, import.meta.url);
  if (url.protocol !== "file:") return url.href;
  return decodeURIComponent(url.pathname);
}

type WasmFn = (...args: (number | bigint)[]) => number | bigint;
type ParamType = (typeof symbols)[keyof typeof symbols]["parameters"][number];
type ResultType = (typeof symbols)[keyof typeof symbols]["result"];

const U32_MAX = 0xffff_ffffn;
/** Bytes read from a file per call when it is copied into wasm memory. */
const MAP_CHUNK = 8 << 20;

/**
 * An instantiated WebAssembly build with the native library's symbols.
 *
 * @example
 * ```ts ignore
 * import { openWasmLibrary } from "./wasm_backend.ts";
 * const w = openWasmLibrary();
 * console.log(w.symbols.cf_abi_version());
 * ```
 */
export interface WasmLibrary {
  /** The same functions `Deno.dlopen(path, symbols).symbols` has. */
  readonly symbols: KernelSymbols;
  /** The module's linear memory. */
  readonly memory: WebAssembly.Memory;
  /**
   * The wasm stand-in for `cf_map_file`: a read-only region of the file's
   * size, filled with a copy of the file. Throws a KernelError naming the
   * path (statuses as natively: `IO_BASE - errno`).
   */
  mapFile(path: string): { handle: number; address: bigint; size: bigint };
  /**
   * A view of [address, address + length) of linear memory. Valid until the
   * next call that grows memory (any allocation): the view is then detached
   * (length 0), never stale.
   */
  view(address: bigint, length: number): Uint8Array;
  /** Drops the instance (its memory goes with it). */
  close(): void;
}

function ioStatus(error: unknown): number {
  if (error instanceof Deno.errors.NotFound) return IO_BASE - 2;
  if (error instanceof Deno.errors.PermissionDenied) return IO_BASE - 13;
  if (error instanceof Deno.errors.IsADirectory) return IO_BASE - 22;
  return IO_BASE - 5;
}

/**
 * Compiles and instantiates the WebAssembly build (synchronously) and checks
 * its ABI version. Needs read access to `path` only.
 *
 * @example
 * ```ts ignore
 * import { openWasmLibrary } from "./wasm_backend.ts";
 * const w = openWasmLibrary();
 * w.symbols.cf_init(0, 0, 0n);
 * ```
 */
export function openWasmLibrary(path: string = localWasmPath()): WasmLibrary {
  let instance: WebAssembly.Instance;
  try {
    const module = new WebAssembly.Module(Deno.readFileSync(path));
    instance = new WebAssembly.Instance(module, {});
  } catch (error) {
    const hint = error instanceof Deno.errors.NotFound
      ? " (build it with `deno task build:kernels`)"
      : error instanceof Deno.errors.NotCapable
      ? ` (read access was not granted: pass --allow-read=${path})`
      : "";
    const detail = error instanceof Error ? `: ${error.message}` : "";
    throw new KernelLoadError(`cannot load the WebAssembly kernels${hint}${detail}`, [path], {
      cause: error,
    });
  }
  return wasmLibraryFromExports(instance.exports, path);
}

/**
 * The same library over the exports of an instance made elsewhere: for
 * example a `.wasm` file imported as a module (`await import(url)`), which
 * is how a package loaded from JSR reaches the build it carries.
 *
 * @example
 * ```ts ignore
 * import { wasmLibraryFromExports } from "./wasm_backend.ts";
 * const url = new URL("../dist/cflow_kernels.wasm", import.meta.url).href;
 * const w = wasmLibraryFromExports(await import(url), url);
 * ```
 */
export function wasmLibraryFromExports(exports: object, path: string): WasmLibrary {
  const ex = exports as Record<string, unknown>;
  const memory = ex.memory as WebAssembly.Memory;
  if (!(memory instanceof WebAssembly.Memory)) {
    throw new KernelLoadError(`WebAssembly kernels ${path} export no memory`, [path]);
  }
  const raw = (name: string): WasmFn => {
    const f = ex[name];
    if (typeof f !== "function") {
      throw new KernelLoadError(`WebAssembly kernels ${path} lack the export ${name}`, [path]);
    }
    return f as WasmFn;
  };
  const scratch = raw("cf_scratch");
  const mapAlloc = raw("cf_map_alloc");
  const release = raw("cf_release");

  const out: Record<string, unknown> = {};
  for (const [key, def] of Object.entries(symbols)) {
    const name = "name" in def ? def.name : key;
    const params = def.parameters as readonly ParamType[];
    const shim = makeShim(raw(name), params, def.result as ResultType, memory, scratch);
    out[key] = "nonblocking" in def && def.nonblocking
      ? (...args: unknown[]) => {
        try {
          return Promise.resolve(shim(...args));
        } catch (error) {
          return Promise.reject(error);
        }
      }
      : shim;
  }
  const lib: WasmLibrary = {
    symbols: out as unknown as KernelSymbols,
    memory,
    mapFile(file: string) {
      let info: Deno.FileInfo;
      try {
        info = Deno.statSync(file);
      } catch (error) {
        throw new KernelError("cf_map_file", ioStatus(error), file);
      }
      // Like the native mapping: regular files only (EINVAL otherwise).
      if (!info.isFile) throw new KernelError("cf_map_file", IO_BASE - 22, file);
      const size = info.size;
      if (size > Number(U32_MAX)) throw new KernelError("cf_map_file", STATUS.NO_MEMORY, file);
      const outPtr = Number(scratch(16));
      if (outPtr === 0) throw new KernelError("cf_map_file", STATUS.NO_MEMORY, file);
      const handle = Number(mapAlloc(size, outPtr));
      if (handle <= 0) throw new KernelError("cf_map_file", handle, file);
      const words = new BigUint64Array(memory.buffer, outPtr, 2);
      const address = words[0];
      const length = words[1];
      try {
        using f = Deno.openSync(file, { read: true });
        let done = 0;
        while (done < size) {
          const n = Math.min(MAP_CHUNK, size - done);
          const dst = new Uint8Array(memory.buffer, Number(address) + done, n);
          const got = f.readSync(dst);
          // Shorter than it was: the file changed while it was copied.
          if (got === null || got === 0) throw new KernelError("cf_map_file", STATUS.CHANGED, file);
          done += got;
        }
      } catch (error) {
        release(handle);
        if (error instanceof KernelError) throw error;
        throw new KernelError("cf_map_file", ioStatus(error), file);
      }
      return { handle, address, size: length };
    },
    view(address: bigint, length: number): Uint8Array {
      if (length === 0) return new Uint8Array(0);
      return new Uint8Array(memory.buffer, Number(address), length);
    },
    close() {
      // Nothing native to free: dropping the references frees the instance.
    },
  };
  const abi = lib.symbols.cf_abi_version();
  if (abi !== ABI_VERSION) {
    throw new KernelLoadError(
      `WebAssembly kernels ${path} have ABI version ${abi}, this cflow needs ${ABI_VERSION}; ` +
        "rebuild them with `deno task build:kernels`",
      [path],
    );
  }
  return lib;
}

/** One ArrayBuffer's bytes copied through scratch for a call. */
interface Span {
  buffer: ArrayBufferLike;
  start: number;
  end: number;
  at: number;
}

function makeShim(
  fn: WasmFn,
  params: readonly ParamType[],
  result: ResultType,
  memory: WebAssembly.Memory,
  scratch: WasmFn,
): (...args: unknown[]) => unknown {
  const bufferArgs = params.flatMap((p, i) => p === "buffer" ? [i] : []);
  const i32Result = result === "i32";
  const convert = (r: number | bigint): unknown => {
    switch (result) {
      case "void":
        return undefined;
      case "u64":
        return BigInt.asUintN(64, r as bigint);
      case "usize":
        return BigInt((r as number) >>> 0);
      case "u32":
        return (r as number) >>> 0;
      default:
        return r;
    }
  };
  return (...args: unknown[]): unknown => {
    const wasmArgs: (number | bigint)[] = new Array(params.length);
    for (let i = 0; i < params.length; i++) {
      const p = params[i];
      const a = args[i];
      if (p === "usize") {
        const v = typeof a === "bigint" ? a : BigInt(a as number);
        if (v < 0n || v > U32_MAX) {
          if (i32Result) return STATUS.OVERFLOW;
          throw new RangeError(`wasm kernels: size ${v} does not fit in 32 bits`);
        }
        wasmArgs[i] = Number(v);
      } else if (p === "u64") {
        wasmArgs[i] = BigInt.asIntN(64, typeof a === "bigint" ? a : BigInt(a as number));
      } else if (p !== "buffer") {
        wasmArgs[i] = a as number;
      }
    }
    if (bufferArgs.length === 0) return convert(fn(...wasmArgs));
    // Group the buffer arguments by ArrayBuffer: one copied range each.
    // Views of linear memory itself (MemoryRegion.bytes) are passed as the
    // addresses they are, without a copy.
    const spans: Span[] = [];
    const spanOf: (Span | undefined)[] = new Array(params.length);
    for (const i of bufferArgs) {
      const a = args[i];
      if (a === null || a === undefined) continue;
      if (!ArrayBuffer.isView(a)) {
        throw new TypeError(`wasm kernels: argument ${i} is not a buffer`);
      }
      if (a.buffer === memory.buffer) {
        wasmArgs[i] = a.byteOffset;
        continue;
      }
      const start = a.byteOffset;
      const end = start + a.byteLength;
      let s = spans.find((x) => x.buffer === a.buffer);
      if (s === undefined) spans.push(s = { buffer: a.buffer, start, end, at: 0 });
      s.start = Math.min(s.start, start);
      s.end = Math.max(s.end, end);
      spanOf[i] = s;
    }
    // Place each span at a 16-byte boundary plus its own offset modulo 16,
    // so that misaligned arguments stay misaligned (and are refused as
    // natively).
    let total = 0;
    for (const s of spans) {
      s.at = total + (s.start % 16);
      total = Math.ceil((s.at + (s.end - s.start)) / 16) * 16 + 16;
    }
    const base = Number(scratch(Math.max(total, 16)));
    if (base === 0) {
      if (i32Result) return STATUS.NO_MEMORY;
      throw new RangeError("wasm kernels: out of memory for arguments");
    }
    let heap = new Uint8Array(memory.buffer);
    for (const s of spans) {
      heap.set(new Uint8Array(s.buffer, s.start, s.end - s.start), base + s.at);
    }
    for (const i of bufferArgs) {
      const a = args[i] as ArrayBufferView | null;
      const s = spanOf[i];
      if (s !== undefined && a !== null) wasmArgs[i] = base + s.at + (a.byteOffset - s.start);
      else if (wasmArgs[i] === undefined) wasmArgs[i] = 0;
    }
    const r = fn(...wasmArgs);
    heap = new Uint8Array(memory.buffer); // the call may have grown memory
    for (const s of spans) {
      new Uint8Array(s.buffer, s.start, s.end - s.start).set(
        heap.subarray(base + s.at, base + s.at + (s.end - s.start)),
      );
    }
    return convert(r);
  };
}
