/**
 * One cflow measurement in a fresh process, for bench/vs_llama.ts (which starts it, pinned with
 * `taskset`, and reads its job as JSON on stdin and its result as the last line of stdout).
 *
 * It goes through the library path users hit: `resolveModel` (the GGUF's conversion, cached in
 * the converted-model cache), `openModel` (one load for the forward pass and the tokenizer the
 * `.cflow` file carries), and
 * `generate()` with a greedy sampler. Jobs:
 *
 * - `prepare`: convert once (untimed; later jobs find the conversion cached) and describe the
 *   model.
 * - `pp`: a warmup, then `generate()` of one token after the prompt; reports prefill tok/s.
 * - `tg`: a warmup, then `generate()` of `maxTokens` tokens ignoring end-of-generation
 *   (llama-bench's tg convention); reports decode tok/s, timed from the first to the last
 *   token, and the fnv1a64 hash of the generated ids.
 * - `agree`: teacher-forced `forward()` over the tokens; top-1 at every position and the logit
 *   margin between llama.cpp's top two tokens there.
 * - `stream`: the kernels' streaming read over a buffer larger than the caches, in 2 MiB pages
 *   like the weights (GB/s), the bandwidth yardstick.
 *
 * Every result carries the process's peak RSS (VmHWM) and its Pss split at exit.
 *
 * @module
 */

import { allocAligned, openKernels } from "../ffi/mod.ts";
import type { Transformer } from "../model/mod.ts";
import {
  fnv1a64,
  generate,
  type GenerationStats,
  openModel,
  resolveModel,
} from "../runtime/mod.ts";
import { Sampler } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { CflowJob, ProcMemory } from "./_vs_llama_models.ts";

/**
 * VmHWM and VmRSS from /proc/PID/status, Pss* from /proc/PID/smaps_rollup, in bytes. Deno
 * refuses to read /proc/self (or /proc/PID) without --allow-all, so `cat` (the one program this
 * worker may run) reads them; the fork happens after the measurement and leaves VmHWM alone.
 */
async function procMemory(): Promise<ProcMemory> {
  const kb = (text: string, key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
    return m === null ? NaN : Number(m[1]) * 1024;
  };
  const cat = async (path: string) => {
    const out = await new Deno.Command("cat", { args: [path], stderr: "null" }).output();
    return out.success ? new TextDecoder().decode(out.stdout) : "";
  };
  const status = await cat(`/proc/${Deno.pid}/status`);
  const rollup = await cat(`/proc/${Deno.pid}/smaps_rollup`);
  return {
    vmHwm: kb(status, "VmHWM"),
    vmRss: kb(status, "VmRSS"),
    pss: kb(rollup, "Pss"),
    pssFile: kb(rollup, "Pss_File"),
    pssAnon: kb(rollup, "Pss_Anon"),
  };
}

async function run(
  model: Transformer,
  tokenizer: Tokenizer,
  prompt: number[],
  maxTokens: number,
): Promise<{ ids: number[]; stats: GenerationStats }> {
  const sampler = new Sampler(model.config.vocab, { temperature: 0 });
  const it = generate(model, tokenizer, sampler, prompt, { maxTokens, ignoreEos: true });
  const ids: number[] = [];
  while (true) {
    const r = await it.next();
    if (r.done) return { ids, stats: r.value };
    if (r.value.id >= 0) ids.push(r.value.id);
  }
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

async function main(job: CflowJob): Promise<Record<string, unknown>> {
  if (job.mode === "stream") {
    const k = openKernels({ threads: job.threads });
    // Native memory in 2 MiB pages where the kernel gives them, as the weights are held
    // (model/weights.ts): a JS buffer (4 KiB pages) read 23.9 GB/s at 1 thread on Zen 4 where
    // this reads 36.6 (bench:read-ceiling), which had made decode look faster than the read.
    // `.bytes` is why this job alone runs with unscoped --allow-ffi.
    const region = allocAligned(job.bytes, 2 << 20);
    try {
      region.advise("hugepage");
      const buf = region.bytes;
      // Write every page: untouched pages would all map the kernel's one zero page.
      buf.fill(0x5a);
      let sink = k.streamRead(buf);
      const rates: number[] = [];
      const start = performance.now();
      while (performance.now() - start < job.minMs || rates.length < 3) {
        const t0 = performance.now();
        sink ^= k.streamRead(buf);
        rates.push(buf.length / ((performance.now() - t0) / 1000) / 1e9);
      }
      rates.sort((a, b) => a - b);
      const rollup = await new Deno.Command("cat", { args: [`/proc/${Deno.pid}/smaps_rollup`] })
        .output();
      const huge = /^AnonHugePages:\s+(\d+) kB/m.exec(new TextDecoder().decode(rollup.stdout));
      return {
        gbps: rates[rates.length >> 1],
        passes: rates.length,
        // Bytes of the process in 2 MiB pages while the buffer was read.
        hugePageBytes: huge === null ? null : Number(huge[1]) * 1024,
        sink: String(sink & 1n),
        threads: k.threads,
        variant: k.variant,
      };
    } finally {
      region.close();
    }
  }

  const k = openKernels({ threads: job.mode === "prepare" ? 1 : job.threads });
  const t0 = performance.now();
  let converted = false;
  const path = await resolveModel(job.gguf, {
    quant: job.quant,
    cache: job.cache,
    onConvert: () => {
      converted = true;
    },
  });
  const resolveMs = performance.now() - t0;
  const opened = openModel(path, { contextLength: job.ctx, kvCache: "f16" });
  const tokenizer = opened.tokenizer;
  using model = opened.model;
  const loadMs = performance.now() - t0;
  const info = {
    path,
    threads: k.threads,
    variant: k.variant,
    cpu: k.cpuModel,
    library: k.buildInfo,
    loadMs,
  };

  switch (job.mode) {
    case "prepare": {
      const c = model.config;
      return {
        ...info,
        converted,
        // With the special tokens the tokenizer adds (Gemma's BOS), as a user's prompt has them.
        textIds: job.text === undefined
          ? undefined
          : tokenizer.encode(job.text, { addSpecial: true, parseSpecial: false }),
        agreeIds: job.agreeText === undefined
          ? undefined
          : tokenizer.encode(job.agreeText, { addSpecial: true, parseSpecial: false }),
        resolveMs,
        fileBytes: (await Deno.stat(path)).size,
        config: {
          hidden: c.hidden,
          layers: c.layers,
          heads: c.heads,
          kvHeads: c.kvHeads,
          headDim: c.headDim,
          ffn: c.ffnHidden,
          vocab: c.vocab,
        },
        contextLength: model.contextLength,
        tokenizerVocab: tokenizer.vocabSize,
      };
    }
    case "pp": {
      await run(model, tokenizer, job.prompt.slice(0, job.warmupPrompt), 1);
      const r = await run(model, tokenizer, job.prompt, 1);
      return {
        ...info,
        tokS: r.stats.prefillTokS,
        promptTokens: r.stats.promptTokens,
        ids: r.ids,
        hash: fnv1a64(r.ids),
        memory: await procMemory(),
        peakRssGetrusage: k.peakRss(),
      };
    }
    case "tg": {
      await run(model, tokenizer, job.prompt, job.warmupTokens);
      const r = await run(model, tokenizer, job.prompt, job.maxTokens);
      if (r.stats.generatedTokens !== job.maxTokens) {
        throw new Error(
          `generated ${r.stats.generatedTokens} tokens (${r.stats.stopReason}), not ${job.maxTokens}`,
        );
      }
      return {
        ...info,
        tokS: r.stats.decodeTokS,
        generatedTokens: r.stats.generatedTokens,
        ids: r.ids,
        hash: fnv1a64(r.ids),
        memory: await procMemory(),
        peakRssGetrusage: k.peakRss(),
      };
    }
    case "agree": {
      const top1: number[] = [];
      const refMargin: number[] = [];
      const splitMargin: number[] = [];
      const a0 = performance.now();
      job.tokens.forEach((id, pos) => {
        const logits = model.forward(id, pos);
        const got = argmax(logits);
        top1.push(got);
        refMargin.push(logits[job.refTop1[pos]] - logits[job.refTop2[pos]]);
        splitMargin.push(logits[got] - logits[job.refTop1[pos]]);
      });
      return {
        ...info,
        top1,
        refMargin,
        splitMargin,
        ms: performance.now() - a0,
        memory: await procMemory(),
        peakRssGetrusage: k.peakRss(),
      };
    }
  }
}

if (import.meta.main) {
  const job = JSON.parse(await new Response(Deno.stdin.readable).text()) as CflowJob;
  const result = await main(job);
  console.log(JSON.stringify({ ok: true, engine: "cflow", mode: job.mode, ...result }));
}
