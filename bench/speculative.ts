/**
 * `deno task bench:speculative`: speculative decoding on Qwen2.5-Coder-1.5B-Instruct Q4_K_M,
 * with and without it, cflow and llama.cpp side by side in the same run.
 *
 *   deno task bench:speculative [--threads 2] [--tokens 128] [--draft-max 16] [--ngram 3]
 *                               [--reps 2] [--only code1,edit3] [--no-llama] [--out FILE]
 *
 * Prompts: bench/prompts/speculative.json, 10 code-writing requests (drafted by
 * Qwen2.5-Coder-0.5B-Instruct Q4_K_M) and 10 editing requests, a rename or a rewrite of a given
 * snippet (drafted by prompt lookup), each in the model's chat template, greedy, up to --tokens
 * tokens or the end of the answer. Per prompt: decode tok/s plain and speculative (timed from the
 * first token to the last; --reps runs of each, alternating, the best of them: the machine is
 * shared and noisy), the speed-up, drafted and accepted tokens, and the speed-up the
 * standard cost model predicts from them: (n - 1) / ((n - 1 - accepted) + r * drafted +
 * c * (drafted + checks)), with r the cost of a checked row beyond the first and c a draft step's,
 * both as fractions of a plain target step, measured here first (a draft model runs one step more
 * per check than it drafts: its catch-up on the target's token). Speculative output must equal the plain
 * one (it is the same tokens by construction; the run says so per prompt).
 *
 * llama.cpp (bench/_llama_spec_worker.mjs): node-llama-cpp 3.21.1 on the same token ids, plain
 * and with its DraftSequenceTokenPredictor (the 0.5B draft) or InputLookupTokenPredictor.
 *
 * Goals (issue 20), at temperature 0: median speed-up >= 1.25x with the draft model, >= 1.8x
 * with prompt lookup, and no prompt below 0.95x. Printed as met or missed; exit status 0 either
 * way (a benchmark, not a test).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { chatPromptIds, chatTemplateFrom } from "../chat/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { DraftModel } from "../runtime/draft_model.ts";
import { fnv1a64, generate } from "../runtime/generate.ts";
import { resolveModel } from "../runtime/model_store.ts";
import { NgramLookup } from "../runtime/ngram_lookup.ts";
import { openModel } from "../runtime/open_model.ts";
import type { SpeculationOptions } from "../runtime/speculative.ts";
import { Sampler } from "../sampling/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const TARGET = `${ROOT}/cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`;
const DRAFT = `${ROOT}/cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;
const NLC_DIR = `${ROOT}/.tools/llamacpp`;

interface Prompt {
  name: string;
  method: "draft" | "lookup";
  user: string;
}

interface Row {
  name: string;
  method: Prompt["method"];
  tokens: number;
  plainTokS: number;
  specTokS: number;
  speedup: number;
  drafted: number;
  accepted: number;
  rate: number;
  predicted: number;
  same: boolean;
  hash: string;
}

const log = (s: string) => console.error(`[bench:speculative] ${s}`);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      threads: { type: "string", default: "2" },
      tokens: { type: "string", default: "128" },
      "draft-max": { type: "string", default: "16" },
      ngram: { type: "string", default: "3" },
      reps: { type: "string", default: "2" },
      only: { type: "string" },
      "no-llama": { type: "boolean", default: false },
      out: { type: "string" },
    },
  });
  const threads = Number(values.threads);
  const maxTokens = Number(values.tokens);
  const draftMax = Number(values["draft-max"]);
  const ngram = Number(values.ngram);
  const reps = Number(values.reps);
  for (
    const [name, v, lo, hi] of [
      ["--threads", threads, 1, 256],
      ["--tokens", maxTokens, 2, 4096],
      [
        "--draft-max",
        draftMax,
        1,
        32,
      ],
      ["--ngram", ngram, 1, 16],
      ["--reps", reps, 1, 20],
    ] as const
  ) {
    if (!Number.isInteger(v) || v < lo || v > hi) {
      throw new RangeError(`${name} ${v} is not in [${lo}, ${hi}]`);
    }
  }
  for (const f of [TARGET, DRAFT]) {
    try {
      await Deno.stat(f);
    } catch {
      throw new Error(`${f} is missing: run bash scripts/fetch-models.sh qwen05b qwen15b`);
    }
  }
  let prompts = JSON.parse(
    await Deno.readTextFile(`${ROOT}/bench/prompts/speculative.json`),
  ) as Prompt[];
  if (values.only !== undefined) {
    const only = new Set(values.only.split(","));
    prompts = prompts.filter((p) => only.has(p.name));
  }
  openKernels({ threads });
  const cpu = (await Deno.readTextFile("/proc/cpuinfo")).match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
  log(`CPU ${cpu}, ${threads} threads; converting/loading the models`);
  const targetPath = await resolveModel(TARGET, {});
  const draftPath = await resolveModel(DRAFT, {});
  const ctx = 2048;
  const t = openModel(targetPath, { contextLength: ctx });
  const d = openModel(draftPath, { contextLength: ctx });
  const tok = t.tokenizer;
  const template = chatTemplateFrom({ "tokenizer.chat_template": tok.chatTemplate }, {}).template;
  const ids = prompts.map((p) =>
    chatPromptIds(tok, template, [{ role: "user", content: p.user }], {
      bosToken: "",
      eosToken: "",
      addGenerationPrompt: true,
    })
  );

  // The cost model's r and c: a row checked beyond the first, and a draft token, per target step.
  const vocab = t.model.config.vocab;
  const into = Array.from({ length: 5 }, () => new Float32Array(vocab));
  t.model.prefill(ids[0], 0);
  d.model.prefill(ids[0], 0);
  const time = (f: () => void, n = 6) => {
    f();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) f();
    return (performance.now() - t0) / n;
  };
  const p0 = ids[0].length;
  const step = time(() => t.model.forward(13, p0));
  const five = time(() => t.model.forwardAll([13, 14, 15, 16, 17], p0, into));
  const draftStep = time(() => d.model.forward(13, p0));
  const r = Math.max(0, (five - step) / 4 / step);
  const c = draftStep / step;
  log(
    `target step ${step.toFixed(1)} ms, 5 rows ${five.toFixed(1)} ms (r = ${r.toFixed(3)}), ` +
      `draft step ${draftStep.toFixed(1)} ms (c = ${c.toFixed(3)})`,
  );

  const run = async (prompt: number[], spec?: SpeculationOptions) => {
    const it = generate(t.model, tok, new Sampler(vocab, { temperature: 0 }), prompt, {
      maxTokens,
      speculation: spec,
    });
    const out: number[] = [];
    for (;;) {
      const x = await it.next();
      if (x.done) return { ids: out, stats: x.value };
      if (x.value.id >= 0) out.push(x.value.id);
    }
  };
  // A warmup of both paths.
  await run(ids[0].slice(0, 16));
  const rows: Row[] = [];
  const draftDrafter = new DraftModel(d.model);
  for (const [i, p] of prompts.entries()) {
    const drafter = p.method === "draft" ? draftDrafter : new NgramLookup(ngram);
    let plain = await run(ids[i]);
    let spec = await run(ids[i], { drafter, maxDraft: draftMax });
    for (let k = 1; k < reps; k++) {
      const a = await run(ids[i]);
      if (a.stats.decodeTokS > plain.stats.decodeTokS) plain = a;
      const b = await run(ids[i], { drafter, maxDraft: draftMax });
      if (b.stats.decodeTokS > spec.stats.decodeTokS) spec = b;
    }
    const s = spec.stats.speculation!;
    const n = plain.ids.length;
    const cost = p.method === "draft" ? c : 0;
    const predicted = (n - 1) /
      Math.max(1e-9, (n - 1 - s.accepted) + r * s.drafted + cost * (s.drafted + s.checks));
    const row: Row = {
      name: p.name,
      method: p.method,
      tokens: n,
      plainTokS: plain.stats.decodeTokS,
      specTokS: spec.stats.decodeTokS,
      speedup: spec.stats.decodeTokS / plain.stats.decodeTokS,
      drafted: s.drafted,
      accepted: s.accepted,
      rate: s.acceptanceRate,
      predicted,
      same: plain.ids.join() === spec.ids.join(),
      hash: fnv1a64(plain.ids),
    };
    rows.push(row);
    log(
      `${p.name} (${p.method}): ${row.plainTokS.toFixed(2)} -> ${row.specTokS.toFixed(2)} tok/s, ` +
        `${row.speedup.toFixed(2)}x, accepted ${s.accepted}/${s.drafted}, predicted ${
          predicted.toFixed(2)
        }x, ` +
        `same ${row.same}, ${n} tokens, ${row.hash}`,
    );
  }
  d.model.close();
  t.model.close();

  let llama: {
    name: string;
    plainTokS: number;
    specTokS: number;
    tokens: number;
    same: boolean;
    drafted: number;
    accepted: number;
  }[] = [];
  if (!values["no-llama"]) {
    log("llama.cpp: the same prompts");
    const job = {
      nlcDir: NLC_DIR,
      target: TARGET,
      draft: DRAFT,
      threads,
      ctx,
      maxTokens,
      draftMax,
      ngram,
      prompts: prompts.map((p, i) => ({ name: p.name, method: p.method, ids: ids[i] })),
    };
    const child = new Deno.Command("node", {
      args: [`${ROOT}/bench/_llama_spec_worker.mjs`],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(JSON.stringify(job)));
    await w.close();
    const out = await child.output();
    if (!out.success) throw new Error("the llama.cpp worker failed");
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    llama = JSON.parse(lines[lines.length - 1]).results;
  }

  const fmt = (x: number) => x.toFixed(2);
  console.log(
    `\nspeculative decoding, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, ${cpu}, ${threads} threads, greedy, up to ${maxTokens} tokens`,
  );
  console.log(
    `cost model: r = ${r.toFixed(3)} (a checked row beyond the first), c = ${
      c.toFixed(3)
    } (a 0.5B draft token), of a ${step.toFixed(1)} ms target step\n`,
  );
  console.log(
    "| prompt | method | tokens | cflow plain tok/s | cflow spec tok/s | speed-up | accepted/drafted | rate | predicted | same | llama.cpp plain | llama.cpp spec | llama.cpp speed-up | llama.cpp accepted/drafted |",
  );
  console.log(
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const row of rows) {
    const l = llama.find((x) => x.name === row.name);
    console.log(
      `| ${row.name} | ${row.method} | ${row.tokens} | ${fmt(row.plainTokS)} | ${
        fmt(row.specTokS)
      } | ${fmt(row.speedup)}x | ${row.accepted}/${row.drafted} | ${fmt(row.rate)} | ${
        fmt(row.predicted)
      }x | ${row.same} | ` +
        (l
          ? `${fmt(l.plainTokS)} | ${fmt(l.specTokS)} | ${
            fmt(l.specTokS / l.plainTokS)
          }x | ${l.accepted}/${l.drafted} |`
          : "- | - | - | - |"),
    );
  }
  const verdicts: string[] = [];
  for (const [method, goal] of [["draft", 1.25], ["lookup", 1.8]] as const) {
    const mine = rows.filter((x) => x.method === method);
    if (mine.length === 0) continue;
    const med = median(mine.map((x) => x.speedup));
    const min = Math.min(...mine.map((x) => x.speedup));
    const ls = llama.filter((x) => prompts.find((p) => p.name === x.name)?.method === method);
    const lmed = ls.length > 0 ? median(ls.map((x) => x.specTokS / x.plainTokS)) : NaN;
    verdicts.push(
      `${method}: cflow median ${fmt(med)}x (goal ${goal}x: ${med >= goal ? "met" : "missed"}), ` +
        `lowest ${fmt(min)}x (goal 0.95x: ${min >= 0.95 ? "met" : "missed"}); ` +
        `llama.cpp median ${fmt(lmed)}x`,
    );
  }
  verdicts.push(`speculative output equal to plain on every prompt: ${rows.every((x) => x.same)}`);
  console.log("\n" + verdicts.join("\n"));
  if (values.out !== undefined) {
    const tmp = `${values.out}.tmp`;
    await Deno.writeTextFile(
      tmp,
      JSON.stringify(
        { cpu, threads, maxTokens, draftMax, ngram, r, c, step, rows, llama },
        null,
        1,
      ),
    );
    await Deno.rename(tmp, values.out);
  }
}

if (import.meta.main) await main();
