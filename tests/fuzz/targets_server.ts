/**
 * Fuzz targets for the server's request validation: any JSON value is
 * either a validated request whose every number is in range, or an
 * {@link ApiError} with status 400.
 *
 * @module
 */

import fc from "fast-check";
import { ApiError } from "../../server/api_error.ts";
import {
  type ChatRequest,
  type CompletionRequest,
  DEFAULT_LIMITS,
  type RequestLimits,
  type SamplingRequest,
  validateChatRequest,
  validateCompletionRequest,
  validateDetokenizeRequest,
  validateTokenizeRequest,
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
function num(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom(
      -101,
      -100,
      -2.5,
      -2,
      -1,
      -0,
      0,
      1e-9,
      0.5,
      1,
      1.5,
      2,
      2.0000001,
      10,
      10.5,
      100,
      101,
      255,
      256,
      0xffffffff,
      2 ** 32,
      2 ** 53,
      1e308,
    ),
    fc.integer({ min: -5, max: 70000 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
  );
}

function anyValue(): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: num(), weight: 3 },
    { arbitrary: weirdJson(), weight: 2 },
    { arbitrary: fc.string({ maxLength: 20 }), weight: 1 },
  );
}

/** Mostly `valid`, sometimes anything. */
function mostly(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof({ arbitrary: valid, weight: 10 }, { arbitrary: anyValue(), weight: 1 });
}

const unit = fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(0, 1));
const penalty = fc.oneof(fc.double({ min: -2, max: 2, noNaN: true }), fc.constantFrom(-2, 2));

const SAMPLING = {
  model: mostly(fc.string({ maxLength: 10 })),
  stream: mostly(fc.boolean()),
  stream_options: mostly(fc.record({ include_usage: mostly(fc.boolean()) }, { requiredKeys: [] })),
  max_tokens: mostly(fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.constant(null))),
  temperature: mostly(fc.double({ min: 0, max: 2, noNaN: true })),
  top_p: mostly(unit),
  top_k: mostly(fc.integer({ min: 0, max: 300000 })),
  min_p: mostly(unit),
  seed: mostly(fc.oneof(fc.nat(), fc.constant(0xffffffff))),
  presence_penalty: mostly(penalty),
  frequency_penalty: mostly(penalty),
  repeat_penalty: mostly(fc.oneof(fc.double({ min: 0, max: 10, noNaN: true }), fc.constant(10))),
  logit_bias: mostly(
    fc.dictionary(
      fc.oneof(
        fc.constantFrom("0", "1", "01", "99", "1000000000", "__proto__", "-1", "1.0"),
        fc.nat({ max: 300000 }).map(String),
      ),
      mostly(fc.double({ min: -100, max: 100, noNaN: true })),
      { maxKeys: 4 },
    ),
  ),
  stop: mostly(
    fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 6 }), { maxLength: 5 })),
  ),
  n: mostly(fc.constantFrom(1, null)),
  user: mostly(fc.string({ maxLength: 10 })),
  logprobs: mostly(fc.constantFrom(false, 0, null)),
  top_logprobs: mostly(fc.constantFrom(0, null)),
};

const message = mostly(
  fc.record({
    role: mostly(fc.constantFrom("system", "user", "assistant", "tool")),
    content: mostly(
      fc.oneof(
        fc.string({ maxLength: 20 }),
        fc.array(
          mostly(
            fc.record({
              type: fc.constantFrom("text", "text", "image_url"),
              text: mostly(fc.string({ maxLength: 10 })),
            }),
          ),
          { maxLength: 4 },
        ),
      ),
    ),
    name: mostly(fc.string({ maxLength: 70 })),
  }, { requiredKeys: ["role", "content"] }),
);

/** An unknown key, now and then. */
const bogus = fc.oneof(
  { arbitrary: fc.constant(null), weight: 12 },
  { arbitrary: fc.tuple(fc.constantFrom("bogus", "tools", "__proto__"), anyValue()), weight: 1 },
);

/** A request body for one of the four endpoints and the settings it is validated against. */
interface RequestInput {
  endpoint: "chat" | "completion" | "tokenize" | "detokenize";
  body: unknown;
  small: boolean;
  vocab: number;
  ctx: number;
}

function requestArb(): fc.Arbitrary<RequestInput> {
  const chat = fc.record({
    ...SAMPLING,
    messages: mostly(fc.array(message, { maxLength: 5 })),
  }, { requiredKeys: ["messages"] }).chain((b) =>
    fc.oneof(
      { arbitrary: fc.constant(b), weight: 6 },
      {
        arbitrary: mostly(fc.integer({ min: 1, max: 4096 })).map((m) => ({
          ...b,
          max_completion_tokens: m,
        })),
        weight: 1,
      },
    )
  );
  const completion = fc.record({ ...SAMPLING, prompt: mostly(fc.string({ maxLength: 20 })) }, {
    requiredKeys: ["prompt"],
  });
  const tokenize = fc.record({ content: mostly(fc.string()), add_special: mostly(fc.boolean()) }, {
    requiredKeys: ["content"],
  });
  const detokenize = fc.record({
    tokens: mostly(fc.array(mostly(fc.nat({ max: 300000 })), { maxLength: 6 })),
  });
  const any = fc.jsonValue({ maxDepth: 3 });
  const pick = (
    endpoint: RequestInput["endpoint"],
    own: fc.Arbitrary<unknown>,
  ): fc.Arbitrary<[RequestInput["endpoint"], unknown]> =>
    fc.oneof({ arbitrary: own, weight: 8 }, { arbitrary: any, weight: 1 }, {
      arbitrary: fc.oneof(chat, completion, tokenize, detokenize),
      weight: 1,
    }).map((body) => [endpoint, body]);
  return fc.record({
    pair: fc.oneof(
      { arbitrary: pick("chat", chat), weight: 4 },
      { arbitrary: pick("completion", completion), weight: 3 },
      { arbitrary: pick("tokenize", tokenize), weight: 1 },
      { arbitrary: pick("detokenize", detokenize), weight: 1 },
    ),
    extra: bogus,
    small: fc.boolean(),
    vocab: fc.oneof(fc.constantFrom(1, 2, 100, 49152, 262144), fc.integer({ min: 1, max: 300000 })),
    ctx: fc.oneof(fc.constantFrom(1, 8, 2048, 8192), fc.integer({ min: 1, max: 1 << 17 })),
  }).map(({ pair: [endpoint, b], extra, small, vocab, ctx }) => {
    if (extra !== null && b !== null && typeof b === "object" && !Array.isArray(b)) {
      Object.defineProperty(b, extra[0], { value: extra[1], enumerable: true });
    }
    // Through JSON, as the server sees a body: undefined keys vanish, -0 becomes 0.
    const text = JSON.stringify(b);
    const body = text === undefined ? null : JSON.parse(text);
    return { endpoint, body, small, vocab, ctx };
  });
}

const inRange = (v: number, lo: number, hi: number, what: string, openLo = false) =>
  ensure(
    typeof v === "number" && Number.isFinite(v) && v <= hi && (openLo ? v > lo : v >= lo),
    `${what} ${v} not in [${lo}, ${hi}]`,
  );

function checkSampling(s: SamplingRequest, r: RequestInput, limits: RequestLimits): void {
  if (s.maxTokens !== undefined) {
    ensure(Number.isSafeInteger(s.maxTokens), "maxTokens");
    inRange(s.maxTokens, 1, r.ctx, "maxTokens");
  }
  inRange(s.temperature, 0, 2, "temperature");
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
  if (s.logitBias !== undefined) {
    const keys = Object.keys(s.logitBias);
    ensure(keys.length <= limits.maxLogitBias, "logit_bias size");
    for (const k of keys) {
      ensure(/^\d+$/.test(k) && Number(k) < r.vocab, `logit_bias key ${k}`);
      inRange(s.logitBias[k], -100, 100, "logit_bias value");
    }
  }
  ensure(Array.isArray(s.stop) && s.stop.length <= limits.maxStop, "stop count");
  for (const x of s.stop) {
    ensure(typeof x === "string" && x.length > 0 && x.length <= limits.maxStopLength, "stop");
  }
  ensure(typeof s.stream === "boolean" && typeof s.includeUsage === "boolean", "flags");
  ensure(!s.includeUsage || s.stream, "include_usage without stream");
}

function validate(r: RequestInput): Outcome {
  const limits = r.small ? SMALL_LIMITS : DEFAULT_LIMITS;
  let out: unknown;
  try {
    switch (r.endpoint) {
      case "chat":
        out = validateChatRequest(r.body, limits, r.vocab, r.ctx);
        break;
      case "completion":
        out = validateCompletionRequest(r.body, limits, r.vocab, r.ctx);
        break;
      case "tokenize":
        out = validateTokenizeRequest(r.body, limits);
        break;
      case "detokenize":
        out = validateDetokenizeRequest(r.body, limits, r.vocab);
        break;
    }
  } catch (e) {
    if (!(e instanceof ApiError)) {
      throw new Error(`threw ${e} instead of an ApiError`, { cause: e });
    }
    ensure(e.status === 400, `status ${e.status}`);
    ensure(e.message.length > 0 && e.type === "invalid_request_error", "message/type");
    ensure(e.param === null || typeof e.param === "string", "param");
    return "rejected";
  }
  if (r.endpoint === "chat") {
    const c = out as ChatRequest;
    checkSampling(c, r, limits);
    ensure(c.messages.length >= 1 && c.messages.length <= limits.maxMessages, "messages");
    let total = 0;
    for (const m of c.messages) {
      ensure(["system", "user", "assistant"].includes(m.role), `role ${m.role}`);
      ensure(typeof m.content === "string", "content");
      total += m.content.length;
    }
    ensure(total <= limits.maxTextLength, "total length");
  } else if (r.endpoint === "completion") {
    const c = out as CompletionRequest;
    checkSampling(c, r, limits);
    ensure(typeof c.prompt === "string" && c.prompt.length <= limits.maxTextLength, "prompt");
  } else if (r.endpoint === "tokenize") {
    const t = out as { content: string; addSpecial: boolean };
    ensure(typeof t.content === "string" && t.content.length <= limits.maxTextLength, "content");
    ensure(typeof t.addSpecial === "boolean", "addSpecial");
  } else {
    const ids = out as number[];
    ensure(ids.length <= limits.maxTokens, "tokens count");
    for (const id of ids) {
      ensure(Number.isSafeInteger(id) && id >= 0 && id < r.vocab, `token ${id}`);
    }
  }
  return "accepted";
}

/** Server request validation: random JSON bodies for the four endpoints. */
export const requestTarget: Target<RequestInput> = {
  name: "server-request",
  minAccepted: 0.05, // measured 11.5%
  arbitrary: requestArb,
  check: validate,
};
