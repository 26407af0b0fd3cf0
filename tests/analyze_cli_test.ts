/**
 * `./cflow analyze` as a user runs it: a real process, the acceptance
 * numbers of report section 4.5 (Table 4.1) and 6.2.1 (Gemma 4 sizing).
 */
import assert from "node:assert/strict";
import { EXIT } from "../cli/exit_codes.ts";
import { SMOLLM2_GGUF, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const CFLOW = `${ROOT}cflow`;

async function cflow(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(CFLOW, {
    args,
    env: { CFLOW_KERNELS: "", CFLOW_THREADS: "", NO_COLOR: "1", ...TEST_CACHE_ENV },
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

const TABLE = [
  "--hidden",
  "512",
  "--layers",
  "6",
  "--ffn",
  "2048",
  "--experts",
  "8",
  "--top-k",
  "2",
  "--expert-ffn",
  "512",
  "--heads",
  "8",
  "--kv-heads",
  "8",
];
const MIB = 1 << 20;

async function json(args: string[]) {
  const r = await cflow(["analyze", ...args, "--json"]);
  assert.equal(r.code, EXIT.OK, r.stderr);
  return JSON.parse(r.stdout);
}

Deno.test("analyze arch2_4_combined: naive 9.00, critical 4.50, serial 16.5 MiB, reduction 2.00", async () => {
  const a = await json(["--arch", "arch2_4_combined", ...TABLE]);
  assert.equal(a.naive_bytes, 9 * MIB);
  assert.equal(a.critical_bytes, 4.5 * MIB);
  assert.equal(a.serial_bytes, 16.5 * MIB);
  assert.equal(a.reduction, 2);
  assert.equal(a.per_layer.length, 6);
  assert.deepEqual(
    Object.keys(a.per_layer[0]).filter((k) => k.endsWith("_bytes") || k === "layer").sort(),
    [
      "attention_bytes",
      "critical_bytes",
      "dense_bytes",
      "expert_bytes",
      "layer",
      "naive_bytes",
      "serial_bytes",
    ],
  );
  assert.equal(a.per_layer[0].dense_bytes, 1_572_864);
  const text = await cflow(["analyze", "--arch", "arch2_4_combined", ...TABLE]);
  assert.equal(text.code, EXIT.OK, text.stderr);
  assert.match(text.stdout, /naive +9\.00 MiB/);
  assert.match(text.stdout, /critical +4\.50 MiB/);
  assert.match(text.stdout, /serial +16\.50 MiB/);
  assert.match(text.stdout, /reduction 2\.00x/);
});

Deno.test("analyze: arch1, arch3, arch4 stay at 9.00 MiB; arch2_4_sync reaches 4.50", async () => {
  for (
    const arch of ["arch1_decoupled_streams", "arch3_pipeline_registers", "arch4_async_experts"]
  ) {
    assert.equal((await json(["--arch", arch, ...TABLE])).critical_bytes, 9 * MIB, arch);
  }
  assert.equal((await json(["--arch", "arch2_4_sync", ...TABLE])).critical_bytes, 4.5 * MIB);
});

Deno.test("analyze: Gemma 4 26B-A4B per MoE layer, 23.79 -> 15.86 MB (10^6), 1.50x", async () => {
  const a = await json([
    "--arch",
    "arch2_4_combined",
    "--hidden",
    "2816",
    "--layers",
    "1",
    "--ffn",
    "2112",
    "--experts",
    "128",
    "--top-k",
    "8",
    "--expert-ffn",
    "704",
    "--heads",
    "16",
    "--kv-heads",
    "16",
  ]);
  const mb = (b: number) => (b / 1e6).toFixed(2);
  assert.equal(mb(a.naive_bytes), "23.79");
  assert.equal(mb(a.critical_bytes), "15.86");
  assert.equal(a.reduction.toFixed(2), "1.50");
  // the paper prints 23.7 -> 15.8: the same numbers truncated
  assert.equal(Math.floor(a.naive_bytes / 1e5) / 10, 23.7);
  assert.equal(Math.floor(a.critical_bytes / 1e5) / 10, 15.8);
});

Deno.test("analyze: bad flags are usage errors that say what is wrong", async () => {
  const unknown = await cflow(["analyze", "--arch", "arch9", ...TABLE]);
  assert.equal(unknown.code, EXIT.USAGE);
  assert.match(unknown.stderr, /unknown architecture 'arch9'.*arch2_4_combined/);
  const topK = await cflow(["analyze", "--arch", "arch2_4_sync", ...TABLE, "--top-k", "9"]);
  assert.equal(topK.code, EXIT.USAGE);
  assert.match(topK.stderr, /--top-k \(9\) must be at most --experts \(8\)/);
  const notInt = await cflow(["analyze", "--arch", "arch2_4_sync", ...TABLE, "--hidden", "-3"]);
  assert.equal(notInt.code, EXIT.USAGE);
  assert.match(notInt.stderr, /--hidden/);
  const gqa = await cflow(["analyze", "--arch", "arch2_4_sync", ...TABLE, "--kv-heads", "3"]);
  assert.equal(gqa.code, EXIT.USAGE);
  assert.match(gqa.stderr, /multiple of --kv-heads/);
});

const SMOLLM2 = SMOLLM2_GGUF;

Deno.test({
  name: "analyze takes a GGUF (converted through the cache) and says what the report is",
  ignore: (() => {
    try {
      return !Deno.statSync(SMOLLM2).isFile;
    } catch {
      return true;
    }
  })(),
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-analyze-" });
    try {
      const out = await new Deno.Command(CFLOW, {
        args: ["analyze", SMOLLM2],
        env: { CFLOW_KERNELS: "", CFLOW_THREADS: "", NO_COLOR: "1", CFLOW_CACHE: cache },
        stdin: "null",
      }).output();
      const d = new TextDecoder();
      const stdout = d.decode(out.stdout);
      assert.equal(out.code, EXIT.OK, d.decode(out.stderr));
      assert.match(
        stdout,
        /the critical-path bandwidth model of the report \(eq\. 4\.23\): "Pipeline-Native/,
      );
      assert.match(stdout, /^ {2}0-29 /m); // SmolLM2's 30 layers, one row
      // The conversion went into the cache's converted/, once.
      const made = [...Deno.readDirSync(`${cache}/converted`)].filter((e) =>
        e.name.endsWith(".cflow")
      );
      assert.equal(made.length, 1);
      // It is the conversion generate makes and reuses (each tensor keeps its type).
      assert.match(made[0].name, /\.auto\.cflow$/);
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});
