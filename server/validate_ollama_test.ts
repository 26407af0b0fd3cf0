import assert from "node:assert/strict";
import { ApiError } from "./api_error.ts";
import {
  ollamaFormat,
  validateOllamaChat,
  validateOllamaGenerate,
  validateOllamaShow,
} from "./validate_ollama.ts";
import { DEFAULT_LIMITS } from "./validate_request.ts";
import { humanNumber } from "./describe_model.ts";
import { doneFields, nanoseconds } from "./ollama_format.ts";

/** Validates a chat body; `ignored` null: `--strict` (unknown fields refused). */
const chat = (body: Record<string, unknown>, ignored: string[] | null = []) =>
  validateOllamaChat(
    { model: "m", messages: [{ role: "user", content: "hi" }], ...body },
    DEFAULT_LIMITS,
    1000,
    256,
    ignored ?? undefined,
  );
const gen = (body: Record<string, unknown>) =>
  validateOllamaGenerate({ model: "m", ...body }, DEFAULT_LIMITS, 1000, 256, []);

function refused(f: () => unknown, message: RegExp): void {
  assert.throws(f, (e) => e instanceof ApiError && e.status === 400 && message.test(e.message));
}

Deno.test("validateOllama: Ollama's defaults and the options mapped onto the sampler", () => {
  const d = chat({});
  assert.equal(d.sampling.stream, true);
  assert.equal(d.sampling.temperature, 0.8);
  assert.equal(d.sampling.topK, 40);
  assert.equal(d.sampling.topP, 0.9);
  assert.equal(d.sampling.repetitionPenalty, 1.1);
  assert.equal(d.sampling.penaltyLastN, 64);
  assert.equal(d.sampling.maxTokens, undefined);
  assert.equal(d.sampling.seed, undefined);
  assert.equal(d.sampling.constraint, undefined);
  const o = chat({
    stream: false,
    options: {
      temperature: 0,
      top_k: 5,
      top_p: 0.5,
      min_p: 0.1,
      seed: 7,
      num_predict: 12,
      repeat_penalty: 1,
      repeat_last_n: -1,
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      stop: ["\n"],
      num_ctx: 128,
      mirostat: 0,
      typical_p: 1,
    },
  });
  assert.deepEqual(o.sampling, {
    maxTokens: 12,
    temperature: 0,
    topP: 0.5,
    topK: 5,
    minP: 0.1,
    seed: 7,
    presencePenalty: 0.5,
    frequencyPenalty: -0.5,
    repetitionPenalty: 1,
    penaltyLastN: 128, // -1: num_ctx
    stop: ["\n"],
    stream: false,
    includeUsage: false,
    ignoreEos: false,
  });
  assert.equal(o.numCtx, 128);
  // -1 and -2: no limit but the context; a negative seed: a random one.
  assert.equal(chat({ options: { num_predict: -2, seed: -1 } }).sampling.maxTokens, undefined);
  assert.equal(chat({ options: { seed: -1 } }).sampling.seed, undefined);
});

Deno.test("validateOllama: unknown fields are named, or refused under --strict", () => {
  const ignored: string[] = [];
  chat({ truncate: true, options: { num_thread: 4, mirostat_eta: 0.1 } }, ignored);
  assert.deepEqual(ignored, ["truncate", "options.num_thread", "options.mirostat_eta"]);
  refused(() => chat({ options: { num_gpu: 1 } }, null), /options\.num_gpu/);
  refused(() => chat({ bogus: 1 }, null), /'bogus'/);
  refused(
    () => chat({ messages: [{ role: "user", content: "x", tool_name: "t" }] }, null),
    /tool_name/,
  );
});

Deno.test("validateOllama: what cflow cannot honour is refused, naming it", () => {
  refused(() => chat({ options: { temperature: "hot" } }), /options\.temperature must be a number/);
  refused(() => chat({ options: { top_p: 0 } }), /options\.top_p 0 is not in \(0, 1\]/);
  refused(() => chat({ options: { num_predict: 0 } }), /num_predict/);
  refused(() => chat({ options: { num_ctx: 257 } }), /num_ctx 257 is not in \[1, 256\]/);
  refused(() => chat({ options: { mirostat: 1 } }), /mirostat is not supported/);
  refused(() => chat({ options: { tfs_z: 0.5 } }), /tfs_z is not supported/);
  refused(() => chat({ options: { stop: [""] } }), /must not be empty/);
  refused(() => chat({ options: { stop: ["a", "b", "c", "d", "e"] } }), /more than 4/);
  refused(() => chat({ model: 3 }), /model must be a string/);
  refused(() => chat({ model: "" }), /model is required/);
  refused(() => chat({ think: true }), /thinking/);
  refused(() => chat({ think: "high" }), /thinking/);
  refused(() => chat({ keep_alive: "1 day" }), /keep_alive/);
  refused(() => chat({ tools: [{}] }), /does not support tools/);
  refused(() => chat({ messages: [{ role: "tool", content: "x" }] }), /role must be/);
  refused(
    () => chat({ messages: [{ role: "user", content: "x", images: ["aGk="] }] }),
    /images/,
  );
  refused(() => chat({ messages: [{ role: "user", content: 5 }] }), /content must be a string/);
  refused(() => chat({ messages: "hi" }), /messages must be an array/);
  refused(() => gen({ prompt: "x", suffix: "y" }), /insert/);
  refused(() => gen({ prompt: "x", template: "{{ .Prompt }}" }), /template/);
  refused(() => gen({ prompt: "x", images: ["aGk="] }), /images/);
  refused(() => gen({ prompt: "x", raw: true, system: "s" }), /system/);
  refused(() => gen({ context: [1000] }), /token ids in \[0, 1000\)/);
  refused(() => gen({ context: new Array(257).fill(1) }), /more than 256/);
  refused(() => validateOllamaChat([], DEFAULT_LIMITS, 10, 10, []), /JSON object/);
});

Deno.test("validateOllama: accepted forms of keep_alive, think, format, template and raw", () => {
  for (const k of ["5m", "1h30m", "-1s", "0", "1.5h", 0, -1, 300]) chat({ keep_alive: k });
  chat({ think: false });
  assert.deepEqual(chat({ format: "json" }).sampling.constraint, { kind: "json_object" });
  assert.equal(chat({ format: "" }).sampling.constraint, undefined);
  const schema = { type: "object", properties: { a: { type: ["string", "null"] } } };
  assert.deepEqual(chat({ format: schema }).sampling.constraint, {
    kind: "json_schema",
    schema,
  });
  refused(() => ollamaFormat({ properties: { a: { type: 1 } } }), /format\.properties\.a\.type/);
  refused(() => ollamaFormat(["json"]), /format must be/);
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < 40; i++) deep = { items: deep };
  refused(() => ollamaFormat(deep), /nested deeper/);
  // raw: a template is ignored, as Ollama ignores it then.
  const raw = gen({ prompt: "x", raw: true, template: "{{ .Prompt }}" });
  assert.equal(raw.raw, true);
  const g = gen({ prompt: "hi", system: "be brief", context: [1, 2] });
  assert.deepEqual([g.prompt, g.system, g.context, g.load], ["hi", "be brief", [1, 2], false]);
});

Deno.test("validateOllama: nothing to generate is a load request", () => {
  assert.equal(gen({}).load, true);
  assert.equal(gen({ prompt: "" }).load, true);
  assert.equal(gen({ prompt: "", context: [1] }).load, false);
  assert.equal(gen({ prompt: "", system: "s" }).load, false);
  assert.equal(chat({ messages: [] }).load, true);
  assert.equal(chat({ messages: null }).load, true);
});

Deno.test("validateOllamaShow: model or name", () => {
  assert.deepEqual(validateOllamaShow({ name: "a" }), { model: "a", verbose: false });
  assert.deepEqual(validateOllamaShow({ model: "b", verbose: true }), {
    model: "b",
    verbose: true,
  });
  refused(() => validateOllamaShow({}), /model is required/);
});

Deno.test("ollama_format: durations in nanoseconds, counts from the generation", () => {
  assert.equal(nanoseconds(0.0004), 400);
  assert.equal(nanoseconds(0), 1);
  const f = doneFields(
    {
      text: "",
      completionTokens: 4,
      cachedTokens: 2,
      finishReason: "length",
      aborted: false,
      timings: {
        cache_n: 2,
        prompt_n: 3,
        prompt_ms: 2.5,
        prompt_per_token_ms: 0,
        prompt_per_second: 0,
        predicted_n: 4,
        predicted_ms: 12,
        predicted_per_token_ms: 0,
        predicted_per_second: 0,
      },
    },
    5,
    { started: 100, acquired: 101, ended: 120 },
  );
  assert.deepEqual(f, {
    done: true,
    done_reason: "length",
    total_duration: 20_000_000,
    load_duration: 1_000_000,
    prompt_eval_count: 5,
    prompt_eval_duration: 2_500_000,
    eval_count: 4,
    eval_duration: 12_000_000,
  });
  assert.deepEqual(
    [1, 999, 1000, 134_515_008, 135_000_000, 1_543_714_304, 7e9].map(humanNumber),
    ["1", "999", "1K", "134.52M", "135M", "1.5B", "7B"],
  );
});
