// Generates tests/fixtures/llamacpp/: what llama.cpp (through node-llama-cpp) predicts on the
// SmolLM2-135M-Instruct Q8_0 GGUF that scripts/derive-models.ts derives, for
// tests/llamacpp_agreement_test.ts to compare cflow against.
//
//   teacher_forced.json  the tokens of teacher_forced.txt (llama.cpp's tokenizer; SmolLM2 adds no
//                        BOS) and, at every position, llama.cpp's top-1 next token, its
//                        probability, the runner-up and the logit margin top-1 minus runner-up;
//                        also how llama.cpp agrees with itself under other settings (the noise
//                        floor the test's thresholds rest on)
//   greedy.json          five prompts, their token ids and llama.cpp's greedy (temperature 0)
//                        continuation of 32 tokens, with the margin at each step
//
// The reference runs decode one token per evaluation, as cflow's forward() does (teacher-forced
// positions and greedy prompts alike), flash attention off, f16 KV cache, 2 threads.
//
// Run once by hand; neither CI nor the tests run it (Node and npm are only needed to regenerate):
//
//   bash scripts/fetch-models.sh smollm2
//   ./dev run --allow-read --allow-write --allow-ffi --allow-env scripts/derive-models.ts smollm2-q8_0
//   npm install --prefix /tmp/nlc-agree --omit=optional node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1
//   NLC_DIR=/tmp/nlc-agree node tests/reference/gen_llamacpp_smollm2.mjs
//   ./dev fmt tests/fixtures/llamacpp
//
// Never install node-llama-cpp into the repository. The prebuilt CPU binaries are used
// (`build: "never"`, `gpu: false`). Margins are ln(p1 / p2) from the full-vocabulary softmax
// node-llama-cpp returns with temperature 0 (the greedy sampler leaves the logits untouched), so
// they equal the raw logit differences to within float32 rounding.

import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";

const NLC_VERSION = "3.21.1";
const GGUF_SHA256 = "0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387";
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const GGUF = path.join(ROOT, "cache/models/smollm2-135m-instruct.Q8_0.gguf");
const OUT = path.join(ROOT, "tests/fixtures/llamacpp");
const GREEDY_TOKENS = 32;
const CONTEXT = {
  contextSize: 2048,
  batchSize: 512,
  threads: 2,
  flashAttention: false,
  // KV cache: llama.cpp's default, f16 keys and values.
};

const SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
const PROMPTS = [
  { name: "prose", specialTokens: false, text: "The history of the printing press begins" },
  { name: "code", specialTokens: false, text: "def is_prime(n):\n" },
  {
    name: "chat",
    specialTokens: true,
    text: `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\n` +
      "What is the boiling point of water at sea level?<|im_end|>\n<|im_start|>assistant\n",
  },
  {
    name: "list",
    specialTokens: false,
    text: "Here is a list of the planets in order from the Sun:\n1.",
  },
  { name: "french", specialTokens: false, text: "La capitale de la France est" },
];

/** 64-bit FNV-1a over the little-endian u32 bytes of the ids (same as the Deno test's). */
function fnv1a64(ids) {
  let h = 0xcbf29ce484222325n;
  for (const id of ids) {
    for (let b = 0; b < 4; b++) {
      h ^= BigInt((id >>> (8 * b)) & 0xff);
      h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
    }
  }
  return `fnv1a64:${h.toString(16).padStart(16, "0")}`;
}

const round = (x, digits) => Number(x.toFixed(digits));
const ln = (a, b) => (b > 0 ? Math.log(a / b) : 1000);

/**
 * Top-1, its probability, runner-up and ln(p1/p2) from a sorted probability map. With `ref` (the
 * reference run's top-1 and runner-up at this position) also this run's margin between those two
 * (`refMargin`) and between its own top-1 and the reference's (`splitMargin`).
 */
function summarize(next, ref) {
  const it = next.probabilities.entries();
  const [t1, p1] = it.next().value;
  const [t2, p2] = it.next().value;
  if (next.token !== t1) throw new Error(`greedy token ${next.token} is not the top-1 ${t1}`);
  const row = { top1: t1, top2: t2, p1: round(p1, 6), margin: round(ln(p1, p2), 5) };
  if (ref !== undefined) {
    const p = (t) => next.probabilities.get(t) ?? 0;
    row.refMargin = ln(p(ref.top1), p(ref.top2));
    row.splitMargin = ln(p1, p(ref.top1));
  }
  return row;
}

const GENERATE = {
  generateNext: { token: true, probabilities: true, options: { temperature: 0 } },
};

/** Every position's next-token summary, feeding `chunk` tokens per evaluation. */
async function teacherForced(seq, tokens, chunk, ref) {
  await seq.clearHistory();
  const rows = [];
  for (let i = 0; i < tokens.length; i += chunk) {
    const input = tokens.slice(i, i + chunk).map((t) => [t, GENERATE]);
    const out = await seq.controlledEvaluate(input);
    for (let j = 0; j < input.length; j++) rows.push(summarize(out[j].next, ref?.[i + j]));
  }
  return rows;
}

/** How a second llama.cpp configuration's teacher-forced pass compares with the reference's. */
function compare(ref, rows) {
  let agree = 0;
  let sum = 0;
  let max = 0;
  let maxSplit = 0;
  let maxRefAtSplit = 0;
  rows.forEach((r, i) => {
    const d = Math.abs(r.refMargin - ref[i].margin);
    sum += d;
    max = Math.max(max, d);
    if (r.top1 === ref[i].top1) {
      agree++;
    } else {
      maxSplit = Math.max(maxSplit, r.splitMargin);
      maxRefAtSplit = Math.max(maxRefAtSplit, ref[i].margin);
    }
  });
  return {
    agree,
    positions: rows.length,
    mean_abs_margin_delta: round(sum / rows.length, 4),
    max_abs_margin_delta: round(max, 4),
    max_own_margin_at_split: round(maxSplit, 4),
    max_reference_margin_at_split: round(maxRefAtSplit, 4),
  };
}

/**
 * A greedy continuation of `promptIds`; `oneByOne` feeds the prompt a token at a time. With
 * `refIds` (a reference continuation) each step also has `splitMargin`, this run's margin
 * between its token and the reference's.
 */
async function greedy(seq, promptIds, oneByOne = false, refIds = undefined) {
  await seq.clearHistory();
  if (oneByOne) {
    for (const t of promptIds.slice(0, -1)) await seq.controlledEvaluate([t]);
  }
  const steps = [];
  const prompt = oneByOne ? promptIds.slice(-1) : promptIds;
  let input = prompt.map((t, i) => (i === prompt.length - 1 ? [t, GENERATE] : t));
  while (steps.length < GREEDY_TOKENS) {
    const out = await seq.controlledEvaluate(input);
    const k = steps.length;
    const ref = refIds === undefined ? undefined : { top1: refIds[k], top2: refIds[k] };
    const step = summarize(out[input.length - 1].next, ref);
    steps.push(step);
    input = [[step.top1, GENERATE]];
  }
  return steps;
}

/** Where a second configuration's greedy continuation leaves the reference's, if it does. */
function greedySplit(ref, steps) {
  const i = steps.findIndex((s, k) => s.top1 !== ref.generated_ids[k]);
  if (i < 0) return { name: ref.name, identical: true };
  return {
    name: ref.name,
    identical: false,
    step: i,
    tokens: [steps[i].top1, ref.generated_ids[i]],
    own_margin: round(steps[i].splitMargin, 5),
    reference_margin: ref.margin[i],
    reference_runner_up: ref.top2[i],
  };
}

function readVersion(dir, pkg) {
  return JSON.parse(fs.readFileSync(path.join(dir, "node_modules", pkg, "package.json"), "utf8"))
    .version;
}

async function main() {
  const dir = process.env.NLC_DIR;
  if (!dir) throw new Error("set NLC_DIR to the folder node-llama-cpp was installed into");
  for (const pkg of ["node-llama-cpp", "@node-llama-cpp/linux-x64"]) {
    const v = readVersion(dir, pkg);
    if (v !== NLC_VERSION) throw new Error(`${pkg} is ${v}, expected ${NLC_VERSION}`);
  }
  const sha = createHash("sha256").update(fs.readFileSync(GGUF)).digest("hex");
  if (sha !== GGUF_SHA256) throw new Error(`${GGUF}: sha256 ${sha}, expected ${GGUF_SHA256}`);

  const { getLlama } = await import(
    pathToFileURL(path.join(dir, "node_modules/node-llama-cpp/dist/index.js")).href
  );
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
  console.error(`llama.cpp ${JSON.stringify(llama.llamaCppRelease)}, ${llama.buildType}`);
  console.error(llama.systemInfo);
  const model = await llama.loadModel({ modelPath: GGUF, gpuLayers: 0 });
  const bos = model.tokens.shouldPrependBosToken;
  const text = fs.readFileSync(path.join(OUT, "teacher_forced.txt"), "utf8");
  // model.tokenize adds no BOS; SmolLM2's GGUF says tokenizer.ggml.add_bos_token = false.
  if (bos) throw new Error("this model wants a BOS token; the fixture format assumes none");
  const tokens = model.tokenize(text, false);
  if (tokens.length < 1000) throw new Error(`only ${tokens.length} tokens; need >= 1000`);

  const context = await model.createContext(CONTEXT);
  const seq = context.getSequence();
  const seconds = (t0) => ((performance.now() - t0) / 1000).toFixed(1);
  let t0 = performance.now();
  const rows = await teacherForced(seq, tokens, 1);
  console.error(`teacher-forced: ${tokens.length} positions in ${seconds(t0)} s`);
  const greedyOut = [];
  for (const p of PROMPTS) {
    const ids = model.tokenize(p.text, p.specialTokens);
    const steps = await greedy(seq, ids, true);
    const generated = steps.map((s) => s.top1);
    const minMargin = Math.min(...steps.map((s) => s.margin));
    console.error(
      `greedy ${p.name}: ${ids.length} prompt tokens, min margin ${minMargin}, ${
        JSON.stringify(model.detokenize(generated, true))
      }`,
    );
    greedyOut.push({
      name: p.name,
      text: p.text,
      special_tokens: p.specialTokens,
      prompt_ids: ids,
      generated_ids: generated,
      generated_text: model.detokenize(generated, true),
      fnv1a64: fnv1a64(generated),
      top2: steps.map((s) => s.top2),
      p1: steps.map((s) => s.p1),
      margin: steps.map((s) => s.margin),
    });
  }

  // llama.cpp against itself, to measure how far results move under a change of summation
  // order alone: the same pass in batches of 32 (matrix-matrix kernels instead of
  // matrix-vector), and with flash attention (f16 accumulation in the CPU kernel); greedy
  // continuations with the prompt evaluated as one batch (llama.cpp's usual way), and with
  // flash attention. Saved in teacher_forced.json as llama_cpp_self_agreement.
  t0 = performance.now();
  const selfAgreement = {
    teacher_forced_batch_32: compare(rows, await teacherForced(seq, tokens, 32, rows)),
    greedy_prompt_batched: [],
    greedy_flash_attention: [],
  };
  for (const p of greedyOut) {
    selfAgreement.greedy_prompt_batched.push(
      greedySplit(p, await greedy(seq, p.prompt_ids, false, p.generated_ids)),
    );
  }
  await context.dispose();
  const fa = await model.createContext({ ...CONTEXT, flashAttention: true });
  const faSeq = fa.getSequence();
  selfAgreement.teacher_forced_flash_attention = compare(
    rows,
    await teacherForced(faSeq, tokens, 1, rows),
  );
  for (const p of greedyOut) {
    selfAgreement.greedy_flash_attention.push(
      greedySplit(p, await greedy(faSeq, p.prompt_ids, true, p.generated_ids)),
    );
  }
  await fa.dispose();
  console.error(`self-agreement (${seconds(t0)} s): ${JSON.stringify(selfAgreement, null, 1)}`);

  const common = {
    generator: "tests/reference/gen_llamacpp_smollm2.mjs",
    node_llama_cpp: NLC_VERSION,
    llama_cpp: llama.llamaCppRelease,
    gguf: "cache/models/smollm2-135m-instruct.Q8_0.gguf",
    gguf_sha256: GGUF_SHA256,
    context: { ...CONTEXT, kv_cache: "f16" },
  };
  fs.writeFileSync(
    path.join(OUT, "teacher_forced.json"),
    JSON.stringify({
      ...common,
      text_file: "teacher_forced.txt",
      batch: 1,
      llama_cpp_self_agreement: selfAgreement,
      tokens,
      top1: rows.map((r) => r.top1),
      top2: rows.map((r) => r.top2),
      p1: rows.map((r) => r.p1),
      margin: rows.map((r) => r.margin),
    }) + "\n",
  );
  fs.writeFileSync(
    path.join(OUT, "greedy.json"),
    JSON.stringify({ ...common, tokens: GREEDY_TOKENS, prompts: greedyOut }) + "\n",
  );
  await model.dispose();
  await llama.dispose();
}

await main();
