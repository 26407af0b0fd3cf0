/**
 * bench/vs_llama.ts's report, once the runs are done: the table on stdout and every sample in a
 * JSON file; and the number formats its progress lines share.
 *
 * @module
 */

import { GATE } from "./_vs_llama_gate.ts";
import { type Engine, type ModelState, ROOT, type Sample, type Test } from "./_vs_llama_models.ts";
import { type Spread, spread } from "./_vs_llama_stats.ts";

const MB = 1e6;
/** One decimal, or "-" where not finite. */
export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : "-");
/** Two decimals, or "-" where not finite. */
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : "-");
/** A share as a percentage with one decimal, or "-" where not finite. */
export const pct = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "-");
const cell = (s: Spread) => s.n === 0 ? "-" : `${f1(s.median)} [${f1(s.min)}-${f1(s.max)}]`;
/** A test's name as llama-bench writes it: `pp512`, `tg128`. */
export const testName = (
  t: Test,
  pp: number,
  tg: number,
): string => (t === "pp" ? `pp${pp}` : `tg${tg}`);

/** What the report reads: the run's settings, its models and samples, the hash gate's findings. */
export interface RunResults {
  /** The options the report reads. */
  values: { "gate-only": boolean; quick: boolean; "llama-flash-attention": string; out?: string };
  states: ModelState[];
  samples: Sample[];
  /** The hash gate's token hashes, by model id. */
  hashes: Record<string, unknown>;
  /** The samples of one model, engine and test (at `t` threads, or all). */
  of: (model: string, engine: Engine, test: Test, t?: number) => Sample[];
  /** The CPU and cflow's kernels, as the cflow worker reports them. */
  machine: Record<string, unknown>;
  threads: number[];
  reps: number;
  seed: number;
  ctx: number;
  pp: number;
  tg: number;
  agreeTokens: number;
  agreeText: { path: string; bytes: number; sha256: string } | undefined;
  llamaCpu: string | undefined;
  streamBytes: number;
  haveTaskset: boolean;
}

/**
 * Prints the run's table on stdout (with issue 7's goals, as measured) and writes every sample
 * (those of refused models withheld) to a JSON file: `--out`, or one under cache/bench/.
 * Returns the exit status: 1 when a model was refused.
 */
export async function report(run: RunResults): Promise<number> {
  const {
    values,
    states,
    samples,
    hashes,
    of,
    machine,
    threads,
    reps,
    seed,
    ctx,
    pp,
    tg,
    agreeTokens,
    agreeText,
    llamaCpu,
    streamBytes,
    haveTaskset,
  } = run;
  const stream = new Map(
    threads.map((t) => [
      t,
      spread(
        samples.filter((x) => x.config.kind === "stream" && x.config.threads === t).map((x) =>
          x.gbps!
        ),
      ),
    ]),
  );
  const lines: string[] = [];
  const say = (l = "") => lines.push(l);
  say(
    `cflow vs llama.cpp: ${machine.cpu}, cflow ${machine.variant} kernels (${machine.library}), ` +
      `llama.cpp via node-llama-cpp 3.21.1 (prebuilt CPU build` +
      `${llamaCpu === undefined ? "" : `, only its ${llamaCpu} CPU backend`}, flash attention ` +
      `${values["llama-flash-attention"]})`,
  );
  const llamaInfo = samples.find((x) => x.config.engine === "llama.cpp")?.systemInfo;
  if (llamaInfo !== undefined) say(`llama.cpp ${llamaInfo.trim().replace(/\s*\|\s*$/, "")}`);
  say(
    `${reps} repetitions, order seed ${seed}, ctx ${ctx}, f16 KV cache, ` +
      `${haveTaskset ? "pinned with taskset" : "unpinned"}${values.quick ? ", --quick" : ""}; ` +
      `median [min-max]`,
  );
  if (!values["gate-only"]) {
    const huge = samples.filter((x) => x.config.kind === "stream").map((x) => x.hugePageBytes);
    const hugeLeast = huge.some((x) => x === null || x === undefined)
      ? "not reported"
      : `at least ${f1(Math.min(...(huge as number[])) / MB)} MB of it`;
    say(
      `streaming read (${f1(streamBytes / MB)} MB buffer, 2 MiB pages: ${hugeLeast}): ` +
        threads.map((t) => `${t}t ${cell(stream.get(t)!)} GB/s`).join(", "),
    );
  }
  const summary: Record<string, unknown>[] = [];
  let failed = false;
  for (const s of states) {
    const id = s.spec.id;
    const a = s.agreement!;
    say();
    say(`== ${id}: ${s.spec.label}`);
    say(
      `  gguf   ${s.spec.gguf.replace(`${ROOT}/`, "")} (${
        f1(s.fileBytes / MB)
      } MB) sha256 ${s.sha256}`,
    );
    say(`  cflow  ${s.cflowPath?.replace(`${ROOT}/`, "")}`);
    say(
      `  weights ${f1(s.weights.total / MB)} MB (${s.weights.tied ? "tied" : "untied"} ` +
        `embeddings), read per token ${f1(s.weights.perToken / MB)} MB; KV cache ` +
        `${f1(s.kvBytes / MB)} MB`,
    );
    const random = s.spec.randomWeights;
    say(
      `  gate   teacher-forced, ${a.positions} positions of ` +
        `${agreeText === undefined ? "the fixture text" : agreeText.path}, 1 thread: ` +
        `top-1 agrees at ` +
        `${pct(a.decidedShare)} of the ${a.decided} where llama.cpp's margin >= ` +
        `${GATE.decidedLogits} (>= ${pct(GATE.minDecided)}) and at ${pct(a.all)} overall ` +
        (random ? "(not gated: random weights)" : `(>= ${pct(GATE.minAll)})`) +
        `; llama.cpp against itself (batches of 32 vs 1 token) ${pct(s.llamaSelf!)}` +
        `, mean margin delta ${f2(s.llamaSelfMarginDelta!)}`,
    );
    say(
      `         margin delta over llama.cpp's top two: mean ${f2(a.meanMarginDelta)}` +
        (random ? ` (<= ${GATE.maxMeanMarginDelta})` : "") +
        `, max ${f2(a.maxMarginDelta)}; largest cflow margin at a split ` +
        `${f2(a.maxSplitMargin)}: ${a.pass ? "pass" : "FAIL"}`,
    );
    const h = hashes[id] as { cflowTg: string[]; cflowPp: string[]; llamaTg: string[] } | undefined;
    if (h !== undefined) {
      const same = h.cflowTg.length === 1 && h.llamaTg.includes(h.cflowTg[0]);
      say(
        `  gate   cflow greedy ${testName("tg", pp, tg)}: ${h.cflowTg.length} distinct hash(es) ` +
          `over ${of(id, "cflow", "tg").length} runs (${h.cflowTg.join(", ")}); after the ` +
          `${testName("pp", pp, tg)} prompt: ${h.cflowPp.length}: ` +
          `${h.cflowTg.length === 1 && h.cflowPp.length === 1 ? "pass" : "FAIL"}` +
          `; llama.cpp's ${testName("tg", pp, tg)}: ${h.llamaTg.join(", ")}` +
          (same ? " (the same tokens)" : " (other tokens)"),
      );
    }
    if (s.refused) {
      failed = true;
      say(`  REFUSED: ${s.refused}; no speed is reported for this model`);
      summary.push({ model: id, refused: s.refused });
      continue;
    }
    if (values["gate-only"]) {
      say("  (--gate-only: no speed runs)");
      continue;
    }
    say(
      "  test    thr  cflow tok/s            llama.cpp tok/s        cflow/llama  " +
        "vs llama best  decode GB/s cflow (of read)  llama.cpp (of read)",
    );
    const cells: Record<string, unknown>[] = [];
    for (const test of ["pp", "tg"] as const) {
      const llamaBy = threads.map((t) => spread(of(id, "llama.cpp", test, t).map((x) => x.tokS!)));
      const bestIdx = llamaBy.reduce((b, x, i) => (x.median > llamaBy[b].median ? i : b), 0);
      const best = llamaBy[bestIdx];
      for (let i = 0; i < threads.length; i++) {
        const t = threads[i];
        const c = spread(of(id, "cflow", test, t).map((x) => x.tokS!));
        const l = llamaBy[i];
        const read = stream.get(t)!.median;
        const gb = (x: number) => (x * s.weights.perToken) / 1e9;
        const bw = test === "tg"
          ? `${f1(gb(c.median))} (${pct(gb(c.median) / read)})`.padEnd(26) +
            `${f1(gb(l.median))} (${pct(gb(l.median) / read)})`
          : "";
        say(
          `  ${testName(test, pp, tg).padEnd(7)} ${String(t).padStart(3)}  ` +
            `${cell(c).padEnd(22)} ${cell(l).padEnd(22)} ${
              (f2(c.median / l.median) + "x").padEnd(12)
            } ` +
            `${(f2(c.median / best.median) + "x (" + threads[bestIdx] + "t)").padEnd(14)} ${bw}`,
        );
        cells.push({
          test: testName(test, pp, tg),
          threads: t,
          cflow: c,
          llama: l,
          ratio: c.median / l.median,
          ratioVsLlamaBest: c.median / best.median,
          llamaBestThreads: threads[bestIdx],
          ...(test === "tg"
            ? {
              cflowGBps: gb(c.median),
              llamaGBps: gb(l.median),
              cflowShareOfRead: gb(c.median) / read,
              llamaShareOfRead: gb(l.median) / read,
            }
            : {}),
        });
      }
    }
    const bound = 1.1 * (s.weights.total + s.kvBytes) + 60 * MB;
    const mem: Record<string, unknown> = {};
    say("  memory  peak RSS (VmHWM) median [min-max] MB; Pss = file + anon at exit, median MB");
    for (const engine of ["cflow", "llama.cpp"] as const) {
      for (const test of ["pp", "tg"] as const) {
        const runs = of(id, engine, test).filter((x) => x.memory !== undefined);
        const hwm = spread(runs.map((x) => x.memory!.vmHwm / MB));
        const pss = spread(runs.map((x) => x.memory!.pss / MB)).median;
        const file = spread(runs.map((x) => x.memory!.pssFile / MB)).median;
        const anon = spread(runs.map((x) => x.memory!.pssAnon / MB)).median;
        say(
          `    ${engine.padEnd(9)} ${testName(test, pp, tg).padEnd(6)} ${cell(hwm).padEnd(24)} ` +
            `Pss ${f1(pss)} = ${f1(file)} + ${f1(anon)}`,
        );
        mem[`${engine} ${test}`] = { vmHwm: hwm, pss, pssFile: file, pssAnon: anon };
      }
    }
    const cflowPeak = Math.max(
      ...of(id, "cflow", "pp").concat(of(id, "cflow", "tg")).map((x) => x.memory!.vmHwm),
    );
    say(
      `    cflow's largest peak ${f1(cflowPeak / MB)} MB vs 1.1 x (${f1(s.weights.total / MB)} + ` +
        `${f1(s.kvBytes / MB)}) + 60 = ${f1(bound / MB)} MB: ${
          cflowPeak <= bound ? "within" : "ABOVE"
        }`,
    );
    // Issue 7's goals, as measured here.
    const tgCells = cells.filter((x) => String(x.test).startsWith("tg"));
    const ppCells = cells.filter((x) => String(x.test).startsWith("pp"));
    const bestOf = (xs: Record<string, unknown>[], k: string) =>
      Math.max(...xs.map((x) => (x[k] as Spread).median));
    const tgRatio = bestOf(tgCells, "cflow") / bestOf(tgCells, "llama");
    const ppRatio = bestOf(ppCells, "cflow") / bestOf(ppCells, "llama");
    const bestShare = Math.max(...tgCells.map((x) => x.cflowShareOfRead as number));
    const goals = [
      `tg best/best ${f2(tgRatio)}x (goal >= ${s.spec.goals.tg}x)`,
      `pp best/best ${f2(ppRatio)}x (goal >= 1.0x)`,
      s.spec.goals.bandwidth !== undefined
        ? `tg read share ${pct(bestShare)} (goal >= ${pct(s.spec.goals.bandwidth)})`
        : `tg read share ${pct(bestShare)}`,
      `RSS ${cflowPeak <= bound ? "within" : "above"} bound`,
    ];
    say(`  goals   ${goals.join("; ")}`);
    summary.push({
      model: id,
      cells,
      memory: mem,
      cflowPeakRss: cflowPeak,
      rssBound: bound,
      tgBestRatio: tgRatio,
      ppBestRatio: ppRatio,
      bestTgShareOfRead: bestShare,
    });
  }
  console.log(lines.join("\n"));

  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const out = values.out ?? `${ROOT}/cache/bench/vs-llama-${stamp}.json`;
  await Deno.mkdir(out.slice(0, out.lastIndexOf("/")), { recursive: true });
  const refused = new Set(states.filter((s) => s.refused).map((s) => s.spec.id));
  await Deno.writeTextFile(
    out,
    JSON.stringify(
      {
        meta: {
          date: new Date().toISOString(),
          args: Deno.args,
          seed,
          reps,
          pp,
          tg,
          ctx,
          agreeTokens,
          agreeText: agreeText === undefined
            ? "fixture"
            : { path: agreeText.path, bytes: agreeText.bytes, sha256: agreeText.sha256 },
          threads,
          pinned: haveTaskset,
          llamaFlashAttention: values["llama-flash-attention"],
          llamaCpu: llamaCpu ?? "best",
          streamBytes,
          deno: Deno.version.deno,
          ...machine,
        },
        models: states.map((s) => ({
          id: s.spec.id,
          label: s.spec.label,
          gguf: s.spec.gguf,
          sha256: s.sha256,
          fileBytes: s.fileBytes,
          weights: s.weights,
          kvBytes: s.kvBytes,
          cflowPath: s.cflowPath,
          agreement: s.agreement,
          agreementMs: s.agreementMs,
          llamaSelfAgreement: s.llamaSelf,
          llamaSelfMarginDelta: s.llamaSelfMarginDelta,
          hashes: hashes[s.spec.id],
          refused: s.refused ?? null,
        })),
        stream: Object.fromEntries(stream),
        summary,
        // Speed samples of refused models are withheld.
        samples: samples.filter((x) =>
          x.config.model === undefined || !refused.has(x.config.model)
        ),
      },
      null,
      1,
    ) + "\n",
  );
  console.log(`\nresults: ${out.replace(`${ROOT}/`, "")}`);
  return failed ? 1 : 0;
}
