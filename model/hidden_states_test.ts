/**
 * `Transformer.hiddenStates`: the final hidden states (after the output norm), checked against
 * references nobody here wrote. On the random-init fixtures of tests/fixtures/hf_logits (made by
 * Hugging Face transformers, tests/reference/gen_hf_logits.py), every row's hidden state times
 * the output matrix read straight from the checkpoint's safetensors gives transformers' logits; on
 * SmolLM2 (real weights), times the embedding matrix dequantized from the GGUF by the ggml
 * reference code, it gives the logits cflow's own head computes. Batching, the async path and
 * the sequence written do not change a bit.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { dequantizeRow } from "../formats/ggml/mod.ts";
import { parseGguf, readTensorBytes, tensorByName } from "../formats/gguf/mod.ts";
import { resolveModel } from "../runtime/model_store.ts";
import { openModel } from "../runtime/open_model.ts";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE } from "../tests/util/test_models.ts";
import { Transformer } from "./transformer.ts";

openKernels({ threads: 1 });

const FIXTURES = new URL("../tests/fixtures/hf_logits/", import.meta.url).pathname;
const MODELS = ["llama_gqa_untied", "llama_gqa_tied", "qwen2", "qwen3", "gemma3"];

/** One f32 tensor of a safetensors file, read here with no help from formats/. */
function safetensor(path: string, name: string): { shape: number[]; data: Float32Array } {
  const bytes = Deno.readFileSync(path);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const t = header[name];
  assert.equal(t.dtype, "F32", name);
  const [from, to] = t.data_offsets as [number, number];
  const data = new Float32Array(bytes.slice(8 + n + from, 8 + n + to).buffer);
  return { shape: t.shape, data };
}

/** W h in f64, for a row-major `rows` x `cols` W. */
function project(w: Float32Array, rows: number, cols: number, h: Float32Array): Float64Array {
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += w[r * cols + c] * h[c];
    out[r] = s;
  }
  return out;
}

function argmax(v: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

function sameRows(a: Float32Array[], b: Float32Array[], what: string): void {
  assert.equal(a.length, b.length, what);
  a.forEach((row, i) => {
    for (let j = 0; j < row.length; j++) {
      if (!Object.is(row[j], b[i][j])) assert.fail(`${what}: row ${i} value ${j} differs`);
    }
  });
}

for (const name of MODELS) {
  Deno.test(`${name}: hidden states times the checkpoint's output matrix give transformers' logits`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "cflow-hidden-" });
    try {
      const out = `${dir}/${name}.cflow`;
      await convertFile(`${FIXTURES}${name}`, out, {
        format: "cflow",
        quant: "f32",
        rule: "ggml",
        measureError: false,
      });
      const ref = JSON.parse(await Deno.readTextFile(`${FIXTURES}${name}/logits.json`));
      const ids: number[] = ref.input_ids;
      const want = new Float32Array(
        Uint8Array.from(atob(ref.logits_f32_b64), (c) => c.charCodeAt(0)).buffer,
      );
      const config = JSON.parse(await Deno.readTextFile(`${FIXTURES}${name}/config.json`));
      const st = `${FIXTURES}${name}/model.safetensors`;
      const w = safetensor(
        st,
        config.tie_word_embeddings === false ? "lm_head.weight" : "model.embed_tokens.weight",
      );
      const [vocab, hidden] = w.shape;
      const cap: number = config.final_logit_softcapping ?? 0;

      // Batches of 3 rows, so that the ids run as several batches; two sequences.
      using model = Transformer.load(out, {
        contextLength: 64,
        kvCache: "f32",
        batch: 3,
        sequences: 2,
      });
      assert.equal(model.config.hidden, hidden);
      const rows = model.hiddenStates(ids);
      assert.equal(rows.length, ids.length);
      let maxRel = 0;
      rows.forEach((h, pos) => {
        assert.equal(h.length, hidden);
        const got = project(w.data, vocab, hidden, h).map((x) =>
          cap > 0 ? cap * Math.tanh(x / cap) : x
        );
        const row = want.subarray(pos * vocab, (pos + 1) * vocab);
        let scale = 0, delta = 0;
        for (let i = 0; i < vocab; i++) {
          scale = Math.max(scale, Math.abs(row[i]));
          delta = Math.max(delta, Math.abs(got[i] - row[i]));
        }
        maxRel = Math.max(maxRel, delta / scale);
        assert.equal(argmax(got), argmax(row), `position ${pos}: top-1`);
      });
      console.log(`${name}: max relative |delta logit| ${maxRel.toExponential(2)}`);
      assert.ok(maxRel <= 1e-5, `max relative |delta| ${maxRel}`);

      // The async path, and sequence 1, give the same bits.
      const again: Float32Array[] = [];
      await model.hiddenStatesAsync(ids, (h, i) => {
        assert.equal(i, again.length);
        again.push(h.slice());
      }, { sequence: 1 });
      sameRows(again, rows, "async on sequence 1");
      // So does a batch of one row at a time (a prompt's arithmetic does not depend on batching).
      using single = Transformer.load(out, { contextLength: 64, kvCache: "f32", batch: 1 });
      sameRows(single.hiddenStates(ids), rows, "batch 1");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("hiddenStates refuses what it cannot run, naming it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-hidden-" });
  try {
    const out = `${dir}/m.cflow`;
    await convertFile(`${FIXTURES}qwen2`, out, {
      format: "cflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
    });
    using model = Transformer.load(out, { contextLength: 8 });
    assert.throws(() => model.hiddenStates([]), /at least one token/);
    assert.throws(() => model.hiddenStates([1, 1e9]), /token 1000000000/);
    assert.throws(() => model.hiddenStates(new Array(9).fill(1)), /outside the context of 8/);
    assert.throws(() => model.hiddenStates([1], { sequence: 1 }), /sequence 1 is not in/);
    const stop = new AbortController();
    stop.abort(new Error("stopped"));
    await assert.rejects(
      model.hiddenStatesAsync([1, 2], () => {}, { signal: stop.signal }),
      /stopped/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "SmolLM2: the last hidden state times the GGUF's embeddings gives the head's logits",
  ignore: !smollm2Present,
  async fn() {
    const path = await resolveModel(SMOLLM2_GGUF, {
      cache: `${TEST_CACHE}/converted`,
      quant: "q4_0",
    });
    const opened = openModel(path, { contextLength: 128, batch: 8 });
    using model = opened.model;
    const ids = opened.tokenizer.encode(
      "The capital of France is Paris. The capital of Germany is",
    );
    assert.ok(ids.length > 8); // several batches
    const bytes = await Deno.readFile(SMOLLM2_GGUF);
    const src = bytesSource("smollm2.gguf", bytes);
    const gguf = parseGguf(src);
    const embd = tensorByName(gguf, "token_embd.weight")!;
    const w = dequantizeRow(embd.type, readTensorBytes(src, embd), embd.elements);
    const [hidden, vocab] = embd.dims;
    assert.equal(hidden, model.config.hidden);
    const logits: Float32Array[] = [];
    model.prefillAll(ids, 0, (l) => logits.push(l.slice()));
    const rows = model.hiddenStates(ids);
    let agree = 0;
    let worst = 1;
    rows.forEach((h, i) => {
      const got = project(w, vocab, hidden, h);
      worst = Math.min(worst, cosine(got, logits[i]));
      if (argmax(got) === argmax(logits[i])) agree++;
    });
    console.log(`SmolLM2: top-1 ${agree}/${ids.length}, lowest cosine ${worst.toFixed(5)}`);
    // The head computes with the converted (Q4_0) weights and a Q8_0 input, the reference with
    // the GGUF's own weights in f64: close, not equal.
    assert.ok(worst > 0.99, `cosine ${worst}`);
    assert.ok(agree >= ids.length - 1, `top-1 agrees at ${agree} of ${ids.length}`);
    const last = logits[ids.length - 1];
    assert.equal(argmax(project(w, vocab, hidden, rows[ids.length - 1])), argmax(last));
  },
});
