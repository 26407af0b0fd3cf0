/**
 * `outputQuant`: the output matrix (the embedding table of a tied model) may be stored in another
 * tile type than the rest. `"auto"` keeps it at Q8_0 in a Q4_0 file, as llama.cpp's quantizer keeps
 * it at higher precision, unless the source already stores it as Q4_0 (then it re-tiles
 * losslessly); the embedding table of an untied model follows `quant`. Whether such a file computes
 * the right logits is checked against transformers in model/transformer_test.ts (q4_0_out_q8_0).
 */
import assert from "node:assert/strict";
import type { Role } from "../arch/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { convertFile, type ConvertOptions } from "./convert_file.ts";
import { openTiledSource } from "./tiled_source.ts";

openKernels({ threads: 1 });

const FIXTURES = new URL("../tests/fixtures/hf_logits/", import.meta.url).pathname;

async function convert(src: string, out: string, options: Partial<ConvertOptions>) {
  return await convertFile(src, out, {
    format: "cflow",
    quant: "q4_0",
    rule: "ggml",
    measureError: false,
    ...options,
  });
}

function typeOf(path: string, role: Role, layer = 0): string | undefined {
  const s = openTiledSource(path);
  try {
    return s.tensor(role, layer)?.typeName;
  } finally {
    s.close();
  }
}

Deno.test("outputQuant: auto keeps the output matrix at Q8_0 in a Q4_0 file unless its source is Q4_0", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-output-quant-" });
  try {
    // Tied: the embedding table is the output matrix.
    const tied = `${FIXTURES}llama_gqa_tied`;
    await convert(tied, `${dir}/default.cflow`, {});
    assert.equal(typeOf(`${dir}/default.cflow`, "token_embd"), "Q4_0", "default: quant");
    await convert(tied, `${dir}/auto.cflow`, { outputQuant: "auto" });
    assert.equal(typeOf(`${dir}/auto.cflow`, "token_embd"), "Q8_0");
    assert.equal(typeOf(`${dir}/auto.cflow`, "q"), "Q4_0");
    assert.equal(typeOf(`${dir}/auto.cflow`, "down", 1), "Q4_0");
    // A source whose output matrix is Q4_0 already keeps it, byte for byte.
    const again = await convert(`${dir}/default.cflow`, `${dir}/again.cflow`, {
      outputQuant: "auto",
    });
    assert.equal(typeOf(`${dir}/again.cflow`, "token_embd"), "Q4_0");
    assert.ok(again.matrices.find((m) => m.name.includes("token_embd"))?.lossless);
    // Explicit types win; a Q8_0 file is Q8_0 throughout under auto.
    await convert(tied, `${dir}/f32out.cflow`, { outputQuant: "f32" });
    assert.equal(typeOf(`${dir}/f32out.cflow`, "token_embd"), "F32");
    await convert(tied, `${dir}/q8.cflow`, { quant: "q8_0", outputQuant: "auto" });
    assert.equal(typeOf(`${dir}/q8.cflow`, "token_embd"), "Q8_0");

    // Untied: the output matrix goes to Q8_0, the embedding table stays Q4_0.
    await convert(`${FIXTURES}llama_gqa_untied`, `${dir}/untied.cflow`, { outputQuant: "auto" });
    assert.equal(typeOf(`${dir}/untied.cflow`, "output"), "Q8_0");
    assert.equal(typeOf(`${dir}/untied.cflow`, "token_embd"), "Q4_0");
    // .vflow carries the same choice.
    await convert(tied, `${dir}/auto.vflow`, { format: "vflow", outputQuant: "auto" });
    assert.equal(typeOf(`${dir}/auto.vflow`, "token_embd"), "Q8_0");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
