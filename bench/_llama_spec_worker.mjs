// llama.cpp's own speculation, for bench/speculative.ts (which starts it and reads its job as
// JSON on stdin and its result as the last line of stdout). node-llama-cpp 3.21.1's prebuilt CPU
// build (scripts/install-llamacpp.sh), all layers on the CPU, `threads` threads. Per prompt (token
// ids, the same ones cflow runs): greedy generation of up to `maxTokens` tokens, stopping at an
// end-of-generation token, plain and with a token predictor: DraftSequenceTokenPredictor over
// the draft model's own context (llama.cpp's draft speculation) or InputLookupTokenPredictor
// (its prompt lookup). Decode tok/s is timed from the first to the last token; the predictor's
// validated and refuted counts are its drafted and accepted tokens.
import path from "node:path";
import { pathToFileURL } from "node:url";

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

/** Greedy generation of up to `n` tokens after `prompt` on `seq`: ids and decode tok/s. */
async function generate(seq, prompt, n) {
  await seq.clearHistory();
  const ids = [];
  let first = 0;
  let last = 0;
  for await (const token of seq.evaluate(prompt, { temperature: 0 })) {
    ids.push(token);
    last = performance.now();
    if (ids.length === 1) first = last;
    if (ids.length >= n) break;
  }
  const tokS = ids.length > 1 ? (ids.length - 1) / ((last - first) / 1000) : 0;
  return { ids, tokS };
}

async function main() {
  const job = JSON.parse(await readStdin());
  const index = path.join(job.nlcDir, "node_modules/node-llama-cpp/dist/index.js");
  const lib = await import(pathToFileURL(index).href);
  const llama = await lib.getLlama({
    gpu: false,
    build: "never",
    logLevel: "error",
    maxThreads: job.threads,
  });
  const target = await llama.loadModel({ modelPath: job.target, gpuLayers: 0 });
  const draft = await llama.loadModel({ modelPath: job.draft, gpuLayers: 0 });
  const ctxOptions = {
    contextSize: job.ctx,
    threads: job.threads,
    batchSize: 512,
    flashAttention: false,
  };
  const plainCtx = await target.createContext(ctxOptions);
  const plain = plainCtx.getSequence();
  const draftCtx = await draft.createContext(ctxOptions);
  const specCtx = await target.createContext({ ...ctxOptions, sequences: 2 });
  const spec = {
    draft: specCtx.getSequence({
      tokenPredictor: new lib.DraftSequenceTokenPredictor(draftCtx.getSequence(), {
        maxTokens: job.draftMax,
      }),
    }),
    lookup: specCtx.getSequence({
      tokenPredictor: new lib.InputLookupTokenPredictor({
        patternLength: { min: 1, max: job.ngram },
        predictionLength: { max: job.draftMax },
      }),
    }),
  };
  const results = [];
  for (const p of job.prompts) {
    const seq = spec[p.method];
    const before = { ...seq.tokenPredictions };
    const a = await generate(plain, p.ids, job.maxTokens);
    const b = await generate(seq, p.ids, job.maxTokens);
    const after = seq.tokenPredictions;
    const validated = after.validated - before.validated;
    const refuted = after.refuted - before.refuted;
    results.push({
      name: p.name,
      plainTokS: a.tokS,
      specTokS: b.tokS,
      tokens: a.ids.length,
      same: a.ids.join() === b.ids.join(),
      drafted: validated + refuted,
      accepted: validated,
    });
  }
  console.log(JSON.stringify({ results }));
  process.exit(0);
}

await main();
