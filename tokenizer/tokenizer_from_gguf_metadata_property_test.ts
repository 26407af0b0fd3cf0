// Property test (fast-check, fixed seed): small gpt2 and llama GGUF tokenizer
// metadata with keys or single array elements (tokens, types, scores,
// merges, special ids, flags, pre) replaced, removed or duplicated either
// load into a tokenizer that encodes and decodes sample text and streams
// every id, or are refused with a FormatError naming the key. The one encode
// error allowed is the RangeError of a SentencePiece vocabulary that has no
// token for a byte the text needs (llama.cpp aborts there). Shared with
// `deno task fuzz`.

import { assertTarget, ggufTokenizerTarget } from "../tests/fuzz/properties.ts";

Deno.test("tokenizerFromGgufMetadata: any mutated metadata loads and works, or gives a FormatError", async () => {
  await assertTarget(ggufTokenizerTarget, 1000);
});
