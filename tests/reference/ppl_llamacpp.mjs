// Perplexity of a GGUF model over a text file computed by llama.cpp (through node-llama-cpp), the
// way llama.cpp's `llama-perplexity` computes it and `./cflow perplexity` (runtime/perplexity.ts)
// mirrors it, so the two can be set side by side on the same text:
//
//   - the text is tokenized by llama.cpp (`model.tokenize`, special-token text not parsed), with a
//     BOS token prepended only when the model asks for one (llama-perplexity tokenizes with
//     add_special = true);
//   - the tokens are cut into floor(n / ctx) chunks of `ctx`; each chunk is evaluated from an
//     empty cache in one batch of `ctx` tokens, its first token replaced by BOS when the model
//     adds one;
//   - the negative log-likelihood of the next token is summed over positions ctx/2 .. ctx-2 of
//     every chunk; ppl = exp(mean), and the +/- is llama-perplexity's estimate,
//     ppl * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)).
//
// The per-position probability of the target token comes from node-llama-cpp's full-vocabulary
// distribution (`generateNext.probabilities` with temperature 0: the greedy sampler leaves the
// logits untouched, and the addon applies a float32 softmax over the whole vocabulary). A target
// missing from the map or with probability 0 (float32 underflow) is an error. The addon sums the
// softmax denominator in float32, largest term first, where llama-perplexity sums it in double;
// so each distribution is renormalized here by its sum taken in double (p / sum(p)), which puts
// the normalization back to within float32 rounding of the individual terms. `ppl_float_sum` is
// the value without that correction.
//
// Run by hand; neither CI nor the tests run it. Never install node-llama-cpp into the repository:
//
//   npm install --prefix /tmp/nlc-agree --omit=optional node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1
//   NLC_DIR=/tmp/nlc-agree node tests/reference/ppl_llamacpp.mjs \
//     --model cache/models/smollm2-135m-instruct.Q4_1.gguf --file text.txt [--ctx 512] \
//     [--threads 2] [--flash-attention] [--kv-cache f16|f32|q8_0] [--tokens-out ids.json] [--json]
//
// On a 151,936-token vocabulary (Qwen2.5) the per-position probability maps outgrow Node's default
// heap: run it as `node --max-old-space-size=12000 tests/reference/ppl_llamacpp.mjs ...`.
//
// The prebuilt CPU binaries are used (`build: "never"`, `gpu: false`); f16 KV cache (llama.cpp's
// default); flash attention off unless --flash-attention (llama-perplexity's own default is
// "auto", which turns it on for the CPU backend).

import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const NLC_VERSION = "3.21.1";

function readVersion(dir, pkg) {
  return JSON.parse(fs.readFileSync(path.join(dir, "node_modules", pkg, "package.json"), "utf8"))
    .version;
}

/** 64-bit FNV-1a over the little-endian u32 bytes of the ids (as in the other references). */
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

async function main() {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      file: { type: "string" },
      ctx: { type: "string", default: "512" },
      threads: { type: "string", default: "2" },
      "flash-attention": { type: "boolean", default: false },
      "kv-cache": { type: "string", default: "f16" },
      "tokens-out": { type: "string" },
      json: { type: "boolean", default: false },
    },
  });
  if (!values.model || !values.file) throw new Error("--model GGUF and --file TEXT are required");
  const ctx = Number(values.ctx);
  const threads = Number(values.threads);
  if (!Number.isSafeInteger(ctx) || ctx < 4) throw new Error(`bad --ctx ${values.ctx}`);
  // llama.cpp's -ctk/-ctv: a quantized V cache needs flash attention there.
  const kvTypes = { f16: "F16", f32: "F32", q8_0: "Q8_0" };
  const kvType = kvTypes[values["kv-cache"]];
  if (kvType === undefined) {
    throw new Error(`bad --kv-cache ${values["kv-cache"]}: f16, f32 or q8_0`);
  }
  if (kvType === "Q8_0" && !values["flash-attention"]) {
    throw new Error("--kv-cache q8_0 needs --flash-attention (llama.cpp quantizes V only with it)");
  }

  const dir = process.env.NLC_DIR;
  if (!dir) throw new Error("set NLC_DIR to the folder node-llama-cpp was installed into");
  for (const pkg of ["node-llama-cpp", "@node-llama-cpp/linux-x64"]) {
    const v = readVersion(dir, pkg);
    if (v !== NLC_VERSION) throw new Error(`${pkg} is ${v}, expected ${NLC_VERSION}`);
  }
  const { getLlama } = await import(
    pathToFileURL(path.join(dir, "node_modules/node-llama-cpp/dist/index.js")).href
  );
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
  if (!values.json) console.error(`llama.cpp ${JSON.stringify(llama.llamaCppRelease)}`);
  const modelPath = path.resolve(values.model);
  const sha256 = createHash("sha256").update(fs.readFileSync(modelPath)).digest("hex");
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });

  const text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(values.file));
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : undefined;
  if (model.tokens.shouldPrependBosToken && (bos === null || bos === undefined)) {
    throw new Error("the model has no BOS id");
  }
  const textTokens = model.tokenize(text, false);
  const tokens = bos === undefined ? textTokens : [bos, ...textTokens];
  if (values["tokens-out"]) fs.writeFileSync(values["tokens-out"], JSON.stringify(tokens) + "\n");

  const chunks = Math.floor(tokens.length / ctx);
  if (chunks < 1) throw new Error(`${tokens.length} tokens is less than one chunk of ${ctx}`);
  const context = await model.createContext({
    contextSize: ctx,
    batchSize: ctx,
    threads,
    flashAttention: values["flash-attention"],
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  });
  const seq = context.getSequence();
  const score = { generateNext: { probabilities: true, options: { temperature: 0 } } };
  const first = Math.floor(ctx / 2);
  let nll = 0;
  let nll2 = 0;
  let nllRaw = 0;
  let count = 0;
  let maxCorrection = 0;
  const perChunk = [];
  const t0 = performance.now();
  for (let c = 0; c < chunks; c++) {
    const start = c * ctx;
    await seq.clearHistory();
    const input = [];
    for (let j = 0; j < ctx; j++) {
      const token = j === 0 && bos !== undefined ? bos : tokens[start + j];
      input.push(j >= first && j < ctx - 1 ? [token, score] : token);
    }
    const out = await seq.controlledEvaluate(input);
    for (let j = first; j < ctx - 1; j++) {
      const target = tokens[start + j + 1];
      const probs = out[j]?.next?.probabilities;
      if (probs === undefined) throw new Error(`chunk ${c} position ${j}: no probabilities`);
      const p = probs.get(target);
      if (!(p > 0)) throw new Error(`chunk ${c} position ${j}: target ${target} has p = ${p}`);
      let sum = 0;
      for (const q of probs.values()) sum += q;
      const correction = Math.log(sum);
      maxCorrection = Math.max(maxCorrection, Math.abs(correction));
      const v = -Math.log(p) + correction;
      nllRaw += -Math.log(p);
      nll += v;
      nll2 += v * v;
      count++;
    }
    perChunk.push(Math.exp(nll / count));
    if (!values.json) {
      console.error(`[${c + 1}/${chunks}] ppl ${perChunk[perChunk.length - 1].toFixed(4)}`);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const mean = nll / count;
  const variance = count > 1 ? (nll2 / count - mean * mean) / (count - 1) : 0;
  const ppl = Math.exp(mean);
  const stderr = ppl * Math.sqrt(Math.max(variance, 0));
  const result = {
    engine: "llama.cpp",
    node_llama_cpp: NLC_VERSION,
    llama_cpp: llama.llamaCppRelease,
    model: values.model,
    model_sha256: sha256,
    ppl,
    stderr,
    chunks,
    ctx,
    tokens: tokens.length,
    tokens_hash: fnv1a64(tokens),
    bos: bos ?? null,
    scored: count,
    ppl_float_sum: Math.exp(nllRaw / count),
    max_abs_log_renormalization: maxCorrection,
    seconds,
    threads,
    flash_attention: values["flash-attention"],
    kv_cache: "f16",
    per_chunk: perChunk,
  };
  if (values.json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(
      `perplexity ${ppl.toFixed(4)} +/- ${stderr.toFixed(4)} (${chunks} chunks of ${ctx}, ` +
        `${count} tokens scored, ${seconds.toFixed(1)} s)`,
    );
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

await main();
