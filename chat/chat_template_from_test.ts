import assert from "node:assert/strict";
import { chatTemplateFrom } from "./chat_template_from.ts";
import { NoChatTemplateError } from "./errors.ts";

const T = "{{ messages[0].content }}";

Deno.test("chatTemplateFrom reads GGUF metadata: GgufValue maps and bare records", () => {
  const gguf = new Map<string, unknown>([
    ["general.architecture", { type: "string", value: "llama" }],
    ["tokenizer.chat_template", { type: "string", value: T }],
    ["tokenizer.chat_template.tool_use", { type: "string", value: "tools" }],
  ]);
  assert.deepEqual(chatTemplateFrom(gguf, { model: "m.gguf" }), {
    template: T,
    source: "tokenizer.chat_template of m.gguf",
  });
  assert.deepEqual(chatTemplateFrom(gguf, { name: "tool_use" }), {
    template: "tools",
    source: "tokenizer.chat_template.tool_use of model",
  });
  assert.equal(chatTemplateFrom(gguf, { name: "default" }).template, T);
  // A record of bare values (e.g. `cflow inspect --json` output).
  assert.equal(chatTemplateFrom({ "tokenizer.chat_template": T }).template, T);
  assert.equal(chatTemplateFrom(new Map([["tokenizer.chat_template", T]])).template, T);
});

Deno.test("chatTemplateFrom reads tokenizer_config.json: string, list and object forms", () => {
  assert.deepEqual(chatTemplateFrom({ chat_template: T, bos_token: "<s>" }, { model: "cfg" }), {
    template: T,
    source: "chat_template of cfg",
  });
  assert.equal(chatTemplateFrom({ chat_template: T }, { name: "default" }).template, T);
  const list = {
    chat_template: [{ name: "default", template: "d" }, { name: "rag", template: "r" }],
  };
  assert.deepEqual(chatTemplateFrom(list, { model: "cfg" }), {
    template: "d",
    source: 'chat_template "default" of cfg',
  });
  assert.equal(chatTemplateFrom(list, { name: "rag" }).template, "r");
  assert.equal(
    chatTemplateFrom({ chat_template: { default: "d", x: "y" } }, { name: "x" }).template,
    "y",
  );
});

Deno.test("an override wins over the model's template", () => {
  const meta = new Map([["tokenizer.chat_template", { type: "string", value: T }]]);
  assert.deepEqual(chatTemplateFrom(meta, { override: "mine" }), {
    template: "mine",
    source: "override",
  });
  assert.equal(chatTemplateFrom({}, { override: "mine" }).template, "mine");
});

Deno.test("NoChatTemplateError: no template, or none by that name", () => {
  const none = (
    meta: Parameters<typeof chatTemplateFrom>[0],
    options = {},
  ): NoChatTemplateError => {
    try {
      chatTemplateFrom(meta, options);
    } catch (e) {
      assert.ok(e instanceof NoChatTemplateError, String(e));
      return e;
    }
    assert.fail("no error");
  };
  let e = none(new Map([["general.architecture", { type: "string", value: "llama" }]]), {
    model: "base.gguf",
  });
  assert.equal(e.message, "base.gguf has no chat template; give a template explicitly");
  assert.equal(e.model, "base.gguf");
  assert.equal(e.templateName, undefined);
  assert.deepEqual(e.available, []);
  none({});
  none({ chat_template: null });

  e = none(new Map([["tokenizer.chat_template", T], ["tokenizer.chat_template.rag", "r"]]), {
    name: "tool_use",
  });
  assert.equal(e.templateName, "tool_use");
  assert.deepEqual(e.available, ["default", "rag"]);
  assert.match(e.message, /no chat template named "tool_use" \(it has "default", "rag"\)/);

  e = none({ chat_template: [{ name: "rag", template: "r" }] });
  assert.deepEqual(e.available, ["rag"]);
  e = none({ chat_template: T }, { name: "rag" });
  assert.deepEqual(e.available, ["default"]);
});

Deno.test("chatTemplateFrom validates its arguments", () => {
  const bad: [() => unknown, ErrorConstructor, RegExp][] = [
    [() => chatTemplateFrom(null as never), TypeError, /meta must be a Map or an object, got null/],
    [() => chatTemplateFrom([] as never), TypeError, /meta must be a Map or an object/],
    [() => chatTemplateFrom({}, { override: 1 } as never), TypeError, /override must be a string/],
    [() => chatTemplateFrom({}, { override: "" }), RangeError, /override is empty/],
    [() => chatTemplateFrom({}, { name: "" }), RangeError, /name is empty/],
    [() => chatTemplateFrom({}, { model: 3 } as never), TypeError, /model must be a string/],
    [() => chatTemplateFrom({}, { template: "x" } as never), RangeError, /unknown option template/],
    [
      () => chatTemplateFrom(new Map([["tokenizer.chat_template", { type: "u32", value: 1 }]])),
      TypeError,
      /tokenizer.chat_template must be a string, got Object/,
    ],
    [
      () => chatTemplateFrom({ chat_template: 5 }),
      TypeError,
      /chat_template must be a string, a list or an object/,
    ],
    [
      () => chatTemplateFrom({ chat_template: [{ name: "a" }] }),
      TypeError,
      /chat_template\[0\] must be/,
    ],
    [
      () => chatTemplateFrom({ chat_template: { a: 1 } }),
      TypeError,
      /chat_template\.a must be a string/,
    ],
  ];
  for (const [fn, type, re] of bad) {
    assert.throws(
      fn,
      (e: unknown) => e instanceof type && re.test((e as Error).message),
      re.source,
    );
  }
});
