import assert from "node:assert/strict";
import fixture from "../tests/fixtures/chat/tool_cases.json" with { type: "json" };
import chatCases from "../tests/fixtures/chat/cases.json" with { type: "json" };
import { renderChat } from "../chat/mod.ts";
import { ggufTokenizerMetadata } from "../tokenizer/_test_utils.ts";
import { tokenizerFromGgufMetadata } from "../tokenizer/tokenizer_from_gguf_metadata.ts";
import { isFile, MODELS_DIR } from "../tests/util/test_models.ts";
import { ApiError } from "./api_error.ts";
import { eventDeltas, finishWithCalls, toolTurn } from "./_tool_turn.ts";
import { DEFAULT_LIMITS, validateChatRequest } from "./validate_request.ts";

// The prompt the server renders for OpenAI requests with tools, against what transformers
// renders for them with the same Qwen2.5-Coder template (tests/reference/gen_tool_chat_fixture.py).

/** The server's prompt for a request body: validation, the tool side, the template. */
function serverPrompt(body: unknown, template = fixture.template): string {
  const r = validateChatRequest(body, DEFAULT_LIMITS, 151936, 32768, undefined);
  const tools = toolTurn(template, r);
  return renderChat(template, r.messages, {
    bosToken: fixture.bos_token,
    eosToken: fixture.eos_token,
    addGenerationPrompt: true,
    ...(tools.extra === undefined ? {} : { extra: tools.extra }),
  });
}

Deno.test("tools: the fixture's template is Qwen2.5-Coder's (as chat/cases.json has it)", () => {
  assert.equal(fixture.template, chatCases.templates.qwen25_coder.template);
});

for (const c of fixture.cases) {
  Deno.test(`tools: ${c.name} renders byte for byte as transformers does`, () => {
    assert.equal(serverPrompt(c.request), c.expected);
  });
}

Deno.test("tools: a forced call carries its schema as the generation's constraint", () => {
  const c = fixture.cases.find((c) => c.name === "asked")!;
  // The prompt is the same as under auto (no opener: the constraint makes a bare JSON call).
  const auto = serverPrompt(c.request);
  assert.equal(serverPrompt({ ...c.request, tool_choice: "required" }), auto);
  const r = validateChatRequest(
    { ...c.request, tool_choice: { type: "function", function: { name: "get_time" } } },
    DEFAULT_LIMITS,
    151936,
    32768,
  );
  const turn = toolTurn(fixture.template, r);
  assert.deepEqual(turn.constraint, {
    kind: "json_schema",
    schema: {
      type: "object",
      properties: {
        name: { const: "get_time" },
        arguments: c.request.tools![1].function.parameters,
      },
      required: ["name", "arguments"],
      additionalProperties: false,
    },
  });
  const any = toolTurn(
    fixture.template,
    validateChatRequest({ ...c.request, tool_choice: "required" }, DEFAULT_LIMITS, 151936, 32768),
  );
  const schema = (any.constraint as { schema: { anyOf: { properties: unknown }[] } }).schema;
  assert.deepEqual(schema.anyOf.map((s) => s.properties), [
    { name: { const: "get_weather" }, arguments: c.request.tools![0].function.parameters },
    { name: { const: "get_time" }, arguments: c.request.tools![1].function.parameters },
  ]);
  // auto and none: no opener, no constraint; none parses nothing.
  const auto2 = toolTurn(fixture.template, validateChatRequest(c.request, DEFAULT_LIMITS, 9, 9));
  assert.equal(auto2.constraint, undefined);
  assert.ok(auto2.parser !== undefined);
  const none = toolTurn(
    fixture.template,
    validateChatRequest({ ...c.request, tool_choice: "none" }, DEFAULT_LIMITS, 9, 9),
  );
  assert.deepEqual(none, {});
});

Deno.test("tools: a template that renders no tools (SmolLM2's) refuses them with a 400", () => {
  const smollm2 = chatCases.templates.smollm2.template;
  const refused = (body: Record<string, unknown>, param: string) => {
    const r = validateChatRequest(body, DEFAULT_LIMITS, 49152, 8192);
    assert.throws(() => toolTurn(smollm2, r), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      assert.equal(e.code, "tools_unsupported");
      assert.match(e.message, /does not render tools/);
      return true;
    });
  };
  const called = fixture.cases.find((c) => c.name === "called")!.request;
  refused({ messages: [{ role: "user", content: "Hi" }], tools: called.tools }, "tools");
  refused({ messages: called.messages }, "messages[1].tool_calls");
  refused({ messages: [{ role: "tool", content: "1", tool_call_id: "c" }] }, "messages[0].role");
  // tool_choice none with tools: nothing is offered, so nothing is refused.
  assert.deepEqual(
    toolTurn(
      smollm2,
      validateChatRequest(
        { messages: [{ role: "user", content: "Hi" }], tools: called.tools, tool_choice: "none" },
        DEFAULT_LIMITS,
        49152,
        8192,
      ),
    ),
    {},
  );
});

Deno.test("tools: finish reasons and streamed deltas", () => {
  assert.equal(finishWithCalls("stop", 1), "tool_calls");
  assert.equal(finishWithCalls("stop", 0), "stop");
  assert.equal(finishWithCalls("length", 2), "length");
  const call = {
    id: "call_1",
    type: "function" as const,
    function: { name: "f", arguments: "{}" },
  };
  assert.deepEqual(
    eventDeltas([{ kind: "content", text: "Hi" }, { kind: "call", index: 0, call }]),
    [
      { content: "Hi" },
      {
        tool_calls: [{
          index: 0,
          id: "call_1",
          type: "function",
          function: { name: "f", arguments: "" },
        }],
      },
      { tool_calls: [{ index: 0, function: { arguments: "{}" } }] },
    ],
  );
});

const QWEN = `${MODELS_DIR}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`;
const qwenPresent = isFile(QWEN);

Deno.test({
  name: `tools: <tool_call> is one token of Qwen's vocabulary, kept in generated text${
    qwenPresent ? "" : " (skipped: the Qwen2.5-Coder-0.5B GGUF is absent)"
  }`,
  ignore: !qwenPresent,
  fn() {
    const tok = tokenizerFromGgufMetadata(ggufTokenizerMetadata(QWEN), { name: "qwen" });
    const open = tok.tokenId("<tool_call>")!, close = tok.tokenId("</tool_call>")!;
    assert.equal(typeof open, "number");
    // Generation decodes tokens with tokenBytes: the markup reaches the parser.
    assert.equal(new TextDecoder().decode(tok.tokenBytes(open)), "<tool_call>");
    assert.equal(new TextDecoder().decode(tok.tokenBytes(close)), "</tool_call>");
    assert.equal(tok.isEog(open), false);
    // The rendered history's calls are those tokens (the template writes the markup).
    const c = fixture.cases.find((c) => c.name === "called")!;
    const ids = tok.encode(c.expected, { addSpecial: true, parseSpecial: true });
    // Two in the system prompt's instructions, one per call of the history.
    assert.equal(ids.filter((id) => id === open).length, 4);
    assert.equal(ids.filter((id) => id === close).length, 4);
    assert.equal(tok.decode(ids), c.expected);
  },
});
