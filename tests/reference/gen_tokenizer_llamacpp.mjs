#!/usr/bin/env node
// Generate tests/fixtures/tokenizer/llamacpp_ids.json: the token ids llama.cpp itself gives every
// chunk of tests/fixtures/tokenizer/corpus.json, for the SmolLM2, Gemma 3 and Qwen2.5-Coder-0.5B
// (`tokenizer.ggml.pre = qwen2`) GGUFs in cache/models/ (fetch them with
// `bash scripts/fetch-models.sh smollm2 gemma3 qwen05b`).
//
// llama.cpp runs through the npm package node-llama-cpp (prebuilt CPU binaries), installed into a
// throwaway folder, never into this repository:
//
//   mkdir -p /tmp/nlc && cd /tmp/nlc && npm init -y >/dev/null &&
//     npm i --omit=optional node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1
//   NLC=/tmp/nlc node tests/reference/gen_tokenizer_llamacpp.mjs
//
// (`bash scripts/install-llamacpp.sh` makes the same install in the git-ignored .tools/llamacpp/;
// `NLC=.tools/llamacpp` then uses it.)
//
// `model.tokenize(text, specialTokens)` is llama.cpp's common_tokenize(vocab, text,
// add_special = false, parse_special = specialTokens). Each chunk records `plain`
// (parse_special off) and, only where it differs, `special` (parse_special on). Ids are the base64
// of their unsigned LEB128 varints (tokenizer/_test_utils.ts unvarint reads them).

import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const FIX = join(ROOT, "tests", "fixtures", "tokenizer");
const NLC = resolve(process.env.NLC ?? "/tmp/nlc");
const MODELS = {
  smollm2: "cache/models/smollm2-135m-instruct.Q4_1.gguf",
  gemma3: "cache/models/gemma-3-270m-q4_k_m.gguf",
  qwen05b: "cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
};

function b64(ids) {
  const bytes = [];
  for (let id of ids) {
    while (id >= 0x80) {
      bytes.push((id & 0x7f) | 0x80);
      id >>>= 7;
    }
    bytes.push(id);
  }
  return Buffer.from(bytes).toString("base64");
}

function sha256File(path) {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

const nlcPkg = JSON.parse(
  readFileSync(join(NLC, "node_modules", "node-llama-cpp", "package.json"), "utf8"),
);
const llamaInfo = JSON.parse(
  readFileSync(join(NLC, "node_modules", "node-llama-cpp", "llama", "llama.cpp.info.json"), "utf8"),
);
const { getLlama } = await import(join(NLC, "node_modules", "node-llama-cpp", "dist", "index.js"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });

const corpus = JSON.parse(readFileSync(join(FIX, "corpus.json"), "utf8"));
const out = {
  generator: "tests/reference/gen_tokenizer_llamacpp.mjs",
  node_llama_cpp: nlcPkg.version,
  llama_cpp: `${llamaInfo.llamaCppGithubRepo}@${llamaInfo.tag}`,
  models: {},
};
for (const [name, rel] of Object.entries(MODELS)) {
  const path = join(ROOT, rel);
  const model = await llama.loadModel({ modelPath: path, vocabOnly: true });
  const chunks = {};
  let tokens = 0;
  const t0 = performance.now();
  for (const { name: chunk, text } of corpus.chunks) {
    const plain = model.tokenize(text, false);
    const special = model.tokenize(text, true);
    tokens += plain.length;
    const entry = { plain: b64(plain) };
    if (special.length !== plain.length || special.some((t, i) => t !== plain[i])) {
      entry.special = b64(special);
    }
    chunks[chunk] = entry;
  }
  const ms = performance.now() - t0;
  out.models[name] = { file: rel, sha256: sha256File(path), tokens, chunks };
  console.log(
    `${name}: ${tokens} tokens over ${corpus.chunks.length} chunks (${ms.toFixed(0)} ms)`,
  );
  await model.dispose();
}
writeFileSync(join(FIX, "llamacpp_ids.json"), JSON.stringify(out, null, 0) + "\n");
// The repository's format check covers JSON.
execFileSync(join(ROOT, "dev"), ["fmt", join(FIX, "llamacpp_ids.json")], {
  cwd: ROOT,
  stdio: "inherit",
});
console.log(`wrote ${join(FIX, "llamacpp_ids.json")}`);
