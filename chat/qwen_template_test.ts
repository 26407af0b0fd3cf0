import assert from "node:assert/strict";
import fixture from "../tests/fixtures/chat/cases.json" with { type: "json" };
import {
  ggufTokenizerMetadata,
  type MetadataRead,
  metadataReadBound,
} from "../tokenizer/_test_utils.ts";
import { tokenizerFromGgufMetadata } from "../tokenizer/tokenizer_from_gguf_metadata.ts";
import { chatTemplateFrom } from "./chat_template_from.ts";
import { renderChat } from "./render_chat.ts";

// The real Qwen2.5-Coder GGUFs in the git-ignored cache (bash scripts/fetch-models.sh qwen05b
// qwen15b): their tokenizer.chat_template must be the copy in tests/fixtures/chat/cases.json that
// render_chat_test.ts checks against jinja2 and transformers, and the prompt it renders must
// tokenize with the chat markers as single special tokens. Only the files' metadata is read.
// Skipped, saying so, without a model or --allow-read.

const MODELS = {
  qwen25_coder: "cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
  qwen25_coder_15b: "cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
} as const;

function skipReason(path: string, fetch: string): string | undefined {
  if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") {
    return "needs --allow-read";
  }
  try {
    Deno.statSync(path);
  } catch {
    return `${path} is absent (fetch it: bash scripts/fetch-models.sh ${fetch})`;
  }
  return undefined;
}

for (const [name, rel] of Object.entries(MODELS) as [keyof typeof MODELS, string][]) {
  const path = new URL(`../${rel}`, import.meta.url).pathname;
  const skip = skipReason(path, name === "qwen25_coder" ? "qwen05b" : "qwen15b");
  Deno.test({
    name: `the ${name} fixture template is the GGUF's tokenizer.chat_template${
      skip ? ` (skipped: ${skip})` : ""
    }`,
    ignore: skip !== undefined,
    fn() {
      const read: MetadataRead = { bytesRead: 0, fileSize: 0, dataStart: 0 };
      const meta = ggufTokenizerMetadata(path, read);
      assert.ok(
        read.bytesRead <= metadataReadBound(read.dataStart),
        `${read.bytesRead} bytes read`,
      );
      const { template, source } = chatTemplateFrom(meta, { model: rel });
      assert.equal(template, fixture.templates[name].template);
      assert.equal(source, `tokenizer.chat_template of ${rel}`);

      // The case's tokens are the GGUF's BOS and EOS.
      const tok = tokenizerFromGgufMetadata(meta, { name: rel });
      const c = fixture.cases.find((c) => c.name === `${name}/system_user+tools/gen`)!;
      assert.equal(tok.tokenText(tok.bosId!), c.bos_token);
      assert.equal(tok.tokenText(tok.eosId!), c.eos_token);
      const prompt = renderChat(template, c.messages, {
        bosToken: c.bos_token,
        eosToken: c.eos_token,
        addGenerationPrompt: true,
        extra: c.extra,
        source,
      });
      assert.equal(prompt, c.expected);

      const ids = tok.encode(prompt, { addSpecial: true, parseSpecial: true });
      const start = tok.tokenId("<|im_start|>")!, end = tok.tokenId("<|im_end|>")!;
      assert.equal(ids[0], start, "no BOS: add_bos_token is false");
      // system, user, then the generation prompt's assistant header.
      assert.equal(ids.filter((id) => id === start).length, 3);
      assert.equal(ids.filter((id) => id === end).length, 2);
      assert.deepEqual(ids.slice(-3), [start, tok.tokenId("assistant"), tok.tokenId("\u010a")]);
      assert.equal(tok.decode(ids), prompt);
    },
  });
}
