// Property test (fast-check, fixed seed): request bodies for the four
// endpoints (mostly well-formed, with any field sometimes any JSON value or a
// boundary number, unknown keys now and then, and plain random JSON), passed
// through JSON as the server sees them, validated against the default and
// small limits and random vocabulary and context sizes, either give a request
// whose every number is in range (max_tokens ≤ context, top_k ≤ vocab,
// logit_bias ids < vocab, …) or throw an ApiError with status 400; nothing
// else. Shared with `deno task fuzz`.

import { assertTarget, requestTarget } from "../tests/fuzz/properties.ts";

Deno.test("validate*Request: any JSON body gives an in-range request or a 400 ApiError", async () => {
  await assertTarget(requestTarget, 1000);
});
