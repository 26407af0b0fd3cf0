/**
 * `deno task bench:serve`: many streams at once, cflow's server against llama.cpp, side by side
 * in the same run.
 *
 *   deno task bench:serve [--models smollm2-q4_0,qwen05b] [--streams 1,2,4,8,16] [--tokens 64]
 *                         [--threads 2] [--ctx 512] [--long-prompt 2000] [--out FILE]
 *
 * cflow: `./cflow serve --parallel S` (S = the most streams, plus one for the long prompt) as a
 * user starts it, pinned with taskset to `--threads` cores; N streamed /v1/completions requests
 * at once (greedy, `ignore_eos`, `--tokens` tokens each), each with its own prompt. llama.cpp:
 * node-llama-cpp 3.21.1 (bench/_llama_serve_worker.mjs), one context of S sequences, N of them
 * generating at once (its batching puts them in one llama_decode), the same prompts and token
 * counts. Per stream count: aggregate tokens per second (all streams' tokens over the wall time
 * from the first request to the last token), time to first token (p50) and the gaps between a
 * stream's tokens (p50, p99; cflow: between the server-sent chunks, one per token that has
 * text), cflow's aggregate against llama.cpp's and against its own single stream. Then, for
 * cflow, a `--long-prompt`-token prompt sent while 8 streams decode: their largest gap while it
 * runs against their p99 without it (chunked prefill). And the server's peak RSS against one copy
 * of the weights, the KV cache the streams held and 150 MB.
 *
 * Goals (issue 19): aggregate at 8 streams >= 3.5x one stream's; >= 1.5x llama.cpp's at every
 * stream count; the long prompt's gap under 3x the p99; peak RSS within the bound. Printed as
 * met or missed; the exit status is 0 either way (a benchmark, not a test).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { getInt, getString, parseGguf } from "../formats/gguf/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const NLC_DIR = `${ROOT}/.tools/llamacpp`;

interface Spec {
  id: string;
  label: string;
  gguf: string;
  quant: "q4_0" | "auto";
  make: string[];
}

const SPECS: Spec[] = [
  {
    id: "smollm2-q4_0",
    label: "SmolLM2-135M-Instruct Q4_0",
    gguf: `${ROOT}/cache/models/smollm2-135m-instruct.Q4_0.gguf`,
    quant: "q4_0",
    make: ["scripts/derive-models.ts", "smollm2-q4_0"],
  },
  {
    id: "qwen05b",
    label: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    gguf: `${ROOT}/cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`,
    quant: "auto",
    make: ["scripts/fetch-models.sh", "qwen05b"],
  },
];

/** One stream's request start and token arrival times (ms, performance.now of this process). */
interface Run {
  start: number;
  at: number[];
  tokens: number;
}

interface Round {
  streams: number;
  aggregate: number;
  ttftP50: number;
  gapP50: number;
  gapP99: number;
  gapMax: number;
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

function summarize(streams: number, runs: Run[]): Round {
  const t0 = Math.min(...runs.map((r) => r.start));
  const t1 = Math.max(...runs.map((r) => r.at.at(-1) ?? r.start));
  const tokens = runs.reduce((a, r) => a + r.tokens, 0);
  const gaps = runs.flatMap((r) => r.at.slice(1).map((t, i) => t - r.at[i]));
  return {
    streams,
    aggregate: tokens / ((t1 - t0) / 1000),
    ttftP50: quantile(runs.map((r) => (r.at[0] ?? NaN) - r.start), 0.5),
    gapP50: quantile(gaps, 0.5),
    gapP99: quantile(gaps, 0.99),
    gapMax: Math.max(...gaps),
  };
}

/** The prompts: a different opening for every stream. */
function prompts(n: number): string[] {
  const topics = ["the sea", "a city at night", "an old clock", "a garden", "the moon", "a train"];
  return Array.from(
    { length: n },
    (_, i) => `Story ${i + 1}. Write a short story about ${topics[i % topics.length]}.`,
  );
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function run(cmd: string, args: string[], input?: string): Promise<string> {
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
  if (!out.success) {
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-20).join("\n");
    throw new Error(`${cmd} ${args.join(" ")} exited with ${out.code}:\n${err}`);
  }
  return new TextDecoder().decode(out.stdout);
}

/** One streamed completion; the time of every chunk with text, and the token count. */
async function completion(url: string, prompt: string, maxTokens: number): Promise<Run> {
  const start = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      prompt,
      max_tokens: maxTokens,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!r.ok || r.body === null) throw new Error(`cflow serve: ${r.status} ${await r.text()}`);
  const at: number[] = [];
  let tokens = 0;
  let buffered = "";
  for await (const chunk of r.body.pipeThrough(new TextDecoderStream())) {
    const now = performance.now();
    buffered += chunk;
    let i: number;
    while ((i = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, i);
      buffered = buffered.slice(i + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const j = JSON.parse(event.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      if (j.choices?.[0]?.text) at.push(now);
    }
  }
  return { start, at, tokens };
}

/** Peak RSS (VmHWM) of a process, in bytes. */
function vmHwm(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m === null ? NaN : Number(m[1]) * 1024;
}

const f1 = (x: number) => x.toFixed(1);
const f0 = (x: number) => x.toFixed(0);

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      models: { type: "string", default: SPECS.map((s) => s.id).join(",") },
      streams: { type: "string", default: "1,2,4,8,16" },
      tokens: { type: "string", default: "64" },
      threads: { type: "string", default: String(Math.min(2, navigator.hardwareConcurrency)) },
      ctx: { type: "string", default: "512" },
      "long-prompt": { type: "string", default: "2000" },
      out: { type: "string" },
    },
  });
  const streams = values.streams.split(",").map(Number);
  const tokens = Number(values.tokens);
  const threads = Number(values.threads);
  const ctx = Number(values.ctx);
  const longPrompt = Number(values["long-prompt"]);
  const int = (x: number, lo: number, hi: number) => Number.isSafeInteger(x) && x >= lo && x <= hi;
  if (
    !streams.every((n) => int(n, 1, 64)) || !int(tokens, 2, 4096) ||
    !int(threads, 1, navigator.hardwareConcurrency) || !int(ctx, 64, 1 << 16) ||
    !int(longPrompt, 0, 1 << 15)
  ) {
    throw new RangeError("bad --streams (1..64), --tokens, --threads, --ctx or --long-prompt");
  }
  const maxStreams = Math.max(...streams);
  const specs = values.models.split(",").map((id) => {
    const s = SPECS.find((x) => x.id === id);
    if (s === undefined) {
      throw new RangeError(`unknown model ${id} (known: ${SPECS.map((x) => x.id)})`);
    }
    return s;
  });
  const pin = ["taskset", "-c", `0-${threads - 1}`];
  const lines: string[] = [];
  const say = (l: string) => {
    console.log(l);
    lines.push(l);
  };
  say(
    `bench:serve: ${navigator.hardwareConcurrency} CPUs here, ${threads} thread(s) per engine, ` +
      `streams ${streams.join(",")}, ${tokens} tokens each, ctx ${ctx} per stream`,
  );
  for (const spec of specs) {
    if (spec.make[0].endsWith(".sh")) await run("bash", [spec.make[0], ...spec.make.slice(1)]);
    else {
      await run(Deno.execPath(), [
        "run",
        "-A",
        "--no-prompt",
        "--quiet",
        spec.make[0],
        ...spec.make.slice(1),
      ]);
    }
    const gguf = parseGguf(bytesSource(spec.gguf, await Deno.readFile(spec.gguf)));
    const weights = gguf.tensors.reduce((a, t) => a + t.bytes, 0);
    // f16 K and V of every layer, per position: what one held token costs.
    const arch = getString(gguf, "general.architecture");
    const heads = getInt(gguf, `${arch}.attention.head_count`);
    const headDim = getInt(
      gguf,
      `${arch}.attention.key_length`,
      getInt(gguf, `${arch}.embedding_length`) / heads,
    );
    const kvPerPosition = getInt(gguf, `${arch}.block_count`) * 2 *
      getInt(gguf, `${arch}.attention.head_count_kv`, heads) * headDim * 2;
    const texts = prompts(maxStreams);

    // cflow: the server as a user starts it.
    const port = freePort();
    const slots = maxStreams + (longPrompt > 0 ? 1 : 0);
    const longCtx = Math.max(ctx, longPrompt + 64);
    const server = new Deno.Command(pin[0], {
      args: [
        ...pin.slice(1),
        `${ROOT}/cflow`,
        "serve",
        "--model",
        spec.gguf,
        ...(spec.quant === "auto" ? [] : ["--quant", spec.quant]),
        "--parallel",
        String(slots),
        "--ctx",
        String(longCtx),
        "--threads",
        String(threads),
        "--port",
        String(port),
      ],
      cwd: ROOT,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    const url = `http://127.0.0.1:${port}`;
    const cflowRounds: Round[] = [];
    let longGap = NaN;
    let baseP99 = NaN;
    let rss = NaN;
    let kvHeld = 0;
    try {
      const deadline = Date.now() + 600_000;
      while (true) {
        try {
          const h = await fetch(`${url}/health`);
          await h.body?.cancel();
          if (h.ok) break;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error("cflow serve did not come up in 10 minutes");
        await new Promise((r) => setTimeout(r, 250));
      }
      await completion(url, texts[0], 8); // warm up
      for (const n of streams) {
        const runs = await Promise.all(texts.slice(0, n).map((p) => completion(url, p, tokens)));
        cflowRounds.push(summarize(n, runs));
      }
      if (longPrompt > 0) {
        // Eight streams decode; the long prompt arrives once they are all running.
        const n = Math.min(8, maxStreams);
        const base = summarize(
          n,
          await Promise.all(texts.slice(0, n).map((p) => completion(url, p, tokens))),
        );
        baseP99 = base.gapP99;
        const long = "The quick brown fox jumps over the lazy dog. ".repeat(
          Math.ceil(longPrompt / 10),
        );
        let longStart = 0;
        let longEnd = 0;
        const decoding = texts.slice(0, n).map((p) => completion(url, p, tokens));
        await new Promise((r) => setTimeout(r, Math.max(50, base.ttftP50 * 2)));
        longStart = performance.now();
        const sent = await fetch(`${url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ prompt: long, max_tokens: 1, temperature: 0 }),
        });
        await sent.text();
        longEnd = performance.now();
        const runs = await Promise.all(decoding);
        const gaps = runs.flatMap((r) =>
          r.at.slice(1).map((t, i) => ({ from: r.at[i], gap: t - r.at[i] }))
            .filter((g) => g.from + g.gap >= longStart && g.from <= longEnd)
        );
        longGap = Math.max(...gaps.map((g) => g.gap));
      }
      rss = vmHwm(server.pid);
      kvHeld = slots * longCtx * kvPerPosition;
    } finally {
      server.kill("SIGTERM");
      await server.status;
    }

    // llama.cpp: the same streams through node-llama-cpp's batched sequences.
    const out = await run(
      pin[0],
      [...pin.slice(1), "node", "bench/_llama_serve_worker.mjs"],
      JSON.stringify({
        nlcDir: NLC_DIR,
        gguf: spec.gguf,
        threads,
        ctx,
        maxStreams,
        streams,
        prompts: texts,
        maxTokens: tokens,
      }),
    );
    const llama = JSON.parse(out.trim().split("\n").pop()!);
    const llamaRounds: Round[] = llama.rounds.map((r: { streams: number; runs: Run[] }) =>
      summarize(r.streams, r.runs)
    );

    say(
      `\n${spec.label} (${spec.gguf.split("/").pop()}; llama.cpp ${
        llama.llamaCpp?.release ?? llama.llamaCpp
      }, node-llama-cpp 3.21.1)`,
    );
    say(
      "streams | cflow tok/s | x1 stream | llama.cpp tok/s | x1 stream | cflow/llama | " +
        "ttft p50 ms (cflow / llama) | gap p50 ms | gap p99 ms",
    );
    const one = cflowRounds[0].aggregate;
    const lone = llamaRounds[0].aggregate;
    for (const [i, c] of cflowRounds.entries()) {
      const l = llamaRounds[i];
      say(
        `${c.streams} | ${f1(c.aggregate)} | ${(c.aggregate / one).toFixed(2)}x | ${
          f1(l.aggregate)
        } | ` +
          `${(l.aggregate / lone).toFixed(2)}x | ${(c.aggregate / l.aggregate).toFixed(2)}x | ` +
          `${f0(c.ttftP50)} / ${f0(l.ttftP50)} | ${f1(c.gapP50)} / ${f1(l.gapP50)} | ` +
          `${f1(c.gapP99)} / ${f1(l.gapP99)}`,
      );
    }
    const at8 = cflowRounds.find((r) => r.streams === 8);
    if (at8) {
      const x = at8.aggregate / one;
      say(
        `goal: aggregate at 8 streams >= 3.5x one stream's: ${x.toFixed(2)}x, ${
          x >= 3.5 ? "met" : "missed"
        }`,
      );
    }
    const worst = Math.min(...cflowRounds.map((c, i) => c.aggregate / llamaRounds[i].aggregate));
    say(
      `goal: >= 1.5x llama.cpp's aggregate at every stream count: worst ${worst.toFixed(2)}x, ${
        worst >= 1.5 ? "met" : "missed"
      }`,
    );
    if (longPrompt > 0) {
      say(
        `goal: a ${longPrompt}-token prompt during 8 streams: largest gap ${f1(longGap)} ms vs ` +
          `p99 ${f1(baseP99)} ms without it (${(longGap / baseP99).toFixed(2)}x; goal < 3x): ` +
          `${longGap < 3 * baseP99 ? "met" : "missed"}`,
      );
    }
    const bound = weights + kvHeld + 150e6;
    say(
      `memory: cflow serve --parallel ${slots} peak RSS ${f0(rss / 1e6)} MB; weights ${
        f0(weights / 1e6)
      } MB ` +
        `+ KV cache of every slot ${f0(kvHeld / 1e6)} MB + 150 MB = ${f0(bound / 1e6)} MB: ` +
        `${rss <= bound ? "within" : "above"}; llama.cpp peak RSS ${f0(llama.vmHwm / 1e6)} MB`,
    );
  }
  if (values.out) await Deno.writeTextFile(values.out, lines.join("\n") + "\n");
}

await main();
