// Property test (fast-check, fixed seed): the real configs of every family
// with keys overridden (in the file or in text_config) by boundary numbers,
// wrong types, layer-type lists and rope objects, number literals swapped
// for 1e999 / 1e-400 / -0 / 2^53 + 1, and byte edits of the text, either
// parse into a config whose every size is within HF_CONFIG_LIMITS (heads
// divisible by kv heads, one layer type per layer, top-k ≤ experts, finite
// rope numbers) or throw a FormatError naming config.json, a field and an
// offset inside the text. Shared with `deno task fuzz`.

import assert from "node:assert/strict";
import { assertTarget, hfConfigTarget } from "../../tests/fuzz/properties.ts";
import { FormatError } from "../errors.ts";
import { parseHfConfig } from "./parse_hf_config.ts";

Deno.test("parseHfConfig: any mutated config gives a config within limits or a FormatError", async () => {
  await assertTarget(hfConfigTarget, 1000);
});

// Found by the property: a head_dim derived from hidden_size / heads was not held to
// HF_CONFIG_LIMITS.headDim (65536 / 4 = 16384 was accepted).
Deno.test("parseHfConfig refuses a derived head_dim above the limit", () => {
  const text = JSON.stringify({
    model_type: "qwen2",
    hidden_size: 65536,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    num_hidden_layers: 2,
    intermediate_size: 64,
    vocab_size: 320,
  });
  assert.throws(() => parseHfConfig(text), (e: unknown) => {
    assert.ok(e instanceof FormatError, String(e));
    assert.equal(e.field, "num_attention_heads");
    assert.equal(e.offset, text.indexOf('"num_attention_heads"') + '"num_attention_heads":'.length);
    assert.match(e.message, /head_dim 16384, above 4096/);
    return true;
  });
  // At the limit it is still accepted.
  const ok = parseHfConfig(
    JSON.stringify({ ...JSON.parse(text), num_attention_heads: 16, num_key_value_heads: 16 }),
  );
  assert.equal(ok.headDim, 4096);
});
