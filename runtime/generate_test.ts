/**
 * generate()'s end-of-generation handling on a tiny random model (tests/util/tiny_gguf.ts,
 * converted to `.cflow`): an EOG token stops generation unless `ignoreEos` is set, in which
 * case it is yielded like any other token and the token budget alone ends generation.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { greedySampler, letterTokenizer } from "../tests/util/generation.ts";
import { tinyGguf } from "../tests/util/tiny_gguf.ts";
import { generate, type GenerateOptions, type GenerationStats } from "./generate.ts";

openKernels({ threads: 1 });

async function run(
  model: Transformer,
  eog: (id: number) => boolean,
  options: GenerateOptions,
): Promise<{ ids: number[]; stats: GenerationStats }> {
  const it = generate(model, letterTokenizer(eog), greedySampler, [1, 2, 3], options);
  const ids: number[] = [];
  while (true) {
    const r = await it.next();
    if (r.done) return { ids, stats: r.value };
    if (r.value.id >= 0) ids.push(r.value.id);
  }
}

Deno.test("generate: an end-of-generation token stops generation unless ignoreEos", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-generate-" });
  try {
    await Deno.writeFile(`${dir}/tiny.gguf`, tinyGguf("Q8_0"));
    await convertFile(`${dir}/tiny.gguf`, `${dir}/tiny.cflow`, {
      format: "cflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
    });
    using model = Transformer.load(`${dir}/tiny.cflow`, { contextLength: 32 });
    const free = await run(model, () => false, { maxTokens: 8 });
    assert.equal(free.ids.length, 8);
    assert.equal(free.stats.stopReason, "max_tokens");

    // Every token ends generation: the first one stops it and is not yielded.
    const stopped = await run(model, () => true, { maxTokens: 8 });
    assert.deepEqual(stopped.ids, []);
    assert.equal(stopped.stats.generatedTokens, 1);
    assert.equal(stopped.stats.stopReason, "eog");
    const explicit = await run(model, () => true, { maxTokens: 8, ignoreEos: false });
    assert.equal(explicit.stats.stopReason, "eog");

    // With ignoreEos the same tokens come out as when nothing is end-of-generation.
    const ignored = await run(model, () => true, { maxTokens: 8, ignoreEos: true });
    assert.deepEqual(ignored.ids, free.ids);
    assert.equal(ignored.stats.generatedTokens, 8);
    assert.equal(ignored.stats.stopReason, "max_tokens");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("generate reports the expert bytes of a mixture-of-experts model: k of E spans per layer and token", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-gen-moe-" });
  try {
    const out = `${dir}/mixtral.cflow`;
    const src = new URL("../tests/fixtures/hf_logits/mixtral", import.meta.url).pathname;
    await convertFile(src, out, {
      format: "cflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
    });
    using model = Transformer.load(out, { contextLength: 32 });
    const { ids, stats } = await run(model, () => false, { maxTokens: 6 });
    assert.equal(ids.length, 6);
    const e = stats.expertBytes!;
    const k = model.config.moe!.topK;
    const E = model.config.moe!.experts;
    // Every expert of this file has the same span: each layer reads k of E of them per token.
    for (const [l, bank] of e.bankPerLayer.entries()) {
      assert.equal(e.decodePerLayerPerToken[l], (bank / E) * k, `layer ${l}`);
    }
    assert.equal(e.decodePerToken, e.decodePerLayerPerToken.reduce((a, n) => a + n, 0));
    // The prefill batch reads each selected expert once for all the rows that chose it.
    assert.ok(e.prefill > 0 && e.prefill <= 3 * e.decodePerToken);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
