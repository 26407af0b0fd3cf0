import assert from "node:assert/strict";
import {
  type AnalyzeGeometry,
  analyzeGeometry,
  analyzeTiledFile,
  ARCH_NAMES,
  formatAnalysis,
  matrixBytes,
  PIPELINE_NATIVE_ARCHS,
} from "./mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import {
  ARCH_IDS,
  matrixTileBytes,
  memorySink,
  readTiledFile,
  writeModel,
} from "../formats/cflow/mod.ts";
import { randomModel, type RandomModelOptions } from "../tests/util/random_model.ts";

/** Table 4.1's geometry. */
const TABLE: AnalyzeGeometry = {
  hidden: 512,
  layers: 6,
  ffn: 2048,
  experts: 8,
  topK: 2,
  expertFfn: 512,
  heads: 8,
  kvHeads: 8,
};
/** Gemma 4 26B-A4B as report section 6.2.1 sizes it (attention 4 d^2), one MoE layer. */
const GEMMA4: AnalyzeGeometry = {
  hidden: 2816,
  layers: 1,
  ffn: 2112,
  experts: 128,
  topK: 8,
  expertFfn: 704,
  heads: 16,
  kvHeads: 16,
};
const MIB = 1 << 20;
const round2 = (x: number) => Math.round(x * 100) / 100;

Deno.test("arch2_4_combined at Table 4.1's geometry: naive 9.00, critical 4.50, serial 16.5 MiB, 2.00x", () => {
  const a = analyzeGeometry(TABLE, { arch: "arch2_4_combined" });
  assert.equal(a.bytes_per_param, 0.5);
  assert.equal(a.per_layer.length, 6);
  assert.deepEqual(a.per_layer[0], {
    layer: 0,
    attention_bytes: 0.5 * MIB,
    dense_bytes: 1.5 * MIB, // 3 * 512 * 2048 * 0.5 = 1,572,864
    expert_bytes: 0.75 * MIB,
    naive_bytes: 1.5 * MIB,
    critical_bytes: 0.75 * MIB,
    serial_bytes: 2.75 * MIB,
  });
  assert.equal(a.naive_bytes, 9 * MIB);
  assert.equal(a.critical_bytes, 4.5 * MIB);
  assert.equal(a.serial_bytes, 16.5 * MIB);
  assert.equal(a.reduction, 2);
  assert.equal(a.naive_mib, 9);
  assert.equal(a.critical_mib, 4.5);
  assert.equal(a.serial_mib, 16.5);
});

Deno.test("the other names at Table 4.1's geometry", () => {
  const critical = (arch: string) => analyzeGeometry(TABLE, { arch }).critical_mib;
  assert.equal(critical("gemma4_parallel"), 9);
  assert.equal(critical("arch1_decoupled_streams"), 9);
  assert.equal(critical("arch3_pipeline_registers"), 9);
  assert.equal(critical("arch4_async_experts"), 9);
  assert.equal(critical("arch2_4_sync"), 4.5);
  // arch5: --layers counts unique blocks, each run 3 times
  const five = analyzeGeometry({ ...TABLE, layers: 2 }, { arch: "arch5_fixed_point" });
  assert.equal(five.passes, 3);
  assert.equal(five.critical_mib, 9);
  assert.equal(five.naive_mib, 9);
  assert.ok(five.notes.some((n) => n.includes("14.06") && n.includes("4.00 MiB")));
  assert.equal(analyzeGeometry(TABLE, { arch: "arch5_fixed_point" }).critical_mib, 27);
});

Deno.test("Gemma 4 26B-A4B per MoE layer: 23.79 MB -> 15.86 MB, 1.50x (the paper truncates: 23.7 -> 15.8)", () => {
  const a = analyzeGeometry(GEMMA4, { arch: "arch2_4_combined" });
  const [l] = a.per_layer;
  assert.equal(l.attention_bytes, 4 * 2816 * 2816 * 0.5);
  assert.equal(round2(l.attention_bytes / 1e6), 15.86);
  assert.equal(round2(l.dense_bytes / 1e6), 8.92);
  assert.equal(round2(l.expert_bytes / 1e6), 23.79);
  assert.equal(round2(l.dense_bytes / 2 / 1e6), 4.46);
  assert.equal(round2(l.expert_bytes / 3 / 1e6), 7.93);
  assert.equal(round2(a.naive_mb), 23.79);
  assert.equal(round2(a.critical_mb), 15.86);
  assert.equal(round2(a.reduction), 1.5);
  assert.equal(Math.floor(a.naive_mb * 10) / 10, 23.7);
  assert.equal(Math.floor(a.critical_mb * 10) / 10, 15.8);
});

Deno.test("quantizations, GQA and head_dim", () => {
  assert.equal(matrixBytes("q4_0", 2, 64), 2 * 2 * 18);
  assert.equal(matrixBytes("q8_0", 1, 33), 68);
  assert.equal(matrixBytes("f32", 3, 5), 60);
  const g = { ...TABLE, layers: 1, experts: 0, topK: 0, expertFfn: 0, ffn: 0, kvHeads: 2 };
  const a = analyzeGeometry(g, { arch: "gemma4_parallel", quant: "f32" });
  // Q and O 512x512, K and V 128x512
  assert.equal(a.per_layer[0].attention_bytes, 4 * (2 * 512 * 512 + 2 * 128 * 512));
  const hd = analyzeGeometry({ ...g, headDim: 32 }, { arch: "gemma4_parallel", quant: "f32" });
  assert.equal(hd.per_layer[0].attention_bytes, 4 * (2 * 256 * 512 + 2 * 64 * 512));
  assert.equal(analyzeGeometry(TABLE, { arch: "arch2_4_combined", quant: "q4_0" }).reduction, 2);
});

Deno.test("bad geometry and names are refused", () => {
  assert.throws(
    () => analyzeGeometry(TABLE, { arch: "arch9" }),
    /unknown architecture 'arch9'.*gemma4_parallel/,
  );
  assert.throws(
    () => analyzeGeometry({ ...TABLE, topK: 9 }, { arch: "arch2_4_sync" }),
    /top-k \(9\)/,
  );
  assert.throws(
    () => analyzeGeometry({ ...TABLE, kvHeads: 3 }, { arch: "arch2_4_sync" }),
    /multiple of kv-heads/,
  );
  assert.throws(() => analyzeGeometry({ ...TABLE, layers: 0 }, { arch: "arch2_4_sync" }), /layers/);
  assert.throws(
    () => analyzeGeometry({ ...TABLE, hidden: 1.5 }, { arch: "arch2_4_sync" }),
    /hidden/,
  );
  assert.deepEqual(ARCH_NAMES, Object.keys(PIPELINE_NATIVE_ARCHS));
  assert.equal(ARCH_NAMES.length, 7);
});

Deno.test("the text output shows MiB and MB", () => {
  const text = formatAnalysis(analyzeGeometry(TABLE, { arch: "arch2_4_combined" }));
  assert.match(text, /naive +9\.00 MiB \(9\.44 MB\)/);
  assert.match(text, /critical +4\.50 MiB/);
  assert.match(text, /serial +16\.50 MiB/);
  assert.match(text, /reduction 2\.00x/);
  assert.match(text, /^ {2}0-5 /m);
});

async function fileOf(o: RandomModelOptions, combineStyle: number, styleParam?: number) {
  const m = randomModel(o);
  m.geometry.combineStyle = combineStyle;
  if (styleParam !== undefined) {
    // pipeline-native files (arch_id 9) carry style_param (GlobalHeader byte 69)
    m.geometry.archId = ARCH_IDS.pipeline_native ?? 9;
    (m.geometry as { styleParam?: number }).styleParam = styleParam;
  }
  const sink = memorySink();
  await writeModel(m, "cflow", sink);
  return readTiledFile(bytesSource("test.cflow", sink.bytes()));
}

Deno.test("a real .cflow file: its tile bytes by stream, at each entry's layer_id", async () => {
  const o: RandomModelOptions = {
    hidden: 64,
    layers: 4,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    ffn: 96,
    vocab: 40,
    experts: 4,
    topK: 2,
    expertFfn: 32,
    denseDelay: 1,
    expertDelay: 2,
  };
  const file = await fileOf(o, 1);
  const a = analyzeTiledFile(file);
  assert.equal(a.arch, "arch2_4_combined");
  assert.equal(a.quant, "file");
  assert.equal(a.per_layer.length, 4);
  const t = (r: number, c: number) => matrixTileBytes(1, r, c); // Q4_0 tiles
  const attention = t(64, 64) + 2 * t(32, 64) + t(64, 64);
  const dense = 2 * t(96, 64) + t(64, 96);
  const expert = 2 * (2 * t(32, 64) + t(64, 32));
  for (const l of a.per_layer) {
    assert.equal(l.attention_bytes, attention, `layer ${l.layer}`);
    assert.equal(l.dense_bytes, dense, `layer ${l.layer}`);
    assert.equal(l.expert_bytes, expert, `layer ${l.layer}`);
    assert.equal(l.critical_bytes, Math.max(attention, dense / 2, expert / 3));
  }
  assert.equal(a.critical_bytes, 4 * Math.max(attention, dense / 2, expert / 3));
  assert.equal(a.naive_bytes, 4 * Math.max(attention, dense, expert));
  assert.equal(a.serial_bytes, 4 * (attention + dense + expert));
  // placed at earlier blocks under delays, still counted at their own layer
  const placedEarly = file.blocks.some((b) =>
    b.entries.some((e) => e.layerId !== b.layer && e.layerId !== 0xffff)
  );
  assert.ok(placedEarly, "the delays move some weights to earlier blocks");
});

Deno.test("a combine style 5 file streams every block style_param times", async () => {
  const file = await fileOf(
    { hidden: 32, layers: 2, heads: 2, kvHeads: 2, headDim: 16, ffn: 64, vocab: 16 },
    5,
    3,
  );
  const a = analyzeTiledFile(file);
  const stored = (file.geometry as { styleParam?: number }).styleParam;
  if (stored === undefined) {
    // a reader without the field: one pass, and a note saying so
    assert.equal(a.passes, 1);
    assert.ok(a.notes.some((n) => n.includes("style_param")));
  } else {
    assert.equal(stored, 3);
    assert.equal(a.passes, 3);
    assert.equal(a.arch, "arch5_fixed_point");
    const perPass = a.per_layer.reduce((n, l) => n + l.naive_bytes, 0);
    assert.equal(a.naive_bytes, 3 * perPass);
  }
  assert.equal(a.per_layer[0].expert_bytes, 0);
});
