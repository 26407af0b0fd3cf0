import assert from "node:assert/strict";
import fixture from "../tests/fixtures/chat/cases.json" with { type: "json" };
import { mappedSource } from "../formats/byte_source.ts";
import { parseGguf } from "../formats/gguf/mod.ts";
import { chatTemplateFrom } from "./chat_template_from.ts";
import { renderChat } from "./render_chat.ts";

// The real SmolLM2-135M-Instruct GGUF, fetched into the git-ignored cache by
// scripts/fetch-models.sh. Needs --allow-read and --allow-ffi; skipped without them.
const MODEL = new URL("../cache/models/smollm2-135m-instruct.Q4_1.gguf", import.meta.url).pathname;

function skipReason(): string | undefined {
  if (Deno.permissions.querySync({ name: "read", path: MODEL }).state !== "granted") {
    return "needs --allow-read";
  }
  try {
    Deno.statSync(MODEL);
  } catch {
    return `${MODEL} is absent`;
  }
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return "needs --allow-ffi";
  return undefined;
}

const skip = skipReason();

Deno.test({
  name: `the SmolLM2 fixture template is the GGUF's tokenizer.chat_template${
    skip ? ` (skipped: ${skip})` : ""
  }`,
  ignore: skip !== undefined,
  async fn() {
    const { mapFile } = await import("../ffi/mod.ts");
    using file = mapFile(MODEL);
    const gguf = parseGguf(mappedSource(file));
    const { template, source } = chatTemplateFrom(gguf.metadata, { model: "smollm2.gguf" });
    assert.equal(template, fixture.templates.smollm2.template);
    assert.equal(source, "tokenizer.chat_template of smollm2.gguf");
    const c = fixture.cases.find((c) => c.name === "smollm2/multi_turn/gen")!;
    assert.equal(
      renderChat(template, c.messages, { addGenerationPrompt: true, source }),
      c.expected,
    );
  },
});
