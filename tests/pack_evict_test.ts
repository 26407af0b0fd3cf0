// Packing at load drops the source pages of a one-matrix run as it goes, so
// that a large matrix is never resident twice. At 1 thread the pool runs the
// whole pack job in one call; the eviction used to happen once per call, and
// Qwen2.5-Coder-1.5B's 191 MB embedding was then held twice while it packed
// (load peak 1,341 MiB against 1,164 MiB resident after).

import assert from "node:assert/strict";
import { PACK_EVICT_SOURCE } from "./util/pack_evict_source.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const LIB = Deno.env.get("CFLOW_KERNELS") ?? `${ROOT}/kernels-zig/zig-out/lib/libcflow_kernels.so`;
const CHILD = `${ROOT}/tests/util/pack_evict_child.ts`;

async function packChild(
  file?: string,
): Promise<{ grew: number; length: number; size: number }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      `--allow-ffi=${LIB}`,
      `--allow-read=${[ROOT, LIB, ...(file === undefined ? [] : [file])].join(",")}`,
      "--allow-env=CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE",
      CHILD,
      ...(file === undefined ? [] : [file]),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.ok(out.success, stderr);
  const r = JSON.parse(new TextDecoder().decode(out.stdout).trim());
  assert.equal(r.backend, "native");
  return { grew: r.after - r.before, length: r.length, size: r.size };
}

Deno.test({
  name: "packing a one-matrix run at 1 thread drops its source stripe by stripe, not at the end",
  ignore: Deno.env.get("CFLOW_KERNELS") === "wasm", // the wasm build packs nothing
  fn: async () => {
    // The packed copy grows while the source shrinks: the peak rises by about
    // one stripe (279 KB here), where dropping the source at the end raised
    // it by the whole matrix (84 MB).
    const { grew, length } = await packChild();
    assert.ok(
      grew < length / 8,
      `peak RSS grew by ${grew} bytes while packing a ${length}-byte run`,
    );
  },
});

Deno.test({
  name: "packing a run from a mapped file drops the neighbours that faults mapped back in",
  ignore: Deno.env.get("CFLOW_KERNELS") === "wasm",
  fn: async () => {
    // No source page is mapped before (the child drops them): the peak rises
    // by the packed copy, plus the source pages mapped at once. Each stripe's
    // first fault maps a window of the file around it (fault-around; whole
    // large folios on ext4 and tmpfs), pages of stripes already packed and
    // dropped among them. Dropping only the stripe itself left those mapped
    // until the run's end: SmolLM2's 30 MB embedding raised the load's peak
    // by 11 MB, this run's by 9 MB (11% of it; now under 1 MB).
    const dir = await Deno.makeTempDir({ prefix: "cflow-pack-evict-" });
    try {
      const file = `${dir}/source.bin`;
      // Written 4 KiB at a time: the page cache then holds small folios, as
      // after a download or a conversion that writes tile by tile (one 84 MB
      // write makes large folios, whose faults did not show the leak here).
      {
        using f = await Deno.open(file, { write: true, createNew: true });
        const page = new Uint8Array(4096).fill(PACK_EVICT_SOURCE.fill);
        for (let o = 0; o < PACK_EVICT_SOURCE.length; o += page.length) {
          const chunk = page.subarray(0, Math.min(page.length, PACK_EVICT_SOURCE.length - o));
          for (let w = 0; w < chunk.length;) w += f.writeSync(chunk.subarray(w));
        }
      }
      const { grew, length, size } = await packChild(file);
      assert.ok(
        grew - size < length / 32,
        `peak RSS grew by ${grew} bytes while packing a ${length}-byte run into ${size} bytes`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
