/**
 * Residency modes (the seed note's replacement-style residency): the same engine and file decoding
 * with the mapped source pages of packed weights kept (`never`), dropped as each matrix is packed
 * (`after-pack`), or dropped again at the prefill/decode boundary (`phase-boundary`), against the
 * unpacked tiles read in place (`tiles`, no packed copy). Every trial runs in a fresh process, in
 * an order shuffled with a printed seed.
 *
 *   deno task bench:residency [--model smollm2-q8_0] [--threads 1] [--reps 5] [--tg 128]
 *     [--prompt 64] [--seed N]
 *
 * Per mode: decode tok/s (first to last generated token), time to first token, RSS / PSS /
 * Pss_File / Pss_Anon after load, after prefill and after decode (/proc/self/smaps_rollup), peak
 * RSS, packing time, the greedy hash (which must be one across modes), and the break-even token
 * count of packing: packing time / (per-token time of tiles - per-token time packed). A table,
 * then one JSON line.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64, type MemoryUsage, memoryUsage, resolveModel } from "../runtime/mod.ts";
import { arg, argmax, median, runTrials } from "./_trials.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const MODELS: Record<string, { gguf: string; quant: "q4_0" | "q8_0" }> = {
  "smollm2-q8_0": { gguf: "cache/models/smollm2-135m-instruct.Q8_0.gguf", quant: "q8_0" },
  "smollm2-q4_0": { gguf: "cache/models/smollm2-135m-instruct.Q4_0.gguf", quant: "q4_0" },
};
const MODES = ["tiles", "never", "after-pack", "phase-boundary"] as const;
type Mode = typeof MODES[number];

interface Result {
  tgTokS: number;
  ttftMs: number;
  packMs: number;
  hash: string;
  peakMiB: number;
  afterLoad: MemoryUsage;
  afterPrefill: MemoryUsage;
  afterDecode: MemoryUsage;
}

/** One trial, in this (fresh) process. */
function worker(path: string, mode: Mode, threads: number, tg: number, promptLen: number): Result {
  const k = openKernels({ threads });
  const t0 = performance.now();
  using model = Transformer.load(path, {
    packed: mode !== "tiles",
    evict: mode === "tiles" ? "never" : mode,
    contextLength: 1024,
    decodeThreads: "pool",
  });
  const afterLoad = memoryUsage()!;
  const prompt = Array.from({ length: promptLen }, (_, i) => 1 + ((i * 7919) % 4000));
  let logits = model.prefill(prompt, 0);
  model.endPrefill();
  const afterPrefill = memoryUsage()!;
  const ids: number[] = [];
  let first = 0;
  for (let i = 0; i < tg; i++) {
    const id = argmax(logits);
    ids.push(id);
    if (i === 0) first = performance.now();
    if (i + 1 < tg) logits = model.forward(id, prompt.length + i);
  }
  const end = performance.now();
  return {
    tgTokS: (tg - 1) / ((end - first) / 1000),
    ttftMs: first - t0,
    packMs: model.loadStats.packMs,
    hash: fnv1a64(ids),
    peakMiB: k.peakRss() / (1 << 20),
    afterLoad,
    afterPrefill,
    afterDecode: memoryUsage()!,
  };
}

async function main(): Promise<void> {
  if (Deno.args[0] === "--worker") {
    const [, path, mode, threads, tg, prompt] = Deno.args;
    const r = worker(path, mode as Mode, Number(threads), Number(tg), Number(prompt));
    console.log(JSON.stringify(r));
    return;
  }
  const name = arg("model", "smollm2-q8_0");
  const threads = Number(arg("threads", "1"));
  const reps = Number(arg("reps", "5"));
  const tg = Number(arg("tg", "128"));
  const promptLen = Number(arg("prompt", "64"));
  const seed = Number(arg("seed", String(Date.now() % 1_000_000_007)));
  const printedSeed = seed;
  const spec = MODELS[name];
  if (spec === undefined) throw new RangeError(`unknown model ${name} (${Object.keys(MODELS)})`);
  for (const [k, v] of [["threads", threads], ["reps", reps], ["tg", tg], ["prompt", promptLen]]) {
    if (!Number.isInteger(v) || (v as number) < 1) throw new RangeError(`--${k} ${v}`);
  }
  const path = await resolveModel(`${ROOT}${spec.gguf}`, {
    quant: spec.quant,
    cache: `${ROOT}cache/converted`,
  });
  if (openKernels().memoryUsage() === undefined) {
    throw new Error("this system has no /proc/self/smaps_rollup: residency cannot be measured");
  }
  const results = await runTrials<Mode, Result>({
    script: new URL(import.meta.url).pathname,
    cells: MODES,
    reps,
    seed,
    key: (mode) => mode,
    workerArgs: (mode) => [path, mode, String(threads), String(tg), String(promptLen)],
    report: (mode, res, r) =>
      console.error(`[${r + 1}/${reps}] ${mode}: ${res.tgTokS.toFixed(1)} tok/s`),
  }) as Map<Mode, Result[]>;
  const hashes = new Set(MODES.flatMap((m) => results.get(m)!.map((x) => x.hash)));
  const mib = (b: number) => (b / (1 << 20)).toFixed(1);
  console.log(
    `residency modes, ${name}, ${threads} thread(s), prompt ${promptLen}, tg ${tg}, ${reps} reps, ` +
      `order seed ${printedSeed}; medians (MiB: RSS / PSS / Pss_File / Pss_Anon)`,
  );
  console.log(
    "mode            decode tok/s  ttft ms  pack ms  after load                   " +
      "after prefill                after decode                 peak RSS",
  );
  const summary: Record<string, unknown> = {};
  for (const m of MODES) {
    const rs = results.get(m)!;
    const med = (f: (x: Result) => number) => median(rs.map(f));
    const mem = (
      p: "afterLoad" | "afterPrefill" | "afterDecode",
    ) => [
      med((x) => x[p].rss),
      med((x) => x[p].pss),
      med((x) => x[p].pssFile),
      med((x) => x[p].pssAnon),
    ];
    const cells = (["afterLoad", "afterPrefill", "afterDecode"] as const).map((p) =>
      mem(p).map(mib).join(" / ").padEnd(29)
    );
    console.log(
      `${m.padEnd(16)}${med((x) => x.tgTokS).toFixed(1).padStart(12)}  ${
        med((x) => x.ttftMs).toFixed(0).padStart(7)
      }  ${med((x) => x.packMs).toFixed(0).padStart(7)}  ${cells.join("")}${
        med((x) => x.peakMiB).toFixed(0)
      }`,
    );
    summary[m] = {
      decode_tok_s: med((x) => x.tgTokS),
      ttft_ms: med((x) => x.ttftMs),
      pack_ms: med((x) => x.packMs),
      after_load: mem("afterLoad"),
      after_prefill: mem("afterPrefill"),
      after_decode: mem("afterDecode"),
      peak_rss_mib: med((x) => x.peakMiB),
    };
  }
  const tiles = median(results.get("tiles")!.map((x) => x.tgTokS));
  const packed = median(results.get("phase-boundary")!.map((x) => x.tgTokS));
  const saved = 1000 / tiles - 1000 / packed;
  const pack = median(results.get("phase-boundary")!.map((x) => x.packMs));
  const breakEven = saved > 0 ? Math.ceil(pack / saved) : null;
  console.log(
    `greedy hash: ${
      hashes.size === 1 ? [...hashes][0] + " in every mode" : "DIFFERS: " + [...hashes]
    }`,
  );
  console.log(
    `packed (phase-boundary) vs tiles decode ${(packed / tiles).toFixed(2)}x; packing pays for ` +
      `itself after ${breakEven ?? "never"} generated tokens`,
  );
  console.log(JSON.stringify({
    bench: "residency",
    model: name,
    threads,
    reps,
    seed: printedSeed,
    hash_stable: hashes.size === 1,
    break_even_tokens: breakEven,
    modes: summary,
  }));
  if (hashes.size !== 1) Deno.exit(1);
}

if (import.meta.main) await main();
