/**
 * The Q8_0 KV cache (`--kv-cache q8_0`, llama.cpp's `-ctk q8_0 -ctv q8_0`)
 * on SmolLM2: batched rows of several sequences, and a prefix copied from
 * one sequence to another, give each sequence's own logits bit for bit; the
 * logits stay close to the f16 cache's (the cost of rounding K and V to 8
 * bits, measured as perplexity in docs/CORRECTNESS.md); and a model whose
 * head dimension is not a multiple of 32 is refused with a message that
 * says so.
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { kvBytesPerPosition, type StepRow, Transformer } from "../model/mod.ts";
import { openModel } from "../runtime/open_model.ts";
import { convertFixture } from "./util/fixture_model.ts";
import { isFile, sameBits } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const GGUF = `${ROOT}cache/models/smollm2-135m-instruct.Q4_0.gguf`;

/** English prose the model predicts well (written for this test). */
const PROSE = "The river runs through the middle of the old town. On market days the bridge is " +
  "crowded with people carrying baskets of bread, fruit and fish. In the evening the lamps are " +
  "lit one by one, and the water turns from grey to gold. Children play on the steps by the " +
  "church while their parents talk about the weather, the harvest and the price of wheat. When " +
  "the bells ring nine times, the shops close and the streets grow quiet again.";

/** SmolLM2 Q4_0 (head dimension 64) as a `.cflow` in a temporary folder, removed after `fn`. */
async function withModel(fn: (path: string) => void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cflow-kv-q8-" });
  try {
    const path = `${dir}/smollm2.cflow`;
    await convertFile(GGUF, path, {
      format: "cflow",
      quant: "q4_0",
      rule: "ggml",
      measureError: false,
    });
    fn(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Deterministic pseudo-text of sequence `s`. */
function text(s: number, n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + s * 104729 + 13) % (vocab - 1)));
}

Deno.test({
  name: "kv q8_0: batched sequences and a copied prefix give each sequence's own logits",
  ignore: !isFile(GGUF),
  fn: () =>
    withModel((MODEL) => {
      openKernels({ threads: 2 });
      try {
        using single = Transformer.load(MODEL, { contextLength: 64, kvCache: "q8_0" });
        const vocab = single.config.vocab;
        // Sequence 3 shares sequence 0's first 9 tokens: it starts from a copy of them.
        const texts = Array.from({ length: 4 }, (_, s) => text(s, 14 + 2 * s, vocab));
        texts[3] = [...texts[0].slice(0, 9), ...texts[3].slice(9)];
        const want = texts.map((tokens) => tokens.map((tok, p) => single.forward(tok, p).slice()));
        using batched = Transformer.load(MODEL, {
          contextLength: 64,
          sequences: 4,
          kvCache: "q8_0",
        });
        // Prompts of sequences 0-2 in one step: 3, 4 and 5 tokens, every row checked.
        const prompts: StepRow[] = [0, 1, 2].flatMap((s) =>
          texts[s].slice(0, 3 + s).map((token, p) => ({
            token,
            sequence: s,
            position: p,
            logits: true,
          }))
        );
        let checked = 0;
        batched.step(prompts, (logits, i) => {
          const r = prompts[i];
          sameBits(logits, want[r.sequence][r.position], `prompt row ${i}`);
          checked++;
        });
        const next = [3, 4, 5, 0];
        for (let d = 0; d < 12; d++) {
          if (d === 6) {
            // Sequence 0 holds 9 positions by now; sequence 3 takes a copy of them.
            batched.copySequence(0, 3, 9);
            next[3] = 9;
          }
          const rows: StepRow[] = [];
          for (let s = 0; s < 4; s++) {
            if (next[s] === 0 || next[s] >= texts[s].length) continue;
            rows.push({ token: texts[s][next[s]], sequence: s, position: next[s], logits: true });
            next[s]++;
          }
          if (d % 2 === 1) rows.reverse();
          batched.step(rows, (logits, i) => {
            const r = rows[i];
            sameBits(logits, want[r.sequence][r.position], `decode ${d} row ${i}`);
            checked++;
          });
        }
        assert.ok(next[3] > 9, "sequence 3 decoded after its copy");
        assert.ok(checked >= 40, `${checked} rows checked`);
      } finally {
        openKernels({ threads: 1 });
      }
    }),
});

Deno.test({
  name: "kv q8_0: logits stay close to the f16 cache's, at about half its bytes",
  ignore: !isFile(GGUF),
  fn: () =>
    withModel((MODEL) => {
      const f16 = openModel(MODEL, { contextLength: 256, kvCache: "f16" });
      const q8 = openModel(MODEL, { contextLength: 256, kvCache: "q8_0" });
      using _a = f16.model;
      using _b = q8.model;
      const c = f16.model.config;
      assert.equal(kvBytesPerPosition(c, "q8_0") / kvBytesPerPosition(c, "f16"), 34 / 64);
      const tokens = f16.tokenizer.encode(PROSE, { addSpecial: false, parseSpecial: false });
      assert.ok(tokens.length > 80, `${tokens.length} tokens`);
      let agree = 0;
      let worst = 1;
      for (const [p, tok] of tokens.entries()) {
        const a = f16.model.forward(tok, p);
        const b = q8.model.forward(tok, p);
        let dot = 0, na = 0, nb = 0, ia = 0, ib = 0;
        for (let i = 0; i < a.length; i++) {
          dot += a[i] * b[i];
          na += a[i] * a[i];
          nb += b[i] * b[i];
          if (a[i] > a[ia]) ia = i;
          if (b[i] > b[ib]) ib = i;
        }
        worst = Math.min(worst, dot / Math.sqrt(na * nb));
        if (ia === ib) agree++;
      }
      // A wrong block address or scale gives unrelated logits (cosine far below 0.9).
      assert.ok(worst > 0.98, `worst cosine similarity ${worst}`);
      assert.ok(agree >= 0.9 * tokens.length, `argmax agrees at ${agree} of ${tokens.length}`);
    }),
});

Deno.test("kv q8_0: a head dimension that is not a multiple of 32 is refused", async () => {
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "kv-q8-" });
  try {
    const path = await convertFixture("hf_logits/llama_gqa_untied", dir); // head_dim 16
    assert.throws(
      () => Transformer.load(path, { contextLength: 8, kvCache: "q8_0" }),
      (e: Error) =>
        e instanceof RangeError &&
        /q8_0 needs a head dimension that is a multiple of 32; this model's is 16/.test(e.message),
    );
    using ok = Transformer.load(path, { contextLength: 8, kvCache: "f16" });
    assert.equal(ok.forward(1, 0).length, ok.config.vocab);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
