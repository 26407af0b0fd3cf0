/**
 * The committed checkpoints under tests/fixtures/hf/ (saved by transformers, see its README):
 * parse them, check every shape against config.json, and read every tensor back, comparing with
 * the values the generator recorded from the same files with the Python safetensors package.
 */

import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import expected from "../../tests/fixtures/hf/expected.json" with { type: "json" };
import { type HfCheckpoint, openHfCheckpoint, type ShardOpener } from "./open_hf_checkpoint.ts";
import type { HfConfig } from "./parse_hf_config.ts";

const ROOT = new URL("../../tests/fixtures/hf/", import.meta.url).pathname;
const canRead = Deno.permissions.querySync({ name: "read", path: ROOT }).state === "granted";
const canMap = canRead && Deno.permissions.querySync({ name: "ffi" }).state === "granted";

/** Reads each (small) shard into memory: works without FFI. */
const readWhole: ShardOpener = (path) => ({
  source: bytesSource(path, Deno.readFileSync(path)),
  close() {},
});

/** The tensor names and shapes transformers gives a Llama / Qwen2 decoder with this config. */
function expectedShapes(c: HfConfig, qkvBias: boolean): Map<string, number[]> {
  const h = c.hiddenSize, q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim;
  const m = new Map<string, number[]>([["model.embed_tokens.weight", [c.vocabSize, h]], [
    "model.norm.weight",
    [h],
  ]]);
  if (!c.tieWordEmbeddings) m.set("lm_head.weight", [c.vocabSize, h]);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}.`;
    m.set(`${p}input_layernorm.weight`, [h]);
    m.set(`${p}post_attention_layernorm.weight`, [h]);
    m.set(`${p}self_attn.q_proj.weight`, [q, h]);
    m.set(`${p}self_attn.k_proj.weight`, [kv, h]);
    m.set(`${p}self_attn.v_proj.weight`, [kv, h]);
    m.set(`${p}self_attn.o_proj.weight`, [h, q]);
    if (qkvBias) {
      m.set(`${p}self_attn.q_proj.bias`, [q]);
      m.set(`${p}self_attn.k_proj.bias`, [kv]);
      m.set(`${p}self_attn.v_proj.bias`, [kv]);
    }
    m.set(`${p}mlp.gate_proj.weight`, [c.intermediateSize, h]);
    m.set(`${p}mlp.up_proj.weight`, [c.intermediateSize, h]);
    m.set(`${p}mlp.down_proj.weight`, [h, c.intermediateSize]);
  }
  return m;
}

async function sha256Hex(values: Float32Array<ArrayBuffer>): Promise<string> {
  // Little-endian f32 bytes, as numpy's "<f4" tobytes() (the host is little-endian).
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
  );
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

type Model = keyof typeof expected.models;

async function checkAgainstGenerator(ckpt: HfCheckpoint, model: Model): Promise<void> {
  const want = expected.models[model].tensors as Record<
    string,
    {
      shard: string;
      dtype: string;
      shape: number[];
      first4: number[];
      sum: number;
      f32_sha256: string;
    }
  >;
  assert.deepEqual([...ckpt.tensors.keys()].sort(), Object.keys(want).sort());
  for (const [name, w] of Object.entries(want)) {
    const ref = ckpt.tensor(name);
    assert.equal(ref.shard.file, w.shard, name);
    assert.equal(ref.info.dtype, w.dtype, name);
    assert.deepEqual(ref.info.shape, w.shape, name);
    const values = ckpt.readF32(name);
    assert.equal(values.length, w.shape.reduce((a, b) => a * b, 1), name);
    assert.deepEqual([...values.slice(0, 4)], w.first4, `${name}: first values`);
    let sum = 0;
    for (const v of values) sum += v;
    assert.ok(
      Math.abs(sum - w.sum) <= 1e-9 * Math.max(1, Math.abs(w.sum)),
      `${name}: sum ${sum} vs ${w.sum}`,
    );
    assert.equal(await sha256Hex(values), w.f32_sha256, `${name}: every value, bit for bit`);
    // Row-range reads agree with the whole tensor.
    const rows = w.shape[0];
    if (w.shape.length === 2 && rows > 2) {
      const cols = w.shape[1];
      assert.deepEqual(
        ckpt.readF32(name, 1, 2),
        values.slice(cols, 3 * cols),
        `${name}: rows 1..3`,
      );
      assert.deepEqual(
        ckpt.readF32(name, rows - 1),
        values.slice((rows - 1) * cols),
        `${name}: last row`,
      );
    }
  }
}

async function checkFileHashes(model: Model): Promise<void> {
  for (const [file, info] of Object.entries(expected.models[model].files)) {
    const bytes = await Deno.readFile(`${ROOT}${model}/${file}`);
    assert.equal(bytes.length, info.bytes, file);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    assert.equal(
      [...digest].map((b) => b.toString(16).padStart(2, "0")).join(""),
      info.sha256,
      file,
    );
  }
}

Deno.test({
  name: "fixture llama: one bf16 model.safetensors, shapes match config.json, every value matches",
  ignore: !canRead,
  async fn() {
    await checkFileHashes("llama");
    using ckpt = openHfCheckpoint(`${ROOT}llama`, { open: readWhole });
    const c = ckpt.config;
    assert.equal(c.family, "llama");
    assert.equal(c.architecture, "LlamaForCausalLM");
    assert.deepEqual(
      [
        c.hiddenSize,
        c.numLayers,
        c.numHeads,
        c.numKvHeads,
        c.headDim,
        c.intermediateSize,
        c.vocabSize,
      ],
      [64, 2, 4, 2, 16, 96, 320],
    );
    assert.equal(c.tieWordEmbeddings, false);
    assert.equal(c.dtype, "bfloat16");
    assert.equal(c.rmsNormEps, 1e-5);
    assert.equal(c.ropeTheta, 10000);
    assert.equal(ckpt.files.index, null);
    assert.equal(ckpt.files.generationConfig, `${ROOT}llama/generation_config.json`);
    assert.equal(ckpt.files.tokenizerJson, null);
    assert.deepEqual(ckpt.shards.map((s) => s.file), ["model.safetensors"]);
    assert.deepEqual({ ...ckpt.shards[0].header.metadata }, { format: "pt" });
    const shapes = expectedShapes(c, false);
    assert.deepEqual([...ckpt.tensors.keys()].sort(), [...shapes.keys()].sort());
    for (const [name, shape] of shapes) {
      assert.deepEqual(ckpt.tensor(name).info.shape, shape, name);
      assert.equal(ckpt.tensor(name).info.dtype, "BF16", name);
    }
    await checkAgainstGenerator(ckpt, "llama");
  },
});

Deno.test({
  name:
    "fixture qwen2: three f16 shards with an index, tied embeddings, q/k/v biases, every value matches",
  ignore: !canRead,
  async fn() {
    await checkFileHashes("qwen2");
    using ckpt = openHfCheckpoint(`${ROOT}qwen2`, { open: readWhole });
    const c = ckpt.config;
    assert.equal(c.family, "qwen2");
    assert.deepEqual(
      [
        c.hiddenSize,
        c.numLayers,
        c.numHeads,
        c.numKvHeads,
        c.headDim,
        c.intermediateSize,
        c.vocabSize,
      ],
      [32, 2, 4, 1, 8, 64, 320],
    );
    assert.equal(c.tieWordEmbeddings, true);
    assert.equal(c.slidingWindow, null);
    assert.equal(c.dtype, "float16");
    assert.equal(ckpt.files.index, `${ROOT}qwen2/model.safetensors.index.json`);
    assert.deepEqual(ckpt.shards.map((s) => s.file), [
      "model-00001-of-00003.safetensors",
      "model-00002-of-00003.safetensors",
      "model-00003-of-00003.safetensors",
    ]);
    const shapes = expectedShapes(c, true);
    assert.deepEqual([...ckpt.tensors.keys()].sort(), [...shapes.keys()].sort());
    assert.equal(ckpt.tensors.has("lm_head.weight"), false, "tied: no lm_head.weight saved");
    for (const [name, shape] of shapes) {
      assert.deepEqual(ckpt.tensor(name).info.shape, shape, name);
      assert.equal(ckpt.tensor(name).info.dtype, "F16", name);
    }
    await checkAgainstGenerator(ckpt, "qwen2");
  },
});

Deno.test({
  name: "fixtures through mapFile (the default opener) read the same values",
  ignore: !canMap,
  async fn() {
    for (const model of ["llama", "qwen2"] as const) {
      using ckpt = openHfCheckpoint(`${ROOT}${model}`);
      await checkAgainstGenerator(ckpt, model);
      ckpt.close();
      assert.throws(() => ckpt.readF32("model.norm.weight"), TypeError);
    }
  },
});
