import assert from "node:assert/strict";
import { openKernels } from "../ffi/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { type Geometry, readTiledFile, TILE_TYPE } from "../formats/cflow/mod.ts";
import { Transformer } from "../model/mod.ts";
import type { TargetQuant } from "./build_weights.ts";
import { convertFile } from "./convert_file.ts";
import { openTiledSource } from "./tiled_source.ts";

openKernels({ threads: 1 });

const FIXTURES = [
  "tests/fixtures/pipeline_native/arch2_4_combined",
  "tests/fixtures/hf_logits/qwen2moe",
  "tests/fixtures/hf_logits/llama_gqa_tied",
];

async function convert(
  input: string,
  output: string,
  format: "cflow" | "vflow",
  quant: TargetQuant,
) {
  return await convertFile(input, output, { format, quant, rule: "ggml", measureError: true });
}

/** The model's geometry, without the fields of one header kind (version, CRC, offsets). */
function geometry(g: Geometry, quantType = g.quantType): Geometry {
  const keys: (keyof Geometry)[] = [
    "archId",
    "hidden",
    "layers",
    "heads",
    "kvHeads",
    "headDim",
    "ffnHidden",
    "experts",
    "topK",
    "expertFfnHidden",
    "vocab",
    "tileRows",
    "tileCols",
    "quantGroup",
    "quantType",
    "slidingWindow",
    "slidingPattern",
    "denseDelay",
    "expertDelay",
    "combineStyle",
    "styleParam",
    "featureFlags",
    "finalLogitSoftcap",
  ];
  return { ...Object.fromEntries(keys.map((k) => [k, g[k]])) as unknown as Geometry, quantType };
}

function logits(path: string, tokens: number[]): Float32Array[] {
  using model = Transformer.load(path, { contextLength: 16 });
  return tokens.map((t, pos) => model.forward(t, pos).slice());
}

for (const fixture of FIXTURES) {
  const name = fixture.split("/").pop()!;
  for (const quant of ["q4_0", "f32"] as const) {
    Deno.test(`${name} ${quant}: .cflow -> .vflow -> .cflow is lossless`, async () => {
      const dir = await Deno.makeTempDir({ prefix: "cflow-tiled-" });
      try {
        const first = `${dir}/a.cflow`;
        const vflow = `${dir}/b.vflow`;
        const last = `${dir}/c.cflow`;
        const direct = `${dir}/direct.vflow`;
        await convert(fixture, first, "cflow", quant);
        const toV = await convert(first, vflow, "vflow", quant);
        const back = await convert(vflow, last, "cflow", quant);
        await convert(fixture, direct, "vflow", quant);
        assert.equal(toV.source.format, "cflow");
        assert.equal(back.source.format, "vflow");
        for (const r of [...toV.matrices, ...back.matrices]) {
          // Q4_0 blocks are copied; f32 values pass through unchanged.
          if (quant === "q4_0") assert.ok(r.lossless, `${r.name} was requantized`);
          assert.equal(r.rms, 0, `${r.name}: rms ${r.rms}`);
        }
        const a = await Deno.readFile(first);
        assert.deepEqual(await Deno.readFile(last), a, "cflow -> vflow -> cflow changed bytes");
        assert.deepEqual(
          await Deno.readFile(vflow),
          await Deno.readFile(direct),
          "cflow -> vflow differs from converting the checkpoint to vflow directly",
        );
        const fa = readTiledFile(bytesSource(first, a));
        const fv = readTiledFile(bytesSource(vflow, await Deno.readFile(vflow)));
        assert.deepEqual(geometry(fv.geometry), geometry(fa.geometry));
        assert.deepEqual(fv.metadata, fa.metadata);

        const tokens = [1, 5, 2, 7];
        const want = logits(first, tokens);
        const got = logits(vflow, tokens);
        got.forEach((g, i) => assert.deepEqual(g, want[i], `position ${i}`));
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }

  Deno.test(`${name}: q4_0 .cflow -> q8_0 .vflow requantizes and loads`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "cflow-tiled-" });
    try {
      const first = `${dir}/a.cflow`;
      const out = `${dir}/b.vflow`;
      await convert(fixture, first, "cflow", "q4_0");
      const r = await convert(first, out, "vflow", "q8_0");
      const tiled = r.matrices.filter((m) => m.from === "Q4_0");
      assert.ok(tiled.length > 0);
      for (const m of tiled) {
        assert.equal(m.to, "Q8_0");
        assert.ok(!m.lossless);
      }
      const fa = readTiledFile(bytesSource(first, await Deno.readFile(first)));
      const fb = readTiledFile(bytesSource(out, await Deno.readFile(out)));
      assert.equal(fb.geometry.quantType, TILE_TYPE.Q8_0);
      assert.deepEqual(geometry(fb.geometry, 0), geometry(fa.geometry, 0));
      assert.equal(fb.metadata.quant, "q8_0");
      const tokens = [1, 5, 2];
      const want = logits(first, tokens);
      const got = logits(out, tokens);
      // Q8_0 holds Q4_0's values to within half a Q8_0 step: close logits.
      got.forEach((g, i) => {
        let max = 0;
        for (let j = 0; j < g.length; j++) max = Math.max(max, Math.abs(g[j] - want[i][j]));
        assert.ok(Number.isFinite(max) && max < 0.5, `position ${i}: max |delta| ${max}`);
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("tiled source: hyperparameters and tensors of a MoE file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-tiled-" });
  try {
    const path = `${dir}/m.vflow`;
    await convert("tests/fixtures/hf_logits/qwen2moe", path, "vflow", "q8_0");
    const s = openTiledSource(path);
    try {
      assert.equal(s.format, "vflow");
      assert.equal(s.hyper.architecture, "qwen2moe");
      assert.ok(s.hyper.experts > 0);
      const e = s.tensor("expert_gate", 0)!;
      assert.equal(e.experts, s.hyper.experts);
      assert.equal(e.typeName, "Q8_0");
      assert.ok(e.rawRows !== undefined);
      const last = s.hyper.experts - 1;
      assert.equal(e.f32Rows(0, e.rows, last).length, e.rows * e.cols);
      assert.notDeepEqual(e.rawRows!(0, 1, 0), e.rawRows!(0, 1, last));
      assert.equal(s.tensor("router", 0)!.typeName, "F32");
      assert.ok(s.tensor("shared_gate", 0) !== undefined);
      assert.ok(s.tensor("token_embd", 0) !== undefined);
      assert.equal(s.tensor("q", s.hyper.layers), undefined);
    } finally {
      s.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("convert refuses to overwrite its input", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-tiled-" });
  try {
    const path = `${dir}/m.cflow`;
    await convert("tests/fixtures/hf_logits/llama_gqa_tied", path, "cflow", "q4_0");
    const before = await Deno.readFile(path);
    for (const output of [path, `${dir}/./m.cflow`]) {
      await assert.rejects(
        convertFile(path, output, {
          format: "vflow",
          quant: "q8_0",
          rule: "ggml",
          measureError: false,
          force: true,
        }),
        /is the input/,
      );
    }
    assert.deepEqual(await Deno.readFile(path), before);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
