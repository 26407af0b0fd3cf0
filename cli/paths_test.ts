import assert from "node:assert/strict";
import { aliasPath, modelArgument } from "./paths.ts";

Deno.test("--model: a pull alias is the model pulled into the cache's models folder", () => {
  const seen: string[] = [];
  const exists = (p: string) => (seen.push(p), true);
  assert.equal(
    modelArgument("qwen2.5-coder-1.5b", "/c/models", exists),
    "/c/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
  );
  assert.equal(
    modelArgument("QWEN2.5-Coder-0.5B", "/c/models", exists),
    "/c/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
  );
  assert.equal(modelArgument("gemma3", "/c/models", exists), "/c/models/gemma-3-270m-q4_k_m.gguf");
  assert.deepEqual(seen, [
    "/c/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "/c/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "/c/models/gemma-3-270m-q4_k_m.gguf",
  ]);
});

Deno.test("--model: an alias not pulled yet says how to pull it; paths pass through", () => {
  assert.throws(
    () => modelArgument("qwen2.5-coder-1.5b", "/c/models", () => false),
    (e: unknown) =>
      e instanceof Error &&
      e.message ===
        "model store: qwen2.5-coder-1.5b is not in the cache " +
          "(no /c/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf): " +
          "run 'cflow pull qwen2.5-coder-1.5b' first",
  );
  const never = () => {
    throw new Error("a path is not looked up");
  };
  for (const p of ["./smollm2", "m.gguf", "/abs/qwen2.5-coder-1.5b", "builtin:arch2_4_combined"]) {
    assert.equal(modelArgument(p, "/c/models", never), p);
  }
  assert.equal(aliasPath("smollm2.gguf", "/c/models"), undefined);
  assert.equal(aliasPath("constructor", "/c/models"), undefined); // not an inherited property
});
