import assert from "node:assert/strict";
import { ApiError } from "./api_error.ts";
import { readJsonBody } from "./read_json_body.ts";
import {
  DEFAULT_LIMITS,
  validateChatRequest,
  validateCompletionRequest,
  validateDetokenizeRequest,
  validateTokenizeRequest,
} from "./validate_request.ts";

const user = [{ role: "user", content: "Hi" }];

function refused(f: () => unknown, param: string | null, pattern?: RegExp): void {
  try {
    f();
  } catch (error) {
    assert.ok(error instanceof ApiError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.param, param);
    if (pattern) assert.match(error.message, pattern);
    return;
  }
  assert.fail(`accepted, expected a 400 on ${param}`);
}

Deno.test("chat requests: defaults, and every field checked and bounded", () => {
  const r = validateChatRequest({ model: "m", messages: user }, DEFAULT_LIMITS, 1000, 64);
  assert.equal(r.temperature, 1);
  assert.equal(r.topP, 1);
  assert.equal(r.maxTokens, undefined);
  assert.deepEqual(r.stop, []);
  const chat = (extra: Record<string, unknown>) => () =>
    validateChatRequest({ messages: user, ...extra }, DEFAULT_LIMITS, 1000, 64);
  refused(chat({ n: 2 }), "n", /n must be 1/);
  refused(chat({ temperature: 2.5 }), "temperature");
  refused(chat({ temperature: "0" }), "temperature");
  refused(chat({ top_p: 0 }), "top_p");
  refused(chat({ top_k: -1 }), "top_k");
  refused(chat({ top_k: 1.5 }), "top_k");
  refused(chat({ min_p: 2 }), "min_p");
  refused(chat({ seed: 1.5 }), "seed");
  refused(chat({ seed: -1 }), "seed");
  refused(chat({ presence_penalty: 3 }), "presence_penalty");
  refused(chat({ frequency_penalty: -3 }), "frequency_penalty");
  refused(chat({ max_tokens: 0 }), "max_tokens");
  refused(chat({ max_tokens: 65 }), "max_tokens");
  refused(chat({ stop: ["a", "b", "c", "d", "e"] }), "stop");
  refused(chat({ stop: 3 }), "stop");
  refused(chat({ stop: [""] }), "stop");
  refused(chat({ logprobs: 1 }), "logprobs", /boolean/);
  refused(chat({ top_logprobs: 2 }), "top_logprobs", /needs logprobs: true/);
  refused(chat({ logprobs: true, top_logprobs: 21 }), "top_logprobs");
  refused(chat({ logit_bias: { "1000": 1 } }), "logit_bias");
  refused(chat({ logit_bias: { "abc": 1 } }), "logit_bias");
  refused(chat({ logit_bias: { "5": 101 } }), "logit_bias.5", /logit_bias.5 101 is not in/);
  refused(chat({ stream_options: { include_usage: true } }), "stream_options");
  refused(chat({ tools: [] }), "tools", /at least one/);
  refused(chat({ messages: [] }), "messages");
  refused(chat({ messages: "hi" }), "messages");
  refused(chat({ messages: [{ role: "tool", content: "x" }] }), "messages[0].tool_call_id");
  refused(chat({ messages: [{ role: "critic", content: "x" }] }), "messages[0].role");
  refused(chat({ messages: [{ role: "user", content: 3 }] }), "messages[0].content");
  refused(chat({ messages: [{ role: "user", content: "x", extra: 1 }] }), "messages[0].extra");
  refused(
    chat({ messages: Array.from({ length: 257 }, () => user[0]) }),
    "messages",
    /more than 256/,
  );
  refused(() => validateChatRequest([], DEFAULT_LIMITS, 1000, 64), null);
  const ok = validateChatRequest(
    {
      messages: [{
        role: "user",
        content: [{ type: "text", text: "a" }, { type: "text", text: "b" }],
      }],
      stop: "x",
      logit_bias: { "5": -100 },
      seed: 7,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 64,
    },
    DEFAULT_LIMITS,
    1000,
    64,
  );
  assert.equal(ok.messages[0].content, "ab");
  assert.deepEqual(ok.stop, ["x"]);
  assert.deepEqual(ok.logitBias, { "5": -100 });
  assert.equal(ok.includeUsage, true);
});

Deno.test("completion, tokenize and detokenize requests", () => {
  assert.equal(validateCompletionRequest({ prompt: "a" }, DEFAULT_LIMITS, 10, 8).prompt, "a");
  refused(() => validateCompletionRequest({ prompt: ["a"] }, DEFAULT_LIMITS, 10, 8), "prompt");
  refused(
    () => validateCompletionRequest({ prompt: "a", echo: true }, DEFAULT_LIMITS, 10, 8),
    "echo",
  );
  assert.deepEqual(validateTokenizeRequest({ content: "x" }, DEFAULT_LIMITS), {
    content: "x",
    addSpecial: false,
  });
  refused(() => validateTokenizeRequest({ content: 1 }, DEFAULT_LIMITS), "content");
  assert.deepEqual(validateDetokenizeRequest({ tokens: [0, 9] }, DEFAULT_LIMITS, 10), [0, 9]);
  refused(() => validateDetokenizeRequest({ tokens: [10] }, DEFAULT_LIMITS, 10), "tokens");
  refused(() => validateDetokenizeRequest({ tokens: [-1] }, DEFAULT_LIMITS, 10), "tokens");
});

Deno.test("request bodies: size cap, strict UTF-8, JSON", async () => {
  const post = (body: BodyInit) => new Request("http://x/", { method: "POST", body });
  assert.deepEqual(await readJsonBody(post('{"a":[1]}'), 64), { a: [1] });
  await assert.rejects(readJsonBody(post("x".repeat(65)), 64), (e: ApiError) => e.status === 413);
  await assert.rejects(
    readJsonBody(post(new Uint8Array([0x22, 0xff, 0x22])), 64),
    (e: ApiError) => e.status === 400 && /UTF-8/.test(e.message),
  );
  await assert.rejects(
    readJsonBody(post(new Uint8Array([0x22, 0xe2, 0x82])), 64), // truncated sequence
    (e: ApiError) => e.status === 400 && /UTF-8/.test(e.message),
  );
  await assert.rejects(readJsonBody(post("{"), 64), (e: ApiError) => e.status === 400);
});

Deno.test("logprobs: chat's boolean and top_logprobs, completions' count of alternatives", () => {
  const m = [{ role: "user", content: "Hi" }];
  const chat = (extra: Record<string, unknown>) =>
    validateChatRequest({ messages: m, ...extra }, DEFAULT_LIMITS, 100, 64).logprobs;
  const cmpl = (extra: Record<string, unknown>) =>
    validateCompletionRequest({ prompt: "Hi", ...extra }, DEFAULT_LIMITS, 100, 64).logprobs;
  assert.equal(chat({}), undefined);
  assert.equal(chat({ logprobs: false }), undefined);
  assert.equal(chat({ logprobs: null, top_logprobs: null }), undefined);
  assert.equal(chat({ logprobs: true }), 0);
  assert.equal(chat({ logprobs: true, top_logprobs: 20 }), 20);
  assert.equal(cmpl({}), undefined);
  assert.equal(cmpl({ logprobs: 0 }), 0);
  assert.equal(cmpl({ logprobs: 5 }), 5);
  assert.throws(() => cmpl({ logprobs: true }), /logprobs must be an integer/);
  assert.throws(() => cmpl({ logprobs: 6 }), /logprobs/);
  // top_logprobs is chat's field: the legacy endpoint does not know it.
  assert.throws(() => cmpl({ logprobs: 1, top_logprobs: 1 }), /unknown or unsupported field/);
  const ignored: string[] = [];
  validateCompletionRequest({ prompt: "Hi", top_logprobs: 1 }, DEFAULT_LIMITS, 100, 64, ignored);
  assert.deepEqual(ignored, ["top_logprobs"]);
});

Deno.test("response_format, grammar and json_schema become the request's constraint", () => {
  const msgs = { messages: [{ role: "user", content: "hi" }] };
  const chat = (extra: Record<string, unknown>) =>
    validateChatRequest({ ...msgs, ...extra }, DEFAULT_LIMITS, 100, 64);
  const schema = { type: "object" };
  assert.equal(chat({}).constraint, undefined);
  assert.equal(chat({ response_format: { type: "text" } }).constraint, undefined);
  assert.deepEqual(chat({ response_format: { type: "json_object" } }).constraint, {
    kind: "json_object",
  });
  assert.deepEqual(
    chat({
      response_format: { type: "json_schema", json_schema: { name: "n", schema, strict: true } },
    })
      .constraint,
    { kind: "json_schema", schema },
  );
  assert.deepEqual(chat({ json_schema: schema }).constraint, { kind: "json_schema", schema });
  assert.deepEqual(
    validateCompletionRequest({ prompt: "x", grammar: 'root ::= "a"' }, DEFAULT_LIMITS, 100, 64)
      .constraint,
    { kind: "gbnf", grammar: 'root ::= "a"' },
  );
  const refused: [Record<string, unknown>, RegExp][] = [
    [{ response_format: { type: "xml" } }, /response_format.type must be/],
    [
      { response_format: { type: "json_schema", json_schema: { name: "n" } } },
      /schema is required/,
    ],
    [
      { response_format: { type: "json_schema", json_schema: { schema: 3 } } },
      /must be a JSON object/,
    ],
    [
      { response_format: { type: "json_schema", json_schema: { schema, strict: "yes" } } },
      /strict must be a boolean/,
    ],
    [{ grammar: 'root ::= "a"', json_schema: schema }, /at most one of/],
    [{ grammar: 7 }, /grammar must be a string/],
    [{ json_schema: schema, ignore_eos: true }, /ignore_eos cannot go with/],
  ];
  for (const [extra, re] of refused) {
    assert.throws(() => validateChatRequest({ ...msgs, ...extra }, DEFAULT_LIMITS, 100, 64), re);
  }
  // Unknown fields inside response_format are refused under strict validation.
  assert.throws(
    () =>
      validateChatRequest(
        { ...msgs, response_format: { type: "json_object", extra: 1 } },
        DEFAULT_LIMITS,
        100,
        64,
      ),
    /response_format.extra/,
  );
});
