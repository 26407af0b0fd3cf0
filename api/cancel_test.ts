/**
 * Long calls can be cancelled: a generation aborted while the kernel library is still reading a
 * long prompt stops within a few operations (the library polls a cancel flag), the event loop
 * runs meanwhile, and the model is reused afterwards with unchanged results. SmolLM2, skipped
 * when the test model is absent.
 */
import assert from "node:assert/strict";
import { loadModel } from "../mod.ts";
import { SMOLLM2_GGUF, smollm2Present } from "../tests/util/test_models.ts";

const GGUF = SMOLLM2_GGUF;
const present = smollm2Present;

Deno.test({
  name: "mod.ts: aborting during a long prompt stops the kernels early; the model is reused",
  ignore: !present,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-cancel-" });
    try {
      using model = await loadModel(GGUF, { quant: "q8_0", cache, contextLength: 1024 });
      const greedy = { temperature: 0, maxTokens: 8 } as const;
      const short = "The three primary colors are";
      const reference: number[] = [];
      for await (const t of model.generate(short, greedy)) if (t.id >= 0) reference.push(t.id);

      // A prompt of about 900 tokens, timed whole.
      const long = "The quick brown fox jumps over the lazy dog. ".repeat(90);
      const n = model.tokenize(long).length;
      assert.ok(n > 700 && n < 1024, `${n} prompt tokens`);
      let t0 = performance.now();
      for await (const _ of model.generate(long, { ...greedy, maxTokens: 1 })) { /* drain */ }
      const fullMs = performance.now() - t0;

      // Nearly the same prompt, aborted a tenth of the way in. Its first token differs, so the
      // KV cache (which holds the prompt above) gives it nothing to reuse.
      const other = `Once more: ${long}`;
      assert.notEqual(model.tokenize(other)[0], model.tokenize(long)[0]);
      const stop = new AbortController();
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 5);
      const timer = setTimeout(() => stop.abort(), fullMs / 10);
      t0 = performance.now();
      const it = model.generate(other, { ...greedy, signal: stop.signal });
      let r = await it.next();
      let yielded = 0;
      while (!r.done) {
        yielded++;
        r = await it.next();
      }
      const abortedMs = performance.now() - t0;
      clearInterval(ticker);
      clearTimeout(timer);
      assert.equal(r.value.stopReason, "aborted");
      assert.equal(yielded, 0, "no token comes out of an aborted prompt");
      assert.equal(r.value.generatedTokens, 0);
      assert.ok(ticks > 0, "the event loop ran while the prompt was read");
      // Stopped well before the whole prompt would have been read (a loose bound: the machine
      // is shared and noisy).
      assert.ok(abortedMs < fullMs * 0.75, `aborted after ${abortedMs} ms of ${fullMs} ms`);

      // The model is reused: the short prompt gives the same tokens as before.
      const again: number[] = [];
      for await (const t of model.generate(short, greedy)) if (t.id >= 0) again.push(t.id);
      assert.deepEqual(again, reference);
      console.log(
        `  ${n}-token prompt: ${fullMs.toFixed(0)} ms whole, stopped after ${
          abortedMs.toFixed(0)
        } ms (abort at ${(fullMs / 10).toFixed(0)} ms), ${ticks} timer ticks meanwhile`,
      );
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});
