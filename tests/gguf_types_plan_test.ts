/**
 * The plan on the real GGUFs kept in their own types (`--quant auto`): Qwen2.5-Coder-0.5B
 * Q4_K_M, whose 896-wide matrices mix Q5_0, Q8_0, Q4_K and Q6_K (half its fused Q/K/V runs are
 * Q5_0, Q5_0, Q8_0: packed member by member into panels of each type, or read in place by the
 * tile kernels), and SmolLM2-135M Q4_1 (packed into Q4_1 panels, or read as tiles):
 *
 * - a prompt run in batches gives bit for bit the logits of the same tokens one at a time;
 * - 1 and 2 threads give the same bits;
 * - greedy decoding continues identically from either;
 * - panels and tiles (two summation orders of the same integer products) give logits that differ
 *   only by rounding, and every run with a panel type per member is packed.
 *
 * Ignored, with a printed reason, where a file has not been fetched (`./dev task test:ts`
 * fetches both).
 *
 * @module
 */
import { convertFile } from "../convert/mod.ts";
import { openKernels, RUN_KIND } from "../ffi/mod.ts";
import { loadTiledFile } from "../formats/cflow/mod.ts";
import { modelConfig } from "../model/config.ts";
import { Transformer } from "../model/transformer.ts";
import { ModelWeights } from "../model/weights.ts";
import { isFile, MODELS_DIR, sameBits } from "./util/test_models.ts";

/** mixedQkv: layers whose Q/K/V members have different panel types. */
const FILES = [
  {
    name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    vocab: 151_000,
    layouts: [true, false],
    mixedQkv: 12,
  },
  { name: "smollm2-135m-instruct.Q4_1.gguf", vocab: 49_000, layouts: [true, false], mixedQkv: 0 },
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
          if (packed) {
            await t.step("panels: every run of panel types is packed, mixed ones too", () => {
              const file = loadTiledFile(path);
              const w = new ModelWeights(file, modelConfig(file.file), { packed: true });
              try {
                const kinds = w.layers.map((l) => l.qkv.kind);
                const mixed = kinds.filter((k) => k === RUN_KIND.PACKED_MIXED).length;
                if (mixed !== f.mixedQkv) {
                  throw new Error(`${mixed} Q/K/V runs packed as mixed panels, not ${f.mixedQkv}`);
                }
                const tiles = w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])
                  .filter((r) =>
                    r !== undefined && (r.kind === RUN_KIND.TILES || r.kind <= RUN_KIND.TILES_F32)
                  );
                if (tiles.length !== 0) throw new Error(`${tiles.length} runs stayed in tiles`);
              } finally {
                w.close(); // and the file
              }
            });
          }
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
        await t.step("panels and tiles give the same logits up to rounding", () => {
          const logits = (packed: boolean) => {
            using m = Transformer.load(path, { packed, contextLength: 128, batch: 32 });
            return m.prefill(prompt, 0).slice();
          };
          const p = logits(true);
          const q = logits(false);
          let top = 0;
          let worst = 0;
          for (let i = 0; i < q.length; i++) {
            top = Math.max(top, Math.abs(q[i]));
            worst = Math.max(worst, Math.abs(p[i] - q[i]));
          }
          // Measured on the 70-token prompt: 0.22 of 8.9 (0.5B), 0.37 of 26.1 (SmolLM2 Q4_1):
          // one activation quant rounded the other way early on moves later layers' logits
          // by a few percent. A member packed in the wrong type, or read at another
          // member's offset, gives garbage or NaN.
          if (!(worst <= 0.05 * top)) throw new Error(`logits differ by ${worst} (largest ${top})`);
        });
      } finally {
        openKernels({ threads: 2 });
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
