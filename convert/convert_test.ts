import assert from "node:assert/strict";
import { bytesSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";
import { findEntry, MATRIX, readTiledFile, untile, VOCAB_LAYER } from "../formats/cflow/mod.ts";
import { memorySink, writeModel } from "../formats/cflow/writer.ts";
import { dequantizeRow } from "../formats/ggml/mod.ts";
import { ggmlTypeByName } from "../formats/ggml/types.ts";
import { parseGguf, readTensorBytes, tensorByName } from "../formats/gguf/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { TINY, tinyGguf } from "../tests/util/tiny_gguf.ts";
import { buildModelWeights, type MatrixReport } from "./build_weights.ts";
import { convertFile } from "./convert_file.ts";
import { ggufModelSource } from "./gguf_source.ts";
import { dequantizeRows, quantizeRows } from "./quantize_rules.ts";

openKernels({ threads: 1 });

const GGUF_ROLE: [string, number][] = [
  ["attn_q", MATRIX.Q],
  ["attn_k", MATRIX.K],
  ["attn_v", MATRIX.V],
  ["attn_output", MATRIX.O],
  ["ffn_gate", MATRIX.GATE],
  ["ffn_up", MATRIX.UP],
  ["ffn_down", MATRIX.DOWN],
];

async function convertInMemory(
  gguf: Uint8Array,
  quant: "q4_0" | "q8_0" | "f32",
  format: "cflow" | "vflow",
) {
  const src = bytesSource("tiny.gguf", gguf);
  const parsed = parseGguf(src);
  const reports: MatrixReport[] = [];
  const model = buildModelWeights(ggufModelSource(src, parsed, () => {}), {
    quant,
    rule: "ggml",
    measureError: true,
  }, reports);
  const sink = memorySink();
  await writeModel(model, format, sink);
  const out = bytesSource("tiny.cflow", sink.bytes());
  return { src, parsed, reports, out, file: readTiledFile(out, { verifyChecksums: true }) };
}

for (const type of ["Q4_0", "Q8_0"]) {
  for (const format of ["cflow", "vflow"] as const) {
    Deno.test(`GGUF ${type} -> ${format} -> dequantized equals the GGUF tensor dequantized, bit for bit`, async () => {
      const { src, parsed, reports, out, file } = await convertInMemory(
        tinyGguf(type),
        type.toLowerCase() as "q4_0",
        format,
      );
      assert.ok(
        reports.every((r) => r.lossless && r.rms === 0),
        "every matrix re-tiled losslessly",
      );
      const t = ggmlTypeByName(type)!;
      for (let l = 0; l < TINY.layers; l++) {
        for (const [name, id] of GGUF_ROLE) {
          const info = tensorByName(parsed, `blk.${l}.${name}.weight`)!;
          const want = dequantizeRow(t, readTensorBytes(src, info), info.elements);
          const entry = findEntry(file, l, id)!;
          const got = dequantizeRow(t, untile(out, file, entry), info.elements);
          assert.deepEqual(
            new Uint32Array(got.buffer),
            new Uint32Array(want.buffer),
            `blk.${l}.${name}`,
          );
        }
      }
      const embd = tensorByName(parsed, "token_embd.weight")!;
      const got = dequantizeRow(
        t,
        untile(out, file, findEntry(file, VOCAB_LAYER, MATRIX.TOKEN_EMBD)!),
        embd.elements,
      );
      assert.deepEqual(got, dequantizeRow(t, readTensorBytes(src, embd), embd.elements));
    });
  }
}

Deno.test("F16 sources requantize to Q4_0 and report the error they introduced", async () => {
  const { reports, file } = await convertInMemory(tinyGguf("F16", 2), "q4_0", "cflow");
  assert.ok(reports.every((r) => !r.lossless && r.from === "F16" && r.to === "Q4_0"));
  assert.ok(reports.every((r) => r.rms! > 0 && r.maxAbs! >= r.rms!), "errors measured");
  assert.equal(file.geometry.quantType, 1);
});

Deno.test("both Q4 rounding rules keep values within their scale", () => {
  const x = new Float32Array(64 * 3).map((_, i) => Math.sin(i * 1.7) * (1 + (i % 5)));
  for (const rule of ["ggml", "paper"] as const) {
    const q = quantizeRows(x, 3, 64, 1, rule);
    const back = dequantizeRows(q, 3, 64, 1);
    for (let g = 0; g < 6; g++) {
      const part = x.subarray(g * 32, g * 32 + 32);
      const amax = Math.max(...part.map(Math.abs));
      for (let j = 0; j < 32; j++) {
        const err = Math.abs(back[g * 32 + j] - part[j]);
        assert.ok(err <= amax / 7 + 1e-3 * amax, `${rule} group ${g} element ${j}: error ${err}`);
      }
    }
  }
  // The paper rule is symmetric: the extreme maps to nibble 1 or 15, never 0.
  const p = quantizeRows(new Float32Array(32).fill(-2), 1, 32, 1, "paper");
  assert.equal(p[2] & 15, 1);
  const g = quantizeRows(new Float32Array(32).fill(-2), 1, 32, 1, "ggml");
  assert.equal(g[2] & 15, 0);
});

Deno.test("convertFile writes atomically and refuses to overwrite without force", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-convert-" });
  try {
    const input = `${dir}/tiny.gguf`;
    await Deno.writeFile(input, tinyGguf("Q4_0"));
    const output = `${dir}/tiny.cflow`;
    const r = await convertFile(input, output, {
      format: "cflow",
      quant: "q4_0",
      rule: "ggml",
      measureError: false,
    });
    assert.equal((await Deno.stat(output)).size, r.bytes);
    await assert.rejects(
      () =>
        convertFile(input, output, {
          format: "cflow",
          quant: "q4_0",
          rule: "ggml",
          measureError: false,
        }),
      Deno.errors.AlreadyExists,
    );
    await convertFile(input, output, {
      format: "vflow",
      quant: "q8_0",
      rule: "ggml",
      measureError: false,
      force: true,
    });
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.deepEqual(names.sort(), ["tiny.cflow", "tiny.gguf"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a hostile source fails with a FormatError and leaves no output behind", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-hostile-" });
  try {
    const good = tinyGguf("Q4_0");
    const cases: [string, Uint8Array][] = [
      ["truncated", good.subarray(0, good.length - 100)],
      ["bad-magic", Uint8Array.from(good, (b, i) => (i === 0 ? 0x58 : b))],
      ["header-only", good.subarray(0, 30)],
    ];
    for (const [name, bytes] of cases) {
      const input = `${dir}/${name}.gguf`;
      await Deno.writeFile(input, bytes);
      await assert.rejects(
        () =>
          convertFile(input, `${dir}/${name}.cflow`, {
            format: "cflow",
            quant: "q4_0",
            rule: "ggml",
            measureError: false,
          }),
        (e: unknown) => e instanceof FormatError && e.message.includes(input),
      );
    }
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.ok(names.every((n) => n.endsWith(".gguf")), `left behind: ${names.join(", ")}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

for (const name of ["llama", "qwen2"]) {
  Deno.test(`Hugging Face ${name} checkpoint (safetensors) converts, and its weights survive within Q8_0 error`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "cflow-hf-" });
    try {
      const fixture = new URL(`../tests/fixtures/hf/${name}`, import.meta.url).pathname;
      const output = `${dir}/${name}.cflow`;
      const r = await convertFile(fixture, output, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: true,
      });
      assert.equal(r.source.format, "hf");
      assert.ok(r.matrices.length > 0 && r.matrices.every((m) => (m.maxAbs ?? 1) < 0.05));
      const { mapFile } = await import("../ffi/mod.ts");
      const { mappedSource } = await import("../formats/byte_source.ts");
      using f = mapFile(output);
      const file = readTiledFile(mappedSource(f), { verifyChecksums: true });
      const config = JSON.parse(await Deno.readTextFile(`${fixture}/config.json`));
      assert.equal(file.geometry.hidden, config.hidden_size);
      assert.equal(file.geometry.layers, config.num_hidden_layers);
      assert.equal(file.geometry.vocab, config.vocab_size);
      assert.equal(file.metadata.architecture, name);
      if (name === "qwen2") {
        assert.ok(findEntry(file, 0, MATRIX.Q_BIAS) !== undefined, "Qwen2 keeps its QKV biases");
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("a Mixtral-style GGUF (3-D expert tensors) converts losslessly, one expert at a time", async () => {
  for (const format of ["cflow", "vflow"] as const) {
    const { src, parsed, out, file } = await convertInMemory(
      tinyGguf("Q8_0", 5, false, 4),
      "q8_0",
      format,
    );
    assert.equal(file.geometry.experts, 4);
    assert.equal(file.geometry.ffnHidden, 0);
    const t = ggmlTypeByName("Q8_0")!;
    for (let l = 0; l < TINY.layers; l++) {
      const bank = file.experts.get(l)!;
      for (
        const [name, entry] of [["gate", bank.gate], ["up", bank.up], ["down", bank.down]] as const
      ) {
        const info = tensorByName(parsed, `blk.${l}.ffn_${name}_exps.weight`)!;
        const all = dequantizeRow(t, readTensorBytes(src, info), info.elements);
        const per = info.elements / 4;
        for (let e = 0; e < 4; e++) {
          const got = dequantizeRow(t, untile(out, file, entry, e), per);
          assert.deepEqual(
            got,
            all.subarray(e * per, (e + 1) * per),
            `${format} layer ${l} expert ${e} ${name}`,
          );
        }
      }
      const router = findEntry(file, l, MATRIX.ROUTER)!;
      assert.equal(router.rows, 4);
    }
  }
});
