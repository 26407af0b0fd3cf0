/**
 * Fuzz target for the validation of Ollama's request bodies (`/api/chat`, `/api/generate`,
 * `/api/show`): any JSON value is either a validated request whose every number is in range,
 * or an {@link ApiError} with status 400.
 *
 * @module
 */

import fc from "fast-check";
import { ApiError } from "../../server/api_error.ts";
import {
  type OllamaChatRequest,
  type OllamaGenerateRequest,
  validateOllamaChat,
  validateOllamaGenerate,
  validateOllamaShow,
} from "../../server/validate_ollama.ts";
import {
  DEFAULT_LIMITS,
  type RequestLimits,
  type SamplingRequest,
} from "../../server/validate_request.ts";
import { ensure, type Outcome, type Target } from "./harness.ts";
import { weirdJson } from "./targets_formats.ts";

const SMALL_LIMITS: RequestLimits = {
  maxBodyBytes: 4096,
  bodyTimeoutMs: 1000,
  maxMessages: 3,
  maxTextLength: 16,
  maxStop: 2,
  maxStopLength: 4,
  maxLogitBias: 3,
  maxTokens: 4,
};

/** Numbers near every bound the validator has. */
const num = fc.oneof(
  fc.constantFrom(-3, -2, -1, -0, 0, 1e-9, 0.5, 0.8, 1, 1.1, 2, 10, 100, 101, 2 ** 31, 2 ** 53),
  fc.integer({ min: -5, max: 70000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

const anyValue = fc.oneof(
  { arbitrary: num, weight: 3 },
  { arbitrary: weirdJson(), weight: 2 },
  { arbitrary: fc.string({ maxLength: 20 }), weight: 1 },
);

/** Mostly `valid`, sometimes anything. */
function mostly(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof({ arbitrary: valid, weight: 10 }, { arbitrary: anyValue, weight: 1 });
}

const unit = fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(0, 1));

const OPTIONS = fc.record({
  temperature: mostly(fc.double({ min: 0, max: 2, noNaN: true })),
  top_k: mostly(fc.integer({ min: 0, max: 300000 })),
  top_p: mostly(unit),
  min_p: mostly(unit),
  seed: mostly(fc.integer({ min: -5, max: 0xffffffff })),
  num_predict: mostly(fc.integer({ min: -3, max: 5000 })),
  num_ctx: mostly(fc.integer({ min: 0, max: 10000 })),
  repeat_penalty: mostly(fc.double({ min: 0, max: 2, noNaN: true })),
  repeat_last_n: mostly(fc.integer({ min: -2, max: 5000 })),
  presence_penalty: mostly(fc.double({ min: -2, max: 2, noNaN: true })),
  frequency_penalty: mostly(fc.double({ min: -2, max: 2, noNaN: true })),
  stop: mostly(fc.array(fc.string({ maxLength: 6 }), { maxLength: 4 })),
  mirostat: mostly(fc.constantFrom(0, 1, 2)),
  typical_p: mostly(fc.constantFrom(1, 0.5)),
  num_thread: mostly(fc.nat({ max: 64 })),
}, { requiredKeys: [] });

const COMMON = {
  model: mostly(fc.constantFrom("m", "smollm2:latest", "")),
  stream: mostly(fc.boolean()),
  options: mostly(OPTIONS),
  keep_alive: mostly(fc.constantFrom("5m", "1h30m", "-1", "0", 0, -1, 300, "soon")),
  think: mostly(fc.constantFrom(false, true, "high", null)),
  format: mostly(
    fc.oneof(
      fc.constantFrom("json", "", "yaml"),
      fc.record({ type: mostly(fc.constantFrom("object", "string", ["string", "null"])) }),
      fc.jsonValue({ maxDepth: 3 }),
    ),
  ),
};

const message = mostly(
  fc.record({
    role: mostly(fc.constantFrom("system", "user", "assistant", "tool")),
    content: mostly(fc.string({ maxLength: 20 })),
    images: mostly(fc.constantFrom([], ["aGk="])),
    thinking: mostly(fc.string({ maxLength: 5 })),
  }, { requiredKeys: ["role"] }),
);

/** A request body for one of the three routes and the settings it is validated against. */
interface OllamaInput {
  endpoint: "chat" | "generate" | "show";
  body: unknown;
  small: boolean;
  vocab: number;
  ctx: number;
}

function ollamaArb(): fc.Arbitrary<OllamaInput> {
  const chat = fc.record({
    ...COMMON,
    messages: mostly(fc.array(message, { maxLength: 5 })),
    tools: mostly(fc.constantFrom([], [{ type: "function" }])),
  }, { requiredKeys: ["model"] });
  const generate = fc.record({
    ...COMMON,
    prompt: mostly(fc.string({ maxLength: 20 })),
    system: mostly(fc.string({ maxLength: 10 })),
    raw: mostly(fc.boolean()),
    suffix: mostly(fc.constantFrom("", "x")),
    template: mostly(fc.constantFrom("", "{{ .Prompt }}")),
    images: mostly(fc.constantFrom([], ["aGk="])),
    context: mostly(fc.array(mostly(fc.integer({ min: -1, max: 300000 })), { maxLength: 6 })),
  }, { requiredKeys: ["model"] });
  const show = fc.record({
    model: mostly(fc.string({ maxLength: 10 })),
    name: mostly(fc.string({ maxLength: 10 })),
    verbose: mostly(fc.boolean()),
  }, { requiredKeys: [] });
  const any = fc.jsonValue({ maxDepth: 3 });
  const pick = (
    endpoint: OllamaInput["endpoint"],
    own: fc.Arbitrary<unknown>,
  ): fc.Arbitrary<[OllamaInput["endpoint"], unknown]> =>
    fc.oneof({ arbitrary: own, weight: 8 }, { arbitrary: any, weight: 1 }).map((
      body,
    ) => [endpoint, body]);
  return fc.record({
    pair: fc.oneof(
      { arbitrary: pick("chat", chat), weight: 4 },
      { arbitrary: pick("generate", generate), weight: 4 },
      { arbitrary: pick("show", show), weight: 1 },
    ),
    small: fc.boolean(),
    vocab: fc.oneof(fc.constantFrom(1, 100, 49152), fc.integer({ min: 1, max: 300000 })),
    ctx: fc.oneof(fc.constantFrom(1, 8, 2048, 8192), fc.integer({ min: 1, max: 1 << 17 })),
  }).map(({ pair: [endpoint, b], small, vocab, ctx }) => {
    // Through JSON, as the server sees a body.
    const text = JSON.stringify(b);
    return { endpoint, body: text === undefined ? null : JSON.parse(text), small, vocab, ctx };
  });
}

const inRange = (v: number, lo: number, hi: number, what: string, openLo = false) =>
  ensure(
    typeof v === "number" && Number.isFinite(v) && v <= hi && (openLo ? v > lo : v >= lo),
    `${what} ${v} not in [${lo}, ${hi}]`,
  );

function checkSampling(s: SamplingRequest, r: OllamaInput, limits: RequestLimits): void {
  if (s.maxTokens !== undefined) {
    ensure(Number.isSafeInteger(s.maxTokens) && s.maxTokens >= 1, `maxTokens ${s.maxTokens}`);
  }
  inRange(s.temperature, 0, 100, "temperature");
  inRange(s.topP, 0, 1, "topP", true);
  ensure(Number.isSafeInteger(s.topK), "topK");
  inRange(s.topK, 0, r.vocab, "topK");
  inRange(s.minP, 0, 1, "minP");
  if (s.seed !== undefined) {
    ensure(Number.isSafeInteger(s.seed), "seed");
    inRange(s.seed, 0, 0xffffffff, "seed");
  }
  inRange(s.presencePenalty, -2, 2, "presencePenalty");
  inRange(s.frequencyPenalty, -2, 2, "frequencyPenalty");
  inRange(s.repetitionPenalty, 0, 10, "repetitionPenalty", true);
  ensure(Number.isSafeInteger(s.penaltyLastN), "penaltyLastN");
  inRange(s.penaltyLastN!, 0, 1 << 20, "penaltyLastN");
  ensure(Array.isArray(s.stop) && s.stop.length <= limits.maxStop, "stop count");
  for (const x of s.stop) {
    ensure(typeof x === "string" && x.length > 0 && x.length <= limits.maxStopLength, "stop");
  }
  ensure(s.logitBias === undefined && s.logprobs === undefined, "no OpenAI-only fields");
  ensure(typeof s.stream === "boolean" && !s.includeUsage && !s.ignoreEos, "flags");
  const c = s.constraint;
  ensure(
    c === undefined || c.kind === "json_object" ||
      (c.kind === "json_schema" && typeof c.schema === "object" && c.schema !== null &&
        !Array.isArray(c.schema)),
    "constraint",
  );
}

function check(r: OllamaInput): Outcome {
  const limits = r.small ? SMALL_LIMITS : DEFAULT_LIMITS;
  let out: unknown;
  const ignored: string[] = [];
  try {
    if (r.endpoint === "chat") out = validateOllamaChat(r.body, limits, r.vocab, r.ctx, ignored);
    else if (r.endpoint === "generate") {
      out = validateOllamaGenerate(r.body, limits, r.vocab, r.ctx, ignored);
    } else out = validateOllamaShow(r.body, ignored);
  } catch (e) {
    if (!(e instanceof ApiError)) {
      throw new Error(`threw ${e} instead of an ApiError`, { cause: e });
    }
    ensure(e.status === 400, `status ${e.status}`);
    ensure(e.message.length > 0, "message");
    return "rejected";
  }
  ensure(ignored.length <= 16 && ignored.every((k) => k.length <= 64), "ignored names");
  if (r.endpoint === "show") {
    const s = out as { model: string };
    ensure(typeof s.model === "string" && s.model.length > 0, "model");
    return "accepted";
  }
  const v = out as OllamaChatRequest | OllamaGenerateRequest;
  ensure(typeof v.model === "string" && v.model.length > 0 && v.model.length <= 256, "model");
  checkSampling(v.sampling, r, limits);
  if (v.numCtx !== undefined) inRange(v.numCtx, 1, r.ctx, "numCtx");
  if ("messages" in v) {
    ensure(v.messages.length <= limits.maxMessages, "messages");
    ensure(v.load === (v.messages.length === 0), "load");
    let total = 0;
    for (const m of v.messages) {
      ensure(["system", "user", "assistant"].includes(m.role), `role ${m.role}`);
      total += m.content.length;
    }
    ensure(total <= limits.maxTextLength, "total length");
  } else {
    ensure(v.prompt.length <= limits.maxTextLength, "prompt");
    for (const id of v.context ?? []) {
      ensure(Number.isSafeInteger(id) && id >= 0 && id < r.vocab, `context id ${id}`);
    }
    ensure((v.context?.length ?? 0) <= Math.min(limits.maxTokens, r.ctx), "context length");
    ensure(!v.raw || v.system === undefined, "system with raw");
  }
  return "accepted";
}

/** Ollama request validation: random JSON bodies for /api/chat, /api/generate, /api/show. */
export const ollamaRequestTarget: Target<OllamaInput> = {
  name: "server-ollama",
  minAccepted: 0.05,
  arbitrary: ollamaArb,
  check,
};
