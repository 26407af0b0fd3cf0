// Property test (fast-check, fixed seed): a small tokenizer.json and the four
// tiny trained fixtures with values anywhere in the tree replaced (any JSON
// value, token-like strings, small integers), removed or duplicated either
// load into a tokenizer that encodes and decodes sample text (ids inside the
// vocabulary) and streams every id without throwing, or are refused with a
// FormatError naming a field. Shared with `deno task fuzz`.

import { assertTarget, hfTokenizerTarget } from "../tests/fuzz/properties.ts";

Deno.test("tokenizerFromHfJson: any mutated tokenizer.json loads and works, or gives a FormatError", async () => {
  await assertTarget(hfTokenizerTarget, 500);
});
