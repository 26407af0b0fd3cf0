/**
 * {@link PromptCache}: a prompt that starts like what the KV cache holds runs only the rest, and
 * what comes out is bit for bit what a fresh model instance gives on the whole prompt (same
 * tokens, same log-probabilities), for a dense model with sliding-window layers (Gemma 3, window
 * 4), a Llama with GQA, and two pipeline-native mixture-of-experts models with delayed streams;
 * across chat-like turns, a prompt that diverges early, an aborted prefill and a record that
 * belongs to another instance.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { generate, type GenerationStats } from "./generate.ts";
import { PromptCache } from "./prompt_cache.ts";
import { greedySampler, letterTokenizer } from "../tests/util/generation.ts";

openKernels({ threads: 1 });

const tokenizer = letterTokenizer(() => false);

interface Run {
  ids: number[];
  logprobs: number[];
  stats: GenerationStats;
}

async function run(
  model: Transformer,
  prompt: number[],
  maxTokens: number,
  cache?: PromptCache,
  signal?: AbortSignal,
): Promise<Run> {
  const it = generate(model, tokenizer, greedySampler, prompt, {
    maxTokens,
    logprobs: 0,
    cache,
    signal,
  });
  const ids: number[] = [];
  const logprobs: number[] = [];
  while (true) {
    const r = await it.next();
    if (r.done) return { ids, logprobs, stats: r.value };
    if (r.value.id >= 0) {
      ids.push(r.value.id);
      logprobs.push(r.value.logprob!);
    }
  }
}

/** The same generation on a fresh instance of the file, with no cache. */
async function fresh(path: string, prompt: number[], maxTokens: number): Promise<Run> {
  using model = Transformer.load(path, { contextLength: 96 });
  return await run(model, prompt, maxTokens);
}

function sameRun(got: Run, want: Run, what: string): void {
  assert.deepEqual(got.ids, want.ids, `${what}: tokens`);
  // Bit for bit: Object.is tells -0 from 0 and compares NaN with itself.
  got.logprobs.forEach((v, i) =>
    assert.ok(Object.is(v, want.logprobs[i]), `${what}: logprob ${i}`)
  );
}

const FIXTURES = new URL("../tests/fixtures/", import.meta.url).pathname;

/** Runs `body` on `src` (a `.cflow` as it is, an HF folder converted to Q8_0 in a temporary folder). */
async function withModelFile(src: string, body: (path: string) => Promise<void>): Promise<void> {
  if (src.endsWith(".cflow")) return await body(src);
  const dir = await Deno.makeTempDir({ prefix: "cflow-prompt-cache-" });
  try {
    const path = `${dir}/model.cflow`;
    await convertFile(src, path, {
      format: "cflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
    });
    await body(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
const CASES: [string, string][] = [
  ["gemma3 (sliding window 4)", `${FIXTURES}hf_logits/gemma3`],
  ["llama (GQA)", `${FIXTURES}hf_logits/llama_gqa_untied`],
  ["mixtral (MoE)", `${FIXTURES}hf_logits/mixtral`],
  [
    "arch2_4_combined (pipeline-native)",
    new URL("../models/builtin/arch2_4_combined.cflow", import.meta.url).pathname,
  ],
];

for (const [name, src] of CASES) {
  Deno.test(`prompt cache, ${name}: each turn runs only the new tokens and matches a fresh instance bit for bit`, async () => {
    await withModelFile(src, async (path) => {
      using model = Transformer.load(path, { contextLength: 96 });
      const vocab = model.config.vocab;
      const tok = (i: number) => (i * 37 + 11) % vocab;
      const cache = new PromptCache(model);

      // Turn 1: nothing held yet.
      const p1 = Array.from({ length: 9 }, (_, i) => tok(i));
      const t1 = await run(model, p1, 6, cache);
      assert.equal(t1.stats.cachedTokens, 0);
      sameRun(t1, await fresh(path, p1, 6), "turn 1");
      // Held: the prompt and every generated token but the last (never run).
      assert.deepEqual(cache.tokens, [...p1, ...t1.ids.slice(0, -1)]);

      // Turn 2: the conversation so far, the whole answer, and a new message.
      const p2 = [...p1, ...t1.ids, tok(50), tok(51), tok(52)];
      const t2 = await run(model, p2, 6, cache);
      assert.equal(t2.stats.cachedTokens, p1.length + t1.ids.length - 1);
      sameRun(t2, await fresh(path, p2, 6), "turn 2");

      // A prompt that shares only 3 tokens: the rest is overwritten.
      const p3 = [...p1.slice(0, 3), tok(70), tok(71), tok(72), tok(73)];
      const t3 = await run(model, p3, 5, cache);
      assert.equal(t3.stats.cachedTokens, 3);
      sameRun(t3, await fresh(path, p3, 5), "diverging prompt");

      // The same prompt again: all but its last token is held.
      const t4 = await run(model, p3, 5, cache);
      assert.equal(t4.stats.cachedTokens, p3.length - 1);
      sameRun(t4, t3, "repeated prompt");
    });
  });
}

Deno.test("prompt cache: an aborted prefill leaves only the shared prefix recorded", async () => {
  await withModelFile(`${FIXTURES}hf_logits/llama_gqa_tied`, async (path) => {
    using model = Transformer.load(path, { contextLength: 96 });
    const cache = new PromptCache(model);
    const p1 = Array.from({ length: 12 }, (_, i) => (i * 13 + 5) % model.config.vocab);
    await run(model, p1, 4, cache);
    const p2 = [...p1.slice(0, 5), ...Array.from({ length: 40 }, (_, i) => (i * 7 + 1) % 300)];
    const abort = new AbortController();
    abort.abort(new DOMException("stop", "AbortError"));
    const aborted = await run(model, p2, 4, cache, abort.signal);
    assert.equal(aborted.stats.stopReason, "aborted");
    assert.deepEqual(cache.tokens, p1.slice(0, 5));
    // What follows is still exact.
    const again = await run(model, p2, 4, cache);
    assert.equal(again.stats.cachedTokens, 5);
    sameRun(again, await fresh(path, p2, 4), "after an abort");
  });
});

Deno.test("prompt cache: reusable() never covers the whole prompt; a record is tied to its instance", async () => {
  await withModelFile(`${FIXTURES}hf_logits/qwen2`, async (path) => {
    using a = Transformer.load(path, { contextLength: 8 });
    using b = Transformer.load(path, { contextLength: 8 });
    const cache = new PromptCache(a);
    cache.append([1, 2, 3, 4]);
    assert.equal(cache.reusable([1, 2, 3, 4]), 3);
    assert.equal(cache.reusable([1, 2, 3, 4, 5]), 4);
    assert.equal(cache.reusable([1, 9, 3]), 1);
    assert.equal(cache.reusable([7]), 0);
    assert.ok(cache.extendedBy([1, 2, 3, 4]) && cache.extendedBy([1, 2, 3, 4, 5]));
    assert.ok(!cache.extendedBy([1, 2, 3]) && !cache.extendedBy([1, 2, 9, 4, 5]));
    assert.throws(() => cache.append([5, 6, 7, 8, 9]), /exceed the context of 8/);
    assert.throws(() => cache.truncate(-1), RangeError);
    cache.truncate(2);
    assert.deepEqual(cache.tokens, [1, 2]);
    await assert.rejects(() => run(b, [1, 2, 3], 2, cache), /another model instance/);
  });
});
