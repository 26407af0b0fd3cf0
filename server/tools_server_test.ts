/**
 * Tool calls end to end: the official `openai` client against `cflow serve` on
 * Qwen2.5-Coder-0.5B-Instruct, whose chat template renders tools (Hermes/Qwen2.5 format). A
 * request with a weather tool, the `tool_calls` reply (whole and streamed, the same at
 * temperature 0), a `tool` message with the result, the next reply. Skipped when the model has
 * not been fetched (`bash scripts/fetch-models.sh qwen05b`).
 */
import assert from "node:assert/strict";
import OpenAI from "npm:openai@4.104.0";
import { Ajv } from "ajv";
import { resolveModel } from "../runtime/model_store.ts";
import { isFile, MODELS_DIR, TEST_CACHE } from "../tests/util/test_models.ts";
import { post } from "./_test_server.ts";
import { type Server, startServer } from "./mod.ts";

const QWEN = `${MODELS_DIR}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;
const present = isFile(QWEN);
const skipped = present ? "" : " (skipped: the Qwen2.5-Coder-0.5B GGUF is absent)";

async function withQwen(body: (server: Server) => Promise<void>): Promise<void> {
  const model = await resolveModel(QWEN, { cache: `${TEST_CACHE}/converted` });
  const server = await startServer({ model, port: 0, contextLength: 2048 });
  try {
    await body(server);
  } finally {
    await server.close();
  }
}

const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "The city name" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
};
const asked: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "What is the weather like in Paris today?" },
];

Deno.test({
  name: `tools: the openai client gets a call, whole and streamed, and sends its result${skipped}`,
  ignore: !present,
  async fn() {
    await withQwen(async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const request = {
        model: "qwen",
        messages: asked,
        tools: [weather],
        temperature: 0,
        max_tokens: 64,
      };
      const whole = await client.chat.completions.create(request);
      const choice = whole.choices[0];
      assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
      assert.equal(choice.message.content, null);
      const calls = choice.message.tool_calls!;
      assert.equal(calls.length, 1);
      assert.match(calls[0].id, /^call_[A-Za-z0-9]{24}$/);
      assert.equal(calls[0].type, "function");
      assert.equal(calls[0].function.name, "get_weather");
      const args = JSON.parse(calls[0].function.arguments);
      assert.equal(args.city, "Paris");

      // Streamed: delta.tool_calls pieces (index, id, type, name, then the arguments), no
      // markup or JSON in delta.content, the same call at temperature 0.
      const stream = await client.chat.completions.create({ ...request, stream: true });
      const streamed: { id: string; name: string; arguments: string }[] = [];
      let content = "";
      let finish: string | null = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (c === undefined) continue;
        content += c.delta.content ?? "";
        finish = c.finish_reason ?? finish;
        for (const d of c.delta.tool_calls ?? []) {
          if (d.id !== undefined) {
            assert.equal(d.index, streamed.length);
            assert.equal(d.type, "function");
            streamed.push({ id: d.id, name: d.function!.name!, arguments: "" });
          }
          streamed[d.index].arguments += d.function?.arguments ?? "";
        }
      }
      assert.equal(content, "");
      assert.equal(finish, "tool_calls");
      assert.equal(streamed.length, 1);
      assert.equal(streamed[0].name, "get_weather");
      assert.equal(streamed[0].arguments, calls[0].function.arguments);
      assert.notEqual(streamed[0].id, calls[0].id);

      // The call and its result go back; the server renders them with the template and the
      // next reply comes (this small model answers by echoing JSON: content, not a call of
      // the tool).
      const answered = await client.chat.completions.create({
        ...request,
        messages: [
          ...asked,
          choice.message,
          {
            role: "tool",
            tool_call_id: calls[0].id,
            content: JSON.stringify({ temperature: 22, unit: "celsius", sky: "sunny" }),
          },
        ],
      });
      const next = answered.choices[0];
      assert.ok(["stop", "length", "tool_calls"].includes(next.finish_reason), next.finish_reason);
      assert.ok(answered.usage!.prompt_tokens > whole.usage!.prompt_tokens + 20);
      if (next.finish_reason === "tool_calls") {
        for (const c of next.message.tool_calls!) JSON.parse(c.function.arguments);
      } else {
        assert.equal(typeof next.message.content, "string");
        assert.ok(next.message.content!.length > 0);
        assert.equal(next.message.tool_calls, undefined);
      }
    });
  },
});

Deno.test({
  name:
    `tools: plain replies stay content, streamed as whole; none hides the tools; bad tools get 400s${skipped}`,
  ignore: !present,
  async fn() {
    await withQwen(async (server) => {
      const url = `${server.url}/v1/chat/completions`;
      // With tool_choice none the tools are not shown: the reply is content, never a call.
      const r = await post(url, {
        messages: [{ role: "user", content: "Say hello in French, one word." }],
        tools: [weather],
        tool_choice: "none",
        temperature: 0,
        max_tokens: 8,
      });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(typeof body.choices[0].message.content, "string");
      assert.equal(body.choices[0].message.tool_calls, undefined);
      assert.notEqual(body.choices[0].finish_reason, "tool_calls");
      // Under auto, whatever the reply is (this model answers a greeting with a call of a
      // function it was not offered: content), the streamed reply is the whole one.
      const hello = {
        messages: [{ role: "user", content: "Say hello." }],
        tools: [weather],
        temperature: 0,
        max_tokens: 32,
        logprobs: true,
      };
      const w = await (await post(url, hello)).json();
      const sse = await (await post(url, { ...hello, stream: true })).text();
      let streamed = "";
      let finish = null;
      const calls: string[] = [];
      const tokens: string[] = [];
      for (const line of sse.split("\n")) {
        if (!line.startsWith("data: {")) continue;
        const c = JSON.parse(line.slice(6)).choices[0];
        // Every token's log-probability is streamed, held-back text's included.
        for (const t of c.logprobs?.content ?? []) tokens.push(t.token);
        streamed += c.delta.content ?? "";
        finish = c.finish_reason ?? finish;
        for (const d of c.delta.tool_calls ?? []) calls.push(d.function.arguments);
      }
      const m = w.choices[0].message;
      assert.deepEqual(
        tokens,
        w.choices[0].logprobs.content.map((t: { token: string }) => t.token),
      );
      assert.equal(streamed, m.content ?? "");
      assert.equal(finish, w.choices[0].finish_reason);
      assert.deepEqual(
        calls.filter((a) => a !== ""),
        (m.tool_calls ?? []).map((c: { function: { arguments: string } }) => c.function.arguments),
      );
      for (
        const [bad, param] of [
          [
            { tools: [{ type: "function", function: { name: "no spaces" } }] },
            "tools[0].function.name",
          ],
          [
            { tools: [weather], tool_choice: { type: "function", function: { name: "x" } } },
            "tool_choice.function.name",
          ],
          [{ messages: [{ role: "tool", content: "1" }] }, "messages[0].tool_call_id"],
        ] as const
      ) {
        const res = await post(url, { messages: asked, ...bad });
        const err = await res.json();
        assert.equal(res.status, 400, JSON.stringify(err));
        assert.equal(err.error.param, param);
      }
    });
  },
});

Deno.test({
  name: `tools: required and named calls have arguments valid against the schema${
    present ? "" : skipped
  }`,
  ignore: !present,
  async fn() {
    const ajv = new Ajv({ strict: false });
    const validate = ajv.compile(weather.function.parameters);
    const time = {
      type: "function" as const,
      function: {
        name: "get_time",
        parameters: {
          type: "object",
          properties: { tz: { type: "string", enum: ["UTC", "Europe/Paris"] } },
          required: ["tz"],
          additionalProperties: false,
        },
      },
    };
    const validateTime = ajv.compile(time.function.parameters);
    await withQwen(async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      for (
        const tool_choice of [
          "required",
          { type: "function", function: { name: "get_time" } },
        ] as const
      ) {
        // A question that does not call for a tool: the call is forced all the same.
        const r = await client.chat.completions.create({
          model: "qwen",
          messages: [{ role: "user", content: "Write a haiku about the sea." }],
          tools: [weather, time],
          tool_choice,
          temperature: 0,
          max_tokens: 96,
        });
        const c = r.choices[0];
        assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
        const call = c.message.tool_calls![0];
        const args = JSON.parse(call.function.arguments);
        if (typeof tool_choice === "object") assert.equal(call.function.name, "get_time");
        const ok = call.function.name === "get_time" ? validateTime(args) : validate(args);
        assert.ok(ok, `${call.function.name}(${call.function.arguments})`);
      }
    });
  },
});
