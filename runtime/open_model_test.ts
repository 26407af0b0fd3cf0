import assert from "node:assert/strict";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE } from "../tests/util/test_models.ts";
import { resolveModel } from "./model_store.ts";
import { openModel, openModelAsync } from "./open_model.ts";

Deno.test({
  name: "openModel: the file's metadata keeps no tokenizer arrays once the tokenizer is built",
  ignore: !smollm2Present,
  async fn() {
    const path = await resolveModel(SMOLLM2_GGUF, { cache: `${TEST_CACHE}/converted` });
    for (const open of [openModel, openModelAsync]) {
      const opened = await open(path, { contextLength: 64 });
      using _model = opened.model;
      const t = opened.file.metadata.tokenizer as Record<string, unknown>;
      assert.equal(typeof t, "object");
      assert.equal(t["tokenizer.ggml.model"], "gpt2"); // scalar keys stay
      for (const [key, value] of Object.entries(t)) {
        assert.ok(!Array.isArray(value), `metadata.tokenizer.${key} is still an array`);
      }
      // The tokenizer holds them: the whole vocabulary, and BPE merges applied.
      assert.equal(opened.tokenizer.vocabSize, 49152);
      const ids = opened.tokenizer.encode("The capital of France is Paris.", {
        addSpecial: false,
        parseSpecial: false,
      });
      assert.ok(ids.length >= 6 && ids.length <= 9, `${ids.length} tokens`);
      assert.equal(opened.tokenizer.decode(ids), "The capital of France is Paris.");
    }
  },
});
