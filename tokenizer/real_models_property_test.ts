// Property tests (fast-check, fixed seed) on the real SmolLM2 (byte-level
// BPE) and Gemma 3 (SentencePiece) tokenizers from cache/models/, each built
// from the GGUF and from the tokenizer.json transformers derives (skipped,
// saying so, when the GGUFs are absent):
//
// - round trip: for any string (any code point, lone surrogates, special
//   token texts, with and without parseSpecial), decode(encode(x)) is x with
//   lone surrogates as U+FFFD, U+2581 as a space for Gemma 3, and for
//   SmolLM2 the bytes its alphabet lacks dropped (as llama.cpp does);
// - decoding: for any id sequence, decode and the stream decoder either both
//   work (ids in range) or both throw a RangeError; the stream never emits
//   text a later token changes, its pieces are well-formed and join to
//   decode(ids); the result has a U+FFFD exactly when the ids' bytes are not
//   valid UTF-8 (or encode one themselves).
//
// Shared with `deno task fuzz` (tests/fuzz/targets_tokenizer.ts).

import { assertTarget, decodeTarget, roundTripTarget } from "../tests/fuzz/properties.ts";
import { skipReason } from "./_test_utils.ts";

for (const model of ["smollm2", "gemma3"] as const) {
  const skip = skipReason(model);
  const suffix = skip ? ` (skipped: ${skip})` : "";
  // The GGUF tokenizer, and the tokenizer.json transformers derives from the same GGUF.
  for (const via of ["gguf", "hf"] as const) {
    const what = via === "gguf" ? `${model} (GGUF)` : `${model} (tokenizer.json)`;
    Deno.test({
      name: `${what}: decode(encode(x)) gives x back for arbitrary unicode text${suffix}`,
      ignore: skip !== undefined,
      async fn() {
        await assertTarget(roundTripTarget(model, via), 1000);
      },
    });
    Deno.test({
      name: `${what}: arbitrary ids decode and stream without broken UTF-8 or surprises${suffix}`,
      ignore: skip !== undefined,
      async fn() {
        await assertTarget(decodeTarget(model, via), 1000);
      },
    });
  }
}
