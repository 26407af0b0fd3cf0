/**
 * `Transformer.prefillAll` on SmolLM2-135M-Instruct (the Q8_0 GGUF converted to Q8_0 and to
 * Q4_0, panels and tiles): the logits of every row of a batched prompt equal, bit for bit,
 * what `forward` returns for the same tokens run one at a time, and the KV cache it leaves
 * continues identically. And `perplexity`, which runs on it, gives bit for bit what scoring
 * token by token through `forward` gives (the algorithm it had before, kept here as the
 * reference), on the text of the `perplexity` CLI test. The same on the random-init fixtures
 * of the other families, mixture-of-experts models (in place and with the disk tier) and the
 * pipeline-native schedules.
 *
 * The SmolLM2 tests are ignored when the Q8_0 GGUF is absent (`./dev task test:ts` derives it).
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/transformer.ts";
import type { TransformerOptions } from "../model/options.ts";
import { openModel } from "../runtime/open_model.ts";
import { perplexity } from "../runtime/perplexity.ts";
import { isFile, sameBits } from "./util/test_models.ts";

const GGUF = new URL("../cache/models/smollm2-135m-instruct.Q8_0.gguf", import.meta.url).pathname;
const present = isFile(GGUF);

/** Deterministic pseudo-text token ids (as in tests/plan_test.ts). */
const PROMPT = Array.from({ length: 150 }, (_, i) => 1 + ((i * 7919 + 13) % 49000));

/** All rows' logits of `prefillAll` from `from` on, copied, with the indices they came with. */
function allRows(
  model: Transformer,
  tokens: number[],
  pos: number,
  from = 0,
): { index: number[]; logits: Float32Array[] } {
  const index: number[] = [];
  const logits: Float32Array[] = [];
  model.prefillAll(tokens, pos, (l, i) => {
    index.push(i);
    logits.push(l.slice());
  }, from);
  return { index, logits };
}

/** llama.cpp's perplexity token by token through forward: what runtime/perplexity.ts did. */
function perplexityByForward(
  model: Transformer,
  tokens: readonly number[],
  ctx: number,
  bos: number | undefined,
): { ppl: number; stderr: number; perChunk: number[] } {
  const logSoftmaxAt = (logits: Float32Array, target: number) => {
    let max = -Infinity;
    for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
    let sum = 0;
    for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
    return logits[target] - max - Math.log(sum);
  };
  const first = Math.floor(ctx / 2);
  let nll = 0;
  let nll2 = 0;
  let count = 0;
  const perChunk: number[] = [];
  for (let c = 0; c < Math.floor(tokens.length / ctx); c++) {
    const start = c * ctx;
    for (let j = 0; j < ctx - 1; j++) {
      const logits = model.forward(j === 0 && bos !== undefined ? bos : tokens[start + j], j);
      if (j >= first) {
        const v = -logSoftmaxAt(logits, tokens[start + j + 1]);
        nll += v;
        nll2 += v * v;
        count++;
      }
    }
    perChunk.push(Math.exp(nll / count));
  }
  const mean = nll / count;
  const variance = (nll2 / count - mean * mean) / (count - 1);
  const ppl = Math.exp(mean);
  return { ppl, stderr: ppl * Math.sqrt(Math.max(variance, 0)), perChunk };
}

Deno.test({
  name: "prefillAll on SmolLM2: every row's logits are forward's, bit for bit",
  ignore: !present,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "cflow-prefill-all-" });
    try {
      openKernels({ threads: 2 });
      for (const quant of ["q8_0", "q4_0"] as const) {
        const path = `${dir}/smollm2.${quant}.cflow`;
        await convertFile(GGUF, path, {
          format: "cflow",
          quant,
          rule: "ggml",
          measureError: false,
        });
        for (const packed of [true, false]) {
          const label = `${quant} ${packed ? "panels" : "tiles"}`;
          using single = Transformer.load(path, { packed, contextLength: 256 });
          const want = PROMPT.map((tok, pos) => single.forward(tok, pos).slice());
          const next = single.forward(42, PROMPT.length).slice();

          await t.step(`${label}: batches of 64 (64 + 64 + 22 rows)`, () => {
            using model = Transformer.load(path, { packed, contextLength: 256, batch: 64 });
            const got = allRows(model, PROMPT, 0);
            assert.deepEqual(got.index, PROMPT.map((_, i) => i));
            got.logits.forEach((l, i) => sameBits(l, want[i], `${label} row ${i}`));
            // The cache it left continues like the token-by-token one.
            sameBits(model.forward(42, PROMPT.length).slice(), next, `${label} next`);
          });

          await t.step(`${label}: from the middle of a batch, batches of 16, twice`, () => {
            using model = Transformer.load(path, { packed, contextLength: 256, batch: 16 });
            for (let round = 0; round < 2; round++) {
              const got = allRows(model, PROMPT, 0, 75);
              assert.deepEqual(got.index, PROMPT.slice(75).map((_, i) => 75 + i));
              got.logits.forEach((l, i) => sameBits(l, want[75 + i], `${label} row ${75 + i}`));
            }
            // Rows before `from` still filled the cache.
            sameBits(model.forward(42, PROMPT.length).slice(), next, `${label} next`);
            // A continuation at a later position: one batch, from row 0.
            const tail = allRows(model, PROMPT.slice(100), 100);
            tail.logits.forEach((l, i) => sameBits(l, want[100 + i], `${label} row ${100 + i}`));
            // from = the length: the cache only, no logits.
            assert.deepEqual(allRows(model, PROMPT, 0, PROMPT.length).index, []);
            sameBits(model.forward(42, PROMPT.length).slice(), next, `${label} next`);
          });
        }
      }
    } finally {
      openKernels({ threads: 1 });
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("prefillAll on the other families, MoE, the disk tier and the pipeline-native schedules: forward's logits", async () => {
  // Random-init fixtures: untied and tied Llama, Qwen2 (biases), Gemma 3 (embedding scale, norm
  // offset), Mixtral and Qwen2-MoE (experts, a shared expert), and the pipeline-native
  // schedules, whose final norm reads the second stream (PipelineRegisters) or follows a flush.
  const ROOT = new URL("..", import.meta.url).pathname;
  const models: [string, TransformerOptions[]][] = [
    ["hf_logits/llama_gqa_untied", [{}]],
    ["hf_logits/llama_gqa_tied", [{ packed: false }]],
    ["hf_logits/qwen2", [{}]],
    ["hf_logits/gemma3", [{}]],
    ["hf_logits/mixtral", [{}, { expertTier: "disk", expertFetch: "staged" }]],
    ["hf_logits/qwen2moe", [{}, { expertTier: "disk" }]],
    ["pipeline_native/arch1_decoupled_streams", [{}]],
    ["pipeline_native/arch3_pipeline_registers", [{}]],
    ["pipeline_native/arch4_async_experts", [{}, { expertTier: "disk", expertFetch: "staged" }]],
    ["pipeline_native/arch5_fixed_point", [{}]],
  ];
  openKernels({ threads: 2 });
  // The disk tier's direct reads need a disk-backed file system: the cache, not /tmp.
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "prefill-all-" });
  try {
    for (const [name, configs] of models) {
      const path = `${dir}/${name.replace("/", "_")}.cflow`;
      await convertFile(`${ROOT}tests/fixtures/${name}`, path, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      for (const options of configs) {
        const label = `${name} ${JSON.stringify(options)}`;
        using single = Transformer.load(path, { contextLength: 16, ...options });
        using batched = Transformer.load(path, { contextLength: 16, batch: 4, ...options });
        const vocab = single.config.vocab;
        const tokens = Array.from({ length: 11 }, (_, i) => 1 + ((i * 7919 + 13) % (vocab - 1)));
        const want = tokens.map((tok, pos) => single.forward(tok, pos).slice());
        const got = allRows(batched, tokens, 0, 2);
        assert.deepEqual(got.index, tokens.slice(2).map((_, i) => 2 + i), label);
        got.logits.forEach((l, i) => sameBits(l, want[2 + i], `${label} row ${2 + i}`));
        sameBits(batched.forward(5, 11).slice(), single.forward(5, 11), `${label} next`);
      }
    }
  } finally {
    openKernels({ threads: 1 });
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "prefillAll refuses what prefill refuses, and a bad from",
  ignore: !present,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-prefill-all-" });
    try {
      openKernels({ threads: 1 });
      const path = `${dir}/smollm2.cflow`;
      await convertFile(GGUF, path, {
        format: "cflow",
        quant: "q4_0",
        rule: "ggml",
        measureError: false,
      });
      using model = Transformer.load(path, { contextLength: 32, batch: 8 });
      const none = () => assert.fail("no logits expected");
      assert.throws(() => model.prefillAll([], 0, none), /at least one token/);
      assert.throws(() => model.prefillAll([1, 2], 0, none, 3), /from 3 is not in \[0, 2\]/);
      assert.throws(() => model.prefillAll([1, 2], 0, none, -1), /from -1/);
      assert.throws(() => model.prefillAll([1, 2], 31, none), /outside the context/);
      assert.throws(() => model.prefillAll([1, 49152], 0, none), /token 49152/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "perplexity through prefillAll is bit for bit the token-by-token perplexity",
  ignore: !present,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-prefill-all-" });
    try {
      openKernels({ threads: 2 });
      const path = `${dir}/smollm2.cflow`;
      await convertFile(GGUF, path, {
        format: "cflow",
        quant: "q4_0",
        rule: "ggml",
        measureError: false,
      });
      // The text and context of the perplexity test in tests/generate_cli_test.ts.
      const { model, tokenizer } = openModel(path, { contextLength: 64, batch: 24 });
      using _ = model;
      const text = "The quick brown fox jumps over the lazy dog. ".repeat(40);
      const tokens = tokenizer.encode(text, { addSpecial: false, parseSpecial: false });
      const bos = tokenizer.addBos ? tokenizer.bosId : undefined;
      const want = perplexityByForward(model, tokens, 64, bos);
      const seen: number[] = [];
      const got = perplexity(model, tokens, 64, bos, (_, __, ppl) => seen.push(ppl));
      assert.equal(got.chunks, Math.floor(tokens.length / 64));
      assert.equal(got.scored, got.chunks * 31);
      assert.ok(got.chunks >= 5, `${got.chunks} chunks`);
      assert.ok(Object.is(got.ppl, want.ppl), `ppl ${got.ppl}, token by token ${want.ppl}`);
      assert.ok(Object.is(got.stderr, want.stderr), `stderr ${got.stderr} vs ${want.stderr}`);
      assert.deepEqual(got.perChunk, want.perChunk);
      assert.deepEqual(seen, want.perChunk);
    } finally {
      openKernels({ threads: 1 });
      await Deno.remove(dir, { recursive: true });
    }
  },
});
