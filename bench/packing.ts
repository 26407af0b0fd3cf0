/**
 * Packing evidence (issue 7, the seed note's packed Q8_0 decode): the same engine decoding from
 * the row-contiguous `.cflow` tiles as stored and from the 16-row panels they are repacked into
 * at load, on the same file, in fresh processes, in a shuffled order.
 *
 *   deno task bench:packing [--models smollm2-q8_0,smollm2-q4_0] [--threads 1]
 *     [--reps 5] [--tg 128] [--seed N]
 *
 * Per layout it reports load time (packing included), packing time, tg decode tok/s (timed
 * from the first to the last token after an 8-token prompt, greedy, end-of-generation ignored),
 * the greedy hash, and peak RSS; then the panels/tiles decode ratio and the break-even token
 * count: packing time / (per-token time with tiles - per-token time with panels), the number of
 * generated tokens after which packing has paid for itself. The models are the GGUFs
 * bench:vs-llama uses (scripts/derive-models.ts), converted through the model cache.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64, resolveModel } from "../runtime/mod.ts";
import { arg, argmax, median, runTrials } from "./_trials.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const MODELS: Record<string, { gguf: string; quant: "q4_0" | "q8_0" }> = {
  "smollm2-q8_0": { gguf: "cache/models/smollm2-135m-instruct.Q8_0.gguf", quant: "q8_0" },
  "smollm2-q4_0": { gguf: "cache/models/smollm2-135m-instruct.Q4_0.gguf", quant: "q4_0" },
};
const PROMPT = [1, 504, 3120, 5248, 314, 253, 1345, 28];

interface Result {
  loadMs: number;
  packMs: number;
  tgTokS: number;
  hash: string;
  peakMiB: number;
}

/** One measurement, in this (fresh) process. */
function worker(path: string, packed: boolean, threads: number, tg: number): Result {
  const k = openKernels({ threads });
  const t0 = performance.now();
  using model = Transformer.load(path, { packed, contextLength: 1024, decodeThreads: "pool" });
  const loadMs = performance.now() - t0;
  // Warmup: a few tokens, then the measured run from position 0 again.
  let logits = model.prefill(PROMPT, 0);
  for (let i = 0; i < 8; i++) logits = model.forward(argmax(logits), PROMPT.length + i);
  logits = model.prefill(PROMPT, 0);
  const ids: number[] = [];
  let first = 0;
  for (let i = 0; i < tg; i++) {
    const id = argmax(logits);
    ids.push(id);
    if (i === 0) first = performance.now();
    if (i + 1 < tg) logits = model.forward(id, PROMPT.length + i);
  }
  const tgTokS = (tg - 1) / ((performance.now() - first) / 1000);
  return {
    loadMs,
    packMs: model.loadStats.packMs,
    tgTokS,
    hash: fnv1a64(ids),
    peakMiB: k.peakRss() / (1 << 20),
  };
}

async function main(): Promise<void> {
  if (Deno.args[0] === "--worker") {
    const [, path, packed, threads, tg] = Deno.args;
    console.log(JSON.stringify(worker(path, packed === "1", Number(threads), Number(tg))));
    return;
  }
  const models = arg("models", "smollm2-q8_0,smollm2-q4_0").split(",");
  const threads = Number(arg("threads", "1"));
  const reps = Number(arg("reps", "5"));
  const tg = Number(arg("tg", "128"));
  const seed = Number(arg("seed", String(Date.now() % 1_000_000_007)));
  const printedSeed = seed;
  if (![1, 2].includes(threads) && !(threads > 0)) throw new RangeError(`--threads ${threads}`);

  const paths = new Map<string, string>();
  for (const m of models) {
    const spec = MODELS[m];
    if (spec === undefined) throw new RangeError(`unknown model ${m} (${Object.keys(MODELS)})`);
    paths.set(
      m,
      await resolveModel(`${ROOT}${spec.gguf}`, {
        quant: spec.quant,
        cache: `${ROOT}cache/converted`,
      }),
    );
  }
  const cells = models.flatMap((m) => [true, false].map((packed) => ({ m, packed })));
  const results = await runTrials<typeof cells[number], Result>({
    script: new URL(import.meta.url).pathname,
    cells,
    reps,
    seed,
    key: (c) => `${c.m}:${c.packed}`,
    workerArgs: (c) => [paths.get(c.m)!, c.packed ? "1" : "0", String(threads), String(tg)],
    report: (c, res, r) =>
      console.error(
        `[${r + 1}/${reps}] ${c.m} ${c.packed ? "panels" : "tiles "}: ${
          res.tgTokS.toFixed(1)
        } tok/s`,
      ),
  });
  console.log(
    `packed panels vs row-contiguous tiles, same engine and file; ${threads} thread(s), ` +
      `${reps} reps, order seed ${printedSeed}; median [min-max]`,
  );
  for (const m of models) {
    const p = results.get(`${m}:true`)!;
    const t = results.get(`${m}:false`)!;
    const fmt = (xs: number[], d = 1) =>
      `${median(xs).toFixed(d)} [${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)}]`;
    const hp = new Set(p.map((x) => x.hash));
    const ht = new Set(t.map((x) => x.hash));
    if (hp.size !== 1 || ht.size !== 1) {
      throw new Error(`${m}: greedy output is not stable across repetitions: ${[...hp, ...ht]}`);
    }
    console.log(`\n== ${m}`);
    console.log(
      `  panels  decode ${fmt(p.map((x) => x.tgTokS))} tok/s, load ${
        fmt(p.map((x) => x.loadMs), 0)
      } ms (packing ${fmt(p.map((x) => x.packMs), 0)} ms), peak RSS ${
        fmt(p.map((x) => x.peakMiB), 0)
      } MiB`,
    );
    console.log(
      `  tiles   decode ${fmt(t.map((x) => x.tgTokS))} tok/s, load ${
        fmt(t.map((x) => x.loadMs), 0)
      } ms, peak RSS ${fmt(t.map((x) => x.peakMiB), 0)} MiB`,
    );
    const ratio = median(p.map((x) => x.tgTokS)) / median(t.map((x) => x.tgTokS));
    const perTokenSaved = 1000 / median(t.map((x) => x.tgTokS)) -
      1000 / median(p.map((x) => x.tgTokS));
    const breakEven = median(p.map((x) => x.packMs)) / perTokenSaved;
    console.log(
      `  panels/tiles decode ${ratio.toFixed(2)}x (goal >= 1.3x for Q8_0); packing pays for ` +
        `itself after ${perTokenSaved > 0 ? Math.ceil(breakEven) : "never"} generated tokens`,
    );
    console.log(
      `  greedy tg hash: panels ${[...hp][0]}, tiles ${[...ht][0]}${
        [...hp][0] === [...ht][0] ? "" : " (the layouts sum in different orders)"
      }`,
    );
  }
}

if (import.meta.main) await main();
