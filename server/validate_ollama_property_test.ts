// Property test (fast-check, fixed seed): Ollama request bodies for /api/chat, /api/generate
// and /api/show (mostly well-formed, any field sometimes any JSON value or a boundary number,
// and plain random JSON), passed through JSON as the server sees them, validated against the
// default and small limits and random vocabulary and context sizes, either give a request whose
// every number is in range or throw an ApiError with status 400; nothing else. Shared with
// `deno task fuzz`.

import { assertTarget, ollamaRequestTarget } from "../tests/fuzz/properties.ts";

Deno.test("validateOllama*: any JSON body gives an in-range request or a 400 ApiError", async () => {
  await assertTarget(ollamaRequestTarget, 1000);
});
