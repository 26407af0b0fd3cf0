// Property test (fast-check, fixed seed): edits of small valid GGUF files
// (byte sets, u16/u32/u64 boundary overwrites, insertions, deletions,
// truncation) and random bytes after the magic either parse into a file whose
// tensors are well-formed, aligned, inside the file, disjoint and uniquely
// named, or throw a FormatError naming t.gguf, a field and an offset inside
// the file. The generator and the property live in tests/fuzz/ and are shared
// with `deno task fuzz`, which runs them for 100 000 inputs.

import { assertTarget, ggufTarget } from "../../tests/fuzz/properties.ts";

Deno.test("parseGguf: any mutated or random file gives a valid file or a FormatError", async () => {
  await assertTarget(ggufTarget, 1000);
});
