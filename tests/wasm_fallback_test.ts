/**
 * The WebAssembly fallback end to end: greedy generation on SmolLM2-135M-Instruct (converted
 * to Q8_0 and to Q4_0) through the native scalar variant, through the wasm build forced with
 * `CFLOW_KERNELS=wasm`, and through the wasm build in a process that has no `--allow-ffi` at
 * all (only `--allow-read`), where it engages by itself. The three give the same token ids
 * (the same fnv1a64 hash): the wasm build is the scalar variant's code, and its `expf` is a
 * port of glibc's (kernels-zig/src/expf.zig). The default native variant (AVX-512 VNNI on a
 * CPU that has it) sums in another order, so its hash is printed, not compared.
 *
 * Skipped when the Q4_1 GGUF is absent (`./dev task test:ts` fetches it).
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { localLibraryPath } from "../ffi/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const GGUF = `${ROOT}cache/models/smollm2-135m-instruct.Q4_1.gguf`;
const present = (() => {
  try {
    return Deno.statSync(GGUF).isFile;
  } catch {
    return false;
  }
})();
const NOTICE =
  "cflow: native kernels not used (FFI is not permitted); running the WebAssembly build";

interface Run {
  hash: string;
  tokens: number[];
  text: string;
  decode: number;
  stderr: string;
}

async function generate(
  model: string,
  dir: string,
  ffi: boolean | "unscoped",
  env: Record<string, string>,
) {
  const lib = localLibraryPath();
  const perms = ffi
    ? [
      // Unscoped, the model loader reads tensors through zero-copy views
      // (of wasm memory, with the wasm kernels); scoped, through copies.
      ffi === "unscoped" ? "--allow-ffi" : `--allow-ffi=${lib}`,
      `--allow-read=${ROOT},${dir}`,
      "--allow-env=CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE",
    ]
    : [`--allow-read=${ROOT},${dir}`];
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      ...perms,
      `${ROOT}cli/main.ts`,
      "generate",
      "--model",
      model,
      "--prompt",
      "The three primary colors are",
      "--max-tokens",
      "16",
      "--temperature",
      "0",
      "--json",
    ],
    env: { CFLOW_KERNELS: "", CFLOW_THREADS: "", CFLOW_KERNEL_VARIANT: "", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  const r = JSON.parse(new TextDecoder().decode(out.stdout));
  return {
    hash: r.hash,
    tokens: r.tokens,
    text: r.text,
    decode: r.stats.decode_tok_s,
    stderr,
  } as Run;
}

Deno.test({
  name: "wasm fallback and native scalar give identical greedy output on SmolLM2 (Q8_0, Q4_0)",
  ignore: !present,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "cflow-wasm-" });
    try {
      for (const quant of ["q8_0", "q4_0"] as const) {
        const model = `${dir}/smollm2.${quant}.cflow`;
        await convertFile(GGUF, model, {
          format: "cflow",
          quant,
          rule: "ggml",
          measureError: false,
        });
        await t.step(`${quant}: native scalar = wasm forced = wasm without FFI`, async () => {
          const scalar = await generate(model, dir, true, {
            CFLOW_KERNEL_VARIANT: "scalar",
            CFLOW_THREADS: "1",
          });
          const forced = await generate(model, dir, "unscoped", { CFLOW_KERNELS: "wasm" });
          const noFfi = await generate(model, dir, false, {});
          const best = await generate(model, dir, true, {});
          assert.equal(scalar.tokens.length, 16);
          assert.equal(forced.hash, scalar.hash, "CFLOW_KERNELS=wasm vs native scalar");
          assert.equal(noFfi.hash, scalar.hash, "no --allow-ffi vs native scalar");
          assert.ok(noFfi.stderr.includes(NOTICE), noFfi.stderr);
          assert.ok(
            !forced.stderr.includes("native kernels not used"),
            "forcing is not a fallback",
          );
          assert.ok(!scalar.stderr.includes("native kernels not used"), scalar.stderr);
          console.log(
            `${quant}: ${scalar.hash} ${JSON.stringify(scalar.text)}\n` +
              `  decode tok/s: native scalar 1 thread ${scalar.decode.toFixed(1)}, ` +
              `wasm ${forced.decode.toFixed(1)} (no FFI ${noFfi.decode.toFixed(1)}), ` +
              `native default ${best.decode.toFixed(1)}\n` +
              `  native default variant: ${best.hash} ` +
              (best.hash === scalar.hash ? "(the same)" : "(differs: another summation order)"),
          );
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("doctor names the WebAssembly backend and why the native library is not used", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      `--allow-read=${ROOT}`,
      `${ROOT}cli/main.ts`,
      "doctor",
      "--json",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, stderr);
  const r = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.equal(r.kernels.backend, "wasm");
  assert.equal(r.kernels.fallbackReason, "FFI is not permitted");
  assert.equal(r.kernels.variant, "scalar");
  assert.ok(r.kernels.library.endsWith("kernels-zig/zig-out/wasm/cflow_kernels.wasm"));
  assert.match(r.zig.build, /wasm32-freestanding/);
  assert.equal(r.threads.count, 1);
  assert.equal(r.permissions.ffi, "not used");
  assert.ok(stderr.includes(NOTICE), stderr);
});
