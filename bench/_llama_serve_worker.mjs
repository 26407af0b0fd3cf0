// llama.cpp's side of bench/serve.ts, in a fresh node process: node-llama-cpp 3.21.1's prebuilt
// CPU build (scripts/install-llamacpp.sh), one context with `maxStreams` sequences of `ctx`
// positions each, and for each stream count N of the job, N sequences generating at once.
// node-llama-cpp batches the evaluations of concurrent sequences of one context into one
// llama_decode, as llama-server's slots share a batch: the same shape as cflow's engine.
//
// Job (JSON on stdin): { nlcDir, gguf, threads, ctx, maxStreams, streams: [N...], prompts:
// [text...], maxTokens }. Each stream greedily generates `maxTokens` tokens after its prompt,
// end-of-generation tokens included (llama-bench's convention, as `ignore_eos`); the result is
// the last line of stdout: per N, every stream's request start, token arrival times (ms) and
// token count, and the process's peak RSS.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

function vmHwm() {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return m === null ? NaN : Number(m[1]) * 1024;
}

async function stream(seq, tokens, maxTokens) {
  await seq.clearHistory();
  const start = performance.now();
  const at = [];
  for await (const _ of seq.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
    at.push(performance.now());
    if (at.length >= maxTokens) break;
  }
  return { start, at, tokens: at.length };
}

async function main() {
  const job = JSON.parse(await readStdin());
  const index = path.join(job.nlcDir, "node_modules/node-llama-cpp/dist/index.js");
  const { getLlama } = await import(pathToFileURL(index).href);
  const llama = await getLlama({
    gpu: false,
    build: "never",
    logLevel: "error",
    maxThreads: job.threads,
  });
  const model = await llama.loadModel({ modelPath: job.gguf, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: job.ctx * job.maxStreams,
    sequences: job.maxStreams,
    batchSize: 512,
    threads: { ideal: job.threads, min: job.threads },
  });
  const prompts = job.prompts.map((p) => model.tokenize(p));
  // The context's sequences, taken once and reused (cleared before each stream).
  const seqs = Array.from({ length: job.maxStreams }, () => context.getSequence());
  // Warm up: one short generation.
  await stream(seqs[0], prompts[0], 8);
  const rounds = [];
  for (const n of job.streams) {
    const t0 = performance.now();
    const out = await Promise.all(
      Array.from(
        { length: n },
        (_, i) => stream(seqs[i], prompts[i % prompts.length], job.maxTokens),
      ),
    );
    rounds.push({
      streams: n,
      t0,
      runs: out.map((r) => ({ start: r.start, at: r.at, tokens: r.tokens })),
    });
  }
  const result = {
    ok: true,
    llamaCpp: llama.llamaCppRelease,
    systemInfo: llama.systemInfo,
    promptTokens: prompts.map((p) => p.length),
    rounds,
    vmHwm: vmHwm(),
  };
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  console.log(JSON.stringify(result));
}

await main();
