/**
 * The continuous-batching engine (runtime/batch_engine.ts): generations on
 * the sequences of one model, started at different times, with different
 * prompt lengths, a shared system prefix, greedy and seeded sampling, and a
 * neighbour aborted mid-run, each give the tokens and log-probabilities
 * they give alone on a model of their own; and the steps really were
 * shared (more than one row per step). On SmolLM2 (Q8_0 panels), a
 * mixture-of-experts fixture and a pipeline-native fixture.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setImmediate } from "node:timers";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { BatchEngine, type Sequence } from "../runtime/batch_engine.ts";
import { generate, type GenerationModel } from "../runtime/generate.ts";
import { PromptCache } from "../runtime/prompt_cache.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import { convertFixture } from "./util/fixture_model.ts";
import { isFile } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const GGUF = `${ROOT}cache/models/smollm2-135m-instruct.Q8_0.gguf`;

interface Job {
  prompt: number[];
  sampling: SamplerOptions;
  maxTokens: number;
  /** Start after this many milliseconds (joins a running batch). */
  delayMs: number;
  /** Abort after this many tokens. */
  abortAfter?: number;
}

interface Output {
  ids: number[];
  logprobs: number[];
  reason: string;
}

/** The token bytes a tokenizer-free run needs: no end-of-generation, one byte per id. */
const BYTES = {
  encode: () => [],
  isEog: () => false,
  tokenBytes: (id: number) => new Uint8Array([0x61 + (id % 26)]),
};

async function run(
  model: GenerationModel,
  vocab: number,
  job: Job,
  tokenizer = BYTES,
): Promise<Output> {
  const abort = new AbortController();
  const it = generate(model, tokenizer, new Sampler(vocab, job.sampling), job.prompt, {
    maxTokens: job.maxTokens,
    logprobs: 0,
    signal: abort.signal,
  });
  const ids: number[] = [];
  const logprobs: number[] = [];
  while (true) {
    const r = await it.next();
    if (r.done) return { ids, logprobs, reason: r.value.stopReason };
    if (r.value.id < 0) continue;
    ids.push(r.value.id);
    logprobs.push(r.value.logprob!);
    if (job.abortAfter !== undefined && ids.length >= job.abortAfter) abort.abort();
    // As the server does between tokens: a macrotask turn.
    await new Promise((r) => setImmediate(r));
  }
}

function jobs(vocab: number): Job[] {
  const text = (s: number, n: number) =>
    Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + s * 104729 + 13) % (vocab - 1)));
  const system = text(99, 12); // a shared prefix
  return [
    { prompt: text(0, 5), sampling: { temperature: 0 }, maxTokens: 24, delayMs: 0 },
    { prompt: [...system, ...text(1, 3)], sampling: { temperature: 0 }, maxTokens: 20, delayMs: 0 },
    {
      prompt: [...system, ...text(2, 7)],
      sampling: { temperature: 0.9, seed: 7 },
      maxTokens: 20,
      delayMs: 15,
    },
    {
      prompt: text(3, 40), // a long prompt, in chunks beside the decoders
      sampling: { temperature: 0.7, topK: 20, seed: 11 },
      maxTokens: 16,
      delayMs: 30,
    },
    {
      prompt: text(4, 9),
      sampling: { temperature: 0 },
      maxTokens: 30,
      delayMs: 5,
      abortAfter: 6, // leaves early; its neighbours go on
    },
  ];
}

async function check(path: string, label: string): Promise<void> {
  using single = Transformer.load(path, { contextLength: 96 });
  const vocab = single.config.vocab;
  const all = jobs(vocab);
  const alone: Output[] = [];
  for (const job of all) alone.push(await run(single, vocab, job));
  using shared = Transformer.load(path, { contextLength: 96, sequences: all.length });
  const engine = new BatchEngine(shared, { prefillChunk: 8 });
  const together = await Promise.all(all.map(async (job, i) => {
    await new Promise((r) => setTimeout(r, job.delayMs));
    const seq: Sequence = engine.sequences[i];
    try {
      return await run(seq, vocab, job);
    } finally {
      seq.idle();
    }
  }));
  together.forEach((out, i) => {
    assert.deepEqual(out.ids, alone[i].ids, `${label} job ${i} tokens`);
    assert.deepEqual(out.logprobs, alone[i].logprobs, `${label} job ${i} logprobs`);
    assert.equal(out.reason, alone[i].reason, `${label} job ${i} stop reason`);
  });
  assert.equal(together[4].reason, "aborted");
  assert.equal(together[4].ids.length, 6);
  const s = engine.stats;
  const generated = together.reduce((a, o) => a + o.ids.length, 0);
  // Shared steps: fewer steps than tokens, and some with several sequences' rows.
  assert.ok(s.widest >= 3, `${label}: widest step ${s.widest}`);
  assert.ok(s.steps < generated, `${label}: ${s.steps} steps for ${generated} tokens`);
}

Deno.test("BatchEngine: each generation of a shared batch is what it is alone", async (t) => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "batch-engine-" });
  try {
    openKernels({ threads: 2 });
    for (
      const name of [
        "hf_logits/mixtral",
        "hf_logits/qwen2",
        "pipeline_native/arch4_async_experts",
      ]
    ) {
      const path = await convertFixture(name, dir);
      await t.step(name, () => check(path, name));
    }
    if (isFile(GGUF)) {
      const path = `${dir}/smollm2.cflow`;
      await convertFile(GGUF, path, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      await t.step("SmolLM2 Q8_0", () => check(path, "SmolLM2"));
    }
  } finally {
    openKernels({ threads: 1 });
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BatchEngine: a sequence asks for one step at a time, inside its context", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "batch-engine-" });
  try {
    const path = await convertFixture("hf_logits/qwen2", dir);
    using model = Transformer.load(path, { contextLength: 16, sequences: 2 });
    const engine = new BatchEngine(model);
    const [a] = engine.sequences;
    await assert.rejects(() => a.prefillAsync([], 0), /at least one token/);
    await assert.rejects(() => a.prefillAsync([1, 2], 15), /outside the context of 16/);
    const first = a.prefillAsync([1, 2, 3], 0);
    await assert.rejects(() => a.forward(4, 3), /already has a step waiting/);
    await first;
    const stop = new AbortController();
    stop.abort(new Error("gone"));
    await assert.rejects(() => a.prefillAsync([4], 3, stop.signal), /gone/);
    assert.equal((await a.forward(4, 3)).length, model.config.vocab);
    assert.throws(() => new BatchEngine(model, { prefillChunk: 0 }), RangeError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BatchEngine.copyPrefix: a sequence that starts from another's prefix continues as alone", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "batch-engine-" });
  try {
    const path = await convertFixture("hf_logits/qwen2", dir);
    using single = Transformer.load(path, { contextLength: 48 });
    const vocab = single.config.vocab;
    const text = (s: number, n: number) =>
      Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + s * 104729 + 13) % (vocab - 1)));
    const system = text(9, 14);
    const job = (s: number): Job => ({
      prompt: [...system, ...text(s, 4)],
      sampling: { temperature: 0 },
      maxTokens: 10,
      delayMs: 0,
    });
    const alone = await run(single, vocab, job(2));
    using shared = Transformer.load(path, { contextLength: 48, sequences: 3 });
    const engine = new BatchEngine(shared);
    const [a, b] = engine.sequences;
    // a runs its prompt and keeps generating while b copies the shared system prompt from it.
    const first = run(a, vocab, { ...job(1), maxTokens: 30 });
    // Once a's prompt has run and it decodes.
    while (engine.stats.steps < 2) await new Promise((r) => setImmediate(r));
    await engine.copyPrefix(0, 1, system.length);
    const cache = new PromptCache(b);
    cache.adopt(system);
    const it = generate(b, BYTES, new Sampler(vocab, { temperature: 0 }), job(2).prompt, {
      maxTokens: 10,
      logprobs: 0,
      cache,
    });
    const ids: number[] = [];
    const logprobs: number[] = [];
    let r = await it.next();
    for (; !r.done; r = await it.next()) {
      ids.push(r.value.id);
      logprobs.push(r.value.logprob!);
    }
    b.idle();
    await first;
    a.idle();
    assert.equal(r.value.cachedTokens, system.length);
    assert.deepEqual(ids, alone.ids);
    assert.deepEqual(logprobs, alone.logprobs);
    // Checked: more than the donor holds, the same sequence, out of range.
    await assert.rejects(() => engine.copyPrefix(0, 2, 1000), /holds/);
    await assert.rejects(() => engine.copyPrefix(1, 1, 1), /the same/);
    await assert.rejects(() => engine.copyPrefix(0, 3, 1), /not in \[0, 3\)/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("BatchEngine.copyPrefix: a copy whose donor an earlier copy of the same gap shrank is refused and writes nothing", async () => {
  // The server's slots borrow prefixes from each other (server/mod.ts): slot 2 asks for 20
  // positions of sequence 0, and before its copy's turn sequence 0 itself borrows 10 from
  // sequence 1. Both copies run in one gap, in order; the second must refuse (a RangeError,
  // which the server takes as "the donor moved on") before writing anything.
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "batch-engine-" });
  try {
    const path = await convertFixture("hf_logits/qwen2", dir);
    using model = Transformer.load(path, { contextLength: 32, sequences: 3 });
    const engine = new BatchEngine(model);
    const [a, b] = engine.sequences;
    await Promise.all([
      a.prefillAsync(Array.from({ length: 20 }, (_, i) => 1 + i), 0),
      b.prefillAsync(Array.from({ length: 10 }, (_, i) => 40 + i), 0),
    ]);
    const shrink = engine.copyPrefix(1, 0, 10);
    const late = engine.copyPrefix(0, 2, 20);
    await shrink;
    await assert.rejects(
      () => late,
      (e: unknown) => e instanceof RangeError && /holds 10/.test(String(e)),
    );
    // Sequence 2 holds nothing still: the refused copy wrote no position.
    await assert.rejects(() => engine.copyPrefix(2, 1, 1), /sequence 2 holds 0/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
