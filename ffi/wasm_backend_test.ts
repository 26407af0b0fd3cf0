/**
 * The WebAssembly build of the kernels against the native library: the
 * array kernels give the native scalar variant's results bit for bit, the
 * memory exports keep the native handles, checks and statuses, and the
 * ffi/ test suite passes through the wasm build in a process that has no
 * FFI permission at all (the fallback engages by itself).
 *
 * @module
 */
import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { openKernels, openWasmKernels } from "./open_kernels.ts";
import { wasmRequested } from "./loader.ts";
import { IO_BASE, STATUS } from "./symbols.ts";
import { localWasmPath, openWasmLibrary } from "./wasm_backend.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const native = openKernels();
/** The process itself may run on wasm (CFLOW_KERNELS=wasm): no native side then. */
const NATIVE = native.backend === "native";

let seed = 12345;
function rnd(): number {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 2 ** 32;
}

function sameBits(a: ArrayLike<number>, b: ArrayLike<number>, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) assert.fail(`${what}: [${i}] is ${b[i]}, native ${a[i]}`);
  }
}

function randomBlocks(nb: number, bytes: number): Uint8Array {
  const b = new Uint8Array(nb * bytes).map(() => (rnd() * 256) | 0);
  const f16 = new Uint16Array(1);
  const f32 = new Float32Array(1);
  for (let i = 0; i < nb; i++) {
    // A random scale in [1e-4, 0.05) as f16 (positive normal range only).
    f32[0] = rnd() * 0.05 + 1e-4;
    const e = Math.floor(Math.log2(f32[0]));
    const m = Math.round((f32[0] / 2 ** e - 1) * 1024);
    f16[0] = ((e + 15) << 10) | Math.min(m, 1023);
    b[i * bytes] = f16[0] & 0xff;
    b[i * bytes + 1] = f16[0] >> 8;
  }
  return b;
}

Deno.test({
  name: "wasm: every array kernel equals the native scalar variant bit for bit",
  ignore: !NATIVE,
  fn() {
    const w = openWasmKernels({ threads: 1 });
    assert.equal(w.backend, "wasm");
    assert.equal(w.variant, "scalar");
    assert.equal(w.threads, 1);
    assert.deepEqual(w.supportedVariants(), ["scalar"]);
    native.configure({ variant: "scalar", threads: 2 });
    try {
      for (const cols of [32, 96, 576, 1536, 4096]) {
        const rows = 67;
        const x = new Float32Array(cols).map(() => (rnd() - 0.5) * 8);
        const q = native.quantizeQ8_0(x);
        sameBits(q, w.quantizeQ8_0(x), `quantize ${cols}`);
        for (const [type, bytes] of [["q4_0", 18], ["q8_0", 34]] as const) {
          const nb = cols / 32;
          const wt = randomBlocks(rows * nb, bytes);
          sameBits(
            native.matvec(type, wt, rows, cols, q),
            w.matvec(type, wt, rows, cols, q),
            `matvec ${type} ${rows}x${cols}`,
          );
          sameBits(
            native.blockDots(type, wt, q, nb),
            w.blockDots(type, wt, q, nb),
            `blockDots ${type}`,
          );
          assert.ok(Object.is(native.dot(type, wt, q, cols), w.dot(type, wt, q, cols)));
        }
        const g = new Float32Array(cols).map(() => (rnd() - 0.5) * 30);
        const u = new Float32Array(cols).map(() => rnd() - 0.5);
        sameBits(native.rmsNorm(g, u, 1e-5), w.rmsNorm(g, u, 1e-5), "rmsNorm");
        sameBits(native.softmax(g.slice()), w.softmax(g.slice()), "softmax");
        sameBits(native.geluMul(g, u), w.geluMul(g, u), "geluMul");
      }
      // expf (SiLU, softmax) over a wide spread of inputs: the wasm build's
      // port of glibc's expf against the process's glibc.
      const n = 1 << 20;
      const g = new Float32Array(n).map(() => (rnd() - 0.5) * 2 ** (rnd() * 14 - 4));
      const u = new Float32Array(n).fill(1);
      sameBits(native.siluMul(g, u), w.siluMul(g, u), "siluMul");
      // RoPE: cos/sin in f64 (glibc natively, compiler_rt in wasm) rounded to f32.
      for (const theta of [10000, 100000, 1000000]) {
        const invFreq = new Float32Array(32).map((_, i) => Math.fround(theta ** (-i / 32)));
        for (let pos = 0; pos < 4096; pos += 3) {
          const x = new Float32Array(2 * 64).map(() => rnd() - 0.5);
          for (const mode of ["neox", "normal"] as const) {
            sameBits(
              native.rope(x.slice(), 2, 64, 64, pos, invFreq, mode),
              w.rope(x.slice(), 2, 64, 64, pos, invFreq, mode),
              `rope ${mode} pos ${pos}`,
            );
          }
        }
      }
      const bytes = new Uint8Array(3 * 65536 + 77).map(() => (rnd() * 256) | 0);
      assert.equal(native.streamRead(bytes), w.streamRead(bytes));
      // Refusals: the same status natively and in wasm.
      const statusOf = (f: () => unknown) => {
        try {
          f();
        } catch (e) {
          if (e instanceof KernelError) return e.status;
          throw e;
        }
        return 0;
      };
      const bad = new Float32Array([1, NaN, ...new Array(30).fill(0)]);
      assert.equal(statusOf(() => w.quantizeQ8_0(bad)), STATUS.NONFINITE);
      assert.equal(statusOf(() => native.quantizeQ8_0(bad)), STATUS.NONFINITE);
    } finally {
      native.configure({});
    }
  },
});

Deno.test({
  name: "wasm: regions keep the native handles, range checks and statuses",
  ignore: !NATIVE,
  fn() {
    const w = openWasmLibrary();
    const n = native.symbols;
    const s = w.symbols;
    assert.equal(s.cf_init(0, 4, 0n), 1, "the scalar variant, whatever was asked");
    assert.equal(s.cf_threads(), 1);
    assert.equal(s.cf_init(3, 1, 0n), STATUS.UNSUPPORTED);
    assert.equal(s.cf_init(9, 1, 0n), STATUS.INVALID_ARG);
    assert.equal(s.cf_init(0, 1, 0n), 1);
    for (const lib of [n, s]) {
      const out = new BigUint64Array(2);
      const h = lib.cf_alloc(10_000n, 4096n, out);
      assert.ok(h > 0);
      assert.equal(out[0] % 4096n, 0n);
      assert.equal(out[1], 10_000n);
      const src = new Uint8Array(100).map((_, i) => i);
      assert.equal(lib.cf_write(h, 9_900n, src, 100n), STATUS.OK);
      assert.equal(lib.cf_write(h, 9_901n, src, 100n), STATUS.RANGE);
      assert.equal(lib.cf_write(h, 0xffff_ffff_ffff_fff0n, src, 100n), STATUS.OVERFLOW);
      const back = new Uint8Array(100);
      assert.equal(lib.cf_copy(h, 9_900n, back, 100n), STATUS.OK);
      assert.deepEqual(back, src);
      assert.equal(lib.cf_copy(h, 9_950n, back, 100n), STATUS.RANGE);
      assert.equal(lib.cf_madvise(h, 0n, 10_001n, 3), STATUS.RANGE);
      assert.equal(lib.cf_madvise(h, 0n, 1n, 99), STATUS.INVALID_ARG);
      assert.equal(lib.cf_madvise(h, 8192n, 10n, 4), STATUS.OK); // dontneed: zeroes that page
      assert.equal(lib.cf_copy(h, 9_900n, back, 100n), STATUS.OK);
      assert.ok(back.every((b) => b === 0), "dontneed pages read back as zeros");
      assert.equal(lib.cf_alloc(0n, 64n, out), STATUS.INVALID_ARG);
      assert.equal(lib.cf_alloc(10n, 3n, out), STATUS.ALIGNMENT);
      assert.equal(lib.cf_alloc(10n, 4n << 20n, out), STATUS.ALIGNMENT);
      assert.equal(lib.cf_release(h), STATUS.OK);
      assert.equal(lib.cf_release(h), STATUS.HANDLE, "stale handle");
      assert.equal(lib.cf_copy(h, 0n, back, 1n), STATUS.HANDLE);
      assert.equal(lib.cf_release(0), STATUS.HANDLE);
      assert.equal(lib.cf_release(-5), STATUS.HANDLE);
    }
    // Sizes past 32 bits cannot reach a wasm32 call: refused as overflow.
    assert.equal(s.cf_alloc(1n << 40n, 64n, new BigUint64Array(2)), STATUS.OVERFLOW);
    // There is no file system in wasm: cf_map_file says ENOSYS; files are
    // copied in by the host, into read-only regions.
    const path = new TextEncoder().encode("/etc/hostname");
    assert.equal(s.cf_map_file(path, BigInt(path.length), new BigUint64Array(2)), IO_BASE - 38);
    const dir = Deno.makeTempDirSync({ prefix: "cflow-wasm-map-" });
    try {
      const file = `${dir}/f.bin`;
      const data = new Uint8Array(3 * (8 << 20) + 5).map((_, i) => (i * 13) & 0xff);
      Deno.writeFileSync(file, data);
      const m = w.mapFile(file);
      assert.equal(m.size, BigInt(data.length));
      assert.deepEqual(w.view(m.address, data.length), data, "copied in chunks, every byte");
      const got = new Uint8Array(16);
      assert.equal(s.cf_copy(m.handle, BigInt(data.length - 16), got, 16n), STATUS.OK);
      assert.deepEqual(got, data.subarray(data.length - 16));
      assert.equal(s.cf_write(m.handle, 0n, got, 16n), STATUS.HANDLE, "mapped files are read-only");
      // A private copy: truncating the file changes nothing behind the handle.
      Deno.truncateSync(file, 10);
      assert.equal(s.cf_copy(m.handle, BigInt(data.length - 16), got, 16n), STATUS.OK);
      assert.deepEqual(got, data.subarray(data.length - 16));
      assert.equal(s.cf_release(m.handle), STATUS.OK);
      assert.throws(
        () => w.mapFile(dir),
        (e: unknown) => e instanceof KernelError && e.errno === 22,
      );
      assert.throws(
        () => w.mapFile(`${dir}/missing`),
        (e: unknown) => e instanceof KernelError && e.errno === 2,
      );
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test("CFLOW_KERNELS=wasm (or a .wasm path) selects the WebAssembly build", () => {
  assert.equal(wasmRequested("wasm"), localWasmPath());
  assert.equal(wasmRequested("/opt/k.wasm"), "/opt/k.wasm");
  assert.equal(wasmRequested("/opt/libcflow_kernels.so"), undefined);
  assert.equal(wasmRequested(undefined), undefined);
});

Deno.test("without --allow-ffi the ffi/ test suite runs on the WebAssembly build and passes", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "test",
      "--no-prompt",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "ffi/kernels_test.ts",
      "ffi/plan_test.ts",
      "ffi/memory_test.ts",
    ],
    cwd: ROOT,
    env: { CFLOW_KERNELS: "", CFLOW_KERNEL_VARIANT: "", CFLOW_THREADS: "", NO_COLOR: "1" },
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `${stdout}\n${stderr}`);
  assert.match(
    stdout + stderr,
    /cflow: native kernels not used \(FFI is not permitted\); running the WebAssembly build/,
  );
  assert.match(stdout, /ok \| \d+ passed \| 0 failed/);
  assert.match(stdout, /scalar: matvec is bit-identical for every thread count \.\.\. ok/);
});
