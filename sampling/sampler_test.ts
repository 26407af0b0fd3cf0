import assert from "node:assert/strict";
import { Sampler } from "./sampler.ts";
import type { SamplerOptions } from "./sampler_options.ts";

const fr = Math.fround;

function f32(...values: number[]): Float32Array {
  return new Float32Array(values);
}

/** The next f32 below `x` (x > 0). */
function below(x: number): number {
  const b = new Float32Array([x]);
  new Uint32Array(b.buffer)[0]--;
  return b[0];
}

/** The next f32 above `x` (x > 0). */
function above(x: number): number {
  const b = new Float32Array([x]);
  new Uint32Array(b.buffer)[0]++;
  return b[0];
}

/** How often each token comes out of `draws` samples (nothing accepted). */
function histogram(s: Sampler, logits: Float32Array, draws: number): number[] {
  const counts = new Array<number>(logits.length).fill(0);
  for (let i = 0; i < draws; i++) counts[s.sample(logits)]++;
  return counts;
}

/** Pearson's chi-square of `counts` against probabilities `p` (cells with p = 0 must be 0). */
function chiSquare(counts: number[], p: number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  let x2 = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] === 0) {
      assert.equal(counts[i], 0, `token ${i} has probability 0 but came out ${counts[i]} times`);
      continue;
    }
    x2 += (counts[i] - n * p[i]) ** 2 / (n * p[i]);
  }
  return x2;
}

function softmax(logits: number[], temperature = 1): number[] {
  const m = Math.max(...logits);
  const e = logits.map((l) => Math.exp((l - m) / temperature));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

/** Logits whose softmax is exactly-enough `probs`. */
function logitsOf(probs: number[]): Float32Array {
  return new Float32Array(probs.map((p) => (p === 0 ? -Infinity : Math.log(p))));
}

// ---------------------------------------------------------------- greedy

Deno.test("temperature 0 is the argmax, ties to the lowest id, with -Infinity masked", () => {
  const s = new Sampler(6, { temperature: 0 });
  assert.equal(s.sample(f32(0, 1, 5, 5, -2, 5)), 2);
  assert.equal(s.sample(f32(-Infinity, -3, -3, -Infinity, -4, -5)), 1);
  assert.equal(s.sample(f32(7, 7, 7, 7, 7, 7)), 0);
  assert.equal(s.sample(f32(-Infinity, -Infinity, -Infinity, -Infinity, -Infinity, 0)), 5);
  assert.throws(
    () => s.sample(new Float32Array(6).fill(-Infinity)),
    /every token is masked or banned/,
  );
});

Deno.test("top_k = 1 is greedy, whatever the temperature and seed", () => {
  let state = 12345;
  const rand = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
  const greedy = new Sampler(50, { temperature: 0 });
  for (let trial = 0; trial < 200; trial++) {
    // Coarse values, so that ties are frequent.
    const logits = new Float32Array(50).map(() => Math.round(rand() * 8) / 2);
    const s = new Sampler(50, { topK: 1, temperature: 0.5 + rand() * 3, seed: trial });
    assert.equal(s.sample(logits), greedy.sample(logits), `trial ${trial}`);
  }
});

// (A greedy sampler's random generator is private and its temperature fixed, so whether greedy
// draws random numbers cannot be observed; what can be is that the seed and the truncations do
// not matter to it.)
Deno.test("greedy takes the argmax whatever the seed and the truncations; ties go to the lowest id", () => {
  const logits = f32(0.1, 0.9, 0.3, 0.9, -2);
  for (let seed = 0; seed < 50; seed++) {
    const s = new Sampler(5, { seed, temperature: 0, topK: 2, topP: 0.1, minP: 0.9 });
    for (let i = 0; i < 4; i++) assert.equal(s.sample(logits), 1, `seed ${seed}`);
  }
  // A masked maximum is skipped.
  assert.equal(new Sampler(3, { temperature: 0 }).sample(f32(-Infinity, 0.2, 0.1)), 1);
});

// ---------------------------------------------------------------- truncation

const P4 = [0.5, 0.3, 0.15, 0.05];

Deno.test("top_p keeps the smallest prefix reaching p (hand-computed)", () => {
  // Cumulative: 0.5, 0.8, 0.95, 1.0.
  const cases: [number, number[]][] = [
    [0.45, [1, 0, 0, 0]],
    [0.75, [0.5 / 0.8, 0.3 / 0.8, 0, 0]],
    [0.81, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]],
    [1, P4],
  ];
  for (const [topP, expected] of cases) {
    const counts = histogram(new Sampler(4, { topP, seed: 11 }), logitsOf(P4), 40_000);
    const x2 = chiSquare(counts, expected);
    assert.ok(x2 < 20, `topP ${topP}: chi-square ${x2.toFixed(2)} for ${counts}`);
  }
});

Deno.test("top_p applies to what top_k kept, and to the distribution at temperature 1", () => {
  // Without top-k, top-p 0.83 needs three tokens (0.5, 0.8, 0.95); after top-k 3 the
  // probabilities are renormalized to 0.526, 0.316, 0.158 and two suffice (0.526, 0.842).
  const three = histogram(new Sampler(4, { topP: 0.83, seed: 3 }), logitsOf(P4), 40_000);
  assert.ok(chiSquare(three, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]) < 20, String(three));
  const two = histogram(new Sampler(4, { topK: 3, topP: 0.83, seed: 3 }), logitsOf(P4), 40_000);
  assert.ok(chiSquare(two, [0.5 / 0.8, 0.3 / 0.8, 0, 0]) < 20, String(two));
  // At temperature 10 the tokens are almost uniform, but top-p 0.75 still keeps two: the
  // truncation sees temperature 1, then the two are sampled at temperature 10.
  const hot = histogram(
    new Sampler(4, { topP: 0.75, temperature: 10, seed: 4 }),
    logitsOf(P4),
    40_000,
  );
  const l = [Math.log(0.5), Math.log(0.3)];
  const p = softmax(l, 10);
  assert.ok(chiSquare(hot, [p[0], p[1], 0, 0]) < 20, String(hot));
});

Deno.test("top_p over a large flat vocabulary sorts as far as it must", () => {
  // 5000 equal logits: top-p 0.9001 keeps ceil(0.9001 * 5000) = 4501 tokens, the lowest ids.
  const n = 5000;
  const s = new Sampler(n, { topP: 0.9001, seed: 8 });
  const logits = new Float32Array(n);
  let max = 0;
  for (let i = 0; i < 20_000; i++) max = Math.max(max, s.sample(logits));
  assert.equal(max <= 4500, true, `sampled ${max}`);
  assert.ok(max > 4400, `sampled at most ${max}`);
  // With a peaked distribution the first 64 suffice; the result is the same either way.
  const peaked = new Float32Array(n).fill(-10);
  peaked[4999] = 10;
  peaked[17] = 9;
  const t = new Sampler(n, { topP: 0.5, seed: 1 });
  for (let i = 0; i < 100; i++) assert.equal(t.sample(peaked), 4999);
});

Deno.test("min_p keeps tokens with p >= min_p * p_max (hand-computed), sorted or not", () => {
  // Ratios to the best: 1, 0.6, 0.3, 0.1.
  const cases: [number, number[]][] = [
    [0.05, P4],
    [0.2, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]],
    [0.5, [0.5 / 0.8, 0.3 / 0.8, 0, 0]],
    [0.7, [1, 0, 0, 0]],
    [1, [1, 0, 0, 0]],
  ];
  for (const [minP, expected] of cases) {
    for (const extra of [{}, { topK: 4 }, { topP: 0.9999 }] as SamplerOptions[]) {
      const counts = histogram(new Sampler(4, { minP, seed: 21, ...extra }), logitsOf(P4), 20_000);
      const x2 = chiSquare(counts, expected);
      assert.ok(x2 < 20, `minP ${minP} ${JSON.stringify(extra)}: chi-square ${x2} for ${counts}`);
    }
  }
  // min_p 1 keeps every token tied for the best.
  const tied = histogram(new Sampler(3, { minP: 1, seed: 2 }), f32(1, 1, 0), 2000);
  assert.equal(tied[2], 0);
  assert.ok(tied[0] > 800 && tied[1] > 800);
});

Deno.test("top_k keeps the k best, ties to the lower ids", () => {
  const counts = histogram(new Sampler(6, { topK: 3, seed: 6 }), f32(1, 2, 2, 0, 2, 2), 3000);
  assert.deepEqual(counts.map((c) => c > 0), [false, true, true, false, true, false]);
  // top_k larger than the vocabulary, or than the unmasked tokens, keeps them all.
  const all = histogram(new Sampler(3, { topK: 10, seed: 6 }), f32(0, -Infinity, 0), 1000);
  assert.equal(all[1], 0);
  assert.ok(all[0] > 400 && all[2] > 400);
});

// ---------------------------------------------------------------- empirical distribution

Deno.test("samples follow softmax(logits / temperature) (chi-square, fixed seeds)", () => {
  const logits = [1, 0.5, 0, -0.5, -1, 2, -Infinity, 0.25];
  for (const [temperature, seed] of [[1, 1], [0.7, 2], [1.8, 3]]) {
    const s = new Sampler(logits.length, { temperature, seed });
    const counts = histogram(s, new Float32Array(logits), 100_000);
    const x2 = chiSquare(counts, softmax(logits, temperature));
    // 6 degrees of freedom: P(X² > 27.9) = 1e-4.
    assert.ok(x2 < 27.9, `temperature ${temperature}: chi-square ${x2.toFixed(2)}`);
  }
});

// ---------------------------------------------------------------- seeds

Deno.test("the same seed gives the same tokens; different seeds differ", () => {
  const logits = new Float32Array(100).map((_, i) => Math.sin(i) * 2);
  const run = (seed: number): number[] => {
    const s = new Sampler(100, { seed, temperature: 1.2, topP: 0.95, repetitionPenalty: 1.1 });
    const out: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = s.sample(logits);
      s.accept(t);
      out.push(t);
    }
    return out;
  };
  const a = run(42);
  assert.deepEqual(run(42), a);
  assert.notDeepEqual(run(43), a);
  assert.notDeepEqual(run(0), a);
  // Pinned: the sequence of a seed is part of the API (same tokens on every run and machine).
  assert.deepEqual(a.slice(0, 12), PINNED_SEED_42);
});

// An independent Python transcription of the steps documented on Sampler (xoshiro128** seeded
// through splitmix32, f32 repetition penalty, a full sort for top-p, the walk over the sorted
// kept tokens) gave the same tokens when this was written.
const PINNED_SEED_42 = [65, 8, 7, 1, 89, 19, 96, 77, 47, 52, 14, 26];

// Every option at once, on a 3000-token vocabulary with a flat distribution (top-p's quickselect
// path). Pinned, and also reproduced by an independent Python transcription of the documented
// steps (full sort instead of quickselect) when this was written.
const PINNED: [SamplerOptions, number[]][] = [
  [{
    "seed": 7,
    "temperature": 0.9,
    "topP": 0.9,
    "minP": 0.05,
    "presencePenalty": 0.5,
    "frequencyPenalty": 0.3,
    "penaltyLastN": 16,
    "logitBias": { "5": -Infinity, "7": 2 },
  }, [
    696,
    1344,
    1579,
    1460,
    2574,
    1577,
    882,
    734,
    1887,
    650,
    252,
    2900,
    690,
    2040,
    2362,
    762,
    999,
    1245,
    1282,
    104,
  ]],
  [{ "seed": 1, "temperature": 0.7, "topK": 50, "topP": 0.8 }, [
    1443,
    2667,
    1409,
    799,
    798,
    1426,
    2020,
    780,
    2037,
    2649,
    815,
    2684,
    1392,
    2684,
    1410,
    2020,
    780,
    781,
    152,
    799,
  ]],
  [{ "seed": 2, "temperature": 1.5, "minP": 0.3, "repetitionPenalty": 1.3 }, [
    1425,
    2169,
    971,
    577,
    2572,
    1493,
    51,
    246,
    2551,
    511,
    2130,
    1845,
    58,
    559,
    889,
    253,
    1903,
    219,
    1748,
    1948,
  ]],
  [{ "seed": 3, "temperature": 1, "topP": 0.5 }, [
    2062,
    901,
    1529,
    216,
    1956,
    2651,
    1455,
    152,
    2175,
    1417,
    2600,
    778,
    34,
    71,
    2628,
    1955,
    745,
    2720,
    84,
    749,
  ]],
];

Deno.test("pinned sequences for every option", () => {
  const n = 3000;
  const logits = new Float32Array(n).map((_, i) =>
    Math.sin(i * 0.01) * 0.5 + Math.cos(i * 0.37) * 0.3
  );
  for (const [options, expected] of PINNED) {
    const s = new Sampler(n, options);
    const got = expected.map(() => {
      const t = s.sample(logits);
      s.accept(t);
      return t;
    });
    assert.deepEqual(got, expected, JSON.stringify(options));
  }
});

Deno.test("without a seed, a random one is chosen and reported", () => {
  const seeds = new Set(Array.from({ length: 8 }, () => new Sampler(2).seed));
  assert.ok(seeds.size > 1);
  for (const seed of seeds) assert.ok(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32);
  const s = new Sampler(10);
  const logits = new Float32Array(10);
  const first = Array.from({ length: 20 }, () => s.sample(logits));
  const again = new Sampler(10, { seed: s.seed });
  assert.deepEqual(Array.from({ length: 20 }, () => again.sample(logits)), first);
});

Deno.test("reset forgets history and restarts the seed's sequence", () => {
  const s = new Sampler(5, { seed: 3, repetitionPenalty: 2, presencePenalty: 1 });
  const logits = f32(1, 0.9, 0.8, 0.7, 0.6);
  const run = (): number[] => {
    const out: number[] = [];
    for (let i = 0; i < 30; i++) {
      const t = s.sample(logits);
      s.accept(t);
      out.push(t);
    }
    return out;
  };
  const first = run();
  s.reset();
  assert.deepEqual(run(), first);
});

// ---------------------------------------------------------------- penalties

Deno.test("repetition penalty: l / p above 0, l * p at or below 0, exact in f32", () => {
  const rep = 1.25;
  const p = fr(rep);
  // Token 1 (logit 2) is penalized to fr(2 / p) = fr(1.6); token 0 holds exactly that: a tie,
  // which the lower id wins. One ulp less and token 1 wins.
  const pos = fr(2 / p);
  const s = new Sampler(2, { temperature: 0, repetitionPenalty: rep });
  s.accept(1);
  assert.equal(s.sample(f32(pos, 2)), 0);
  assert.equal(s.sample(f32(below(pos), 2)), 1);
  // Negative: -2 becomes fr(-2 * p) = -2.5.
  const neg = fr(-2 * p);
  assert.equal(s.sample(f32(neg, -2)), 0);
  assert.equal(s.sample(f32(-above(-neg), -2)), 1);
  // Zero stays zero (0 * p).
  assert.equal(s.sample(f32(0, 0)), 0);
  assert.equal(s.sample(f32(-1e-30, 0)), 1);
  // A penalty below 1 rewards repetition.
  const r = new Sampler(2, { temperature: 0, repetitionPenalty: 0.5 });
  r.accept(1);
  assert.equal(r.sample(f32(4.1, 2)), 0);
  assert.equal(r.sample(f32(3.9, 2)), 1);
});

Deno.test("presence and frequency penalties: l -= c * frequency + presence, exact in f32", () => {
  const presence = 0.3, frequency = 0.2;
  const s = new Sampler(3, {
    temperature: 0,
    presencePenalty: presence,
    frequencyPenalty: frequency,
  });
  s.accept(2);
  s.accept(2);
  s.accept(2);
  // Token 2: 1 - (3 * 0.2 + 0.3) in f32, as llama.cpp computes it.
  const expect = fr(1 - fr(fr(3 * fr(frequency)) + fr(presence)));
  assert.ok(Math.abs(expect - 0.1) < 1e-6);
  assert.equal(s.sample(f32(-1, expect, 1)), 1);
  assert.equal(s.sample(f32(-1, below(expect), 1)), 2);
  // Tokens never accepted are untouched.
  assert.equal(s.sample(f32(0.95, -1, 1)), 0);
  // Negative penalties encourage.
  const e = new Sampler(2, { temperature: 0, presencePenalty: -1 });
  e.accept(1);
  assert.equal(e.sample(f32(1.5, 0.6)), 1);
});

Deno.test("both penalties together: repetition first, then presence/frequency", () => {
  const s = new Sampler(2, {
    temperature: 0,
    repetitionPenalty: 2,
    presencePenalty: 0.5,
    frequencyPenalty: 0.25,
  });
  s.accept(1);
  s.accept(1);
  // 3 / 2 - (2 * 0.25 + 0.5) = 0.5.
  assert.equal(s.sample(f32(0.5, 3)), 0);
  assert.equal(s.sample(f32(below(0.5), 3)), 1);
});

Deno.test("penalties look at the last penaltyLastN accepted tokens", () => {
  const s = new Sampler(3, { temperature: 0, presencePenalty: 10, penaltyLastN: 2 });
  const logits = f32(1, 0.9, 0.8);
  s.accept(0);
  assert.equal(s.sample(logits), 1);
  s.accept(1);
  assert.equal(s.sample(logits), 2); // 0 and 1 are both in the window
  s.accept(2);
  assert.equal(s.sample(logits), 0); // 0 left the window
  s.accept(2);
  assert.equal(s.sample(logits), 0); // window: 2, 2
  // Frequency counts occurrences within the window only.
  const f = new Sampler(2, { temperature: 0, frequencyPenalty: 1, penaltyLastN: 3 });
  for (const t of [0, 0, 0, 0, 0]) f.accept(t);
  // Count 3 (not 5): 3.5 - 3 = 0.5.
  assert.equal(f.sample(f32(3.5, 0.4)), 0);
  assert.equal(f.sample(f32(3.5, 0.6)), 1);
});

Deno.test("penaltyLastN 0 turns the penalties off", () => {
  const s = new Sampler(2, { temperature: 0, repetitionPenalty: 100, penaltyLastN: 0 });
  s.accept(0);
  assert.equal(s.sample(f32(1, 0.5)), 0);
});

// ---------------------------------------------------------------- logit bias

Deno.test("logit bias adds to logits; -Infinity bans", () => {
  const logits = f32(5, 1, 0);
  const ban = new Sampler(3, { temperature: 0, logitBias: new Map([[0, -Infinity]]) });
  assert.equal(ban.sample(logits), 1);
  // Banned tokens never come out of sampling either.
  const hist = histogram(new Sampler(3, { seed: 1, logitBias: { "0": -Infinity } }), logits, 5000);
  assert.equal(hist[0], 0);
  assert.ok(chiSquare(hist, [0, ...softmax([1, 0])]) < 15);
  // Record keys are decimal ids; a positive bias can promote a token.
  const up = new Sampler(3, { temperature: 0, logitBias: { "2": 5.5 } });
  assert.equal(up.sample(logits), 2);
  const tie = new Sampler(3, { temperature: 0, logitBias: { "2": 5 } });
  assert.equal(tie.sample(logits), 0);
  // Banning everything is an error.
  const all = new Sampler(2, { logitBias: { "0": -Infinity, "1": -Infinity } });
  assert.throws(() => all.sample(f32(1, 2)), RangeError);
  // The bias is added after the penalties: a banned token stays banned, a biased one is not
  // scaled by the repetition penalty.
  const order = new Sampler(2, { temperature: 0, repetitionPenalty: 2, logitBias: { "1": 1 } });
  order.accept(1);
  assert.equal(order.sample(f32(2, 2)), 0); // 2 / 2 + 1 = 2: a tie
  assert.equal(order.sample(f32(below(2), 2)), 1);
});

Deno.test("the caller's logits are not changed", () => {
  const logits = f32(1, 2, 3);
  const s = new Sampler(3, { repetitionPenalty: 3, logitBias: { "0": 2 }, seed: 1 });
  s.accept(2);
  s.sample(logits);
  assert.deepEqual([...logits], [1, 2, 3]);
});

// ---------------------------------------------------------------- logprobs

Deno.test("logprobs: the top n of the softmax, best first, ties to the lower id", () => {
  const s = new Sampler(5);
  const logits = f32(0, Math.log(3), -Infinity, 0, Math.log(5));
  const top = s.logprobs(logits, 4);
  assert.deepEqual(top.map((t) => t.id), [4, 1, 0, 3]);
  const expected = [5 / 10, 3 / 10, 1 / 10, 1 / 10];
  top.forEach((t, i) => assert.ok(Math.abs(Math.exp(t.logprob) - expected[i]) < 1e-7, String(i)));
  assert.equal(s.logprobs(logits, 0).length, 0);
  // Masked tokens are never listed.
  assert.equal(s.logprobs(logits, 5).length, 4);
  assert.deepEqual(s.logprobs(new Float32Array(5).fill(-Infinity), 3), []);
  assert.equal(s.logprobOf(logits, 2), -Infinity);
  assert.ok(Math.abs(s.logprobOf(logits, 1) - Math.log(0.3)) < 1e-7);
  // Large logits do not overflow.
  const big = s.logprobs(f32(1e30, 1e30, 0, 0, 0), 2);
  assert.deepEqual(big.map((t) => t.id), [0, 1]);
  assert.ok(Math.abs(big[0].logprob - Math.log(0.5)) < 1e-12);
  // They ignore penalties and bias: the model's distribution.
  const b = new Sampler(2, { logitBias: { "0": -Infinity }, repetitionPenalty: 2 });
  b.accept(1);
  assert.ok(Math.abs(b.logprobOf(f32(0, 0), 0) - Math.log(0.5)) < 1e-12);
});

// ---------------------------------------------------------------- a real-size vocabulary

Deno.test("a 151936-token vocabulary samples quickly with top-p and min-p", () => {
  const n = 151_936;
  const logits = new Float32Array(n).map((_, i) =>
    Math.sin(i * 0.37) * 4 + ((i * 7919) % 13) * 0.1
  );
  const s = new Sampler(n, {
    temperature: 0.8,
    topP: 0.95,
    minP: 0.02,
    repetitionPenalty: 1.1,
    seed: 5,
  });
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) s.accept(s.sample(logits));
  const ms = (performance.now() - t0) / 20;
  console.log(`${ms.toFixed(2)} ms per token`);
  assert.ok(ms < 200);
});

// ---------------------------------------------------------------- validation

Deno.test("Sampler validates its arguments", () => {
  const bad: [() => unknown, ErrorConstructor, RegExp][] = [
    [() => new Sampler(0), RangeError, /vocabSize 0 is not an integer in \[1, 16777216\]/],
    [() => new Sampler(2.5), RangeError, /vocabSize 2.5/],
    [() => new Sampler("5" as never), TypeError, /vocabSize must be a number/],
    [() => new Sampler(4, null as never), TypeError, /options must be an object/],
    [() => new Sampler(4, { top_k: 3 } as never), RangeError, /unknown option top_k/],
    [() => new Sampler(4, { temperature: -0.1 }), RangeError, /temperature -0.1 is negative/],
    [() => new Sampler(4, { temperature: NaN }), RangeError, /temperature NaN is not finite/],
    [
      () => new Sampler(4, { temperature: Infinity }),
      RangeError,
      /temperature Infinity is not finite/,
    ],
    [
      () => new Sampler(4, { temperature: "1" as never }),
      TypeError,
      /temperature must be a number/,
    ],
    [() => new Sampler(4, { topK: -1 }), RangeError, /topK -1 is not an integer >= 0/],
    [() => new Sampler(4, { topK: 1.5 }), RangeError, /topK 1.5/],
    [() => new Sampler(4, { topP: 0 }), RangeError, /topP 0 is not in \(0, 1\]/],
    [() => new Sampler(4, { topP: 1.01 }), RangeError, /topP 1.01/],
    [() => new Sampler(4, { minP: -0.01 }), RangeError, /minP -0.01 is not in \[0, 1\]/],
    [() => new Sampler(4, { minP: 2 }), RangeError, /minP 2/],
    [() => new Sampler(4, { repetitionPenalty: 0 }), RangeError, /repetitionPenalty 0 is not > 0/],
    [() => new Sampler(4, { repetitionPenalty: -1 }), RangeError, /repetitionPenalty -1/],
    [
      () => new Sampler(4, { penaltyLastN: -1 }),
      RangeError,
      /penaltyLastN -1 is not an integer in \[0, 1048576\]/,
    ],
    [() => new Sampler(4, { penaltyLastN: 2 ** 21 }), RangeError, /penaltyLastN 2097152/],
    [
      () => new Sampler(4, { presencePenalty: Infinity }),
      RangeError,
      /presencePenalty Infinity is not finite/,
    ],
    [
      () => new Sampler(4, { frequencyPenalty: NaN }),
      RangeError,
      /frequencyPenalty NaN is not finite/,
    ],
    [() => new Sampler(4, { seed: -1 }), RangeError, /seed -1 is not an integer in \[0, 2\^32\)/],
    [() => new Sampler(4, { seed: 2 ** 32 }), RangeError, /seed 4294967296/],
    [() => new Sampler(4, { seed: 0.5 }), RangeError, /seed 0.5/],
    [
      () => new Sampler(4, { logitBias: new Map([[4, 1]]) }),
      RangeError,
      /logitBias token id 4 is not an integer in \[0, 4\)/,
    ],
    [() => new Sampler(4, { logitBias: new Map([[-1, 1]]) }), RangeError, /logitBias token id -1/],
    [
      () => new Sampler(4, { logitBias: { "01": 1 } }),
      RangeError,
      /logitBias key "01" is not a token id/,
    ],
    [() => new Sampler(4, { logitBias: { "x": 1 } }), RangeError, /logitBias key "x"/],
    [
      () => new Sampler(4, { logitBias: { "1": Infinity } }),
      RangeError,
      /logitBias\[1\] Infinity is not finite or -Infinity/,
    ],
    [() => new Sampler(4, { logitBias: { "1": NaN } }), RangeError, /logitBias\[1\] NaN/],
    [
      () => new Sampler(4, { logitBias: { "1": "2" } } as never),
      TypeError,
      /logitBias\[1\] must be a number/,
    ],
    [
      () => new Sampler(4, { logitBias: [1] } as never),
      TypeError,
      /logitBias must be a Map or a record/,
    ],
  ];
  for (const [fn, type, re] of bad) {
    assert.throws(
      fn,
      (e: unknown) => e instanceof type && re.test((e as Error).message),
      re.source,
    );
  }
  const s = new Sampler(4, { seed: 1 });
  const calls: [() => unknown, ErrorConstructor, RegExp][] = [
    [
      () => s.sample(new Float64Array(4) as never),
      TypeError,
      /logits must be a Float32Array, got Float64Array/,
    ],
    [() => s.sample(new Float32Array(5)), RangeError, /logits length 5 is not vocabSize 4/],
    [() => s.sample(f32(0, NaN, 0, 0)), RangeError, /logits\[1\] is NaN/],
    [() => s.sample(f32(0, 0, Infinity, 0)), RangeError, /logits\[2\] is Infinity/],
    [() => s.accept(4), RangeError, /token 4 is not an integer in \[0, 4\)/],
    [() => s.accept(-1), RangeError, /token -1/],
    [() => s.accept(1.5), RangeError, /token 1.5/],
    [() => s.logprobs(new Float32Array(4), 5), RangeError, /n 5 is not an integer in \[0, 4\]/],
    [() => s.logprobs(new Float32Array(4), -1), RangeError, /n -1/],
    [() => s.logprobs(new Float32Array(3), 1), RangeError, /logprobs: logits length 3/],
    [() => s.logprobOf(new Float32Array(4), 4), RangeError, /token 4/],
  ];
  for (const [fn, type, re] of calls) {
    assert.throws(
      fn,
      (e: unknown) => e instanceof type && re.test((e as Error).message),
      re.source,
    );
  }
});

/** A constraint allowing the ids in `ok`, counting how often each way was asked. */
function allowOnly(vocab: number, ok: number[]) {
  const mask = new Uint8Array(vocab);
  for (const id of ok) mask[id] = 1;
  const calls = { allows: 0, mask: 0 };
  return {
    calls,
    allows: (id: number) => {
      calls.allows++;
      return mask[id] === 1;
    },
    mask: () => {
      calls.mask++;
      return mask;
    },
  };
}

Deno.test("sampleConstrained: greedy is the argmax over allowed tokens, one check when allowed", () => {
  const s = new Sampler(5, { temperature: 0 });
  const logits = new Float32Array([1, 9, 3, 7, 2]);
  const all = allowOnly(5, [0, 1, 2, 3, 4]);
  assert.equal(s.sampleConstrained(logits, all), 1);
  assert.deepEqual(all.calls, { allows: 1, mask: 0 });
  assert.equal(s.sampleConstrained(logits, allowOnly(5, [0, 2, 4])), 2);
  assert.throws(() => s.sampleConstrained(logits, allowOnly(5, [])), /allows no token/);
});

Deno.test("sampleConstrained: P(t) = p(t)/Z over the allowed truncated candidates (empirical)", () => {
  const logits = new Float32Array([2.0, 1.5, 1.0, 0.5, 0.0, -1.0, -5]);
  const options: SamplerOptions = { temperature: 0.8, topK: 5, seed: 123 };
  const s = new Sampler(logits.length, options);
  const allowed = [1, 2, 4, 6]; // 6 is cut by top-k
  const c = allowOnly(logits.length, allowed);
  const n = 40_000;
  const counts = new Array(logits.length).fill(0);
  for (let i = 0; i < n; i++) counts[s.sampleConstrained(logits, c)]++;
  // Expected: softmax(logit / T) over {1, 2, 4} (top-5 keeps 0..4; 6 is not a candidate).
  const w = [1, 2, 4].map((id) => Math.exp(logits[id] / 0.8));
  const z = w.reduce((a, b) => a + b, 0);
  [1, 2, 4].forEach((id, k) => {
    const p = w[k] / z;
    const sd = Math.sqrt((p * (1 - p)) / n);
    assert.ok(Math.abs(counts[id] / n - p) < 5 * sd, `token ${id}: ${counts[id] / n} vs ${p}`);
  });
  assert.equal(counts[0] + counts[3] + counts[5] + counts[6], 0);
});

Deno.test("sampleConstrained: no allowed candidate after truncation: the truncations redone over the allowed tokens", () => {
  const logits = new Float32Array([5, 4, 0, 0, 1, 0.5]);
  const s = new Sampler(6, { temperature: 1, topK: 2, seed: 9 });
  const c = allowOnly(6, [4, 5, 3]);
  const counts = new Array(6).fill(0);
  const n = 20_000;
  for (let i = 0; i < n; i++) counts[s.sampleConstrained(logits, c)]++;
  // top-2 over the allowed {3, 4, 5} keeps {4, 5}.
  const p4 = Math.exp(1) / (Math.exp(1) + Math.exp(0.5));
  assert.equal(counts[3], 0);
  assert.ok(Math.abs(counts[4] / n - p4) < 0.02, `${counts[4] / n} vs ${p4}`);
  assert.ok(c.calls.mask > 0);
});

Deno.test("sampleConstrained: the same draws as sample while every token is allowed", () => {
  const logits = new Float32Array(Array.from({ length: 50 }, (_, i) => Math.sin(i) * 3));
  const a = new Sampler(50, { temperature: 0.9, topP: 0.9, seed: 4 });
  const b = new Sampler(50, { temperature: 0.9, topP: 0.9, seed: 4 });
  const all = allowOnly(50, Array.from({ length: 50 }, (_, i) => i));
  for (let i = 0; i < 100; i++) assert.equal(a.sampleConstrained(logits, all), b.sample(logits));
  assert.equal(all.calls.mask, 0);
});
