// Packing at load drops the source pages of a one-matrix run as it goes, so
// that a large matrix is never resident twice. At 1 thread the pool runs the
// whole pack job in one call; the eviction used to happen once per call, and
// Qwen2.5-Coder-1.5B's 191 MB embedding was then held twice while it packed
// (load peak 1,341 MiB against 1,164 MiB resident after).

import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const LIB = Deno.env.get("CFLOW_KERNELS") ?? `${ROOT}/kernels-zig/zig-out/lib/libcflow_kernels.so`;
const CHILD = `${ROOT}/tests/util/pack_evict_child.ts`;

Deno.test({
  name: "packing a one-matrix run at 1 thread drops its source stripe by stripe, not at the end",
  ignore: Deno.env.get("CFLOW_KERNELS") === "wasm", // the wasm build packs nothing
  fn: async () => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        `--allow-ffi=${LIB}`,
        `--allow-read=${ROOT},${LIB}`,
        "--allow-env=CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE",
        CHILD,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.ok(out.success, stderr);
    const r = JSON.parse(new TextDecoder().decode(out.stdout).trim());
    assert.equal(r.backend, "native");
    // The packed copy grows while the source shrinks: the peak rises by about
    // one stripe (279 KB here), where dropping the source at the end raised
    // it by the whole matrix (84 MB).
    const grew = r.after - r.before;
    assert.ok(
      grew < r.length / 8,
      `peak RSS grew by ${grew} bytes while packing a ${r.length}-byte run`,
    );
  },
});
