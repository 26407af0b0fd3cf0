import assert from "node:assert/strict";
import fixture from "../tests/fixtures/chat/cases.json" with { type: "json" };
import { strftime } from "./_strftime.ts";
import { ChatTemplateError } from "./errors.ts";
import { DEFAULT_CHAT_OUTPUT_LENGTH, MAX_CHAT_TEMPLATE_LENGTH, renderChat } from "./render_chat.ts";
import type { ChatMessage } from "./render_chat_options.ts";

// tests/fixtures/chat/cases.json is made by tests/reference/gen_chat_fixtures.py with Python
// jinja2 in the environment transformers renders chat templates with.

type Templates = typeof fixture.templates;
const NOW = new Date(fixture.now);

interface Rendered {
  output?: string;
  error?: ChatTemplateError;
}

function attempt(fn: () => string): Rendered {
  try {
    return { output: fn() };
  } catch (e) {
    if (e instanceof ChatTemplateError) return { error: e };
    throw e;
  }
}

/** jinja2's `TemplateError: message` (raise_exception) against ours. */
function assertSameError(name: string, expected: string, got: Rendered): void {
  assert.ok(got.error, `${name}: expected ${expected}, rendered ${JSON.stringify(got.output)}`);
  if (expected.startsWith("TemplateError: ")) {
    assert.equal(got.error.kind, "raised", name);
    assert.equal(got.error.detail, expected.slice("TemplateError: ".length), name);
  }
}

Deno.test("the fixture covers the real templates and both generation-prompt settings", () => {
  const names = new Set(fixture.cases.map((c) => c.template));
  assert.deepEqual([...names].sort(), [
    "gemma2",
    "gemma3_style",
    "llama3_style",
    "qwen25_coder",
    "qwen25_coder_15b",
    "smollm2",
  ]);
  assert.ok(fixture.cases.length >= 90);
  assert.ok(fixture.cases.some((c) => c.add_generation_prompt));
  assert.ok(fixture.cases.some((c) => !c.add_generation_prompt));
  assert.ok(fixture.cases.some((c) => "error" in c));
  assert.ok(fixture.templates.smollm2.template.includes("<|im_start|>"));
  // Qwen2.5: the tools branch (tools given, tool_calls, tool turns) and the plain one.
  const qwen = fixture.cases.filter((c) => c.template === "qwen25_coder");
  assert.ok(qwen.length >= 30);
  assert.ok(qwen.some((c) => c.extra?.tools?.length && c.expected?.includes("<tools>")));
  assert.ok(qwen.some((c) => !c.extra && c.expected?.includes("<tool_call>")));
  assert.ok(qwen.some((c) => c.expected?.includes("<tool_response>")));
  assert.ok(qwen.some((c) => c.expected?.startsWith("<|im_start|>system\nYou are Qwen")));
});

for (const c of fixture.cases) {
  Deno.test(`renderChat matches jinja2: ${c.name}`, () => {
    const template = fixture.templates[c.template as keyof Templates].template;
    const got = attempt(() =>
      renderChat(template, c.messages, {
        bosToken: c.bos_token,
        eosToken: c.eos_token,
        addGenerationPrompt: c.add_generation_prompt,
        extra: c.extra,
        now: NOW,
        source: c.template,
      })
    );
    if ("expected" in c) {
      assert.equal(got.error, undefined, `${c.name}: ${got.error?.message}`);
      assert.equal(got.output, c.expected);
    } else {
      assertSameError(c.name, c.error!, got);
      assert.equal(got.error!.source, c.template);
    }
  });
}

/**
 * Probes where @huggingface/jinja 0.5.11 renders differently from jinja2. Each is asserted to
 * still differ, so that an upgrade that fixes one shows up here (then delete it from the list).
 */
const KNOWN_DIVERGENCES: Readonly<Record<string, string>> = {
  none_renders: "None renders as an empty string, not 'None'",
  booleans: "booleans render as true/false, not True/False",
  list_repr: "lists render as JSON, not Python repr",
  dict_repr: "dicts render as JSON, not Python repr",
  loop_output_before_break: "output of the iteration that runs {% break %} is dropped",
  string_length_emoji: "string length counts UTF-16 code units, not code points",
  string_index_emoji: "string indexing is by UTF-16 code unit, not code point",
  trim_nel: "trim/strip use JS whitespace: U+0085 is not stripped",
  trim_bom: "trim/strip use JS whitespace: U+FEFF is stripped",
  trim_unit_separators: "trim/strip use JS whitespace: U+001C..U+001F are not stripped",
  strip_chars: "str.strip/lstrip/rstrip ignore their chars argument",
  concat_tilde_none: "'a' ~ none is an error, not 'aNone'",
  string_repeat: "str * int is an error",
  format_filter: "the format filter does not exist",
  raw_block: "{% raw %} does not exist",
  tojson_integer_keys:
    "integer-like object keys come first (JavaScript's property order), so tojson of a tool schema or call arguments keyed '1', '2' … orders them differently",
};

Deno.test("every known divergence names an existing probe", () => {
  const names = new Set(fixture.probes.map((p) => p.name));
  for (const name of Object.keys(KNOWN_DIVERGENCES)) assert.ok(names.has(name), name);
});

for (const p of fixture.probes) {
  const divergence = KNOWN_DIVERGENCES[p.name];
  Deno.test(
    `renderChat probe ${p.name}: ${divergence ? `known divergence (${divergence})` : "as jinja2"}`,
    () => {
      const got = attempt(() => renderChat(p.template, p.messages, { extra: p.extra, now: NOW }));
      if (divergence !== undefined) {
        const same = "expected" in p ? got.output === p.expected : got.error !== undefined;
        assert.ok(!same, `${p.name} now agrees with jinja2: remove it from KNOWN_DIVERGENCES`);
      } else if ("expected" in p) {
        assert.equal(got.error, undefined, `${p.name}: ${got.error?.message}`);
        assert.equal(got.output, p.expected);
      } else {
        assertSameError(p.name, p.error!, got);
      }
    },
  );
}

Deno.test("strftime matches Python's datetime.strftime", () => {
  for (const s of fixture.strftime) {
    assert.equal(strftime(new Date(s.date), s.format), s.expected, s.date);
  }
  assert.equal(strftime(new Date(2025, 0, 2), "%Q %5d %"), "%Q %5d %");
});

const CHATML = fixture.templates.smollm2.template;
const USER: ChatMessage[] = [{ role: "user", content: "Hi" }];

Deno.test("raise_exception, syntax and runtime errors are ChatTemplateErrors with the source", () => {
  const src = "tokenizer.chat_template of x.gguf";
  const raised = attempt(() =>
    renderChat(
      "{% if messages[0].role == 'user' %}{{ raise_exception('no ' + 'users') }}{% endif %}",
      USER,
      {
        source: src,
      },
    )
  ).error!;
  assert.equal(raised.kind, "raised");
  assert.equal(raised.detail, "no users");
  assert.equal(raised.message, `${src}: raise_exception: no users`);
  assert.equal(raised.source, src);

  const syntax = attempt(() => renderChat("{% for %}", USER, { source: src })).error!;
  assert.equal(syntax.kind, "syntax");
  assert.ok(syntax.message.startsWith(`${src}: `), syntax.message);
  assert.ok(syntax.cause instanceof Error);

  const render = attempt(() => renderChat("{{ messages.nope.deeper + 1 }}", USER)).error!;
  assert.equal(render.kind, "render");
  assert.ok(render.message.startsWith("chat template: "), render.message);

  // A template that recurses forever overflows the stack: still a ChatTemplateError.
  const recursion = attempt(() =>
    renderChat("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", USER)
  ).error!;
  assert.ok(["render", "limit"].includes(recursion.kind), recursion.message);
});

Deno.test("renderChat holds templates to their limits", () => {
  assert.throws(
    () => renderChat(" ".repeat(MAX_CHAT_TEMPLATE_LENGTH + 1), USER),
    /template length 1048577 exceeds 1048576/,
  );
  // Exactly at the limit is fine.
  assert.equal(
    renderChat("x".repeat(MAX_CHAT_TEMPLATE_LENGTH), []).length,
    MAX_CHAT_TEMPLATE_LENGTH,
  );

  const limit = (template: string, options = {}): ChatTemplateError => {
    const e = attempt(() => renderChat(template, USER, options)).error;
    assert.ok(e, `${template} rendered`);
    assert.equal(e.kind, "limit", e.message);
    return e;
  };
  // Output: the whole result, or any intermediate string.
  limit("{% for i in range(100) %}0123456789{% endfor %}", { maxOutputLength: 999 });
  assert.equal(
    renderChat("{% for i in range(100) %}0123456789{% endfor %}", USER, { maxOutputLength: 1000 })
      .length,
    1000,
  );
  limit(
    "{% set s = namespace(v='ab') %}{% for i in range(40) %}{% set s.v = s.v + s.v %}" +
      "{% endfor %}{{ s.v | length }}",
  );
  // Steps: nested loops that would run for hours.
  const steps = /evaluation steps/;
  assert.match(
    limit(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}" +
        "{% endfor %}{% endfor %}{% endfor %}",
    ).message,
    steps,
  );
  assert.match(limit("{% for i in range(1000000) %}{% endfor %}").message, steps);
  limit("{% for i in range(100) %}{{ i }}{% endfor %}", { maxSteps: 50 });
  // Lists: range and repeated concatenation.
  limit("{{ range(2000000) | length }}");
  limit(
    "{% set s = namespace(v=[1]) %}{% for i in range(30) %}{% set s.v = s.v + s.v %}" +
      "{% endfor %}{{ s.v | length }}",
  );
});

Deno.test("templates see data, not the host", () => {
  const out = renderChat(
    "[{{ messages.constructor }}][{{ messages[0].__proto__ }}][{{ ''.__class__ }}]" +
      "[{{ messages[0].constructor }}][{{ range.constructor }}][{{ Deno }}][{{ globalThis }}]",
    USER,
  );
  assert.equal(out, "[][][][][][][]");
  // No include/import/extends: they are syntax errors, never file reads.
  for (const t of ["{% include 'x' %}", "{% import 'x' as y %}", "{% extends 'x' %}"]) {
    assert.equal(attempt(() => renderChat(t, USER)).error?.kind, "syntax", t);
  }
});

Deno.test("renderChat variables: tokens, generation prompt, extra, tools, now", () => {
  const t = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|" +
    "{{ documents is none }}|{{ extra_var }}|{{ strftime_now('%Y-%m-%d') }}";
  assert.equal(
    renderChat(t, USER, {
      bosToken: "<s>",
      eosToken: "</s>",
      addGenerationPrompt: true,
      extra: { extra_var: "e" },
      now: new Date(2024, 1, 29, 23, 0),
    }),
    "<s>|</s>|true|true|true|e|2024-02-29",
  );
  // Omitted tokens are undefined (render empty); tools from extra replace None.
  assert.equal(
    renderChat("[{{ bos_token }}]{{ tools | length }}", USER, { extra: { tools: [{ a: 1 }] } }),
    "[]1",
  );
  // Today, by default.
  const year = String(new Date().getFullYear());
  assert.ok(renderChat("{{ strftime_now('%Y') }}", []).length === 4);
  assert.ok([year, String(Number(year) + 1)].includes(renderChat("{{ strftime_now('%Y') }}", [])));
});

Deno.test("messages: extra fields pass, null fields are dropped, the input is not touched", () => {
  const messages = [
    { role: "assistant", content: "x", name: "bob", tool_calls: null, meta: { n: [1, 2] } },
  ];
  const t = "{{ messages[0].name }}|{{ messages[0].tool_calls is defined }}|" +
    "{{ messages[0].meta.n[1] }}";
  assert.equal(renderChat(t, messages as ChatMessage[]), "bob|false|2");
  assert.equal(messages[0].tool_calls, null); // the caller's object is not changed
  // A "__proto__" key from JSON is an ordinary key.
  const parsed = JSON.parse('[{"role": "user", "content": "c", "__proto__": {"x": 1}}]');
  assert.equal(renderChat("{{ messages[0].x }}|{{ messages[0]['__proto__'].x }}", parsed), "|1");
});

Deno.test("parsed templates are cached and still render fresh variables", () => {
  for (let i = 0; i < 40; i++) {
    const out = renderChat(CHATML, [{ role: "user", content: `n${i}` }], {
      addGenerationPrompt: i % 2 === 0,
    });
    assert.ok(out.includes(`<|im_start|>user\nn${i}<|im_end|>`));
    assert.equal(out.endsWith("<|im_start|>assistant\n"), i % 2 === 0);
  }
  // More distinct templates than the cache holds.
  for (let i = 0; i < 40; i++) assert.equal(renderChat(`{{ ${i} }}`, []), String(i));
});

Deno.test("renderChat validates its arguments", () => {
  const bad: [() => unknown, ErrorConstructor, RegExp][] = [
    [() => renderChat(1 as unknown as string, USER), TypeError, /template must be a string/],
    [() => renderChat("", "x" as unknown as ChatMessage[]), TypeError, /messages must be an array/],
    [
      () => renderChat("", [null as unknown as ChatMessage]),
      TypeError,
      /messages\[0\] must be an object/,
    ],
    [
      () => renderChat("", [{ role: 1 } as unknown as ChatMessage]),
      TypeError,
      /messages\[0\]\.role must be a string/,
    ],
    [
      () => renderChat("", [{ role: "u" } as unknown as ChatMessage]),
      TypeError,
      /messages\[0\]\.content must be a string/,
    ],
    [
      () => renderChat("", [{ role: "u", content: "c", f: () => 1 } as unknown as ChatMessage]),
      TypeError,
      /messages\[0\]\.f must be plain JSON data/,
    ],
    [
      () => renderChat("", [{ role: "u", content: "c", d: new Date() } as unknown as ChatMessage]),
      TypeError,
      /messages\[0\]\.d must be plain JSON data, got Date/,
    ],
    [
      () => renderChat("", [{ role: "u", content: "c", n: NaN } as unknown as ChatMessage]),
      RangeError,
      /messages\[0\]\.n NaN is not a finite number/,
    ],
    [
      () => renderChat("", USER, { extra: { x: 1n } }),
      TypeError,
      /extra\.x must be plain JSON data, got bigint 1/,
    ],
    [
      () => renderChat("", USER, { extra: { messages: [] } }),
      RangeError,
      /extra\.messages is reserved/,
    ],
    [
      () => renderChat("", USER, { extra: { raise_exception: "x" } }),
      RangeError,
      /extra\.raise_exception is reserved/,
    ],
    [
      () => renderChat("", USER, { extra: [] as unknown as Record<string, unknown> }),
      TypeError,
      /extra must be a plain object/,
    ],
    [
      () => renderChat("", USER, { bosToken: 1 as unknown as string }),
      TypeError,
      /bosToken must be a string, got number 1/,
    ],
    [
      () => renderChat("", USER, { eosToken: null as unknown as string }),
      TypeError,
      /eosToken must be a string, got null/,
    ],
    [
      () => renderChat("", USER, { addGenerationPrompt: "yes" as unknown as boolean }),
      TypeError,
      /addGenerationPrompt must be a boolean/,
    ],
    [() => renderChat("", USER, { now: new Date(NaN) }), TypeError, /now must be a valid Date/],
    [
      () => renderChat("", USER, { maxOutputLength: 0 }),
      RangeError,
      /maxOutputLength 0 is not an integer in \[1, 4194304\]/,
    ],
    [
      () => renderChat("", USER, { maxOutputLength: DEFAULT_CHAT_OUTPUT_LENGTH + 1 }),
      RangeError,
      /maxOutputLength 4194305/,
    ],
    [() => renderChat("", USER, { maxSteps: 1.5 }), RangeError, /maxSteps 1.5 is not an integer/],
    [() => renderChat("", USER, { maxSteps: Infinity }), RangeError, /maxSteps Infinity/],
    [
      () => renderChat("", USER, { maxSteps: "9" as unknown as number }),
      TypeError,
      /maxSteps must be a number/,
    ],
    [
      () => renderChat("", USER, { add_generation_prompt: true } as never),
      RangeError,
      /unknown option add_generation_prompt/,
    ],
  ];
  for (const [fn, type, re] of bad) {
    assert.throws(
      fn,
      (e: unknown) => e instanceof type && re.test((e as Error).message),
      re.source,
    );
  }

  const cyclic: Record<string, unknown> = { role: "u", content: "c" };
  cyclic.self = cyclic;
  assert.throws(() => renderChat("", [cyclic as unknown as ChatMessage]), /nested deeper than 32/);
});
