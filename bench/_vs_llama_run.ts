/**
 * bench/vs_llama.ts's run: its worker processes (cflow's and llama.cpp's, pinned with taskset
 * where it exists) and the phases of {@link main}: the models, cflow's conversions, the
 * agreement gate, the shuffled speed rounds, the hash gate and the report.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { bytesSource } from "../formats/byte_source.ts";
import { parseGguf } from "../formats/gguf/mod.ts";
import { agreement, GATE, meanMarginDelta } from "./_vs_llama_gate.ts";
import { readAgreeText, sha256File } from "./_vs_llama_inputs.ts";
import {
  type CflowJob,
  type Config,
  type Engine,
  MODELS,
  type ModelState,
  type ProcMemory,
  ROOT,
  type Sample,
  type Test,
} from "./_vs_llama_models.ts";
import { f1, f2, pct, report, testName } from "./_vs_llama_report.ts";
import { seededShuffler, weightBytes } from "./_vs_llama_stats.ts";

// ---------------------------------------------------------------------------------------------
// The run

let LIB = `${ROOT}/kernels-zig/zig-out/lib/libcflow_kernels.so`;
let NLC_DIR = `${ROOT}/.tools/llamacpp`;
const CONVERTED = `${ROOT}/cache/converted`;
const FIXTURE = `${ROOT}/tests/fixtures/llamacpp/teacher_forced.json`;
const CFLOW_ENV =
  "CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE,CFLOW_PANEL_PREFETCH,CFLOW_CACHE";

let haveTaskset = false;
/** Real paths of the models (a symlinked cache folder resolves outside the checkout). */
const modelReads: string[] = [];

function log(line: string): void {
  console.error(line);
}

/** Starts a command, feeds `input` on stdin, returns stdout, or throws with stderr's tail. */
async function spawn(cmd: string, args: string[], input?: string): Promise<string> {
  const child = new Deno.Command(cmd, {
    args,
    cwd: ROOT,
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (input !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(input));
    await w.close();
  }
  const out = await child.output();
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    const stderr = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-30).join("\n");
    throw new Error(`${[cmd, ...args].join(" ")} exited with ${out.code}:\n${stderr}`);
  }
  return stdout;
}

function denoArgs(script: string, extra: string[], ffiAnywhere = false): string[] {
  return [
    "run",
    "--no-prompt",
    "--quiet",
    // As ./cflow runs (see its launcher): no V8 code cache mapped, V8's young generation kept
    // small, gc() exposed.
    "--no-code-cache",
    "--v8-flags=--max-semi-space-size=1,--expose-gc",
    // The streaming read views native memory (the worker's `stream` job), which needs
    // unscoped FFI; every other job only loads the library.
    ffiAnywhere ? "--allow-ffi" : `--allow-ffi=${LIB}`,
    `--allow-read=${[ROOT, LIB, ...modelReads].join(",")}`,
    `--allow-env=${CFLOW_ENV}`,
    ...extra,
    script,
  ];
}

/** Runs one worker (pinned to `threads` cores when taskset exists) and parses its result. */
async function worker(
  engine: Engine,
  threads: number,
  job: object,
): Promise<Record<string, unknown>> {
  const [cmd, args] = engine === "cflow"
    ? [
      Deno.execPath(),
      denoArgs(
        "bench/_cflow_worker.ts",
        [`--allow-write=${CONVERTED}`, "--allow-run=cat"],
        (job as { mode?: string }).mode === "stream",
      ),
    ]
    : ["node", ["bench/_llama_worker.mjs"]];
  const pin = haveTaskset ? ["taskset", ["-c", `0-${threads - 1}`, cmd, ...args]] as const : null;
  const stdout = await spawn(
    pin ? pin[0] : cmd,
    pin ? [...pin[1]] : args,
    JSON.stringify(engine === "cflow" ? job : { ...job, nlcDir: NLC_DIR }),
  );
  const last = stdout.trim().split("\n").pop() ?? "";
  const result = JSON.parse(last) as Record<string, unknown>;
  if (result.ok !== true) throw new Error(`${engine} worker: ${last}`);
  return result;
}

export async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      models: { type: "string", default: MODELS.map((m) => m.id).join(",") },
      threads: { type: "string", default: "1,2" },
      reps: { type: "string" },
      seed: { type: "string" },
      quick: { type: "boolean", default: false },
      "gate-only": { type: "boolean", default: false },
      pp: { type: "string", default: "512" },
      tg: { type: "string", default: "128" },
      "agree-tokens": { type: "string" },
      "agree-text": { type: "string" },
      ctx: { type: "string", default: "1024" },
      "llama-flash-attention": { type: "string", default: "auto" },
      "llama-cpu": { type: "string" },
      "stream-mib": { type: "string", default: "256" },
      out: { type: "string" },
    },
  });
  const reps = Number(values.reps ?? (values.quick ? 2 : 5));
  const agreeTokens = Number(values["agree-tokens"] ?? 512);
  const pp = Number(values.pp);
  const tg = Number(values.tg);
  const ctx = Number(values.ctx);
  const streamBytes = Number(values["stream-mib"]) * 1024 * 1024;
  const threads = [...new Set(values.threads.split(",").map(Number))].sort((a, b) => a - b);
  const seed = values.seed !== undefined
    ? Number(values.seed)
    : crypto.getRandomValues(new Uint32Array(1))[0];
  const fa = { auto: "auto", on: true, off: false }[values["llama-flash-attention"]];
  const cores = navigator.hardwareConcurrency;
  const specs = values.models.split(",").map((id) => {
    const m = MODELS.find((s) => s.id === id);
    if (m === undefined) {
      throw new RangeError(`unknown model '${id}' (known: ${MODELS.map((s) => s.id).join(", ")})`);
    }
    return m;
  });
  const intIn = (x: number, lo: number, hi: number) =>
    Number.isSafeInteger(x) && x >= lo && x <= hi;
  if (
    !intIn(reps, 1, 1000) || !intIn(pp, 1, 1 << 16) || !intIn(tg, 2, 1 << 16) ||
    !intIn(agreeTokens, 1, 1 << 20) || !intIn(ctx, 16, 1 << 20) ||
    !intIn(seed, 0, 0xffffffff) || !(streamBytes >= 1 << 20) || fa === undefined ||
    !threads.every((t) => intIn(t, 1, cores))
  ) {
    throw new RangeError(
      `bad --reps, --pp, --tg, --agree-tokens, --ctx, --seed, --stream-mib, ` +
        `--llama-flash-attention or --threads (1..${cores} here)`,
    );
  }
  const fixture = JSON.parse(await Deno.readTextFile(FIXTURE)) as { tokens: number[] };
  const fixtureText = await Deno.readTextFile(FIXTURE.replace(/\.json$/, ".txt"));
  const agreeText = values["agree-text"] === undefined
    ? undefined
    : await readAgreeText(values["agree-text"]);
  const tgPrompt = fixture.tokens.slice(0, 8);
  const warmupPrompt = Math.min(pp, 64);
  const warmupTokens = Math.min(tg, 16);
  if (
    pp > fixture.tokens.length || (agreeText === undefined && agreeTokens > fixture.tokens.length)
  ) {
    throw new RangeError(`--pp and --agree-tokens are at most ${fixture.tokens.length}`);
  }
  if (ctx < pp + 1 || ctx < tgPrompt.length + tg) {
    throw new RangeError(`--ctx ${ctx} is too small for the prompts`);
  }
  LIB = Deno.env.get("CFLOW_KERNELS") ?? LIB;
  const llamaCpu = values["llama-cpu"];
  if (llamaCpu !== undefined) {
    if (!/^[a-z0-9_]+$/.test(llamaCpu)) throw new RangeError(`bad --llama-cpu '${llamaCpu}'`);
    const made = await new Deno.Command("bash", {
      args: [`${ROOT}/scripts/install-llamacpp.sh`, "--cpu", llamaCpu],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    if (!made.success) throw new Error(`scripts/install-llamacpp.sh --cpu ${llamaCpu} failed`);
    NLC_DIR = new TextDecoder().decode(made.stdout).trim().split("\n").pop()!;
  }
  try {
    await Deno.stat(`${NLC_DIR}/node_modules/node-llama-cpp/package.json`);
  } catch {
    throw new Error(`llama.cpp is not installed: run bash scripts/install-llamacpp.sh`);
  }
  try {
    await new Deno.Command("taskset", { args: ["-V"], stdout: "null", stderr: "null" }).output();
    haveTaskset = true;
  } catch {
    log("taskset is not available: workers run unpinned");
  }

  // 1. The models: made or checked by their scripts, hashed, described.
  const states: ModelState[] = [];
  for (const spec of specs) {
    log(`model ${spec.id}: ${spec.make.join(" ")}`);
    if (spec.make[0].endsWith(".sh")) {
      await spawn("bash", [`${ROOT}/${spec.make[0]}`, ...spec.make.slice(1)]);
    } else {
      await spawn(
        Deno.execPath(),
        denoArgs(spec.make[0], [`--allow-write=${ROOT}/cache/models`]).concat(spec.make.slice(1)),
      );
    }
    modelReads.push(await Deno.realPath(spec.gguf));
    const { sha256, bytes } = await sha256File(spec.gguf);
    const gguf = parseGguf(bytesSource(spec.gguf, bytes));
    const weights = weightBytes(gguf.tensors);
    states.push({
      spec,
      sha256,
      fileBytes: bytes.length,
      weights,
      kvBytes: 0,
      tensors: gguf.tensors.length,
    });
  }

  // 2. cflow's conversions (cached), outside any measurement.
  let machine: Record<string, unknown> = {};
  for (const s of states) {
    const job: CflowJob = {
      mode: "prepare",
      gguf: s.spec.gguf,
      quant: s.spec.quant,
      cache: CONVERTED,
      ctx,
      text: s.spec.ownTokens ? fixtureText : undefined,
      agreeText: agreeText?.text,
    };
    const t0 = performance.now();
    const r = await worker("cflow", 1, job);
    const c = r.config as { layers: number; kvHeads: number; headDim: number };
    s.cflowPath = r.path as string;
    s.ids = s.spec.ownTokens ? r.textIds as number[] : fixture.tokens;
    s.agreeIds = agreeText === undefined ? s.ids : r.agreeIds as number[];
    if (s.ids.length < pp || s.agreeIds.length < agreeTokens) {
      throw new RangeError(
        `model ${s.spec.id}: the fixture text is ${s.ids.length} tokens` +
          (agreeText === undefined ? "" : ` and --agree-text ${s.agreeIds.length}`) +
          `; --pp needs ${pp}, --agree-tokens ${agreeTokens}`,
      );
    }
    s.converted = r.converted as boolean;
    s.convertMs = performance.now() - t0;
    s.kvBytes = 2 * c.layers * ctx * c.kvHeads * c.headDim * 2;
    machine = { cpu: r.cpu, variant: r.variant, library: r.library };
    log(
      `model ${s.spec.id}: ${s.cflowPath}` +
        (s.converted ? ` (converted in ${f1(s.convertMs / 1000)} s)` : " (cached)"),
    );
  }

  // 3. The agreement gate, before any speed is measured.
  for (const s of states) {
    const tokens = s.agreeIds!.slice(0, agreeTokens);
    const base = {
      gguf: s.spec.gguf,
      quant: s.spec.quant,
      cache: CONVERTED,
      ctx: Math.max(ctx, agreeTokens),
      threads: 1,
    };
    log(
      `model ${s.spec.id}: teacher-forced agreement over ${tokens.length} positions of ` +
        (agreeText === undefined ? "the fixture text" : agreeText.path),
    );
    const ref = await worker("llama.cpp", 1, {
      ...base,
      mode: "agree",
      tokens,
      batch: 512,
      selfBatch: 32,
    }) as unknown as {
      top1: number[];
      top2: number[];
      margin: number[];
      selfTop1: number[];
      selfMargin: (number | null)[];
      ms: number;
    };
    const mine = await worker("cflow", 1, {
      ...base,
      mode: "agree",
      tokens,
      refTop1: ref.top1,
      refTop2: ref.top2,
    }) as unknown as { top1: number[]; refMargin: number[]; splitMargin: number[]; ms: number };
    s.llamaSelf = ref.selfTop1.filter((t, i) => t === ref.top1[i]).length / ref.top1.length;
    s.llamaSelfMarginDelta = meanMarginDelta(ref.margin, ref.selfMargin);
    s.agreement = agreement(
      ref,
      mine,
      s.spec.randomWeights ? "random" : "trained",
      GATE,
      s.llamaSelf,
    );
    s.agreementMs = { cflow: mine.ms, llama: ref.ms };
    if (!s.agreement.pass) s.refused = "teacher-forced agreement below the gate";
    log(
      `model ${s.spec.id}: top-1 ${pct(s.agreement.all)} overall, ` +
        `${pct(s.agreement.decidedShare)} decided, mean margin delta ` +
        `${f2(s.agreement.meanMarginDelta)}; llama.cpp vs itself ${pct(s.llamaSelf)}, ` +
        `mean margin delta ${f2(s.llamaSelfMarginDelta)}: ` +
        `${s.agreement.pass ? "pass" : "FAIL"}`,
    );
  }

  // 4. The speed runs: every configuration in a fresh process, shuffled rounds.
  const configs: Config[] = [];
  if (!values["gate-only"]) {
    for (const t of threads) {
      configs.push({ kind: "stream", threads: t });
    }
  }
  for (const s of states) {
    if (s.refused || values["gate-only"]) continue;
    for (const engine of ["cflow", "llama.cpp"] as const) {
      for (const test of ["pp", "tg"] as const) {
        for (const t of threads) {
          configs.push({ kind: "model", engine, model: s.spec.id, test, threads: t });
        }
      }
    }
  }
  const shuffle = seededShuffler(seed);
  if (configs.length > 0) {
    log(`${configs.length} configurations x ${reps} repetitions, order seed ${seed}`);
  }
  const samples: Sample[] = [];
  let done = 0;
  for (let rep = 0; rep < reps; rep++) {
    const order = shuffle(configs);
    for (let i = 0; i < order.length; i++) {
      const c = order[i];
      const t0 = performance.now();
      let r: Record<string, unknown>;
      let label: string;
      if (c.kind === "stream") {
        label = `stream read ${c.threads}t`;
        r = await worker("cflow", c.threads, {
          mode: "stream",
          threads: c.threads,
          bytes: streamBytes,
          minMs: 500,
        });
      } else {
        const s = states.find((x) => x.spec.id === c.model)!;
        label = `${c.engine} ${c.model} ${testName(c.test!, pp, tg)} ${c.threads}t`;
        const base = {
          gguf: s.spec.gguf,
          quant: s.spec.quant,
          cache: CONVERTED,
          ctx,
          threads: c.threads,
          batch: 512,
          flashAttention: fa,
        };
        const job = c.test === "pp"
          ? { ...base, mode: "pp", prompt: s.ids!.slice(0, pp), warmupPrompt }
          : {
            ...base,
            mode: "tg",
            prompt: s.ids!.slice(0, tgPrompt.length),
            maxTokens: tg,
            warmupTokens,
          };
        r = await worker(c.engine!, c.threads, job);
      }
      const sample: Sample = {
        rep,
        order: i,
        config: c,
        tokS: r.tokS as number | undefined,
        gbps: r.gbps as number | undefined,
        hugePageBytes: r.hugePageBytes as number | null | undefined,
        hash: r.hash as string | undefined,
        ids: r.ids as number[] | undefined,
        memory: r.memory as ProcMemory | undefined,
        loadMs: r.loadMs as number | undefined,
        systemInfo: r.systemInfo as string | undefined,
        wallMs: performance.now() - t0,
      };
      samples.push(sample);
      done++;
      log(
        `[${done}/${configs.length * reps}] ${label}: ` +
          (c.kind === "stream" ? `${f2(sample.gbps!)} GB/s` : `${f1(sample.tokS!)} tok/s`) +
          ` (${f1(sample.wallMs / 1000)} s)`,
      );
    }
  }

  // 5. The hash gate.
  const of = (model: string, engine: Engine, test: Test, t?: number) =>
    samples.filter((x) =>
      x.config.model === model && x.config.engine === engine && x.config.test === test &&
      (t === undefined || x.config.threads === t)
    );
  const hashes: Record<string, unknown> = {};
  for (const s of states) {
    if (s.refused || values["gate-only"]) continue;
    const id = s.spec.id;
    const tgHashes = new Set(of(id, "cflow", "tg").map((x) => x.hash));
    const ppHashes = new Set(of(id, "cflow", "pp").map((x) => x.hash));
    const llamaTg = new Set(of(id, "llama.cpp", "tg").map((x) => x.hash));
    hashes[id] = { cflowTg: [...tgHashes], cflowPp: [...ppHashes], llamaTg: [...llamaTg] };
    if (tgHashes.size !== 1 || ppHashes.size !== 1) {
      s.refused = "cflow's greedy tokens differ between repetitions or thread counts";
    }
  }

  // 6. The report.
  return await report({
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
  });
}
