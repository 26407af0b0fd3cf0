import assert from "node:assert/strict";
import { ApiError } from "./api_error.ts";
import { DEFAULT_LIMITS, validateChatRequest } from "./validate_request.ts";
import { TOOL_LIMITS } from "./validate_tools.ts";

const user = [{ role: "user", content: "Weather in Paris?" }];
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

function chat(body: Record<string, unknown>, ignored?: string[]) {
  return validateChatRequest({ messages: user, ...body }, DEFAULT_LIMITS, 1000, 64, ignored);
}

function refused(body: Record<string, unknown>, param: string, pattern?: RegExp): void {
  try {
    chat(body);
  } catch (error) {
    assert.ok(error instanceof ApiError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.param, param, error.message);
    if (pattern) assert.match(error.message, pattern);
    return;
  }
  assert.fail(`accepted ${JSON.stringify(body).slice(0, 200)}, expected a 400 on ${param}`);
}

Deno.test("tools: accepted as given, with tool_choice and parallel_tool_calls", () => {
  const r = chat({ tools: [weather] });
  assert.deepEqual(r.tools, [weather]);
  assert.equal(r.toolChoice, undefined);
  assert.equal(r.parallelToolCalls, true);
  for (const choice of ["none", "auto", "required"]) {
    assert.equal(chat({ tools: [weather], tool_choice: choice }).toolChoice, choice);
  }
  const named = { type: "function", function: { name: "get_weather" } };
  assert.deepEqual(chat({ tools: [weather], tool_choice: named }).toolChoice, named);
  assert.equal(chat({ tools: [weather], parallel_tool_calls: false }).parallelToolCalls, false);
  assert.equal(chat({ tool_choice: "none" }).toolChoice, "none");
  // Optional parts absent or null; strict kept; key order kept (the template writes tojson).
  const bare = { type: "function", function: { name: "now", description: null, strict: true } };
  assert.deepEqual(chat({ tools: [bare] }).tools, [{
    type: "function",
    function: { name: "now", strict: true },
  }]);
  const reordered = { function: { parameters: { type: "object" }, name: "x" }, type: "function" };
  assert.equal(JSON.stringify(chat({ tools: [reordered] }).tools), JSON.stringify([reordered]));
  // Unknown fields inside a tool: ignored and listed, or refused under --strict.
  const ignored: string[] = [];
  chat({ tools: [{ ...weather, cache: 1, function: { ...weather.function, x: 2 } }] }, ignored);
  assert.deepEqual(ignored, ["tools[0].cache", "tools[0].function.x"]);
  refused({ tools: [{ ...weather, cache: 1 }] }, "tools[0].cache", /unknown/);
});

Deno.test("tools: every field checked and bounded, 400s naming it", () => {
  refused({ tools: {} }, "tools", /array/);
  refused({ tools: [] }, "tools", /at least one/);
  refused({ tools: Array(TOOL_LIMITS.maxTools + 1).fill(weather) }, "tools", /more than 128/);
  refused({ tools: [null] }, "tools[0]");
  refused({ tools: [{ type: "retrieval", function: weather.function }] }, "tools[0].type");
  refused({ tools: [{ type: "function" }] }, "tools[0].function");
  for (const name of ["", "a b", "x".repeat(65), "naïve", "a.b", "<tool_call>", 3]) {
    refused(
      { tools: [{ type: "function", function: { name } }] },
      "tools[0].function.name",
    );
  }
  refused({ tools: [weather, weather] }, "tools[1].function.name", /twice/);
  const fn = (extra: Record<string, unknown>) => ({
    tools: [{ type: "function", function: { name: "f", ...extra } }],
  });
  refused(fn({ description: 1 }), "tools[0].function.description");
  refused(fn({ description: "d".repeat(8193) }), "tools[0].function.description");
  refused(fn({ parameters: "object" }), "tools[0].function.parameters");
  refused(fn({ parameters: [] }), "tools[0].function.parameters");
  let deep: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < 20; i++) deep = { type: "object", properties: { a: deep } };
  refused(fn({ parameters: deep }), "tools[0].function.parameters", /deeper than 16/);
  const wide = { type: "object", description: "w".repeat(TOOL_LIMITS.maxSchemaLength) };
  refused(fn({ parameters: wide }), "tools[0].function.parameters", /longer than/);
  refused(fn({ strict: "yes" }), "tools[0].function.strict");
  // tool_choice
  refused({ tools: [weather], tool_choice: "always" }, "tool_choice");
  refused({ tool_choice: "auto" }, "tool_choice", /needs tools/);
  refused({ tool_choice: "required" }, "tool_choice", /needs tools/);
  refused({ tools: [weather], tool_choice: 3 }, "tool_choice");
  refused({ tools: [weather], tool_choice: { type: "x" } }, "tool_choice.type");
  refused(
    { tools: [weather], tool_choice: { type: "function", function: { name: "nope" } } },
    "tool_choice.function.name",
    /not in tools/,
  );
  refused(
    { tools: [weather], tool_choice: { type: "function", function: {} } },
    "tool_choice.function.name",
  );
  refused({ tools: [weather], parallel_tool_calls: "no" }, "parallel_tool_calls");
});

const calls = [{
  id: "call_1",
  type: "function",
  function: { name: "get_weather", arguments: '{"city": "Paris"}' },
}];

Deno.test("tool messages: calls parsed, results with their call id, text parts joined", () => {
  const r = chat({
    messages: [
      { role: "user", content: [{ type: "text", text: "Weather " }, { type: "text", text: "?" }] },
      { role: "assistant", content: null, tool_calls: calls },
      { role: "tool", tool_call_id: "call_1", content: "21 °C" },
      { role: "assistant", content: "Mild.", tool_calls: null },
    ],
  });
  assert.deepEqual(r.messages, [
    { role: "user", content: "Weather ?" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{
        id: "call_1",
        type: "function",
        function: { name: "get_weather", arguments: { city: "Paris" } },
      }],
    },
    { role: "tool", content: "21 °C", tool_call_id: "call_1" },
    { role: "assistant", content: "Mild." },
  ]);
  // Content with calls, and a call without id or type.
  const m = chat({
    messages: [{
      role: "assistant",
      content: "Checking.",
      tool_calls: [{ function: { name: "f", arguments: "{}" } }],
    }],
  }).messages[0];
  assert.deepEqual(m, {
    role: "assistant",
    content: "Checking.",
    tool_calls: [{ type: "function", function: { name: "f", arguments: {} } }],
  });
});

Deno.test("tool messages: every field checked and bounded", () => {
  const at = (m: Record<string, unknown>) => ({ messages: [m] });
  const call = (f: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    at({
      role: "assistant",
      content: null,
      tool_calls: [{ type: "function", function: f, ...extra }],
    });
  refused(at({ role: "tool", content: "x" }), "messages[0].tool_call_id");
  refused(at({ role: "tool", content: "x", tool_call_id: "" }), "messages[0].tool_call_id");
  refused(at({ role: "tool", content: "x", tool_call_id: 5 }), "messages[0].tool_call_id");
  refused(
    at({ role: "tool", content: "x", tool_call_id: "c".repeat(257) }),
    "messages[0].tool_call_id",
  );
  refused(at({ role: "user", content: "x", tool_call_id: "c" }), "messages[0].tool_call_id");
  refused(at({ role: "user", content: "x", tool_calls: calls }), "messages[0].tool_calls");
  refused(at({ role: "assistant", content: null }), "messages[0].content");
  refused(at({ role: "assistant", content: null, tool_calls: [] }), "messages[0].tool_calls");
  refused(at({ role: "assistant", content: null, tool_calls: {} }), "messages[0].tool_calls");
  refused(
    at({ role: "assistant", content: null, tool_calls: Array(65).fill(calls[0]) }),
    "messages[0].tool_calls",
    /more than 64/,
  );
  refused(
    at({ role: "assistant", content: null, tool_calls: [null] }),
    "messages[0].tool_calls[0]",
  );
  refused(call({ name: "f", arguments: "{}" }, { type: "code" }), "messages[0].tool_calls[0].type");
  refused(call({ name: "a b", arguments: "{}" }), "messages[0].tool_calls[0].function.name");
  const args = "messages[0].tool_calls[0].function.arguments";
  refused(call({ name: "f" }), args);
  refused(call({ name: "f", arguments: { a: 1 } }), args, /string/);
  refused(call({ name: "f", arguments: "{a: 1}" }), args, /not JSON/);
  refused(call({ name: "f", arguments: "[1]" }), args, /JSON object/);
  refused(call({ name: "f", arguments: "null" }), args, /JSON object/);
  refused(
    call({ name: "f", arguments: `{"a":${"[".repeat(20)}${"]".repeat(20)}}` }),
    args,
    /deeper/,
  );
  refused(call({ name: "f", arguments: "{}" }, { id: 7 }), "messages[0].tool_calls[0].id");
  // Arguments count against the total text length.
  const long = JSON.stringify({ a: "x".repeat(DEFAULT_LIMITS.maxTextLength) });
  refused(call({ name: "f", arguments: long }), args, /longer than/);
  // Images and other parts are refused, saying so.
  refused(
    at({ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }),
    "messages[0].content[0].type",
    /images/,
  );
});
