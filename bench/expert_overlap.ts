/**
 * Expert-overlap A/B (report 3.9.4 and 5.14): a mixture-of-experts model whose expert bank is read
 * from disk by direct I/O, decoded with the reads waited for in the routing layer (`sync`) and
 * with the reads started there and waited for at the injection layer `expert_delay` passes later
 * (`staged`), so that they overlap the compute of the passes between. Every trial runs in a fresh
 * process, in an order shuffled with a printed seed.
 *
 *   deno task bench:expert-overlap [--threads 1,2] [--reps 3] [--tg 32] [--seed N]
 *
 * The model is generated once into cache/bench/ (not committed; `generateOverlapModel` below is the
 * generator): a pipeline-native arch2_4_combined layer stack (dense_delay 1, expert_delay 2) with
 * random Q4_0 weights, sized so that a layer's expert reads take about as long as its compute.
 *
 * Per arm: decode tok/s, stall per token (time blocked on expert reads), bytes read per token,
 * and the per-layer compute C = (token time - stall) / layers and I/O per layer IO = stall of the
 * sync arm / layers. The overlap model: sync takes L (C + IO) per token; staged issues layer l's
 * reads at the start of its pass, one read after another on the disk, and waits for them at the
 * end of pass l + expert_delay (the last expert_delay layers at the end of the token), so its
 * time is that schedule's length; in steady state this is (C + IO) / max(C, IO). The table prints
 * the predicted ratio next to the measured one, and the greedy hashes, which must agree. A JSON
 * line last.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import { ARCH_IDS, writeModel } from "../formats/cflow/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64 } from "../runtime/mod.ts";
import { randomModel } from "../tests/util/random_model.ts";
import { arg, argmax, median, runTrials } from "./_trials.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const MODEL = `${ROOT}cache/bench/expert-overlap.cflow`;
/** The generated model's geometry (changing it changes the file name's contents: delete the file). */
export const OVERLAP_GEOMETRY = {
  hidden: 1024,
  layers: 8,
  heads: 8,
  kvHeads: 8,
  headDim: 128,
  ffn: 8192,
  vocab: 4096,
  experts: 32,
  topK: 2,
  expertFfn: 512,
} as const;

/**
 * Writes the benchmark model: random Q4_0 weights in the geometry above, pipeline-native
 * arch2_4_combined (combine_style 1, dense_delay 1, expert_delay 2), written to a temporary
 * file and renamed into place.
 *
 * @example
 * ```ts ignore
 * await generateOverlapModel("cache/bench/expert-overlap.cflow");
 * ```
 */
export async function generateOverlapModel(path: string): Promise<void> {
  const model = randomModel({
    ...OVERLAP_GEOMETRY,
    archId: ARCH_IDS.pipeline_native,
    architecture: "pipeline_native",
    combineStyle: 1,
    denseDelay: 1,
    expertDelay: 2,
    moeNorm: true,
    seed: 20261130,
  });
  model.metadata = { ...model.metadata, rms_norm_eps: 1e-6, pipeline_native: "arch2_4_combined" };
  await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  const tmp = `${path}.tmp-${Deno.pid}`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    let position = 0;
    const writeAll = async (bytes: Uint8Array) => {
      let done = 0;
      while (done < bytes.length) done += await file.write(bytes.subarray(done));
    };
    await writeModel(model, "cflow", {
      async write(bytes) {
        await writeAll(bytes);
        position += bytes.length;
      },
      async writeAt(offset, bytes) {
        await file.seek(offset, Deno.SeekMode.Start);
        await writeAll(bytes);
        await file.seek(position, Deno.SeekMode.Start);
      },
    });
    await file.sync();
  } finally {
    file.close();
  }
  await Deno.rename(tmp, path);
}

interface Result {
  tgTokS: number;
  stallMsPerToken: number;
  readBytesPerToken: number;
  hitRate: number;
  direct: boolean;
  hash: string;
}

/** One trial in this (fresh) process. */
function worker(fetch: "sync" | "staged", threads: number, tg: number): Result {
  openKernels({ threads });
  using model = Transformer.load(MODEL, {
    contextLength: 256,
    expertTier: "disk",
    expertFetch: fetch,
    decodeThreads: "pool",
  });
  const prompt = [1, 17, 42, 99, 5, 63, 127, 8];
  let logits = model.prefill(prompt, 0);
  for (let i = 0; i < 4; i++) logits = model.forward(argmax(logits), prompt.length + i); // warmup
  logits = model.prefill(prompt, 0);
  const before = model.expertTierStats!;
  const ids: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < tg; i++) {
    const id = argmax(logits);
    ids.push(id);
    logits = model.forward(id, prompt.length + i);
  }
  const ms = performance.now() - t0;
  const after = model.expertTierStats!;
  const lookups = after.hits + after.misses - before.hits - before.misses;
  return {
    tgTokS: tg / (ms / 1000),
    stallMsPerToken: (after.stallMs - before.stallMs) / tg,
    readBytesPerToken: (after.bytesRead - before.bytesRead) / tg,
    hitRate: lookups > 0 ? (after.hits - before.hits) / lookups : 0,
    direct: after.direct,
    hash: fnv1a64(ids),
  };
}

/**
 * The overlap model's staged time per token: L passes of compute C; layer l's reads (IO, one
 * read after another) start with its pass and are waited for after pass l + delay, the last
 * `delay` layers' after the last pass.
 */
function stagedModel(L: number, delay: number, C: number, IO: number): number {
  const done: number[] = [];
  let t = 0;
  let disk = 0;
  for (let l = 0; l < L; l++) {
    disk = Math.max(t, disk) + IO;
    done.push(disk);
    t += C;
    if (l - delay >= 0) t = Math.max(t, done[l - delay]);
  }
  for (let l = Math.max(0, L - delay); l < L; l++) t = Math.max(t, done[l]);
  return t;
}

async function main(): Promise<void> {
  if (Deno.args[0] === "--worker") {
    const [, fetch, threads, tg] = Deno.args;
    console.log(JSON.stringify(worker(fetch as "sync" | "staged", Number(threads), Number(tg))));
    return;
  }
  const threadsList = arg("threads", "1,2").split(",").map(Number);
  const reps = Number(arg("reps", "3"));
  const tg = Number(arg("tg", "32"));
  const seed = Number(arg("seed", String(Date.now() % 1_000_000_007)));
  const printedSeed = seed;
  for (const t of threadsList) {
    if (!Number.isInteger(t) || t < 1) throw new RangeError(`--threads ${t}`);
  }
  if (!Number.isInteger(reps) || reps < 1 || !Number.isInteger(tg) || tg < 2) {
    throw new RangeError("--reps and --tg must be integers (reps >= 1, tg >= 2)");
  }
  try {
    await Deno.stat(MODEL);
  } catch {
    console.error(`generating ${MODEL} (random weights, once)`);
    await generateOverlapModel(MODEL);
  }
  const size = (await Deno.stat(MODEL)).size;
  const cells = threadsList.flatMap((threads) =>
    (["sync", "staged"] as const).map((fetch) => ({ threads, fetch }))
  );
  const results = await runTrials<typeof cells[number], Result>({
    script: new URL(import.meta.url).pathname,
    cells,
    reps,
    seed,
    key: (c) => `${c.threads}:${c.fetch}`,
    workerArgs: (c) => [c.fetch, String(c.threads), String(tg)],
    report: (c, res, r) =>
      console.error(
        `[${r + 1}/${reps}] ${c.threads}t ${c.fetch}: ${res.tgTokS.toFixed(2)} tok/s, stall ${
          res.stallMsPerToken.toFixed(2)
        } ms/token`,
      ),
  });
  const L = OVERLAP_GEOMETRY.layers;
  console.log(
    `expert overlap A/B: ${(size / 2 ** 20).toFixed(0)} MiB model, expert bank read by ` +
      `${results.get(`${threadsList[0]}:sync`)![0].direct ? "O_DIRECT" : "buffered reads"}, ` +
      `${reps} reps, tg ${tg}, order seed ${printedSeed}; medians`,
  );
  console.log(
    "threads  arm     tok/s   ms/token  stall ms/token  read KiB/token  hit rate  C ms/layer  IO ms/layer",
  );
  const summary: Record<string, unknown>[] = [];
  let hashes = new Set<string>();
  for (const threads of threadsList) {
    const sync = results.get(`${threads}:sync`)!;
    const staged = results.get(`${threads}:staged`)!;
    hashes = new Set([...hashes, ...sync.map((x) => x.hash), ...staged.map((x) => x.hash)]);
    const ms = (rs: Result[]) => 1000 / median(rs.map((x) => x.tgTokS));
    const stall = (rs: Result[]) => median(rs.map((x) => x.stallMsPerToken));
    const C = (ms(sync) - stall(sync)) / L;
    const IO = stall(sync) / L;
    for (const [arm, rs] of [["sync", sync], ["staged", staged]] as const) {
      console.log(
        `${String(threads).padEnd(9)}${arm.padEnd(8)}${
          median(rs.map((x) => x.tgTokS)).toFixed(2).padStart(5)
        }` +
          `${ms(rs).toFixed(1).padStart(11)}${stall(rs).toFixed(2).padStart(16)}${
            (median(rs.map((x) => x.readBytesPerToken)) / 1024).toFixed(0).padStart(16)
          }${median(rs.map((x) => x.hitRate)).toFixed(2).padStart(10)}${
            arm === "sync" ? C.toFixed(2).padStart(12) + IO.toFixed(2).padStart(13) : ""
          }`,
      );
    }
    const measured = ms(sync) / ms(staged);
    const predicted = (L * (C + IO)) / stagedModel(L, 2, C, IO);
    const steady = (C + IO) / Math.max(C, IO);
    console.log(
      `         staged/sync measured ${measured.toFixed(2)}x, predicted ${predicted.toFixed(2)}x ` +
        `(${((measured / predicted - 1) * 100).toFixed(1)}% off); steady state (C + IO) / ` +
        `max(C, IO) = ${steady.toFixed(2)}x`,
    );
    summary.push({
      threads,
      sync_tok_s: median(sync.map((x) => x.tgTokS)),
      staged_tok_s: median(staged.map((x) => x.tgTokS)),
      sync_stall_ms: stall(sync),
      staged_stall_ms: stall(staged),
      c_ms_per_layer: C,
      io_ms_per_layer: IO,
      measured,
      predicted,
      steady_state: steady,
    });
  }
  console.log(
    `greedy hash: ${
      hashes.size === 1 ? [...hashes][0] + " in every arm" : "DIFFERS: " + [...hashes]
    }`,
  );
  console.log(JSON.stringify({
    bench: "expert-overlap",
    model_bytes: size,
    geometry: OVERLAP_GEOMETRY,
    reps,
    tg,
    seed: printedSeed,
    hash_stable: hashes.size === 1,
    arms: summary,
  }));
  if (hashes.size !== 1) Deno.exit(1);
}

if (import.meta.main) await main();
