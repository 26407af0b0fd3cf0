// One llama.cpp measurement in a fresh node process, for bench/vs_llama.ts (which starts it,
// pinned with `taskset`, and reads its job as JSON on stdin and its result as the last line of
// stdout). llama.cpp is node-llama-cpp 3.21.1's prebuilt CPU build from .tools/llamacpp/
// (scripts/install-llamacpp.sh): getLlama({ gpu: false, build: "never" }), all layers on the
// CPU, `threads` threads for generation and batches alike, an f16 KV cache of `ctx` positions.
//
// Jobs (the same as bench/_cflow_worker.ts's):
//   pp      a warmup, then the prompt evaluated in batches of `batch` and the first token
//           sampled (greedy); reports prompt tokens per second of that
//   tg      a warmup, then `maxTokens` greedy tokens after the prompt, end-of-generation tokens
//           included (yieldEogToken, llama-bench's tg convention); decode tok/s timed from the
//           first to the last token; fnv1a64 of the ids
//   agree   teacher-forced, one token per evaluation (as the committed fixtures were made):
//           top-1, runner-up and ln(p1/p2) (= the logit margin; temperature 0 leaves the logits
//           untouched) at every position, flash attention off; then the top-1 of the same
//           positions evaluated `selfBatch` tokens at a time (llama.cpp against itself), with
//           its ln(p(top-1)/p(runner-up)) of the one-token run's two tokens
//
// Every result carries the process's peak RSS (VmHWM) and its Pss split at exit.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** VmHWM and VmRSS from /proc/self/status, Pss* from /proc/self/smaps_rollup, in bytes. */
function procMemory() {
  const kb = (text, key) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
    return m === null ? NaN : Number(m[1]) * 1024;
  };
  const status = fs.readFileSync("/proc/self/status", "utf8");
  let rollup = "";
  try {
    rollup = fs.readFileSync("/proc/self/smaps_rollup", "utf8");
  } catch {
    // older kernels: Pss unknown
  }
  return {
    vmHwm: kb(status, "VmHWM"),
    vmRss: kb(status, "VmRSS"),
    pss: kb(rollup, "Pss"),
    pssFile: kb(rollup, "Pss_File"),
    pssAnon: kb(rollup, "Pss_Anon"),
  };
}

/** 64-bit FNV-1a over the little-endian u32 bytes of the ids (runtime/generate.ts's fnv1a64). */
function fnv1a64(ids) {
  let h = 0xcbf29ce484222325n;
  for (const id of ids) {
    for (let b = 0; b < 4; b++) {
      h ^= BigInt((id >>> (8 * b)) & 0xff);
      h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
    }
  }
  return `fnv1a64:${h.toString(16).padStart(16, "0")}`;
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

const GREEDY = { temperature: 0, yieldEogToken: true };

/** Greedy generation of `n` tokens after `prompt`; the time after each token arrived. */
async function generate(seq, prompt, n) {
  await seq.clearHistory();
  const ids = [];
  const at = [];
  const start = performance.now();
  for await (const token of seq.evaluate(prompt, GREEDY)) {
    ids.push(token);
    at.push(performance.now());
    if (ids.length >= n) break;
  }
  return { ids, at, start };
}

async function main() {
  const job = JSON.parse(await readStdin());
  const index = path.join(job.nlcDir, "node_modules/node-llama-cpp/dist/index.js");
  const { getLlama } = await import(pathToFileURL(index).href);
  const t0 = performance.now();
  const llama = await getLlama({
    gpu: false,
    build: "never",
    logLevel: "error",
    maxThreads: job.threads,
  });
  const model = await llama.loadModel({ modelPath: job.gguf, gpuLayers: 0 });
  const flashAttention = job.mode === "agree" ? false : job.flashAttention;
  const context = await model.createContext({
    contextSize: job.ctx,
    batchSize: job.batch,
    threads: { ideal: job.threads, min: job.threads },
    flashAttention,
  });
  const seq = context.getSequence();
  const info = {
    llamaCpp: llama.llamaCppRelease,
    buildType: llama.buildType,
    systemInfo: llama.systemInfo,
    threads: job.threads,
    contextSize: context.contextSize,
    batchSize: context.batchSize,
    flashAttention,
    loadMs: performance.now() - t0,
  };
  let result;
  if (job.mode === "pp") {
    await generate(seq, job.prompt.slice(0, job.warmupPrompt), 1);
    const r = await generate(seq, job.prompt, 1);
    result = {
      tokS: job.prompt.length / ((r.at[0] - r.start) / 1000),
      promptTokens: job.prompt.length,
      ids: r.ids,
      hash: fnv1a64(r.ids),
    };
  } else if (job.mode === "tg") {
    await generate(seq, job.prompt, job.warmupTokens);
    const r = await generate(seq, job.prompt, job.maxTokens);
    if (r.ids.length !== job.maxTokens) {
      throw new Error(`generated ${r.ids.length} tokens, not ${job.maxTokens}`);
    }
    result = {
      tokS: (r.ids.length - 1) / ((r.at[r.at.length - 1] - r.at[0]) / 1000),
      generatedTokens: r.ids.length,
      ids: r.ids,
      hash: fnv1a64(r.ids),
    };
  } else if (job.mode === "agree") {
    await seq.clearHistory();
    const next = {
      generateNext: { token: true, probabilities: true, options: { temperature: 0 } },
    };
    const top1 = [];
    const top2 = [];
    const margin = [];
    const a0 = performance.now();
    for (const id of job.tokens) {
      const [out] = await seq.controlledEvaluate([[id, next]]);
      const it = out.next.probabilities.entries();
      const [t1, p1] = it.next().value;
      const [t2, p2] = it.next().value;
      top1.push(t1);
      top2.push(t2);
      margin.push(p2 > 0 ? Math.log(p1 / p2) : 1000);
    }
    const ms = performance.now() - a0;
    // llama.cpp against itself: the same positions in batches of `selfBatch` (matrix-matrix
    // kernels, another summation order), the noise floor of top-1 agreement on this model.
    // Its margin between the one-token run's top two tokens says how far llama.cpp moves from
    // itself in logits, the yardstick for cflow's mean margin delta.
    await seq.clearHistory();
    const selfTop1 = [];
    const selfMargin = [];
    for (let i = 0; i < job.tokens.length; i += job.selfBatch) {
      const chunk = job.tokens.slice(i, i + job.selfBatch).map((t) => [t, next]);
      for (const out of await seq.controlledEvaluate(chunk)) {
        const at = selfTop1.length;
        selfTop1.push(out.next.token);
        const p1 = out.next.probabilities.get(top1[at]) ?? 0;
        const p2 = out.next.probabilities.get(top2[at]) ?? 0;
        selfMargin.push(p1 > 0 && p2 > 0 ? Math.log(p1 / p2) : null);
      }
    }
    result = { top1, top2, margin, selfTop1, selfMargin, ms };
  } else {
    throw new Error(`unknown mode ${job.mode}`);
  }
  result.memory = procMemory();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  console.log(
    JSON.stringify({ ok: true, engine: "llama.cpp", mode: job.mode, ...info, ...result }),
  );
}

await main();
