import assert from "node:assert/strict";
import rulesFixture from "../tests/fixtures/ggml_kquant/llama_tensor_types.json" with {
  type: "json",
};
import type { ByteSource } from "../formats/byte_source.ts";
import { getInt, getString, parseGguf, writeGguf } from "../formats/gguf/mod.ts";
import { bytesSource } from "../formats/byte_source.ts";
import {
  kquantArchFactsFromGguf,
  type KQuantModelFacts,
  kquantTensorType,
  kquantTensorTypes,
} from "./kquant_rules.ts";

const MODELS = new URL("../cache/models/", import.meta.url);

/** A bounded ByteSource over a file: only the ranges the GGUF parser asks for are read. */
function fileSource(path: string): ByteSource & Disposable {
  const file = Deno.openSync(path, { read: true });
  // The size from a seek, not fstat: Deno checks fstat against where a link leads, and
  // cache/models is a link into the user cache, outside what `deno task fuzz` may read.
  const size = file.seekSync(0, Deno.SeekMode.End);
  return {
    name: path,
    size,
    read(offset: number, length: number): Uint8Array {
      if (offset + length > size) throw new RangeError(`${path}: ${offset}+${length} > ${size}`);
      const out = new Uint8Array(length);
      file.seekSync(offset, Deno.SeekMode.Start);
      let got = 0;
      while (got < length) {
        const n = file.readSync(out.subarray(got));
        if (n === null) throw new RangeError(`${path}: ends at ${offset + got}`);
        got += n;
      }
      return out;
    },
    [Symbol.dispose]: () => file.close(),
  };
}

function skipReason(path: string): string | undefined {
  if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") {
    return "needs --allow-read";
  }
  try {
    Deno.statSync(path);
  } catch {
    return `${path} is absent (scripts/fetch-models.sh gemma3 qwen05b qwen15b)`;
  }
  return undefined;
}

/** llama.cpp's use_more_bits, written out again to name the blocks the test expects to differ. */
function moreBits(i: number, n: number): boolean {
  return i < Math.floor(n / 8) || i >= Math.floor((7 * n) / 8) || (i - Math.floor(n / 8)) % 3 === 2;
}

interface RealModel {
  file: string;
  /** The blocks' order in the file, as llama.cpp before PR #9935 numbered them. */
  fileOrder: "by-layer" | "as-text";
  tensors: number;
}

const REAL: RealModel[] = [
  // Gemma 3 270M: 18 blocks of 640 columns; quantized by a llama.cpp after PR #9935 (its
  // tensor infos are in llama.cpp's by-layer order).
  { file: "gemma-3-270m-q4_k_m.gguf", fileOrder: "by-layer", tensors: 236 },
  // Qwen2.5-Coder 0.5B and 1.5B (Qwen's own GGUFs, general.name "... AWQ" / "... GGUF"):
  // blocks listed as text (0, 1, 10, ..., 19, 2, 20, ...), as in the Hugging Face checkpoint.
  { file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", fileOrder: "as-text", tensors: 291 },
  { file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", fileOrder: "as-text", tensors: 339 },
];

for (const m of REAL) {
  const path = new URL(m.file, MODELS).pathname;
  const skip = skipReason(path);
  Deno.test({
    name: `kquantTensorTypes reproduces every tensor type of ${m.file}${
      skip ? ` (skipped: ${skip})` : ""
    }`,
    ignore: skip !== undefined,
    fn() {
      using src = fileSource(path);
      const gguf = parseGguf(src); // header, metadata and tensor infos only
      assert.equal(gguf.tensors.length, m.tensors);
      assert.equal(getInt(gguf, "general.file_type"), 15, "LLAMA_FTYPE_MOSTLY_Q4_K_M");
      // Made without an importance matrix: llama-quantize records one under quantize.imatrix.*.
      assert.deepEqual([...gguf.metadata.keys()].filter((k) => k.startsWith("quantize.")), []);
      const arch = kquantArchFactsFromGguf(gguf);
      assert.equal(arch.nExpert, 0);
      assert.equal(arch.is70B, false);
      const stored = gguf.tensors.map((t) => t.type.name);
      const infos = gguf.tensors.map((t) => ({ name: t.name, dims: t.dims }));
      const check = (got: ReturnType<typeof kquantTensorTypes>): string[] =>
        infos.flatMap((t, i) => {
          // Tensors llama.cpp does not quantize keep the source type: F32 for these (norms, biases).
          const want = got[i]?.name ?? "F32";
          return want === stored[i] ? [] : [`${t.name}: rules ${want}, file ${stored[i]}`];
        });

      // The files were quantized by llama.cpps that visited the tensors in file order (before
      // PR #9935) or by layer (after): in that order the rules give every stored type.
      const asGiven = check(kquantTensorTypes("q4_k_m", infos, arch, "as-given"));
      assert.deepEqual(asGiven, [], `${m.file}: file order`);

      const byLayer = check(kquantTensorTypes("q4_k_m", infos, arch, "by-layer"));
      if (m.fileOrder === "by-layer") {
        assert.deepEqual(byLayer, [], `${m.file}: current llama.cpp`);
        return;
      }
      // Current llama.cpp numbers the blocks 0..n-1; the older one that made these files gave
      // block b the counter pos(b), its position in the text order. attn_v and ffn_down of
      // block b differ exactly where use_more_bits(b, n) != use_more_bits(pos(b), n).
      const n = arch.nLayer;
      const asText = Array.from({ length: n }, (_, b) => String(b)).sort();
      const expected: number[] = [];
      for (let b = 0; b < n; b++) {
        if (moreBits(b, n) !== moreBits(asText.indexOf(String(b)), n)) expected.push(b);
      }
      const blocks = [...new Set(byLayer.map((s) => Number(/^blk\.(\d+)\./.exec(s)![1])))];
      assert.deepEqual(blocks.sort((a, b) => a - b), expected, `${m.file}: blocks that differ`);
      assert.equal(byLayer.length, 2 * expected.length, "attn_v and ffn_down of each");
      assert.ok(byLayer.every((s) => /\.(attn_v|ffn_down)\.weight:/.test(s)), byLayer.join("\n"));
      console.log(
        `${m.file}: made by a llama.cpp before PR #9935; current llama.cpp would give blocks ` +
          `${expected.join(", ")} the other attn_v / ffn_down type`,
      );
    },
  });
}

const qwen05bSkip = skipReason(new URL(REAL[1].file, MODELS).pathname);
Deno.test(
  `kquantArchFactsFromGguf reads the real files' facts${
    qwen05bSkip ? ` (skipped: ${qwen05bSkip})` : ""
  }`,
  { ignore: qwen05bSkip !== undefined },
  () => {
    using src = fileSource(new URL(REAL[1].file, MODELS).pathname);
    const gguf = parseGguf(src);
    assert.equal(getString(gguf, "general.architecture"), "qwen2");
    assert.deepEqual(kquantArchFactsFromGguf(gguf), {
      arch: "qwen2",
      nLayer: 24,
      nExpert: 0,
      is70B: false,
    });
  },
);

// --- The rules against llama.cpp's own llama_quant_compute_types on mock models. ---

const SCHEMES = ["q4_k_m", "q5_k_m", "q6_k"] as const;

for (const m of rulesFixture.models) {
  Deno.test(`kquantTensorTypes matches llama.cpp's llama_quant_compute_types: ${m.name}`, () => {
    // Rows: [name, dims, type in Q4_K_M, Q5_K_M, Q6_K] (null: kept as in the source).
    const rows = m.tensors as [string, number[], string | null, string | null, string | null][];
    const tensors = rows.map(([name, dims]) => ({ name, dims }));
    const arch = { arch: m.arch, nLayer: m.n_layer, nExpert: m.n_expert, is70B: m.is70B };
    SCHEMES.forEach((scheme, k) => {
      const got = kquantTensorTypes(scheme, tensors, arch);
      const diff = rows.flatMap((r, i) => {
        const g = got[i]?.name ?? null;
        return g === r[2 + k] ? [] : [`${r[0]}: ours ${g}, llama.cpp ${r[2 + k]}`];
      });
      assert.deepEqual(diff, [], `${m.name}, ${scheme}`);
    });
  });
}

Deno.test("the llama.cpp rules fixture reaches every result type", () => {
  const all = new Set<string>();
  for (const m of rulesFixture.models) {
    for (const r of m.tensors) for (const t of r.slice(2)) all.add(String(t));
  }
  // K types, the fallbacks Q5_0 / Q5_1 / Q8_0 / F16, and "kept" (null).
  assert.deepEqual([...all].sort(), [
    "F16",
    "Q4_K",
    "Q5_0",
    "Q5_1",
    "Q5_K",
    "Q6_K",
    "Q8_0",
    "null",
  ]);
  assert.equal(
    rulesFixture.provenance.llama_cpp_commit,
    "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
  );
});

// --- The rules themselves, case by case (llama-quant.cpp at commit 0c1e570). ---

const dense = (nLayer: number, tied = false): KQuantModelFacts => ({
  arch: "llama",
  nLayer,
  nExpert: 0,
  tiedEmbeddings: tied,
});

function typeOf(
  scheme: "q4_k_m" | "q5_k_m" | "q6_k",
  name: string,
  dims: number[],
  model: KQuantModelFacts,
  layer?: number,
): string | undefined {
  return kquantTensorType(scheme, { name, dims, layer }, model)?.name;
}

Deno.test("use_more_bits picks attn_v and ffn_down blocks in Q4_K_M and Q5_K_M, none in Q6_K", () => {
  const m = dense(32);
  const q6 = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31];
  for (const scheme of ["q4_k_m", "q5_k_m"] as const) {
    const base = scheme === "q4_k_m" ? "Q4_K" : "Q5_K";
    for (let b = 0; b < 32; b++) {
      const want = q6.includes(b) ? "Q6_K" : base;
      assert.equal(typeOf(scheme, `blk.${b}.attn_v.weight`, [4096, 1024], m), want, `${b}`);
      assert.equal(typeOf(scheme, `blk.${b}.ffn_down.weight`, [14336, 4096], m), want, `${b}`);
      assert.equal(typeOf(scheme, `blk.${b}.attn_qkv.weight`, [4096, 6144], m), want, `${b}`);
      for (const other of ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"]) {
        assert.equal(typeOf(scheme, `blk.${b}.${other}.weight`, [4096, 4096], m), base, other);
      }
    }
  }
  for (let b = 0; b < 32; b++) {
    assert.equal(typeOf("q6_k", `blk.${b}.attn_v.weight`, [4096, 1024], m), "Q6_K");
    assert.equal(typeOf("q6_k", `blk.${b}.ffn_down.weight`, [14336, 4096], m), "Q6_K");
  }
  // The counter, not the name, decides: `layer` overrides the block number.
  assert.equal(typeOf("q4_k_m", "blk.2.attn_v.weight", [4096, 1024], m, 4), "Q4_K");
});

Deno.test("output and token embeddings: Q6_K, Q8_0 on odd widths and for Falcon", () => {
  for (const scheme of ["q4_k_m", "q5_k_m", "q6_k"] as const) {
    const untied = dense(16);
    assert.equal(typeOf(scheme, "output.weight", [2048, 128256], untied), "Q6_K");
    assert.equal(
      typeOf(scheme, "token_embd.weight", [2048, 128256], untied),
      { q4_k_m: "Q4_K", q5_k_m: "Q5_K", q6_k: "Q6_K" }[scheme],
    );
    const tied = dense(16, true);
    assert.equal(typeOf(scheme, "token_embd.weight", [2048, 128256], tied), "Q6_K");
    assert.equal(typeOf(scheme, "per_layer_token_embd.weight", [7680, 262144], tied), "Q6_K");
    assert.equal(typeOf(scheme, "token_embd.weight", [640, 262144], tied), "Q8_0");
    assert.equal(typeOf(scheme, "output.weight", [896, 151936], untied), "Q8_0");
    assert.equal(typeOf(scheme, "output.weight", [100, 1000], untied), "F16");
    const falcon = { ...untied, arch: "falcon" };
    assert.equal(typeOf(scheme, "output.weight", [4544, 65024], falcon), "Q8_0");
  }
});

Deno.test("fallback for column counts that are not a multiple of 256", () => {
  const m = dense(24);
  // Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and F16 when not a multiple of 32 either.
  assert.equal(typeOf("q4_k_m", "blk.5.attn_q.weight", [896, 896], m), "Q5_0");
  assert.equal(typeOf("q4_k_m", "blk.0.attn_v.weight", [896, 128], m), "Q8_0");
  assert.equal(typeOf("q5_k_m", "blk.5.attn_q.weight", [896, 896], m), "Q5_1");
  assert.equal(typeOf("q5_k_m", "blk.0.ffn_down.weight", [4864 + 32, 896], m), "Q8_0");
  assert.equal(typeOf("q6_k", "blk.5.attn_q.weight", [896, 896], m), "Q8_0");
  for (const scheme of ["q4_k_m", "q5_k_m", "q6_k"] as const) {
    assert.equal(typeOf(scheme, "blk.5.attn_q.weight", [100, 896], m), "F16");
    assert.equal(typeOf(scheme, "blk.5.attn_q.weight", [1024, 100], m)?.endsWith("_K"), true);
  }
});

Deno.test("8 experts: attn_v and attn_k Q8_0, attn_output Q5_K in Q4_K_M; ffn_down layer from the name", () => {
  const mixtral: KQuantModelFacts = {
    arch: "llama",
    nLayer: 32,
    nExpert: 8,
    tiedEmbeddings: false,
  };
  for (const scheme of ["q4_k_m", "q5_k_m", "q6_k"] as const) {
    assert.equal(typeOf(scheme, "blk.3.attn_v.weight", [4096, 1024], mixtral), "Q8_0");
    assert.equal(typeOf(scheme, "blk.3.attn_k.weight", [4096, 1024], mixtral), "Q8_0");
    assert.equal(
      typeOf(scheme, "blk.3.attn_q.weight", [4096, 4096], mixtral)?.endsWith("_K"),
      true,
    );
  }
  assert.equal(typeOf("q4_k_m", "blk.3.attn_output.weight", [4096, 4096], mixtral), "Q5_K");
  assert.equal(typeOf("q5_k_m", "blk.3.attn_output.weight", [4096, 4096], mixtral), "Q5_K");
  assert.equal(typeOf("q6_k", "blk.3.attn_output.weight", [4096, 4096], mixtral), "Q6_K");
  // MoE ffn_down: the block number comes from the name; `layer` is not read.
  assert.equal(
    typeOf("q4_k_m", "blk.3.ffn_down_exps.weight", [14336, 4096, 8], mixtral, 4),
    "Q6_K",
  );
  assert.equal(
    typeOf("q4_k_m", "blk.4.ffn_down_exps.weight", [14336, 4096, 8], mixtral, 3),
    "Q4_K",
  );
  assert.equal(
    typeOf("q5_k_m", "blk.31.ffn_down_shexp.weight", [1024, 4096], { ...mixtral, nExpert: 64 }),
    "Q6_K",
  );
  assert.throws(
    () => typeOf("q4_k_m", "blk.32.ffn_down_exps.weight", [14336, 4096, 8], mixtral),
    RangeError,
  );
  assert.throws(
    () => typeOf("q4_k_m", "enc.blk.1.ffn_down.weight", [14336, 4096], mixtral),
    RangeError,
  );
  // 4 experts: no 8-expert rules.
  assert.equal(
    typeOf("q4_k_m", "blk.3.attn_v.weight", [4096, 1024], { ...mixtral, nExpert: 4 }),
    "Q6_K",
  );
});

Deno.test("70B: attn_v Q5_K where Q4_K_M would give Q4_K; Falcon's ffn_down in Q4_K_M", () => {
  const llama70 = { ...dense(80), is70B: true };
  // n = 80: use_more_bits for blocks < 10, >= 70 and 12, 15, ...; not for 11.
  assert.equal(typeOf("q4_k_m", "blk.11.attn_v.weight", [8192, 1024], llama70), "Q5_K");
  assert.equal(typeOf("q4_k_m", "blk.11.attn_v.weight", [8192, 1024], dense(80)), "Q4_K");
  assert.equal(typeOf("q4_k_m", "blk.12.attn_v.weight", [8192, 1024], llama70), "Q6_K");
  assert.equal(typeOf("q5_k_m", "blk.11.attn_v.weight", [8192, 1024], llama70), "Q5_K");
  assert.equal(typeOf("q6_k", "blk.11.attn_v.weight", [8192, 1024], llama70), "Q6_K");
  assert.equal(typeOf("q4_k_m", "blk.11.ffn_down.weight", [28672, 8192], llama70), "Q4_K");
  const falcon: KQuantModelFacts = {
    arch: "falcon",
    nLayer: 32,
    nExpert: 0,
    tiedEmbeddings: false,
  };
  const down = (b: number) => typeOf("q4_k_m", `blk.${b}.ffn_down.weight`, [18176, 4544], falcon);
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6].map(down), [
    "Q6_K",
    "Q6_K",
    "Q5_K",
    "Q5_K",
    "Q4_K",
    "Q4_K",
    "Q5_K",
  ]);
  assert.equal(typeOf("q5_k_m", "blk.2.ffn_down.weight", [18176, 4352], falcon), "Q6_K");
});

Deno.test("tensors llama.cpp keeps as they are", () => {
  const m = dense(16);
  const kept: [string, number[]][] = [
    ["blk.0.attn_norm.weight", [2048]],
    ["blk.0.attn_q.bias", [2048]],
    ["blk.0.attn_q.weight", [2048, 1]], // ggml_n_dims: 1
    ["blk.0.ffn_gate_inp.weight", [2048, 8]],
    ["blk.0.attn_q_norm.weight", [128, 1]],
    ["position_embd.weight", [768, 1024]],
    ["token_types.weight", [768, 2]],
    ["blk.0.ssm_conv1d.weight", [4, 1536]],
    ["blk.0.time_mix_w1.weight", [2048, 160]],
    ["v.patch_embd.weight", [14, 14, 3, 1152]],
    ["rope_freqs.weight", [64]],
  ];
  for (const [name, dims] of kept) {
    for (const scheme of ["q4_k_m", "q5_k_m", "q6_k"] as const) {
      assert.equal(typeOf(scheme, name, dims, m), undefined, name);
    }
  }
  // A name of 5 characters counts as ending in "weight" in llama.cpp (npos == npos).
  assert.equal(typeOf("q4_k_m", "abcde", [256, 4], m), "Q4_K");
  assert.equal(typeOf("q4_k_m", "abcdef", [256, 4], m), undefined);
});

Deno.test("glm5-next: attn_q_a, attn_q_b and nextn.eh_proj at least Q8_0; its own kept tensors", () => {
  const glm: KQuantModelFacts = { arch: "glm5-next", nLayer: 8, nExpert: 0, tiedEmbeddings: false };
  assert.equal(typeOf("q4_k_m", "blk.3.attn_q_a.weight", [6144, 2048], glm), "Q8_0");
  assert.equal(typeOf("q6_k", "blk.3.nextn.eh_proj.weight", [12288, 6144], glm), "Q8_0");
  assert.equal(typeOf("q4_k_m", "blk.3.attn_k_b.weight", [512, 16384], glm), undefined);
  assert.equal(typeOf("q4_k_m", "blk.3.attn_k_b.weight", [512, 16384], dense(8)), "Q4_K");
});

Deno.test("kquantTensorTypes: counters skip unquantized tensors and count hybrid models' attention", () => {
  // A hybrid model: attention (attn_v) only in blocks 3, 7, 11, 15 of 16; llama.cpp's n and i
  // for attn_v are 4 and 0..3, so use_more_bits(i, 4) (i < 0 || i >= 3 || i % 3 == 2): 2 and 3.
  const tensors: { name: string; dims: number[] }[] = [];
  for (let b = 0; b < 16; b++) {
    tensors.push({ name: `blk.${b}.ffn_down.weight`, dims: [8192, 2048] });
    tensors.push({ name: `blk.${b}.ffn_down.bias`, dims: [2048] });
    if (b % 4 === 3) tensors.push({ name: `blk.${b}.attn_v.weight`, dims: [2048, 512] });
  }
  tensors.push({ name: "token_embd.weight", dims: [2048, 32000] });
  const types = kquantTensorTypes("q4_k_m", tensors, { arch: "lfm2", nLayer: 16, nExpert: 0 });
  const byName = new Map(tensors.map((t, i) => [t.name, types[i]?.name]));
  assert.deepEqual(
    [3, 7, 11, 15].map((b) => byName.get(`blk.${b}.attn_v.weight`)),
    ["Q4_K", "Q4_K", "Q6_K", "Q6_K"],
  );
  // ffn_down: n = 16, use_more_bits for 0, 1, 4, 7, 10, 13, 14, 15.
  assert.deepEqual(
    Array.from({ length: 16 }, (_, b) => byName.get(`blk.${b}.ffn_down.weight`) === "Q6_K" ? b : -1)
      .filter((b) => b >= 0),
    [0, 1, 4, 7, 10, 13, 14, 15],
  );
  assert.equal(byName.get("blk.0.ffn_down.bias"), undefined);
  assert.equal(byName.get("token_embd.weight"), "Q6_K"); // no output.weight: tied
  assert.throws(() => kquantTensorTypes("q4_k_m", [tensors[0], tensors[0]], dense(16)), RangeError);
});

Deno.test("kquantTensorType rejects bad arguments", () => {
  const m = dense(4);
  assert.throws(
    () =>
      kquantTensorType("q4_k_s" as "q4_k_m", { name: "blk.0.attn_q.weight", dims: [256, 256] }, m),
    { name: "RangeError", message: /scheme must be q4_k_m, q5_k_m or q6_k/ },
  );
  assert.throws(() => kquantTensorType("q4_k_m", { name: "x.weight", dims: [] }, m), RangeError);
  assert.throws(
    () => kquantTensorType("q4_k_m", { name: "x.weight", dims: [256, 0.5] }, m),
    RangeError,
  );
  assert.throws(
    () => kquantTensorType("q4_k_m", { name: "x.weight", dims: [256, 4] }, { ...m, nLayer: -1 }),
    RangeError,
  );
  // attn_v needs a counter: a layer or a blk.N. prefix.
  assert.throws(() => kquantTensorType("q4_k_m", { name: "attn_v.weight", dims: [256, 4] }, m), {
    name: "RangeError",
    message: /no layer given/,
  });
});

Deno.test("kquantArchFactsFromGguf: 70B per llama.cpp's model types, expert_count default 0", () => {
  const facts = (arch: string, kv: [string, number][]) =>
    kquantArchFactsFromGguf(parseGguf(bytesSource(
      "m.gguf",
      writeGguf({
        metadata: [
          ["general.architecture", { type: "string", value: arch }],
          ...kv.map((
            [k, v],
          ): [string, { type: "u32"; value: number }] => [`${arch}.${k}`, {
            type: "u32",
            value: v,
          }]),
        ],
      }),
    )));
  assert.equal(
    facts("llama", [["block_count", 80], ["attention.head_count", 64], [
      "attention.head_count_kv",
      8,
    ]]).is70B,
    true,
  );
  assert.equal(
    facts("llama", [["block_count", 80], ["attention.head_count", 64], [
      "attention.head_count_kv",
      64,
    ]]).is70B,
    false,
  ); // 65B
  assert.equal(
    facts("llama", [["block_count", 80], ["attention.head_count", 64], [
      "attention.head_count_kv",
      8,
    ], ["expert_count", 8]]).is70B,
    false,
  );
  assert.equal(facts("qwen2", [["block_count", 80]]).is70B, true);
  assert.equal(facts("jais2", [["block_count", 68]]).is70B, true);
  assert.equal(facts("gemma3", [["block_count", 80]]).is70B, false);
  assert.throws(() => kquantArchFactsFromGguf({ metadata: new Map() }), RangeError);
  assert.throws(() => facts("llama", [["expert_count", 8]]), /llama.block_count is missing/);
  assert.deepEqual(facts("qwen3moe", [["block_count", 48], ["expert_count", 128]]), {
    arch: "qwen3moe",
    nLayer: 48,
    nExpert: 128,
    is70B: false,
  });
});
