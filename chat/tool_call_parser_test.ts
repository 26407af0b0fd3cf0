import assert from "node:assert/strict";
import {
  MAX_TOOL_CALL_LENGTH,
  MAX_TOOL_CALLS,
  parseToolCalls,
  type ToolCall,
  ToolCallParser,
  type ToolCallParserOptions,
} from "./tool_call_parser.ts";

/** Ids call_0, call_1 … in order. */
function ids(): () => string {
  let n = 0;
  return () => `call_${n++}`;
}

function call(id: string, name: string, args: unknown): ToolCall {
  return { id, type: "function", function: { name, arguments: JSON.stringify(args) } };
}

/** Content and calls of `text` pushed in `pieces`. */
function run(
  pieces: readonly string[],
  options: ToolCallParserOptions = {},
): { content: string; calls: ToolCall[]; indexes: number[] } {
  const p = new ToolCallParser({ newId: ids(), ...options });
  let content = "";
  const calls: ToolCall[] = [];
  const indexes: number[] = [];
  for (const e of [...pieces.flatMap((t) => p.push(t)), ...p.end()]) {
    if (e.kind === "content") {
      assert.ok(e.text !== "", "no empty content events");
      content += e.text;
    } else {
      calls.push(e.call);
      indexes.push(e.index);
    }
  }
  assert.deepEqual(p.calls, calls);
  return { content, calls, indexes };
}

const QWEN_ONE =
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const QWEN_TWO = QWEN_ONE +
  '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京", "unit": "celsius"}}\n</tool_call>';

Deno.test("parser: a Qwen2.5 call, then several, content null", () => {
  const one = parseToolCalls(QWEN_ONE, { newId: ids() });
  assert.deepEqual(one, {
    content: null,
    toolCalls: [call("call_0", "get_weather", { city: "Paris" })],
  });
  const two = run([QWEN_TWO]);
  assert.equal(two.content, "");
  assert.deepEqual(two.indexes, [0, 1]);
  assert.deepEqual(two.calls, [
    call("call_0", "get_weather", { city: "Paris" }),
    call("call_1", "get_weather", { city: "東京", unit: "celsius" }),
  ]);
  // Real ids: call_ and 24 letters or digits, different each time.
  const a = parseToolCalls(QWEN_ONE).toolCalls[0].id, b = parseToolCalls(QWEN_ONE).toolCalls[0].id;
  assert.match(a, /^call_[A-Za-z0-9]{24}$/);
  assert.notEqual(a, b);
});

Deno.test("parser: content around calls, and the whitespace between them dropped", () => {
  const r = run(["Let me check.\n" + QWEN_TWO + "\n\n"]);
  assert.equal(r.content, "Let me check.");
  assert.equal(r.calls.length, 2);
  const after = run([QWEN_ONE + "\nDone: here it is."]);
  assert.equal(after.content, "\nDone: here it is.");
  // Without calls the text is kept exactly, whitespace included.
  for (const t of ["  plain\n", "\n\n", "a < b <tool", "x <tool_call", "{}", '{"nam']) {
    assert.deepEqual(parseToolCalls(t), { content: t, toolCalls: [] }, t);
  }
});

Deno.test("parser: malformed or unknown calls are plain content, markup included", () => {
  const names = new Set(["get_weather"]);
  for (
    const bad of [
      "<tool_call>\n{not json}\n</tool_call>",
      '<tool_call>\n{"name": "get_weather", "arguments": [1]}\n</tool_call>',
      '<tool_call>\n{"name": 3, "arguments": {}}\n</tool_call>',
      '<tool_call>\n["get_weather"]\n</tool_call>',
      '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',
      '<tool_call>\n{"name": "get_weather", "arguments": "not json"}\n</tool_call>',
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', // cut off
    ]
  ) {
    assert.deepEqual(run([bad], { names }), { content: bad, calls: [], indexes: [] }, bad);
  }
  // A good call after a bad one is still a call, and takes index 0.
  const mixed = run(["<tool_call>\nnope\n</tool_call>" + QWEN_ONE], { names });
  assert.equal(mixed.content, "<tool_call>\nnope\n</tool_call>");
  assert.deepEqual(mixed.indexes, [0]);
});

Deno.test("parser: arguments as a string or `parameters`, an unclosed call at the end", () => {
  const r = run([
    '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
    '<tool_call>{"name": "g", "parameters": {"b": [true, null]}}</tool_call>',
    '<tool_call>\n{"name": "h"}\n',
  ]);
  assert.deepEqual(r.calls, [
    call("call_0", "f", { a: 1 }),
    call("call_1", "g", { b: [true, null] }),
    call("call_2", "h", {}),
  ]);
});

Deno.test("parser: bare JSON calls (no markup), one or one per line", () => {
  const names = new Set(["get_weather", "add"]);
  const bare = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}';
  assert.deepEqual(run([bare], { names }).calls, [
    call("call_0", "get_weather", { city: "Paris", unit: "celsius" }),
  ]);
  const lines = `\n${bare}\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n`;
  assert.equal(run([lines], { names }).calls.length, 2);
  assert.equal(run([lines], { names, parallel: false }).calls.length, 1);
  // JSON that is not a call stays content, as do unknown names and text after the object.
  for (
    const t of [
      '{"city": "Paris"}',
      '{"name": "rm", "arguments": {}}',
      bare + " and more",
      '{ "name": "get_weather", "arguments": {"city": 1} } {',
    ]
  ) {
    assert.deepEqual(run([t], { names }), { content: t, calls: [], indexes: [] }, t);
  }
  // Not at the start: content.
  assert.equal(run(["Call: " + bare], { names }).calls.length, 0);
  // In a json code fence (Qwen2.5-Coder-1.5B's way), pretty-printed.
  const fenced =
    '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```';
  assert.deepEqual(run([fenced], { names }).calls, [
    call("call_0", "get_weather", { city: "Paris" }),
  ]);
  assert.equal(run(["```\n" + bare + "\n```\n"], { names }).calls.length, 1);
  for (
    const t of [
      "```python\n" + bare + "\n```",
      "```json\n" + bare,
      "`" + bare + "`",
      '```json\n{"a": 1}\n```',
    ]
  ) {
    assert.deepEqual(run([t], { names }), { content: t, calls: [], indexes: [] }, t);
  }
});

Deno.test("parser: forced calls start inside the block; parallel false keeps the first", () => {
  const forced = run(['{"name": "add", "arguments": {"a": 1, "b": 2}}'], { opened: true });
  assert.deepEqual(forced.calls, [call("call_0", "add", { a: 1, b: 2 })]);
  assert.equal(forced.content, "");
  const closed = run(['{"name": "add", "arguments": {}}\n</tool_call>'], { opened: true });
  assert.equal(closed.calls.length, 1);
  const single = run([QWEN_TWO], { parallel: false });
  assert.deepEqual(single.calls, [call("call_0", "get_weather", { city: "Paris" })]);
  assert.equal(single.content, "");
});

Deno.test("parser: streamed at every split gives the same content and calls", () => {
  const names = new Set(["get_weather"]);
  const texts = [
    QWEN_TWO,
    "Sure.\n" + QWEN_ONE + "\nAnd <tool_call>\nbad\n</tool_call> x <tool_ca",
    '  {"name": "get_weather", "arguments": {"city": "Zürich 🌍"}}\n',
    '{"nam": 1} <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
    "plain <tool_call text with < and </tool_call> inside",
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    "```js\nconsole.log(1)\n```",
  ];
  for (const text of texts) {
    const whole = run([text], { names });
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j += 7) {
        const split = run([text.slice(0, i), text.slice(i, j), text.slice(j)], { names });
        assert.deepEqual(split, whole, `${JSON.stringify(text)} split at ${i}, ${j}`);
      }
    }
    // One character at a time.
    assert.deepEqual(run([...text], { names }), whole);
  }
});

Deno.test("parser: markup never leaks into streamed content before the call is known", () => {
  const p = new ToolCallParser({ newId: ids() });
  const streamed: string[] = [];
  for (const ch of "Hi " + QWEN_ONE) {
    for (const e of p.push(ch)) if (e.kind === "content") streamed.push(e.text);
  }
  p.end();
  assert.equal(streamed.join(""), "Hi");
  assert.ok(streamed.every((t) => !t.includes("<")));
});

Deno.test("parser: bounds — an over-long block is content, at most MAX_TOOL_CALLS calls", () => {
  const long = `<tool_call>{"name": "f", "arguments": {"x": "${
    "a".repeat(MAX_TOOL_CALL_LENGTH)
  }"}}</tool_call>`;
  const r = run([long]);
  assert.equal(r.calls.length, 0);
  assert.equal(r.content, long);
  const pieces = [];
  for (let i = 0; i < long.length; i += 4096) pieces.push(long.slice(i, i + 4096));
  assert.deepEqual(run(pieces), r);
  const many = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'.repeat(MAX_TOOL_CALLS + 2);
  const m = run([many]);
  assert.equal(m.calls.length, MAX_TOOL_CALLS);
  assert.equal(m.content, '<tool_call>{"name": "f", "arguments": {}}</tool_call>'.repeat(2));
  // Hostile nesting is content, not a crash.
  const deep = `<tool_call>{"name": "f", "arguments": ${"[".repeat(100000)}</tool_call>`;
  assert.equal(run([deep]).calls.length, 0);
  assert.throws(() => {
    const p = new ToolCallParser();
    p.end();
    p.push("x");
  }, /after end/);
});

Deno.test("parser: one character at a time stays linear (long blocks, long replies)", () => {
  const body = `{"name": "f", "arguments": {"x": "${"a".repeat(200_000)}"}}`;
  for (const text of [`<tool_call>${body}</tool_call>`, body, " ".repeat(100_000) + "x"]) {
    const t0 = performance.now();
    const p = new ToolCallParser({ newId: ids() });
    for (let i = 0; i < text.length; i += 2) p.push(text.slice(i, i + 2));
    p.end();
    const ms = performance.now() - t0;
    assert.ok(ms < 3000, `${ms} ms for ${text.length} characters`);
    assert.equal(p.calls.length, text.includes("name") ? 1 : 0);
  }
  // A bare call is told from the reply's first 256 characters: later is content.
  const late = " ".repeat(300) + '{"name": "f", "arguments": {}}';
  assert.deepEqual(run([late]), { content: late, calls: [], indexes: [] });
});
