/**
 * The plan on the real GGUFs kept in their own types (`--quant auto`): Qwen2.5-Coder-0.5B
 * Q4_K_M, whose 896-wide matrices mix Q5_0, Q8_0, Q4_K and Q6_K (fused Q/K/V and gate/up runs of
 * mixed types, read in place by the whole-block tile kernels), and SmolLM2-135M Q4_1 (packed into
 * Q4_1 panels, or read as tiles):
 *
 * - a prompt run in batches gives bit for bit the logits of the same tokens one at a time;
 * - 1 and 2 threads give the same bits;
 * - greedy decoding continues identically from either.
 *
 * Ignored, with a printed reason, where a file has not been fetched (`./dev task test:ts`
 * fetches both).
 *
 * @module
 */
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/transformer.ts";
import { isFile, MODELS_DIR, sameBits } from "./util/test_models.ts";

const FILES = [
  { name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", vocab: 151_000, layouts: [true, false] },
  { name: "smollm2-135m-instruct.Q4_1.gguf", vocab: 49_000, layouts: [true, false] },
];

for (const f of FILES) {
  const gguf = `${MODELS_DIR}/${f.name}`;
  const here = isFile(gguf);
  if (!here) console.log(`gguf_types_plan_test: ${gguf} is absent; its test is ignored`);
  /** Deterministic pseudo-text token ids inside the vocabulary. */
  const prompt = Array.from({ length: 70 }, (_, i) => 1 + ((i * 7919 + 13) % f.vocab));
  Deno.test({
    name: `${f.name} as its own types: batches and threads give the same bits`,
    ignore: !here,
    async fn(t) {
      const dir = await Deno.makeTempDir({ prefix: "cflow-gguf-types-" });
      try {
        const path = `${dir}/model.cflow`;
        await convertFile(gguf, path, {
          format: "cflow",
          quant: "auto",
          rule: "ggml",
          outputQuant: "auto",
          measureError: false,
        });
        for (const packed of f.layouts) {
          const label = packed ? "panels" : "tiles";
          await t.step(`${label}: prefill in batches of 32 equals forward, bit for bit`, () => {
            openKernels({ threads: 2 });
            using batched = Transformer.load(path, { packed, contextLength: 128, batch: 32 });
            using single = Transformer.load(path, { packed, contextLength: 128 });
            const got = batched.prefill(prompt, 0).slice();
            let want: Float32Array = new Float32Array(0);
            prompt.forEach((tok, pos) => want = single.forward(tok, pos));
            sameBits(got, want, label);
            sameBits(
              batched.forward(42, prompt.length).slice(),
              single.forward(42, prompt.length),
              label,
            );
          });
          await t.step(`${label}: 1 and 2 threads give the same logits`, () => {
            const run = (threads: number) => {
              openKernels({ threads });
              using m = Transformer.load(path, { packed, contextLength: 128, batch: 32 });
              const a = m.prefill(prompt, 0).slice();
              return [a, m.forward(42, prompt.length).slice()];
            };
            const one = run(1);
            const two = run(2);
            sameBits(two[0], one[0], `${label} prefill`);
            sameBits(two[1], one[1], `${label} decode`);
          });
        }
      } finally {
        openKernels({ threads: 2 });
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
