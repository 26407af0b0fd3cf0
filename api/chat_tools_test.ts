/**
 * `Model.chat` with tools on Qwen2.5-Coder-0.5B-Instruct (skipped when absent): the call comes
 * back in the returned stats, goes back with its result in OpenAI's shape; a template without
 * tools (SmolLM2's) refuses them.
 */
import assert from "node:assert/strict";
import { loadModel, type ToolChatMessage } from "../mod.ts";
import {
  isFile,
  MODELS_DIR,
  SMOLLM2_GGUF,
  smollm2Present,
  TEST_CACHE,
} from "../tests/util/test_models.ts";

const QWEN = `${MODELS_DIR}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;
const present = isFile(QWEN);

const tools = [{
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "The city name" } },
      required: ["city"],
    },
  },
}];

/** Runs a chat to its end: the text yielded and the returned stats. */
async function chatOf(it: ReturnType<Awaited<ReturnType<typeof loadModel>>["chat"]>) {
  let text = "";
  let r = await it.next();
  while (!r.done) {
    text += r.value.text;
    r = await it.next();
  }
  return { text, stats: r.value };
}

Deno.test({
  name: `Model.chat: tools give toolCalls; the call and its result go back${
    present ? "" : " (skipped: the Qwen2.5-Coder-0.5B GGUF is absent)"
  }`,
  ignore: !present,
  async fn() {
    using model = await loadModel(QWEN, { cache: `${TEST_CACHE}/converted`, contextLength: 1024 });
    const messages: ToolChatMessage[] = [{
      role: "user",
      content: "What is the weather in Paris?",
    }];
    const { text, stats } = await chatOf(
      model.chat(messages, { tools, temperature: 0, maxTokens: 64 }),
    );
    assert.equal(stats.content, null, text);
    assert.equal(stats.toolCalls!.length, 1);
    const [call] = stats.toolCalls!;
    assert.equal(call.function.name, "get_weather");
    assert.equal(JSON.parse(call.function.arguments).city, "Paris");
    // The tokens yielded are the raw reply.
    assert.ok(text.includes('"get_weather"'));

    // OpenAI-shaped history (arguments as a string, content null) renders and runs.
    messages.push({ role: "assistant", content: null, tool_calls: stats.toolCalls });
    messages.push({ role: "tool", tool_call_id: call.id, content: '{"temperature": 22}' });
    const next = await chatOf(model.chat(messages, { tools, temperature: 0, maxTokens: 16 }));
    assert.ok(next.stats.promptTokens > stats.promptTokens);
    assert.ok(Array.isArray(next.stats.toolCalls));
    // Without tools: the stats have no tool fields.
    const plain = await chatOf(model.chat([{ role: "user", content: "Hi" }], { maxTokens: 2 }));
    assert.equal(plain.stats.toolCalls, undefined);

    // A forced call: a question that does not call for the tool still gets a call, whose
    // arguments validate against the tool's parameters (the reply is held to them).
    const forced = await chatOf(model.chat([{ role: "user", content: "Tell me a joke." }], {
      tools,
      toolChoice: { type: "function", function: { name: "get_weather" } },
      temperature: 0.8,
      seed: 7,
      maxTokens: 64,
    }));
    assert.equal(forced.stats.toolCalls!.length, 1, forced.text);
    assert.equal(forced.stats.toolCalls![0].function.name, "get_weather");
    assert.equal(typeof JSON.parse(forced.stats.toolCalls![0].function.arguments).city, "string");
    await assert.rejects(
      () =>
        chatOf(model.chat(messages, {
          tools,
          toolChoice: "required",
          constraint: { kind: "json_object" },
        })),
      /cannot be combined/,
    );
    await assert.rejects(
      () => chatOf(model.chat(messages, { tools: [{ ...tools[0] }, { ...tools[0] }] })),
      /given twice/,
    );
    await assert.rejects(
      () =>
        chatOf(model.chat(messages, { tools: [{ type: "function", function: { name: "a b" } }] })),
      /tools\[0\]/,
    );
  },
});

Deno.test({
  name: `Model.chat: a template that renders no tools refuses them${
    smollm2Present ? "" : " (skipped: the SmolLM2 GGUF is absent)"
  }`,
  ignore: !smollm2Present,
  async fn() {
    using model = await loadModel(SMOLLM2_GGUF, {
      quant: "q8_0",
      cache: `${TEST_CACHE}/converted`,
      contextLength: 256,
    });
    await assert.rejects(
      () => chatOf(model.chat([{ role: "user", content: "Hi" }], { tools })),
      /does not render tools/,
    );
    // tool_choice none: nothing offered, a plain chat.
    const r = await chatOf(
      model.chat([{ role: "user", content: "Hi" }], { tools, toolChoice: "none", maxTokens: 2 }),
    );
    assert.equal(r.stats.toolCalls, undefined);
  },
});
