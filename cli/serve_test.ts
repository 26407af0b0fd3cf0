import assert from "node:assert/strict";
import { requestLogLine } from "./serve.ts";

Deno.test("serve's request log line: method, path, status, ms, tokens, ignored fields", () => {
  const e = {
    method: "POST",
    path: "/v1/chat/completions",
    status: 200,
    ms: 412,
    promptTokens: 12,
    completionTokens: 30,
    ignored: ["cache_prompt", "n_predict"],
  };
  assert.equal(
    requestLogLine(e, false),
    "cflow serve: POST /v1/chat/completions 200 412 ms, prompt 12, generated 30, " +
      "ignored cache_prompt n_predict",
  );
  assert.deepEqual(JSON.parse(requestLogLine(e, true)), {
    method: "POST",
    path: "/v1/chat/completions",
    status: 200,
    ms: 412,
    prompt_tokens: 12,
    completion_tokens: 30,
    ignored_fields: ["cache_prompt", "n_predict"],
  });
  // A request refused before generation has no token counts.
  const refused = { method: "POST", path: "/v1/completions", status: 415, ms: 1, ignored: [] };
  assert.equal(requestLogLine(refused, false), "cflow serve: POST /v1/completions 415 1 ms");
  const j = JSON.parse(requestLogLine(refused, true));
  assert.equal(j.prompt_tokens, null);
  assert.equal(j.completion_tokens, null);
});
