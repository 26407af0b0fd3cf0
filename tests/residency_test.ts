/**
 * Residency modes on SmolLM2 Q4_0 (skipped when the test model is absent): the mapped source
 * pages of packed weights are kept (`never`), dropped as they are packed (`after-pack`), or
 * dropped again at the prefill/decode boundary (`phase-boundary`). Greedy output is the same in
 * every mode; the file-backed PSS is what changes.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64, generate, type GenerationStats, memoryUsage } from "../runtime/mod.ts";
import { SMOLLM2_GGUF, smollm2Present } from "./util/test_models.ts";

Deno.test({
  name:
    "residency: never, after-pack and phase-boundary give one greedy hash; eviction lowers Pss_File",
  ignore: !smollm2Present || memoryUsage() === undefined,
  async fn() {
    openKernels();
    const dir = await Deno.makeTempDir({ prefix: "cflow-residency-" });
    try {
      const path = `${dir}/smollm2.cflow`;
      await convertFile(SMOLLM2_GGUF, path, {
        format: "cflow",
        quant: "q4_0",
        rule: "ggml",
        measureError: false,
      });
      const tokenizer = {
        encode: () => [],
        isEog: () => false,
        tokenBytes: () => new Uint8Array(),
      };
      const greedy = {
        sample(l: Float32Array) {
          let b = 0;
          for (let i = 1; i < l.length; i++) if (l[i] > l[b]) b = i;
          return b;
        },
        accept() {},
      };
      const results: { mode: string; hash: string; stats: GenerationStats }[] = [];
      for (const mode of ["never", "after-pack", "phase-boundary"] as const) {
        using model = Transformer.load(path, { contextLength: 128, packed: true, evict: mode });
        const ids: number[] = [];
        const it = generate(model, tokenizer, greedy, [1, 504, 2372, 2447, 3758], {
          maxTokens: 24,
        });
        let r = await it.next();
        while (!r.done) {
          if (r.value.id >= 0) ids.push(r.value.id);
          r = await it.next();
        }
        results.push({ mode, hash: fnv1a64(ids), stats: r.value });
      }
      for (const r of results) {
        const m = r.stats.memory!;
        console.log(
          `${r.mode}: ${r.hash}; Pss_File MiB after load ${
            (m.afterLoad.pssFile / 2 ** 20).toFixed(1)
          }, ` +
            `after prefill ${(m.afterPrefill.pssFile / 2 ** 20).toFixed(1)}, after decode ${
              (m.afterDecode.pssFile / 2 ** 20).toFixed(1)
            }; Pss_Anon ${(m.afterDecode.pssAnon / 2 ** 20).toFixed(1)}`,
        );
      }
      assert.equal(new Set(results.map((r) => r.hash)).size, 1);
      const file = (i: number) => results[i].stats.memory!.afterDecode.pssFile;
      // The model file is ~80 MiB of packed weights: keeping its pages costs that much file PSS.
      assert.ok(file(0) - file(1) > 40 << 20, `never ${file(0)} vs after-pack ${file(1)}`);
      assert.ok(
        file(2) <= file(1) + (1 << 20),
        `phase-boundary ${file(2)} vs after-pack ${file(1)}`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/**
 * Resident bytes of the mappings of `path`, from this process's smaps (read by `cat`: Deno
 * refuses to read /proc/self without --allow-all, which the suite does not grant).
 */
function mappedRss(path: string): number {
  const out = new Deno.Command("cat", { args: [`/proc/${Deno.pid}/smaps`] }).outputSync();
  assert.ok(out.success, "cat /proc/PID/smaps failed");
  let rss = 0;
  let inFile = false;
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${path}`);
    const m = /^Rss:\s+(\d+) kB/.exec(line);
    if (inFile && m !== null) rss += Number(m[1]) * 1024;
  }
  return rss;
}

Deno.test({
  name:
    "residency: after loading with after-pack, the model file keeps almost no pages mapped (the norms' reads map whole page-cache folios)",
  ignore: !smollm2Present || Deno.build.os !== "linux",
  async fn() {
    openKernels();
    const dir = await Deno.makeTempDir({ prefix: "cflow-residency-" });
    try {
      const path = await Deno.realPath(dir) + "/smollm2.cflow";
      await convertFile(SMOLLM2_GGUF, path, {
        format: "cflow",
        quant: "q4_0",
        rule: "ggml",
        measureError: false,
      });
      using model = Transformer.load(path, { contextLength: 64, packed: true });
      const packed = model.loadStats.packedBytes;
      const resident = mappedRss(path);
      console.log(
        `${(packed / 2 ** 20).toFixed(1)} MiB packed, ${
          (resident / 2 ** 20).toFixed(1)
        } MiB of the file resident`,
      );
      // Before the file's pages were dropped after the vectors were read, 30-36 MiB stayed
      // mapped here (Linux 6.18; SmolLM2 Q4_0 and Q4_1).
      assert.ok(packed > 40 << 20);
      assert.ok(resident < 4 << 20, `${resident} bytes of ${path} resident after loading`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
