// deno-lint-ignore-file no-sync-fn-in-async-fn
import assert from "node:assert/strict";
const join = (...p: string[]) => p.join("/");
import { bytesSource } from "../formats/byte_source.ts";
import { ARCH_IDS, ENTRY_KIND, FEATURE, MATRIX, readTiledFile } from "../formats/cflow/mod.ts";
import { FormatError } from "../formats/errors.ts";
import { PIPELINE_NATIVE_NAMES } from "../formats/hf/mod.ts";
import { writeSafetensors } from "../formats/safetensors/mod.ts";
import { Rng } from "../tests/util/rng.ts";
import { openKernels } from "../ffi/mod.ts";
import { convertFile } from "./convert_file.ts";

openKernels({ threads: 1 });

const H = 32, L = 4, HEADS = 4, KV = 2, HD = 8, FFN = 64, E = 4, EFFN = 32, V = 128;

/** A tiny random pipeline-native checkpoint (docs/ARCHITECTURES.md) in a new folder. */
function checkpoint(name: string, over: Record<string, unknown> = {}): string {
  const [style, dd, ed, sp] = PIPELINE_NATIVE_NAMES[name];
  const experts = name === "arch2_4_sync" ? 0 : E; // one dense model too
  const tie = name === "arch3_pipeline_registers";
  const config = {
    model_type: "pipeline_native",
    architecture: name,
    hidden_size: H,
    num_hidden_layers: L,
    num_attention_heads: HEADS,
    num_key_value_heads: KV,
    head_dim: HD,
    intermediate_size: FFN,
    num_experts: experts,
    num_experts_per_tok: experts > 0 ? 2 : undefined,
    expert_intermediate_size: experts > 0 ? EFFN : undefined,
    vocab_size: V,
    rms_norm_eps: 1e-6,
    rope_theta: 10000.0,
    max_position_embeddings: 256,
    combine_style: style,
    dense_delay: dd,
    expert_delay: ed,
    style_param: sp,
    feature_flags: FEATURE.GEGLU | (tie ? FEATURE.TIED_EMBEDDINGS : 0),
    final_logit_softcap: 30.0,
    tie_word_embeddings: tie,
    ...over,
  };
  const rng = new Rng(name.length);
  const t = (n: string, shape: number[]) => ({
    name: n,
    dtype: "F32" as const,
    shape,
    data: new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => rng.normal() * 0.1),
  });
  const tensors = [t("embed.weight", [V, H]), t("norm.weight", [H])];
  if (!tie) tensors.push(t("lm_head.weight", [V, H]));
  for (let l = 0; l < L; l++) {
    const p = `layers.${l}.`;
    tensors.push(
      t(p + "attn_norm.weight", [H]),
      t(p + "attn.q.weight", [HEADS * HD, H]),
      t(p + "attn.k.weight", [KV * HD, H]),
      t(p + "attn.v.weight", [KV * HD, H]),
      t(p + "attn.o.weight", [H, HEADS * HD]),
      t(p + "ffn_norm.weight", [H]),
      t(p + "ffn.gate.weight", [FFN, H]),
      t(p + "ffn.up.weight", [FFN, H]),
      t(p + "ffn.down.weight", [H, FFN]),
    );
    if (experts > 0) {
      tensors.push(t(p + "moe_norm.weight", [H]), t(p + "moe.router.weight", [experts, H]));
      for (let e = 0; e < experts; e++) {
        tensors.push(
          t(p + `moe.experts.${e}.gate.weight`, [EFFN, H]),
          t(p + `moe.experts.${e}.up.weight`, [EFFN, H]),
          t(p + `moe.experts.${e}.down.weight`, [H, EFFN]),
        );
      }
    }
  }
  const dir = Deno.makeTempDirSync({ prefix: "cflow-pn-" });
  Deno.writeTextFileSync(join(dir, "config.json"), JSON.stringify(config));
  Deno.writeFileSync(join(dir, "model.safetensors"), writeSafetensors(tensors, { format: "pt" }));
  return dir;
}

/** Converts a folder to both formats and checks what the header and entries say. */
async function convertAndCheck(
  dir: string,
  quant: "f32" | "q4_0" | "q8_0",
  expect?: { name: string; experts: number; tie: boolean },
) {
  const config = JSON.parse(Deno.readTextFileSync(join(dir, "config.json")));
  const out = Deno.makeTempDirSync({ prefix: "cflow-pn-out-" });
  try {
    for (const format of ["cflow", "vflow"] as const) {
      const path = join(out, `m.${format}`);
      await convertFile(dir, path, { format, quant, rule: "ggml", measureError: false });
      const bytes = Deno.readFileSync(path);
      const f = readTiledFile(bytesSource(path, bytes), { verifyChecksums: true });
      const g = f.geometry;
      assert.equal(g.archId, ARCH_IDS.pipeline_native);
      assert.equal(f.metadata.architecture, "pipeline_native");
      assert.equal(f.metadata.pipeline_native, config.architecture);
      assert.equal(f.metadata.rope_style, "neox");
      assert.equal(g.combineStyle, config.combine_style);
      assert.equal(g.denseDelay, config.dense_delay);
      assert.equal(g.expertDelay, config.expert_delay);
      assert.equal(g.styleParam, config.style_param);
      assert.equal(g.featureFlags, config.feature_flags);
      assert.equal(g.experts, config.num_experts ?? 0);
      assert.equal(g.ffnHidden, config.intermediate_size);
      if (format === "cflow") {
        assert.equal(g.finalLogitSoftcap, Math.fround(config.final_logit_softcap ?? 0));
      }
      if (expect !== undefined) {
        assert.equal((g.featureFlags & FEATURE.TIED_EMBEDDINGS) !== 0, expect.tie);
      }
      // moe_norm sits with the router, at the expert placement.
      for (let l = 0; l < g.layers; l++) {
        const where = (id: number) =>
          f.blocks.findIndex((b) => b.entries.some((e) => e.layerId === l && e.matrixId === id));
        if (g.experts === 0) {
          assert.equal(where(MATRIX.MOE_NORM), -1);
          continue;
        }
        const norm = where(MATRIX.MOE_NORM);
        assert.ok(norm >= 0, `layer ${l} has a moe_norm`);
        assert.equal(norm, where(MATRIX.ROUTER));
        const block = f.blocks[norm];
        if (format === "cflow") assert.equal(block.layer, Math.max(0, l - g.expertDelay));
        else assert.equal(block.layer, l);
        const entries = block.entries.filter((e) => e.layerId === l);
        const i = entries.findIndex((e) => e.matrixId === MATRIX.MOE_NORM);
        assert.equal(entries[i + 1].matrixId, MATRIX.ROUTER);
        assert.equal(entries[i + 2].kind, ENTRY_KIND.EXPERT_TABLE);
      }
    }
  } finally {
    Deno.removeSync(out, { recursive: true });
  }
}

for (const name of Object.keys(PIPELINE_NATIVE_NAMES)) {
  Deno.test(`pipeline-native ${name}: safetensors -> .cflow and .vflow (f32, q4_0)`, async () => {
    const dir = checkpoint(name);
    try {
      for (const quant of ["f32", "q4_0"] as const) await convertAndCheck(dir, quant);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
}

Deno.test("pipeline-native configs that disagree with their architecture name are refused, naming the field", async () => {
  const bad: [string, Record<string, unknown>, RegExp][] = [
    ["arch2_4_combined", { expert_delay: 1 }, /expert_delay/],
    ["arch2_4_combined", { combine_style: 2 }, /combine_style/],
    ["arch1_decoupled_streams", { style_param: 2 }, /style_param/],
    ["arch5_fixed_point", { dense_delay: 1 }, /dense_delay/],
    ["arch2_4_sync", { architecture: "arch9" }, /architecture/],
    ["arch2_4_sync", { feature_flags: FEATURE.TIED_EMBEDDINGS }, /feature_flags/],
    ["arch2_4_sync", { feature_flags: 16 }, /feature_flags/],
    ["arch2_4_sync", { dense_delay: 1.5 }, /dense_delay/],
    ["arch2_4_sync", { final_logit_softcap: -1 }, /final_logit_softcap/],
    ["gemma4_parallel", { num_experts: 0 }, /num_experts/],
  ];
  for (const [name, over, field] of bad) {
    const dir = checkpoint(name, over);
    const out = join(dir, "x.cflow");
    try {
      await assert.rejects(
        () =>
          convertFile(dir, out, {
            format: "cflow",
            quant: "f32",
            rule: "ggml",
            measureError: false,
          }),
        (e: unknown) => {
          assert.ok(e instanceof FormatError, `${name} ${JSON.stringify(over)}: ${e}`);
          assert.match(e.field, field, e.message);
          return true;
        },
      );
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }
});

// Real checkpoints from the PyTorch reference (tests/reference/gen_pipeline_native.py), when present.
for (const name of Object.keys(PIPELINE_NATIVE_NAMES)) {
  const dir = `tests/fixtures/pipeline_native/${name}`;
  let present = false;
  try {
    present = Deno.statSync(join(dir, "config.json")).isFile;
  } catch { /* absent */ }
  Deno.test({
    name: `pipeline-native fixture ${name} converts (f32, q4_0; .cflow and .vflow)`,
    ignore: !present,
    fn: async () => {
      for (const quant of ["f32", "q4_0"] as const) await convertAndCheck(dir, quant);
    },
  });
}

// Real MoE checkpoints (transformers save_pretrained), when present.
for (const name of ["mixtral", "olmoe", "qwen2moe", "qwen3moe"]) {
  const dir = `tests/fixtures/hf_logits/${name}`;
  let present = false;
  try {
    present = Deno.statSync(join(dir, "config.json")).isFile;
  } catch { /* absent */ }
  Deno.test({
    name: `HF MoE fixture ${name} converts (.cflow and .vflow) with its routing rule`,
    ignore: !present,
    fn: async () => {
      const config = JSON.parse(Deno.readTextFileSync(join(dir, "config.json")));
      const out = Deno.makeTempDirSync({ prefix: "cflow-moe-out-" });
      try {
        for (const format of ["cflow", "vflow"] as const) {
          const path = join(out, `m.${format}`);
          await convertFile(dir, path, { format, quant: "f32", rule: "ggml", measureError: false });
          const f = readTiledFile(bytesSource(path, Deno.readFileSync(path)), {
            verifyChecksums: true,
          });
          assert.equal(f.geometry.archId, ARCH_IDS[name]);
          assert.ok(f.geometry.experts > 0);
          assert.equal(f.geometry.combineStyle, 1);
          assert.equal(
            f.metadata.moe_norm_topk_prob,
            name === "mixtral" ? true : config.norm_topk_prob ?? false,
          );
          const shared = f.blocks.some((b) =>
            b.entries.some((e) => e.matrixId === MATRIX.SHARED_GATE)
          );
          assert.equal(shared, name === "qwen2moe");
          if (name === "qwen2moe") {
            assert.equal(f.metadata.shared_expert_ffn, config.shared_expert_intermediate_size);
          }
        }
      } finally {
        Deno.removeSync(out, { recursive: true });
      }
    },
  });
}
