/**
 * Explicit prefetch on and off (the report's claim 6, refuted there when storage bandwidth
 * binds): the same engine and file decoding with the prefetch thread touching the next matrix
 * and the next selected expert with PREFETCHT0 (`CFLOW_PREFETCH=1`) and without it. Every trial
 * runs in a fresh process, in an order shuffled with a printed seed.
 *
 *   deno task bench:prefetch [--models smollm2-q8_0,expert-overlap] [--threads 1] [--reps 5]
 *     [--tg 64] [--seed N]
 *
 * `expert-overlap` is bench:expert-overlap's generated MoE model (its experts read in place from
 * the mapped file here). Per model and arm: decode tok/s (median, min-max) and the greedy hash,
 * which must not change; then the on/off ratio. A JSON line last.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64, resolveModel } from "../runtime/mod.ts";
import { generateOverlapModel } from "./expert_overlap.ts";
import { arg, argmax, median, runTrials } from "./_trials.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const OVERLAP = `${ROOT}cache/bench/expert-overlap.cflow`;

interface Result {
  tgTokS: number;
  hash: string;
}

function worker(path: string, prefetch: boolean, threads: number, tg: number): Result {
  openKernels({ threads, prefetch });
  using model = Transformer.load(path, { contextLength: 512, decodeThreads: "pool" });
  const prompt = [1, 504, 3120, 2248, 314, 253, 1345, 28]; // < 4096: both vocabularies
  let logits = model.prefill(prompt, 0);
  for (let i = 0; i < 8; i++) logits = model.forward(argmax(logits), prompt.length + i);
  logits = model.prefill(prompt, 0);
  const ids: number[] = [];
  let first = 0;
  for (let i = 0; i < tg; i++) {
    const id = argmax(logits);
    ids.push(id);
    if (i === 0) first = performance.now();
    if (i + 1 < tg) logits = model.forward(id, prompt.length + i);
  }
  return { tgTokS: (tg - 1) / ((performance.now() - first) / 1000), hash: fnv1a64(ids) };
}

async function modelPath(name: string): Promise<string> {
  if (name === "expert-overlap") {
    try {
      await Deno.stat(OVERLAP);
    } catch {
      await generateOverlapModel(OVERLAP);
    }
    return OVERLAP;
  }
  const quant = name === "smollm2-q4_0" ? "q4_0" : name === "smollm2-q8_0" ? "q8_0" : undefined;
  if (quant === undefined) throw new RangeError(`unknown model ${name}`);
  return await resolveModel(
    `${ROOT}cache/models/smollm2-135m-instruct.${quant.toUpperCase()}.gguf`,
    {
      quant,
      cache: `${ROOT}cache/converted`,
    },
  );
}

async function main(): Promise<void> {
  if (Deno.args[0] === "--worker") {
    const [, path, on, threads, tg] = Deno.args;
    console.log(JSON.stringify(worker(path, on === "1", Number(threads), Number(tg))));
    return;
  }
  const models = arg("models", "smollm2-q8_0,expert-overlap").split(",");
  const threads = Number(arg("threads", "1"));
  const reps = Number(arg("reps", "5"));
  const tg = Number(arg("tg", "64"));
  const seed = Number(arg("seed", String(Date.now() % 1_000_000_007)));
  const printedSeed = seed;
  if (!Number.isInteger(threads) || threads < 1 || !Number.isInteger(reps) || reps < 1) {
    throw new RangeError("--threads and --reps must be integers >= 1");
  }
  const paths = new Map<string, string>();
  for (const m of models) paths.set(m, await modelPath(m));
  const cells = models.flatMap((m) => [false, true].map((on) => ({ m, on })));
  const results = await runTrials<typeof cells[number], Result>({
    script: new URL(import.meta.url).pathname,
    cells,
    reps,
    seed,
    key: (c) => `${c.m}:${c.on}`,
    workerArgs: (c) => [paths.get(c.m)!, c.on ? "1" : "0", String(threads), String(tg)],
    report: (c, res, r) =>
      console.error(
        `[${r + 1}/${reps}] ${c.m} prefetch ${c.on ? "on " : "off"}: ${
          res.tgTokS.toFixed(1)
        } tok/s`,
      ),
  });
  console.log(
    `explicit prefetch, ${threads} thread(s), tg ${tg}, ${reps} reps, order seed ${printedSeed}; ` +
      "decode tok/s median [min-max]",
  );
  const summary: Record<string, unknown>[] = [];
  let stable = true;
  for (const m of models) {
    const off = results.get(`${m}:false`)!;
    const on = results.get(`${m}:true`)!;
    const fmt = (rs: Result[]) => {
      const xs = rs.map((x) => x.tgTokS);
      return `${median(xs).toFixed(1)} [${Math.min(...xs).toFixed(1)}-${
        Math.max(...xs).toFixed(1)
      }]`;
    };
    const hashes = new Set([...off, ...on].map((x) => x.hash));
    stable &&= hashes.size === 1;
    const ratio = median(on.map((x) => x.tgTokS)) / median(off.map((x) => x.tgTokS));
    console.log(
      `${m.padEnd(16)} off ${fmt(off)}  on ${fmt(on)}  on/off ${ratio.toFixed(2)}x  hash ${
        hashes.size === 1 ? [...hashes][0] : "DIFFERS"
      }`,
    );
    summary.push({
      model: m,
      off_tok_s: median(off.map((x) => x.tgTokS)),
      on_tok_s: median(on.map((x) => x.tgTokS)),
      ratio,
    });
  }
  console.log(JSON.stringify({
    bench: "prefetch",
    threads,
    reps,
    tg,
    seed: printedSeed,
    hash_stable: stable,
    models: summary,
  }));
  if (!stable) Deno.exit(1);
}

if (import.meta.main) await main();
