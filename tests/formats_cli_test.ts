/**
 * `./cflow convert` and `./cflow inspect` as a user runs them, on the real
 * SmolLM2-135M-Instruct GGUF (fetched by scripts/fetch-models.sh into the
 * user cache, reached through the checkout's cache/models/ link) and on hostile files.
 */
import assert from "node:assert/strict";
import { SMOLLM2_GGUF, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const SMOLLM2 = SMOLLM2_GGUF;
const haveModel = (() => {
  try {
    return Deno.statSync(SMOLLM2).isFile;
  } catch {
    return false;
  }
})();

async function cflow(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(`${ROOT}cflow`, {
    args,
    env: {
      CFLOW_KERNELS: "",
      CFLOW_THREADS: "",
      CFLOW_KERNEL_VARIANT: "",
      CFLOW_CPU_DISABLE: "",
      ...TEST_CACHE_ENV,
    },
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function json(args: string[]) {
  const r = await cflow(args);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

Deno.test({
  name: "SmolLM2-135M converts to .cflow and .vflow; inspect agrees with the GGUF metadata",
  ignore: !haveModel,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-smollm2-" });
    try {
      const gguf = await json(["inspect", SMOLLM2, "--json"]);
      assert.equal(gguf.format, "gguf");
      assert.equal(gguf.architecture, "llama");
      assert.deepEqual(
        [
          gguf.hidden,
          gguf.layers,
          gguf.heads,
          gguf.kv_heads,
          gguf.head_dim,
          gguf.ffn_hidden,
          gguf.vocab,
        ],
        [576, 30, 9, 3, 64, 1536, 49152],
      );
      for (const format of ["cflow", "vflow"]) {
        const out = `${dir}/smollm2.${format}`;
        const conv = await cflow(["convert", SMOLLM2, out]);
        assert.equal(conv.code, 0, conv.stderr);
        assert.equal(conv.stderr, "", "piped, convert prints no progress");
        const r = await json(["inspect", out, "--json"]);
        assert.equal(r.format, format);
        // --quant auto keeps the file's Q4_1 tiles: a type of .cflow 6 / .vflow 2.
        assert.equal(r.version, format === "cflow" ? 6 : 2);
        assert.equal(r.header_bytes, format === "cflow" ? 88 : 64);
        for (
          const k of [
            "architecture",
            "hidden",
            "layers",
            "heads",
            "kv_heads",
            "head_dim",
            "ffn_hidden",
            "vocab",
            "experts",
            "top_k",
            "dense_delay",
            "expert_delay",
            "combine_style",
          ]
        ) {
          assert.equal(r[k], gguf[k], `${format} ${k}`);
        }
        assert.equal(r.tile_rows, 128);
        assert.equal(r.tile_cols, 256);
        assert.equal(r.tile_bytes, 20496); // a full 128 x 256 Q4_1 tile
        assert.equal(r.checksums_ok, true);
        // Every GGUF tensor is present with its shape (tied embeddings: no output).
        assert.equal(r.tensors.length, gguf.tensors.length);
        const q = r.tensors.find((t: { name: string }) => t.name === "blk.0.q");
        assert.deepEqual(q.shape, [576, 576]);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("inspect of a corrupted .cflow names the field and the byte offset and exits non-zero", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-corrupt-" });
  try {
    const { tinyGguf } = await import("./util/tiny_gguf.ts");
    await Deno.writeFile(`${dir}/t.gguf`, tinyGguf("Q8_0"));
    const conv = await cflow(["convert", `${dir}/t.gguf`, `${dir}/t.cflow`, "--quant", "q8_0"]);
    assert.equal(conv.code, 0, conv.stderr);
    const good = await Deno.readFile(`${dir}/t.cflow`);
    // A flipped byte inside tile data: structure parses, the section CRC does not match.
    const tile = good.slice();
    tile[good.length - 100] ^= 0xff;
    await Deno.writeFile(`${dir}/tile.cflow`, tile);
    const r1 = await cflow(["inspect", `${dir}/tile.cflow`, "--json"]);
    assert.equal(r1.code, 1);
    assert.equal(JSON.parse(r1.stdout).checksums_ok, false);
    // A header field: the header CRC catches it, named with its offset.
    const head = good.slice();
    head[16] ^= 0x01;
    await Deno.writeFile(`${dir}/head.cflow`, head);
    const r2 = await cflow(["inspect", `${dir}/head.cflow`]);
    assert.equal(r2.code, 1);
    assert.match(r2.stderr, /head\.cflow: header_crc32 at byte 76: checksum mismatch/);
    // Truncated: names what ran past the end.
    await Deno.writeFile(`${dir}/cut.cflow`, good.subarray(0, 1000));
    const r3 = await cflow(["inspect", `${dir}/cut.cflow`]);
    assert.equal(r3.code, 1);
    assert.match(r3.stderr, /cut\.cflow: .* at byte \d+: /);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("convert of a hostile file exits non-zero, names the file, and leaves no output", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-hostile-cli-" });
  try {
    const { tinyGguf } = await import("./util/tiny_gguf.ts");
    const good = tinyGguf("Q4_0");
    const bad = good.slice();
    new DataView(bad.buffer).setBigUint64(8, 1n << 62n, true); // tensor_count
    await Deno.writeFile(`${dir}/bad.gguf`, bad);
    const r = await cflow(["convert", `${dir}/bad.gguf`, `${dir}/bad.cflow`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /bad\.gguf: tensor_count at byte 8/);
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.deepEqual(names, ["bad.gguf"]);
    const usage = await cflow(["convert", `${dir}/bad.gguf`]);
    assert.equal(usage.code, 2);
    const quant = await cflow(["convert", `${dir}/bad.gguf`, `${dir}/x.cflow`, "--quant", "q3"]);
    assert.equal(quant.code, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const haveScript = (() => {
  try {
    return Deno.statSync("/usr/bin/script").isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: "on a terminal convert shows a progress bar (bytes, rate, ETA)",
  ignore: !haveScript,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-pty-" });
    try {
      const fixture = `${ROOT}tests/fixtures/hf/llama`;
      const cmd = `${ROOT}cflow convert ${fixture} ${dir}/x.cflow`;
      const out = await new Deno.Command("/usr/bin/script", {
        args: ["-qec", cmd, "/dev/null"],
        env: { CFLOW_KERNELS: "", CFLOW_THREADS: "" },
        stdin: "null",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      assert.equal(out.code, 0, text);
      assert.match(text, /\[#+\] 100% [0-9.]+\/[0-9.]+ MB [0-9.]+ MB\/s ETA \d+s/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "inspect of a GGUF: name, file type, context, tokenizer, chat template, tensor types; no MoE lines for a dense model",
  ignore: !haveModel,
  async fn() {
    const r = await cflow(["inspect", SMOLLM2]);
    assert.equal(r.code, 0, r.stderr);
    for (
      const line of [
        /^name +Smollm2 135M/m,
        /^architecture +llama$/m,
        /^file type +Q4_1$/m,
        /^context +8192 tokens \(trained\)$/m,
        /^tokenizer +gpt2 \(pre-tokenizer smollm\)$/m,
        /^chat template +yes$/m,
        /^tensor types +Q4_1 x210, F32 x61, Q8_0 x1$/m,
      ]
    ) assert.match(r.stdout, line);
    assert.doesNotMatch(r.stdout, /^experts|^delays/m);
    const j = await json(["inspect", SMOLLM2, "--json"]);
    assert.equal(j.file_type, "Q4_1");
    assert.equal(j.context_length, 8192);
    assert.equal(j.chat_template, true);
    assert.deepEqual(j.tensor_types, { Q4_1: 210, F32: 61, Q8_0: 1 });
  },
});
