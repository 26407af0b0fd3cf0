/**
 * Mixture-of-experts GGUFs as llama.cpp's converter writes them (Mixtral as
 * "llama" with experts and permuted Q/K, qwen2moe, qwen3moe, olmoe), built
 * from the Hugging Face fixtures by tests/util/moe_gguf.ts: converting the
 * GGUF gives the same model as converting the Hugging Face folder, and both
 * match transformers' logits.
 */
import assert from "node:assert/strict";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { type MoeFamily, moeGgufFromHf, type MoeGgufOptions } from "../tests/util/moe_gguf.ts";
import { convertFile } from "./mod.ts";

openKernels({ threads: 1 });

const FIXTURES = new URL("../tests/fixtures/hf_logits/", import.meta.url).pathname;
const FAMILIES: MoeFamily[] = ["mixtral", "olmoe", "qwen2moe", "qwen3moe"];

function fixture(name: string) {
  const j = JSON.parse(Deno.readTextFileSync(`${FIXTURES}${name}/logits.json`));
  const bytes = Uint8Array.from(atob(j.logits_f32_b64), (c) => c.charCodeAt(0));
  return {
    ids: j.input_ids as number[],
    logits: new Float32Array(bytes.buffer),
    vocab: j.shape[1] as number,
  };
}

function argmax(v: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

async function convert(input: string, out: string, quant: "f32" | "q4_0") {
  await convertFile(input, out, { format: "cflow", quant, rule: "ggml", measureError: false });
  return out;
}

function run(path: string, ids: number[], packed = false): Float32Array[] {
  using model = Transformer.load(path, { kvCache: "f32", packed, contextLength: 32 });
  return ids.map((t, pos) => model.forward(t, pos).slice());
}

function metadata(path: string): Record<string, unknown> {
  using model = Transformer.load(path, { kvCache: "f32", packed: false, contextLength: 8 });
  return { ...model.config } as Record<string, unknown>;
}

function renormalize(path: string): boolean {
  return (metadata(path).moe as { renormalize: boolean }).renormalize;
}

async function withDir<T>(f: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "cflow-gguf-moe-" });
  try {
    return await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function ggufFile(dir: string, name: MoeFamily, options?: MoeGgufOptions) {
  const path = `${dir}/${name}.gguf`;
  await Deno.writeFile(path, moeGgufFromHf(`${FIXTURES}${name}`, name, options));
  return path;
}

for (const name of FAMILIES) {
  Deno.test(`${name}: the llama.cpp-style GGUF converts to the same model as the Hugging Face folder`, async () => {
    await withDir(async (dir) => {
      const ref = fixture(name);
      const fromHf = run(
        await convert(`${FIXTURES}${name}`, `${dir}/hf.cflow`, "f32"),
        ref.ids,
      );
      const ggufPath = await convert(await ggufFile(dir, name), `${dir}/gguf.cflow`, "f32");
      const fromGguf = run(ggufPath, ref.ids);
      const hfConfig = metadata(`${dir}/hf.cflow`);
      const ggufConfig = metadata(ggufPath);
      assert.equal(ggufConfig.architecture, hfConfig.architecture);
      assert.deepEqual(ggufConfig.moe, hfConfig.moe);
      let vsHf = 0;
      let vsTransformers = 0;
      fromGguf.forEach((got, pos) => {
        const hf = fromHf[pos];
        const want = ref.logits.subarray(pos * ref.vocab, (pos + 1) * ref.vocab);
        let scale = 0;
        let d1 = 0;
        let d2 = 0;
        for (let i = 0; i < ref.vocab; i++) {
          scale = Math.max(scale, Math.abs(hf[i]));
          d1 = Math.max(d1, Math.abs(got[i] - hf[i]));
          d2 = Math.max(d2, Math.abs(got[i] - want[i]));
        }
        vsHf = Math.max(vsHf, d1 / scale);
        vsTransformers = Math.max(vsTransformers, d2 / scale);
        assert.equal(argmax(got), argmax(hf), `argmax at ${pos}`);
        assert.equal(argmax(got), argmax(want), `argmax vs transformers at ${pos}`);
      });
      console.log(
        `${name}: GGUF vs HF ${vsHf.toExponential(2)}, vs transformers ${
          vsTransformers.toExponential(2)
        } (relative)`,
      );
      assert.ok(vsHf <= 1e-5, `GGUF vs HF conversion: relative ${vsHf}`);
      assert.ok(vsTransformers <= 1e-3, `GGUF vs transformers: relative ${vsTransformers}`);
    });
  });

  Deno.test(`${name}: the GGUF converts to q4_0, loads and runs`, async () => {
    await withDir(async (dir) => {
      const ref = fixture(name);
      const path = await convert(await ggufFile(dir, name), `${dir}/q4.cflow`, "q4_0");
      for (const packed of [false, true]) {
        const logits = run(path, ref.ids, packed);
        let maxDelta = 0;
        logits.forEach((got, pos) => {
          const want = ref.logits.subarray(pos * ref.vocab, (pos + 1) * ref.vocab);
          for (let i = 0; i < ref.vocab; i++) {
            assert.ok(Number.isFinite(got[i]), `finite logit ${pos}/${i}`);
            maxDelta = Math.max(maxDelta, Math.abs(got[i] - want[i]));
          }
        });
        // model/moe_test.ts holds the HF q4_0 conversion to 12.
        assert.ok(maxDelta <= 12, `q4_0 ${packed ? "panels" : "tiles"}: max |delta| ${maxDelta}`);
      }
    });
  });
}

Deno.test("routing normalization: llama.cpp's per-architecture default, overridden by expert_weights_norm", async () => {
  await withDir(async (dir) => {
    const want: Record<MoeFamily, boolean> = {
      mixtral: true,
      olmoe: false,
      qwen2moe: false,
      qwen3moe: true,
    };
    for (const name of FAMILIES) {
      const plain = await convert(await ggufFile(dir, name), `${dir}/${name}.cflow`, "f32");
      assert.equal(renormalize(plain), want[name], name);
      await Deno.remove(`${dir}/${name}.gguf`);
      const flipped = await convert(
        await ggufFile(dir, name, {
          extra: [["expert_weights_norm", { type: "bool", value: !want[name] }]],
        }),
        `${dir}/${name}.flipped.cflow`,
        "f32",
      );
      assert.equal(renormalize(flipped), !want[name], `${name} flipped`);
      await Deno.remove(`${dir}/${name}.gguf`);
    }
  });
});

Deno.test("qwen2moe: the shared expert's width comes from the tensor when the GGUF has no expert_shared_feed_forward_length", async () => {
  await withDir(async (dir) => {
    const ref = fixture("qwen2moe");
    const full = run(
      await convert(await ggufFile(dir, "qwen2moe"), `${dir}/a.cflow`, "f32"),
      ref.ids.slice(0, 4),
    );
    await Deno.remove(`${dir}/qwen2moe.gguf`);
    const bare = run(
      await convert(
        await ggufFile(dir, "qwen2moe", {
          omit: ["expert_shared_feed_forward_length", "expert_feed_forward_length"],
        }),
        `${dir}/b.cflow`,
        "f32",
      ),
      ref.ids.slice(0, 4),
    );
    assert.deepEqual(bare, full);
  });
});

Deno.test("qwen2moe: an expert_shared_feed_forward_length that disagrees with the tensor is refused", async () => {
  await withDir(async (dir) => {
    const input = await ggufFile(dir, "qwen2moe", {
      omit: ["expert_shared_feed_forward_length"],
      extra: [["expert_shared_feed_forward_length", { type: "u32", value: 64 }]],
    });
    await assert.rejects(
      convert(input, `${dir}/x.cflow`, "f32"),
      /expert_shared_feed_forward_length.*64 disagrees/,
    );
  });
});
