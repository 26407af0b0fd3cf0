// Conversion is lossless on the real GGUF files the suite runs: every tensor of each file,
// converted with the default (`--quant auto`), dequantizes from its tiles to exactly what
// gguf-py's dequantization of the source tensor gives (SHA-256 of the f32 values,
// tests/fixtures/ggml_dequant/files.json, made by tests/reference/gen_gguf_file_dequant.py).
// A file that has not been fetched is reported and its test ignored (the suite fetches SmolLM2,
// Gemma 3 and Qwen2.5-Coder-0.5B; the 1.5B runs where `scripts/fetch-models.sh qwen15b` was run).

import assert from "node:assert/strict";
import { LAYER_ROLES, type Role } from "../arch/mod.ts";
import { isFile, MODELS_DIR } from "../tests/util/test_models.ts";
import { convertFile } from "./convert_file.ts";
import { openGgufSource } from "./gguf_source.ts";
import { openTiledSource } from "./tiled_source.ts";

interface Fixture {
  files: Record<string, {
    size: number;
    tensors: Record<string, { type: string; shape: number[]; sha256: string }>;
  }>;
}

const FIXTURE: Fixture = JSON.parse(
  Deno.readTextFileSync(new URL("../tests/fixtures/ggml_dequant/files.json", import.meta.url)),
);

async function sha256(values: Float32Array): Promise<string> {
  const bytes = new Uint8Array(values.buffer as ArrayBuffer, values.byteOffset, values.byteLength);
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

for (const [name, want] of Object.entries(FIXTURE.files)) {
  const path = `${MODELS_DIR}/${name}`;
  const here = isFile(path, want.size);
  if (!here) {
    console.log(`lossless_files_test: ${name} is not in ${MODELS_DIR}; its test is ignored`);
  }
  Deno.test({
    name: `${name}: every tensor, converted with --quant auto, dequantizes to gguf-py's values`,
    ignore: !here,
    async fn() {
      const dir = await Deno.makeTempDir({ prefix: "cflow-lossless-" });
      const out = `${dir}/model.cflow`;
      try {
        const result = await convertFile(path, out, {
          format: "cflow",
          quant: "auto",
          rule: "ggml",
          outputQuant: "auto",
          measureError: false,
        });
        assert.ok(result.matrices.every((r) => r.lossless), "every matrix re-tiled");
        const gguf = openGgufSource(path);
        const tiled = openTiledSource(out);
        try {
          const seen = new Set<string>();
          const check = async (role: Role, layer: number) => {
            const g = gguf.tensor(role, layer);
            if (g === undefined) return;
            const t = tiled.tensor(role, layer);
            assert.ok(t !== undefined, `${g.name} is in the conversion`);
            const fix = want.tensors[g.name];
            assert.ok(fix !== undefined, `${g.name} is in the fixture`);
            assert.equal(t.typeName, fix.type, `${g.name} keeps its type`);
            const got = await sha256(t.f32Rows(0, t.rows));
            assert.equal(
              got,
              fix.sha256,
              `${g.name} (${fix.type}) dequantizes to gguf-py's values`,
            );
            seen.add(g.name);
          };
          const layers = gguf.hyper.layers;
          for (let l = 0; l < layers; l++) {
            for (const role of LAYER_ROLES) await check(role, l);
          }
          for (const role of ["token_embd", "output_norm", "output"] as const) {
            await check(role, 0);
          }
          const missing = Object.keys(want.tensors).filter((n) => !seen.has(n));
          assert.deepEqual(missing, [], "every tensor of the file was compared");
        } finally {
          gguf.close();
          tiled.close();
        }
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
