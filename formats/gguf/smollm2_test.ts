import assert from "node:assert/strict";
import { type ByteSource, mappedSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { getArray, getBool, getF32, getString, getU32 } from "./get_value.ts";
import { parseGguf } from "./parse_gguf.ts";
import { requireTensor, tensorByName } from "./tensor_by_name.ts";

// The real SmolLM2-135M-Instruct Q4_1 GGUF, fetched into the git-ignored
// cache (see ../shared/GUIDE.md section 4). Needs --allow-read and --allow-ffi.
const MODEL = new URL("../../cache/models/smollm2-135m-instruct.Q4_1.gguf", import.meta.url)
  .pathname;

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

/** The first `size` bytes of a source, as if the file had been cut there. */
function prefix(src: ByteSource, size: number): ByteSource {
  return {
    name: src.name,
    size,
    read(offset, length, field) {
      if (offset + length > size) {
        throw new FormatError(src.name, field ?? "data", offset, `past the end at ${size}`);
      }
      return src.read(offset, length, field);
    },
  };
}

Deno.test({
  name: `the real SmolLM2-135M GGUF parses and lines up with its size${
    skip ? ` (skipped: ${skip})` : ""
  }`,
  ignore: skip !== undefined,
  async fn() {
    const { mapFile } = await import("../../ffi/mod.ts");
    using file = mapFile(MODEL);
    const src = mappedSource(file);
    const t0 = performance.now();
    const f = parseGguf(src);
    const ms = performance.now() - t0;
    console.log(
      `parsed ${f.tensors.length} tensors and ${f.metadata.size} keys in ${ms.toFixed(0)} ms`,
    );

    assert.equal(f.version, 3);
    assert.equal(f.alignment, 32);
    assert.equal(f.size, file.size);
    assert.equal(getString(f, "general.architecture"), "llama");
    assert.equal(getU32(f, "llama.block_count"), 30);
    assert.equal(getU32(f, "llama.embedding_length"), 576);
    assert.equal(getU32(f, "llama.feed_forward_length"), 1536);
    assert.equal(getU32(f, "llama.attention.head_count"), 9);
    assert.equal(getU32(f, "llama.attention.head_count_kv"), 3);
    assert.equal(getU32(f, "llama.vocab_size"), 49152);
    assert.equal(getF32(f, "llama.rope.freq_base"), 100000);
    assert.equal(getBool(f, "tokenizer.ggml.add_bos_token"), false);
    assert.equal(getString(f, "tokenizer.ggml.model"), "gpt2");
    assert.equal(getString(f, "tokenizer.ggml.pre"), "smollm");
    const tokens = getArray(f, "tokenizer.ggml.tokens", "string");
    assert.equal(tokens.length, 49152);
    assert.equal(tokens[getU32(f, "tokenizer.ggml.eos_token_id")], "<|im_end|>");
    assert.equal(getArray(f, "tokenizer.ggml.token_type", "i32").length, 49152);
    assert.equal(getArray(f, "tokenizer.ggml.merges", "string").length, 48900);
    assert.match(getString(f, "tokenizer.chat_template"), /<\|im_start\|>/);

    // 30 layers × 9 tensors + token_embd + output_norm; the output matrix is tied.
    assert.equal(f.tensors.length, 272);
    assert.equal(tensorByName(f, "output.weight"), undefined);
    const embd = requireTensor(f, "token_embd.weight");
    assert.deepEqual(embd.dims, [576, 49152]);
    assert.equal(embd.type.name, "Q8_0");
    assert.deepEqual(requireTensor(f, "blk.29.ffn_down.weight").dims, [1536, 576]);
    assert.equal(requireTensor(f, "blk.0.attn_k.weight").type.name, "Q4_1");
    const types = new Map<string, number>();
    for (const t of f.tensors) types.set(t.type.name, (types.get(t.type.name) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(types), { Q8_0: 1, F32: 61, Q4_1: 210 });

    // Tensors are packed in file order, each at the next aligned offset, and
    // the last one ends exactly at the end of the file.
    let next = f.dataOffset;
    for (const t of f.tensors) {
      assert.equal(t.offset, next, t.name);
      next = Math.ceil((t.offset + t.bytes) / f.alignment) * f.alignment;
    }
    const last = f.tensors[f.tensors.length - 1];
    assert.equal(last.offset + last.bytes, f.size);

    // Cut anywhere before the end, the file is refused.
    for (const cut of [10, 1000, f.dataOffset - 1, f.dataOffset + 1, f.size - 1]) {
      assert.throws(() => parseGguf(prefix(src, cut)), FormatError, `cut at ${cut}`);
    }
  },
});
