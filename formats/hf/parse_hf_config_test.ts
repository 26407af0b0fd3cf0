import assert from "node:assert/strict";
import { FormatError } from "../errors.ts";
import { CONFIG_CASES } from "./_test_configs.ts";
import { HF_CONFIG_LIMITS, type HfConfig, parseHfConfig, readHfConfig } from "./parse_hf_config.ts";

Deno.test("parseHfConfig reads every family the way transformers does", () => {
  assert.ok(Object.keys(CONFIG_CASES).length >= 17);
  for (const [name, { config, transformers: tv }] of Object.entries(CONFIG_CASES)) {
    const c = parseHfConfig(JSON.stringify(config), `${name}/config.json`);
    const msg = (what: string) => `${name}: ${what}`;
    assert.equal(c.hiddenSize, tv.hiddenSize, msg("hiddenSize"));
    assert.equal(c.numLayers, tv.numLayers, msg("numLayers"));
    assert.equal(c.numHeads, tv.numHeads, msg("numHeads"));
    assert.equal(c.numKvHeads, tv.numKvHeads, msg("numKvHeads"));
    assert.equal(c.headDim, tv.headDim, msg("headDim"));
    assert.equal(c.intermediateSize, tv.intermediateSize, msg("intermediateSize"));
    assert.equal(c.vocabSize, tv.vocabSize, msg("vocabSize"));
    assert.equal(c.rmsNormEps, tv.rmsNormEps, msg("rmsNormEps"));
    assert.equal(c.ropeTheta, tv.ropeTheta, msg("ropeTheta"));
    const ropeType = c.ropeScaling === null
      ? "default"
      : c.ropeScaling.rope_type ?? c.ropeScaling.type;
    assert.equal(ropeType, tv.ropeType, msg("rope type"));
    assert.equal(c.ropeLocalTheta, tv.ropeLocalTheta, msg("ropeLocalTheta"));
    assert.equal(c.maxPositionEmbeddings, tv.maxPositionEmbeddings, msg("maxPositionEmbeddings"));
    assert.equal(c.tieWordEmbeddings, tv.tieWordEmbeddings, msg("tieWordEmbeddings"));
    const tvTypes = tv.layerTypes ??
      Array(tv.numLayers).fill(tv.slidingWindow ? "sliding_attention" : "full_attention");
    assert.deepEqual(c.layerTypes, tvTypes, msg("layerTypes"));
    const slides = tvTypes.includes("sliding_attention") && tv.slidingWindow;
    assert.equal(c.slidingWindow, slides ? tv.slidingWindow : null, msg("slidingWindow"));
    if (tv.numExperts === null) assert.equal(c.moe, null, msg("moe"));
    else {
      assert.ok(c.moe !== null, msg("moe"));
      assert.equal(c.moe.numExperts, tv.numExperts, msg("numExperts"));
      assert.equal(c.moe.numExpertsPerTok, tv.numExpertsPerTok, msg("numExpertsPerTok"));
      assert.equal(
        c.moe.expertIntermediateSize,
        tv.moeIntermediateSize ?? tv.intermediateSize,
        msg("expert size"),
      );
      assert.equal(
        c.moe.sharedExpertIntermediateSize,
        tv.sharedExpertIntermediateSize ?? 0,
        msg("shared"),
      );
      assert.equal(
        c.moe.normTopkProb,
        tv.normTopkProb ?? true,
        msg("normTopkProb (Mixtral: always)"),
      );
    }
    assert.deepEqual(c.raw, config, msg("raw"));
  }
});

Deno.test("parseHfConfig normalizes names, RoPE scaling, dtype and MoE layer lists", () => {
  const llama = parseHfConfig(JSON.stringify(CONFIG_CASES.llama31_8b.config));
  assert.equal(llama.family, "llama");
  assert.equal(llama.architecture, "LlamaForCausalLM");
  assert.equal(llama.dtype, "bfloat16");
  assert.deepEqual(llama.ropeScaling, {
    factor: 8,
    low_freq_factor: 1,
    high_freq_factor: 4,
    original_max_position_embeddings: 8192,
    rope_type: "llama3",
  });
  const gemma = parseHfConfig(JSON.stringify(CONFIG_CASES.gemma3_4b.config));
  assert.equal(gemma.family, "gemma3");
  assert.equal(gemma.modelType, "gemma3");
  assert.equal(gemma.architecture, "Gemma3ForConditionalGeneration");
  assert.deepEqual(gemma.ropeScaling, { factor: 8, rope_type: "linear" });
  assert.equal(gemma.dtype, "bfloat16", "the wrapper's torch_dtype");
  const qmoe = parseHfConfig(JSON.stringify(CONFIG_CASES.v5_qwen2_moe.config));
  assert.deepEqual(qmoe.moe?.mlpOnlyLayers, [1]);
  assert.equal(qmoe.moe?.decoderSparseStep, 1);
  // v5 configs carry "dtype" rather than "torch_dtype"; the tiny ones carry neither.
  assert.equal(parseHfConfig('{"model_type": "qwen3", "dtype": "float16"}').dtype, "float16");
  assert.equal(parseHfConfig('{"model_type": "qwen3"}').dtype, null);
  // v5 rope_parameters with scaling.
  const scaled = parseHfConfig(JSON.stringify({
    model_type: "llama",
    rope_parameters: {
      rope_type: "yarn",
      factor: 4,
      rope_theta: 123.5,
      original_max_position_embeddings: 4096,
    },
  }));
  assert.equal(scaled.ropeTheta, 123.5);
  assert.equal(scaled.ropeScaling?.rope_type, "yarn");
  // Qwen sliding window: only from max_window_layers on, only when enabled.
  const sliding = parseHfConfig(JSON.stringify({
    model_type: "qwen2",
    num_hidden_layers: 4,
    use_sliding_window: true,
    sliding_window: 128,
    max_window_layers: 2,
  }));
  assert.deepEqual(sliding.layerTypes, [
    "full_attention",
    "full_attention",
    "sliding_attention",
    "sliding_attention",
  ]);
  assert.equal(sliding.slidingWindow, 128);
  const mixtral = parseHfConfig(
    '{"model_type": "mixtral", "num_hidden_layers": 2, "sliding_window": 4096}',
  );
  assert.deepEqual(mixtral.layerTypes, ["sliding_attention", "sliding_attention"]);
  // Nulls are absent.
  const nulls = parseHfConfig(
    '{"model_type": "llama", "num_key_value_heads": null, "head_dim": null, "rope_scaling": null}',
  );
  assert.equal(nulls.numKvHeads, nulls.numHeads);
  assert.equal(nulls.headDim, nulls.hiddenSize / nulls.numHeads);
  assert.equal(nulls.ropeScaling, null);
});

Deno.test("parseHfConfig keeps __proto__ keys as data", () => {
  const c = parseHfConfig('{"model_type": "llama", "__proto__": {"hidden_size": 8}}');
  assert.equal(c.hiddenSize, 4096);
  assert.equal(Object.getPrototypeOf(c.raw), Object.prototype);
  assert.deepEqual(Object.getOwnPropertyDescriptor(c.raw, "__proto__")?.value, { hidden_size: 8 });
});

/** Asserts that `config` is refused with a FormatError at `field`, at the byte where `needle` starts. */
function refuses(
  config: string,
  field: string,
  needle: string | number | null,
  detail?: RegExp,
): void {
  assert.throws(() => parseHfConfig(config, "m/config.json"), (e: unknown) => {
    assert.ok(e instanceof FormatError, `not a FormatError: ${e}`);
    assert.equal(e.file, "m/config.json");
    assert.equal(e.field, field, e.message);
    if (typeof needle === "number") assert.equal(e.offset, needle, e.message);
    else if (needle !== null) {
      assert.equal(
        e.offset,
        new TextEncoder().encode(config.slice(0, config.indexOf(needle))).length,
        e.message,
      );
    }
    if (detail) assert.match(e.message, detail);
    return true;
  });
}

const L = (extra: string) =>
  `{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4${extra}}`;

Deno.test("parseHfConfig refuses text that is not a JSON object", () => {
  refuses("", "(root)", 0, /expected a value/);
  refuses("[]", "(root)", 0, /JSON object/);
  refuses('{"model_type": "llama",}', "(root)", 23);
  refuses('{"model_type": "llama", "model_type": "qwen2"}', "model_type", 24, /duplicate key/);
  refuses(
    new TextDecoder().decode(new Uint8Array([0x7b, 0xff, 0x7d])),
    "(root)",
    1,
    /expected a key/,
  );
  assert.throws(() => parseHfConfig(new Uint8Array([0x7b, 0xff, 0x7d])), /UTF-8/);
});

Deno.test("parseHfConfig refuses unknown or missing model types", () => {
  refuses("{}", "model_type", 0, /required/);
  refuses('{"model_type": "gpt2"}', "model_type", '"gpt2"', /unsupported model_type "gpt2"/);
  refuses('{"model_type": 3}', "model_type", "3", /must be a string/);
  refuses(
    '{"model_type": "llama", "architectures": "LlamaForCausalLM"}',
    "architectures",
    '"Llama',
    /array/,
  );
  refuses(
    '{"model_type": "llama", "architectures": [1]}',
    "architectures[0]",
    "1]",
    /non-empty string/,
  );
  refuses('{"model_type": "gemma3", "text_config": []}', "text_config", "[]", /object/);
});

Deno.test("parseHfConfig refuses values of the wrong type, non-finite or out of range", () => {
  refuses(
    L(', "num_hidden_layers": "2"'),
    "num_hidden_layers",
    '"2"',
    /must be an integer, found a string/,
  );
  refuses(L(', "num_hidden_layers": 2.5'), "num_hidden_layers", "2.5", /not an integer/);
  refuses(L(', "num_hidden_layers": 0'), "num_hidden_layers", "0}", /outside \[1, 1024\]/);
  refuses(L(', "num_hidden_layers": 1025'), "num_hidden_layers", "1025", /outside/);
  refuses(L(', "num_hidden_layers": -1'), "num_hidden_layers", "-1", /outside/);
  refuses(
    L(', "num_hidden_layers": 1e999'),
    "num_hidden_layers",
    "1e999",
    /Infinity is not finite/,
  );
  refuses(L(', "num_hidden_layers": true'), "num_hidden_layers", "true", /found a boolean/);
  refuses(
    '{"model_type": "llama", "hidden_size": 65537}',
    "hidden_size",
    "65537",
    /outside \[1, 65536\]/,
  );
  refuses(
    '{"model_type": "llama", "num_attention_heads": 0}',
    "num_attention_heads",
    "0}",
    /outside/,
  );
  refuses(L(', "vocab_size": 16777217'), "vocab_size", "16777217", /outside/);
  refuses(L(', "intermediate_size": 0'), "intermediate_size", "0}", /outside/);
  refuses(L(', "max_position_embeddings": 0'), "max_position_embeddings", "0}", /outside/);
  refuses(L(', "rms_norm_eps": 0'), "rms_norm_eps", "0}", /outside \(0, 1\)/);
  refuses(L(', "rms_norm_eps": -1e-6'), "rms_norm_eps", "-1e-6", /outside/);
  refuses(L(', "rms_norm_eps": "1e-6"'), "rms_norm_eps", '"1e-6"', /must be a number/);
  refuses(L(', "rms_norm_eps": NaN'), "rms_norm_eps", "NaN", /expected a value/);
  refuses(L(', "rms_norm_eps": Infinity'), "rms_norm_eps", "Infinity", /expected a value/);
  refuses(L(', "rope_theta": 0'), "rope_theta", "0}", /outside/);
  refuses(L(', "rope_theta": 1e400'), "rope_theta", "1e400", /not finite/);
  refuses(L(', "tie_word_embeddings": "false"'), "tie_word_embeddings", '"false"', /true or false/);
  refuses(L(', "tie_word_embeddings": 0'), "tie_word_embeddings", "0}", /true or false/);
  refuses(L(', "sliding_window": -1'), "sliding_window", "-1", /outside/);
  refuses(L(', "head_dim": 0'), "head_dim", "0}", /outside/);
  refuses(L(', "head_dim": 4097'), "head_dim", "4097", /outside/);
});

Deno.test("parseHfConfig refuses inconsistent head counts", () => {
  refuses(
    '{"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3}',
    "num_attention_heads",
    "3}",
    /not a multiple/,
  );
  assert.equal(
    parseHfConfig(
      '{"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3, "head_dim": 32}',
    ).headDim,
    32,
  );
  refuses(
    L(', "num_key_value_heads": 3'),
    "num_key_value_heads",
    "3}",
    /does not divide num_attention_heads 4/,
  );
  refuses(L(', "num_key_value_heads": 8'), "num_key_value_heads", "8}", /outside \[1, 4\]/);
  refuses(L(', "num_key_value_heads": 0'), "num_key_value_heads", "0}", /outside/);
});

Deno.test("parseHfConfig refuses bad RoPE settings", () => {
  refuses(L(', "rope_scaling": 2'), "rope_scaling", "2}", /must be an object/);
  refuses(
    L(', "rope_scaling": {"rope_type": "linear", "factor": 0}'),
    "rope_scaling.factor",
    "0}",
    /outside/,
  );
  refuses(
    L(', "rope_scaling": {"rope_type": "linear", "factor": -2}'),
    "rope_scaling.factor",
    "-2",
    /outside/,
  );
  refuses(
    L(', "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta": 1e999}'),
    "rope_scaling.beta",
    "1e999",
    /not finite/,
  );
  refuses(
    L(', "rope_scaling": {"rope_type": "x", "a": [1, -1e999]}'),
    "rope_scaling.a[1]",
    "-1e999",
    /-Infinity is not finite/,
  );
  refuses(
    L(', "rope_scaling": {"rope_type": 5}'),
    "rope_scaling.rope_type",
    "5}",
    /must be a string/,
  );
  refuses(
    L(', "rope_parameters": {"rope_type": "default", "rope_theta": -1}'),
    "rope_parameters.rope_theta",
    "-1",
    /outside/,
  );
  refuses(
    L(', "rope_theta": 10, "rope_parameters": {"rope_theta": 20}'),
    "rope_theta",
    "10,",
    /disagrees with rope_parameters.rope_theta 20/,
  );
  refuses(
    '{"model_type": "gemma3_text", "rope_parameters": {"sliding_attention": {"rope_theta": 1}}}',
    "rope_parameters",
    '{"sliding',
    /no full_attention/,
  );
  refuses(
    '{"model_type": "gemma3_text", "rope_parameters": {"full_attention": {"rope_theta": 1}, "sliding_attention": {"rope_theta": 1e999}}}',
    "rope_parameters.sliding_attention.rope_theta",
    "1e999",
  );
  const ok = parseHfConfig(
    '{"model_type": "gemma3_text", "rope_parameters": {"full_attention": {"rope_theta": 5, "rope_type": "linear", "factor": 2}, "sliding_attention": {"rope_theta": 7}}}',
  );
  assert.deepEqual([ok.ropeTheta, ok.ropeLocalTheta, ok.ropeScaling], [5, 7, {
    rope_theta: 5,
    rope_type: "linear",
    factor: 2,
  }]);
});

Deno.test("parseHfConfig refuses bad layer types and sliding windows", () => {
  refuses(
    L(', "num_hidden_layers": 2, "layer_types": ["full_attention"]'),
    "layer_types",
    "[",
    /1 entries for 2 layers/,
  );
  refuses(
    L(', "num_hidden_layers": 1, "layer_types": ["chunked_attention"]'),
    "layer_types[0]",
    '"chunked',
    /one of/,
  );
  refuses(
    L(', "num_hidden_layers": 1, "layer_types": ["sliding_attention"]'),
    "sliding_window",
    0,
    /sliding_window is not set/,
  );
  refuses(
    '{"model_type": "gemma3_text", "sliding_window_pattern": 0}',
    "sliding_window_pattern",
    "0}",
    /outside/,
  );
});

Deno.test("parseHfConfig refuses inconsistent MoE settings", () => {
  refuses(
    '{"model_type": "mixtral", "num_local_experts": 0}',
    "num_local_experts",
    "0}",
    /outside \[1, 4096\]/,
  );
  refuses(
    '{"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 5}',
    "num_experts_per_tok",
    "5}",
    /outside \[1, 4\]/,
  );
  refuses(
    '{"model_type": "olmoe", "num_experts": 4}',
    "num_experts_per_tok",
    0,
    /defaults to 8, more than the 4 experts/,
  );
  refuses(
    '{"model_type": "olmoe", "num_experts": 4, "num_experts_per_tok": 0}',
    "num_experts_per_tok",
    "0}",
    /outside/,
  );
  refuses(
    '{"model_type": "qwen3_moe", "num_experts": 8, "num_local_experts": 4}',
    "num_experts",
    "8,",
    /disagrees with num_local_experts 4/,
  );
  refuses(
    '{"model_type": "qwen3_moe", "moe_intermediate_size": "768"}',
    "moe_intermediate_size",
    '"768"',
    /integer/,
  );
  refuses(
    '{"model_type": "qwen2_moe", "num_hidden_layers": 2, "mlp_only_layers": [2]}',
    "mlp_only_layers[0]",
    "2]",
    /outside \[0, 1\]/,
  );
  refuses(
    '{"model_type": "qwen2_moe", "num_hidden_layers": 3, "mlp_only_layers": [1, 1]}',
    "mlp_only_layers[1]",
    "1]",
    /twice/,
  );
  refuses('{"model_type": "qwen2_moe", "mlp_only_layers": 1}', "mlp_only_layers", "1}", /array/);
  refuses(
    '{"model_type": "qwen3_moe", "norm_topk_prob": 1}',
    "norm_topk_prob",
    "1}",
    /true or false/,
  );
  refuses(
    '{"model_type": "qwen3_moe", "decoder_sparse_step": 0}',
    "decoder_sparse_step",
    "0}",
    /outside/,
  );
});

Deno.test("parseHfConfig names nested Gemma 3 fields with their text_config path", () => {
  const text =
    '{"model_type": "gemma3", "text_config": {"num_attention_heads": 8, "num_key_value_heads": 3}}';
  refuses(text, "text_config.num_key_value_heads", "3}", /does not divide/);
  const d = parseHfConfig('{"model_type": "gemma3"}');
  assert.equal(d.vocabSize, 262208, "Gemma3TextConfig defaults without text_config");
});

Deno.test("parseHfConfig limits match the documented sanity limits", () => {
  assert.equal(HF_CONFIG_LIMITS.numLayers.max, 1024);
  assert.equal(HF_CONFIG_LIMITS.hiddenSize.max, 65536);
  const c: HfConfig = parseHfConfig(L(', "num_hidden_layers": 1024'));
  assert.equal(c.numLayers, 1024);
  assert.ok(Object.isFrozen(c));
});

Deno.test({
  name: "readHfConfig reads a file and names its path in errors",
  ignore:
    Deno.permissions.querySync({ name: "read", path: "tests/fixtures/hf" }).state !== "granted",
  fn() {
    const c = readHfConfig("tests/fixtures/hf/llama/config.json");
    assert.equal(c.family, "llama");
    assert.throws(
      () => readHfConfig("tests/fixtures/hf"),
      (e) => e instanceof FormatError && /not a regular file/.test(e.message),
    );
    assert.throws(() => readHfConfig("tests/fixtures/hf/nope.json"), Deno.errors.NotFound);
  },
});
