/**
 * The disk expert tier: selected experts read by direct I/O into staging
 * slots, waited for in the routing layer (`sync`) or at the injection layer
 * `expert_delay` passes later (`staged`), with or without an LRU cache. The
 * arithmetic is the in-place path's on the same inputs, so greedy output is
 * bit-identical in every configuration; and faults end in a clear error,
 * with no hang and no slot left pinned.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { KernelError, openKernels } from "../ffi/mod.ts";
import { Transformer, type TransformerOptions } from "./mod.ts";

openKernels({ threads: 2 });

const ROOT = new URL("..", import.meta.url).pathname;
const SOURCES: Record<string, string> = {
  arch2_4_combined: `${ROOT}tests/fixtures/pipeline_native/arch2_4_combined`,
  arch4_async_experts: `${ROOT}tests/fixtures/pipeline_native/arch4_async_experts`,
  gemma4_parallel: `${ROOT}tests/fixtures/pipeline_native/gemma4_parallel`,
  mixtral: `${ROOT}tests/fixtures/hf_logits/mixtral`,
  qwen2moe: `${ROOT}tests/fixtures/hf_logits/qwen2moe`,
};
const CONFIGS: TransformerOptions[] = [
  {},
  { expertTier: "disk" },
  { expertTier: "disk", expertFetch: "staged" },
  { expertTier: "disk", expertFetch: "staged", expertCacheMiB: 1 },
  { expertTier: "disk", expertCacheMiB: 1, packed: false },
];

/** Greedy ids after a 4-token prompt (batched prefill), 12 decode steps. */
function greedy(path: string, options: TransformerOptions): { ids: number[]; bytes: number[] } {
  using model = Transformer.load(path, { contextLength: 32, ...options });
  let logits = model.prefill([1, 17, 42, 99], 0);
  const ids: number[] = [];
  const bytes = new Array<number>(model.config.layers).fill(0);
  for (let i = 0; i < 12; i++) {
    let best = 0;
    for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
    ids.push(best);
    logits = model.forward(best, 4 + i);
    model.expertBytes.perLayer.forEach((n, l) => bytes[l] += n);
  }
  return { ids, bytes };
}

/** Converts a fixture to Q8_0 on a disk-backed file system (the cache). */
async function convert(name: string, dir: string): Promise<string> {
  const out = `${dir}/${name}.cflow`;
  await convertFile(SOURCES[name], out, {
    format: "cflow",
    quant: "q8_0",
    rule: "ggml",
    measureError: false,
  });
  return out;
}

Deno.test("disk tier: mmap, sync, staged and cached give one greedy output and read the same experts", async () => {
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "disk-tier-" });
  try {
    for (const name of Object.keys(SOURCES)) {
      const path = await convert(name, dir);
      const runs = CONFIGS.map((o) => greedy(path, o));
      for (const [i, r] of runs.entries()) {
        assert.deepEqual(r.ids, runs[0].ids, `${name} ${JSON.stringify(CONFIGS[i])}`);
        assert.deepEqual(r.bytes, runs[0].bytes, `${name} ${JSON.stringify(CONFIGS[i])}`);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("disk tier: staged reads are waited for at the injection pass; the cache turns misses into hits", async () => {
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "disk-tier-" });
  try {
    const path = await convert("arch2_4_combined", dir);
    const stats = [
      { expertTier: "disk" },
      { expertTier: "disk", expertCacheMiB: 4 },
    ].map((o) => {
      using model = Transformer.load(path, { contextLength: 32, ...o as TransformerOptions });
      for (let i = 0; i < 8; i++) model.forward(1 + i, i);
      return model.expertTierStats!;
    });
    // 8 tokens x 6 layers x 2 experts = 96 lookups.
    for (const s of stats) assert.equal(s.hits + s.misses, 96);
    assert.equal(stats[0].direct, true);
    // 4 MiB holds all 24 experts of this model: after the first reads, every lookup hits.
    assert.ok(stats[1].misses <= 24 && stats[1].hits >= 72, JSON.stringify(stats[1]));
    assert.ok(stats[1].bytesRead < stats[0].bytesRead);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Whether this machine has a writable /dev/shm tmpfs folder. */
const HAVE_SHM = (() => {
  try {
    const dir = Deno.makeTempDirSync({ dir: "/dev/shm", prefix: "cflow-probe-" });
    Deno.removeSync(dir);
    return true;
  } catch {
    return false;
  }
})();
if (!HAVE_SHM) {
  console.log(
    "ignored where noted: no writable /dev/shm (absent, or Deno refuses /dev paths without --allow-all, as under the suite's scoped flags)",
  );
}

Deno.test({
  name:
    "disk tier: where O_DIRECT is refused (tmpfs), reads go through the page cache, same output",
  ignore: !HAVE_SHM,
}, async () => {
  const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "cflow-disk-" });
  try {
    const path = await convert("mixtral", shm);
    using model = Transformer.load(path, { contextLength: 32, expertTier: "disk" });
    model.forward(1, 0);
    assert.equal(model.expertTierStats!.direct, false);
    const direct = greedy(path, {});
    assert.deepEqual(greedy(path, { expertTier: "disk", expertFetch: "staged" }), direct);
  } finally {
    await Deno.remove(shm, { recursive: true });
  }
});

Deno.test("disk tier: a model file truncated mid-generation stops with a clear error, no hang, no slot left pinned", async () => {
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "disk-tier-" });
  try {
    const path = await convert("arch2_4_combined", dir);
    for (const fetch of ["sync", "staged"] as const) {
      const copy = `${dir}/${fetch}.cflow`;
      await Deno.copyFile(path, copy);
      const model = Transformer.load(copy, {
        contextLength: 32,
        expertTier: "disk",
        expertFetch: fetch,
      });
      model.forward(1, 0);
      const size = (await Deno.stat(copy)).size;
      await Deno.truncate(copy, Math.floor(size / 2));
      const t0 = performance.now();
      assert.throws(
        () => model.forward(2, 1),
        (e: unknown) => e instanceof KernelError && /changed|truncated|past|range/i.test(e.message),
      );
      assert.ok(performance.now() - t0 < 5000, "the error comes at once");
      // Every pin was given back: closing (which destroys the staging area) succeeds.
      model.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("explicit prefetch (CFLOW_PREFETCH) changes no result", async () => {
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "disk-tier-" });
  try {
    const path = await convert("mixtral", dir);
    const off = greedy(path, {});
    openKernels({ threads: 2, prefetch: true });
    try {
      assert.equal(openKernels().prefetch, true);
      assert.deepEqual(greedy(path, {}), off);
      assert.deepEqual(greedy(path, { packed: false }), off);
    } finally {
      openKernels({ threads: 2, prefetch: false });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
