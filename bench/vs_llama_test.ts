/**
 * The side-by-side harness's pieces that run without llama.cpp: the gate's arithmetic, the
 * byte and statistics helpers, the random-GGUF generator (scripts/gen-random-gguf.ts) on a tiny
 * geometry, and the cflow worker end to end on that tiny model (fresh processes, as the
 * harness starts them). Not timing-based.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { dequantizeRow } from "../formats/ggml/mod.ts";
import { type GgufValue, parseGguf, readTensorBytes } from "../formats/gguf/mod.ts";
import { Transformer } from "../model/mod.ts";
import { fnv1a64 } from "../runtime/mod.ts";
import { BYTE_TO_CHAR } from "../tokenizer/_unicode.ts";
import { type RandomGeometry, WEIGHT_STD, writeRandomGguf } from "../scripts/gen-random-gguf.ts";
import { runReadProbe } from "../tests/util/read_probe.ts";
import {
  AGREE_TEXT_MAX_BYTES,
  agreement,
  meanMarginDelta,
  readAgreeText,
  seededShuffler,
  spread,
  weightBytes,
} from "./vs_llama.ts";

openKernels({ threads: 1 });

Deno.test("readAgreeText: a file outside what the bench may read says to copy it under cache/", async () => {
  // The bench runs with --allow-read=. (the checkout); Deno refuses other paths with NotCapable.
  const dir = await Deno.makeTempDir({ prefix: "cflow-agree-" });
  try {
    const module = new URL("./_vs_llama_inputs.ts", import.meta.url).href;
    const out = await runReadProbe(
      `import { readAgreeText } from ${JSON.stringify(module)};\n` +
        `try { await readAgreeText("/etc/hostname"); } catch (e) { console.log((e as Error).message); }\n`,
      [dir],
      dir,
    );
    assert.equal(out.code, 0, out.stderr);
    assert.equal(
      out.stdout,
      "--agree-text /etc/hostname: the bench may read only inside the checkout; copy the file " +
        "under cache/ (git-ignored)\n",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("meanMarginDelta: over the positions the other run knows", () => {
  assert.equal(meanMarginDelta([2, 0.5, 1], [1.5, null, 1.25]), 0.375);
  assert.equal(meanMarginDelta([1, 2], [1, 2]), 0);
  assert.ok(Number.isNaN(meanMarginDelta([1], [null])));
  assert.throws(() => meanMarginDelta([1, 2], [1]), RangeError);
});

Deno.test("readAgreeText: UTF-8 within its bound, its sha256; empty, oversized, invalid refused", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const ok = `${dir}/ok.txt`;
    await Deno.writeTextFile(ok, "abc");
    const t = await readAgreeText(ok);
    assert.deepEqual([t.text, t.bytes, t.path], ["abc", 3, ok]);
    assert.equal(t.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const max = `${dir}/max.txt`;
    await Deno.writeFile(max, new Uint8Array(AGREE_TEXT_MAX_BYTES).fill(0x61));
    assert.equal((await readAgreeText(max)).text.length, AGREE_TEXT_MAX_BYTES);
    const big = `${dir}/big.txt`;
    await Deno.writeFile(big, new Uint8Array(AGREE_TEXT_MAX_BYTES + 1).fill(0x61));
    await assert.rejects(readAgreeText(big), /larger than/);
    const empty = `${dir}/empty.txt`;
    await Deno.writeFile(empty, new Uint8Array(0));
    await assert.rejects(readAgreeText(empty), /empty/);
    const bad = `${dir}/bad.txt`;
    await Deno.writeFile(bad, new Uint8Array([0x61, 0xff, 0x62]));
    await assert.rejects(readAgreeText(bad), /not UTF-8/);
    await assert.rejects(readAgreeText(`${dir}/missing.txt`), /missing\.txt/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agreement: both criteria, decided positions, and the random-weights rule", () => {
  // 20 positions; llama.cpp's margin >= 0.6 at the first 10 ("decided").
  const ref = {
    top1: Array.from({ length: 20 }, (_, i) => i),
    margin: Array.from({ length: 20 }, (_, i) => (i < 10 ? 2 : 0.1)),
  };
  const cflow = (splits: number[], delta: number) => ({
    top1: ref.top1.map((t, i) => (splits.includes(i) ? 100 + i : t)),
    refMargin: ref.margin.map((m) => m + delta),
    splitMargin: ref.top1.map((_, i) => (splits.includes(i) ? 0.05 : 0)),
  });
  const one = agreement(ref, cflow([15], 0.01));
  assert.equal(one.agree, 19);
  assert.equal(one.all, 0.95);
  assert.equal(one.decided, 10);
  assert.equal(one.decidedShare, 1);
  assert.ok(Math.abs(one.meanMarginDelta - 0.01) < 1e-12);
  assert.equal(one.maxSplitMargin, 0.05);
  assert.equal(one.pass, true);
  // A split at an undecided position too many: 90% overall.
  assert.equal(agreement(ref, cflow([15, 16], 0.01)).pass, false);
  // ...unless llama.cpp agrees with itself no better in the same run (90% or 85%).
  assert.equal(agreement(ref, cflow([15, 16], 0.01), "trained", undefined, 0.9).pass, true);
  assert.equal(agreement(ref, cflow([15, 16], 0.01), "trained", undefined, 0.95).pass, false);
  assert.equal(agreement(ref, cflow([14, 15, 16], 0.01), "trained", undefined, 0.9).pass, false);
  // One split at a decided position: 90% there.
  const decided = agreement(ref, cflow([3], 0.01));
  assert.equal(decided.decidedShare, 0.9);
  assert.equal(decided.pass, false);
  // Random weights: overall top-1 is not gated, the margin delta is.
  assert.equal(agreement(ref, cflow([12, 13, 14, 15], 0.1), "random").pass, true);
  assert.equal(agreement(ref, cflow([12, 13, 14, 15], 0.2), "random").pass, false);
  assert.equal(agreement(ref, cflow([3], 0.1), "random").pass, false);
  assert.throws(() => agreement(ref, { ...cflow([], 0), top1: [1] }), RangeError);
});

Deno.test("weightBytes: a tied embedding is read whole (plus the looked-up row), an untied one by row", () => {
  const embd = { name: "token_embd.weight", dims: [64, 100], bytes: 6800 };
  const q = { name: "blk.0.attn_q.weight", dims: [64, 64], bytes: 4352 };
  const norm = { name: "output_norm.weight", dims: [64], bytes: 256 };
  assert.deepEqual(weightBytes([embd, q, norm]), {
    total: 11408,
    perToken: 11408 + 68,
    tied: true,
  });
  const out = { name: "output.weight", dims: [64, 100], bytes: 6800 };
  assert.deepEqual(weightBytes([embd, q, norm, out]), {
    total: 18208,
    perToken: 18208 - 6800 + 68,
    tied: false,
  });
});

Deno.test("spread and seededShuffler", () => {
  assert.deepEqual(spread([5, 1, 3]), { median: 3, min: 1, max: 5, n: 3 });
  assert.deepEqual(spread([4, 1, 3, 2]), { median: 2.5, min: 1, max: 4, n: 4 });
  assert.equal(spread([]).n, 0);
  const items = Array.from({ length: 30 }, (_, i) => i);
  const a = seededShuffler(42);
  const first = a(items);
  const second = a(items);
  assert.deepEqual([...first].sort((x, y) => x - y), items);
  assert.notDeepEqual(first, second); // the stream moves on between rounds
  assert.deepEqual(seededShuffler(42)(items), first);
  assert.notDeepEqual(seededShuffler(43)(items), first);
});

/** A byte-level GPT-2 vocabulary without merges: token b is byte b; 256 ends generation. */
const TOKENIZER: [string, GgufValue][] = [
  ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
  ["tokenizer.ggml.tokens", {
    type: "array",
    elementType: "string",
    value: [...BYTE_TO_CHAR, "<|end|>"],
  }],
  ["tokenizer.ggml.token_type", {
    type: "array",
    elementType: "i32",
    value: Int32Array.from([...BYTE_TO_CHAR.map(() => 1), 3]),
  }],
  ["tokenizer.ggml.merges", { type: "array", elementType: "string", value: [] }],
  ["tokenizer.ggml.eos_token_id", { type: "u32", value: 256 }],
];

const TINY: RandomGeometry = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  ffn: 128,
  ropeTheta: 500000,
  eps: 1e-5,
  contextLength: 256,
};

Deno.test("gen-random-gguf: a valid llama GGUF, deterministic, std 0.02, runs without NaNs", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-random-gguf-" });
  try {
    const write = (path: string, seed: number) =>
      writeRandomGguf(path, {
        geometry: TINY,
        tokenizer: TOKENIZER,
        type: "Q4_0",
        seed,
        name: "t",
      });
    const size = await write(`${dir}/a.gguf`, 1);
    await write(`${dir}/b.gguf`, 1);
    await write(`${dir}/c.gguf`, 2);
    const a = await Deno.readFile(`${dir}/a.gguf`);
    assert.equal(a.length, size);
    assert.deepEqual(await Deno.readFile(`${dir}/b.gguf`), a);
    assert.notDeepEqual(await Deno.readFile(`${dir}/c.gguf`), a);

    const src = bytesSource("a.gguf", a);
    const g = parseGguf(src);
    assert.equal(g.metadata.get("llama.vocab_size")?.value, 257);
    assert.equal(g.metadata.get("llama.attention.head_count_kv")?.value, 2);
    assert.equal(g.metadata.get("general.file_type")?.value, 2);
    assert.equal(g.tensors.length, 1 + 9 * TINY.layers + 1);
    assert.ok(!g.tensors.some((t) => t.name === "output.weight"), "tied embeddings");
    const byName = new Map(g.tensors.map((t) => [t.name, t]));
    assert.deepEqual(byName.get("token_embd.weight")?.dims, [64, 257]);
    assert.deepEqual(byName.get("blk.1.attn_k.weight")?.dims, [64, 32]);
    assert.deepEqual(byName.get("blk.0.ffn_down.weight")?.dims, [128, 64]);
    assert.equal(byName.get("blk.0.ffn_up.weight")?.type.name, "Q4_0");
    const norm = byName.get("blk.0.attn_norm.weight")!;
    assert.deepEqual(
      [...dequantizeRow(norm.type, readTensorBytes(src, norm), 64)],
      Array(64).fill(1),
    );
    const up = byName.get("blk.0.ffn_up.weight")!;
    const w = dequantizeRow(up.type, readTensorBytes(src, up), up.elements);
    const mean = w.reduce((s, x) => s + x, 0) / w.length;
    const std = Math.sqrt(w.reduce((s, x) => s + (x - mean) ** 2, 0) / w.length);
    assert.ok(
      Math.abs(mean) < 0.002 && Math.abs(std - WEIGHT_STD) < 0.1 * WEIGHT_STD,
      `${mean} ${std}`,
    );

    await convertFile(`${dir}/a.gguf`, `${dir}/a.cflow`, {
      format: "cflow",
      quant: "q4_0",
      rule: "ggml",
      measureError: false,
    });
    using model = Transformer.load(`${dir}/a.cflow`, { contextLength: 32 });
    for (let pos = 0; pos < 16; pos++) {
      const logits = model.forward((pos * 37) % 257, pos);
      assert.ok(logits.every(Number.isFinite), `position ${pos}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cflow worker: fresh processes give the same greedy tokens at 1 and 2 threads", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-vs-llama-" });
  try {
    const gguf = `${dir}/tiny.gguf`;
    await writeRandomGguf(gguf, {
      geometry: TINY,
      tokenizer: TOKENIZER,
      type: "Q8_0",
      seed: 3,
      name: "t",
    });
    const worker = async (job: Record<string, unknown>) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-prompt",
          "--quiet",
          "--allow-ffi",
          "--allow-read",
          `--allow-write=${dir}`,
          "--allow-env",
          "--allow-run=cat",
          new URL("./_cflow_worker.ts", import.meta.url).pathname,
        ],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(JSON.stringify(job)));
      await w.close();
      const out = await child.output();
      const text = new TextDecoder().decode(out.stdout);
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      return JSON.parse(text.trim().split("\n").pop()!);
    };
    const base = { gguf, quant: "q8_0", cache: `${dir}/converted`, ctx: 64 };
    const prompt = [104, 105, 32, 116, 104, 101, 114, 101];
    const tg = { ...base, mode: "tg", prompt, maxTokens: 12, warmupTokens: 2 };
    const one = await worker({ ...tg, threads: 1 });
    const two = await worker({ ...tg, threads: 2 });
    assert.equal(one.threads, 1);
    assert.equal(two.threads, 2);
    assert.equal(one.generatedTokens, 12);
    assert.equal(one.hash, fnv1a64(one.ids));
    assert.equal(two.hash, one.hash);
    assert.ok(one.tokS > 0);
    for (const key of ["vmHwm", "vmRss", "pss", "pssFile", "pssAnon"]) {
      assert.ok(one.memory[key] > 0, `${key}: ${one.memory[key]}`);
    }
    assert.ok(one.memory.vmHwm >= one.memory.vmRss);
    const stream = await worker({ mode: "stream", threads: 1, bytes: 1 << 20, minMs: 1 });
    assert.ok(stream.gbps > 0 && stream.passes >= 3);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
