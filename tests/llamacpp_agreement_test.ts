/**
 * cflow against llama.cpp on identical weights: SmolLM2-135M-Instruct requantized to Q8_0
 * (scripts/derive-models.ts), converted losslessly to `.cflow` (Q8_0 re-tiles byte for byte), run
 * on the token ids llama.cpp itself produced (tests/fixtures/llamacpp/, made by
 * tests/reference/gen_llamacpp_smollm2.mjs with node-llama-cpp 3.21.1, decoding one token at a
 * time as cflow does), with the f16 KV cache (the default) and with an f32 one.
 *
 * - Teacher-forced, over the 1,067 positions of teacher_forced.txt: cflow's top-1 next token is
 *   llama.cpp's at >= {@link MIN_AGREEMENT} of all positions and >= {@link MIN_DECIDED_AGREEMENT}
 *   of the positions where llama.cpp's margin is >= {@link DECIDED_LOGITS} logits, and cflow's
 *   margin between llama.cpp's top two tokens is on average within
 *   {@link MAX_MEAN_MARGIN_DELTA} of llama.cpp's. The thresholds rest on how llama.cpp agrees
 *   with itself (see {@link MIN_AGREEMENT}).
 * - Greedy: five prompts, 32 tokens each, continue exactly as llama.cpp did, or split only where
 *   cflow's own logit margin between its token and llama.cpp's is below {@link TIE_LOGITS}; the
 *   test prints where, both tokens and both margins.
 *
 * Both engines run the same Q8_0 weights and both quantize activations to Q8_0 before each
 * matrix product, so what is left between them is summation order, f16 rounding inside
 * attention (llama.cpp rounds q and the softmax to f16 against the f16 cache), and
 * exp/softmax/RMSNorm/RoPE implementations; the Q8_0 activation rounding amplifies all of it.
 *
 * Skipped when the Q8_0 GGUF is absent (derive it with
 * `./dev run --allow-read --allow-write --allow-ffi --allow-env scripts/derive-models.ts`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/transformer.ts";
import { fnv1a64 } from "../runtime/mod.ts";

// One thread: on a 2-core machine a second process on the other core would
// stall a 2-thread pool at every one of the hundreds of dispatches per token.
openKernels({ threads: 1 });

const GGUF = new URL("../cache/models/smollm2-135m-instruct.Q8_0.gguf", import.meta.url).pathname;
const FIXTURES = new URL("./fixtures/llamacpp/", import.meta.url).pathname;

/**
 * Noise floor, measured by the fixture generator on llama.cpp against itself (same weights, same
 * inputs, only the summation order changed: batches of 32 instead of 1, or flash attention):
 * top-1 agrees at 96.6% and 96.8% of the 1,067 positions, margins between the reference's top two
 * tokens move by 0.10-0.11 logits on average and up to 0.60, and where the two runs split, the
 * other run prefers its own token by up to 0.44 logits (0.21 at a greedy split). Every matrix
 * product quantizes its input to Q8_0, so a difference of one ulp upstream can move a value
 * across a rounding boundary and change the product by a whole quantum: small differences are
 * amplified to this level whatever their origin (cflow against itself, f16 against f32 KV
 * cache, agrees at 96.7% with the same 0.10 mean margin change). An implementation that is not bit-identical to
 * one llama.cpp configuration cannot be expected to reach 99% top-1 agreement over all positions
 * on this model; cflow measures 97.0% with either KV cache, as close as llama.cpp is to itself.
 */
const MIN_AGREEMENT = 0.95;
/** Positions where llama.cpp's own top-1 margin is at least this are "decided". */
const DECIDED_LOGITS = 0.6;
/**
 * Top-1 agreement required at decided positions: flipping one takes a swing larger than any
 * llama.cpp shows against itself (max 0.60).
 */
const MIN_DECIDED_AGREEMENT = 0.99;
/** Largest mean |cflow margin - llama.cpp margin| accepted (llama.cpp against itself: 0.10-0.11). */
const MAX_MEAN_MARGIN_DELTA = 0.15;
/**
 * Largest cflow logit margin (its token minus llama.cpp's) at which a greedy split is put down
 * to rounding rather than a bug. 0.05 would be too tight: llama.cpp itself, with flash
 * attention on, leaves its own reference continuation of the "code" prompt at the first token,
 * preferring its own by 0.21 logits ("chat" and "french" by 0.06-0.07), and where its
 * teacher-forced runs split they prefer their own token by up to 0.44. 0.25 accepts what
 * llama.cpp's own configurations do to each other at a greedy split and nothing much bigger; a
 * real defect (a wrong RoPE position, mask or scale) moves logits by whole units.
 */
const TIE_LOGITS = 0.25;

interface SelfComparison {
  agree: number;
  positions: number;
  mean_abs_margin_delta: number;
  max_abs_margin_delta: number;
  max_own_margin_at_split: number;
}

interface SelfSplit {
  name: string;
  identical: boolean;
  step?: number;
  tokens?: [number, number];
  own_margin?: number;
}

interface TeacherForced {
  gguf_sha256: string;
  llama_cpp_self_agreement: {
    teacher_forced_batch_32: SelfComparison;
    teacher_forced_flash_attention: SelfComparison;
    greedy_prompt_batched: SelfSplit[];
    greedy_flash_attention: SelfSplit[];
  };
  tokens: number[];
  top1: number[];
  top2: number[];
  p1: number[];
  margin: number[];
}

interface GreedyPrompt {
  name: string;
  prompt_ids: number[];
  generated_ids: number[];
  fnv1a64: string;
  top2: number[];
  margin: number[];
}

interface Greedy {
  gguf_sha256: string;
  tokens: number;
  prompts: GreedyPrompt[];
}

function skipReason(): string | undefined {
  for (const [name, path] of [["read", GGUF], ["write", Deno.env.get("TMPDIR") ?? "/tmp"]]) {
    const state = Deno.permissions.querySync({ name: name as "read" | "write", path }).state;
    if (state !== "granted") return `needs --allow-${name}`;
  }
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return "needs --allow-ffi";
  try {
    Deno.statSync(GGUF);
  } catch {
    return `${GGUF} is absent (run scripts/derive-models.ts smollm2-q8_0)`;
  }
  return undefined;
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

async function sha256File(path: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", await Deno.readFile(path)));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function readJson<T>(name: string): T {
  return JSON.parse(Deno.readTextFileSync(`${FIXTURES}${name}`)) as T;
}

const f = (x: number, d = 3) => x.toFixed(d);

interface Agreement {
  all: number;
  decided: number;
  meanDelta: number;
}

/** Runs the teacher-forced pass; prints every disagreement and the totals. */
function teacherForced(model: Transformer, tf: TeacherForced, label: string): Agreement {
  let agree = 0;
  let decided = 0;
  let decidedAgree = 0;
  let sumDelta = 0;
  let maxDelta = 0;
  const splits: string[] = [];
  const t0 = performance.now();
  for (let pos = 0; pos < tf.tokens.length; pos++) {
    const logits = model.forward(tf.tokens[pos], pos);
    const want = tf.top1[pos];
    const got = argmax(logits);
    // cflow's margin between llama.cpp's top two tokens, against llama.cpp's own margin.
    const delta = Math.abs(logits[want] - logits[tf.top2[pos]] - tf.margin[pos]);
    sumDelta += delta;
    maxDelta = Math.max(maxDelta, delta);
    const isDecided = tf.margin[pos] >= DECIDED_LOGITS;
    if (isDecided) decided++;
    if (got === want) {
      agree++;
      if (isDecided) decidedAgree++;
    } else {
      const theirs = tf.top2[pos] === got ? "" : ` (its runner-up: ${tf.top2[pos]})`;
      splits.push(
        `pos ${pos}: cflow ${got} by ${f(logits[got] - logits[want], 4)}, ` +
          `llama.cpp ${want} by ${f(tf.margin[pos], 4)}${theirs}`,
      );
    }
  }
  const ms = performance.now() - t0;
  const n = tf.tokens.length;
  const r = { all: agree / n, decided: decidedAgree / decided, meanDelta: sumDelta / n };
  console.log(`${label}: ${splits.length} top-1 splits (token, its logit margin):`);
  for (const s of splits) console.log(`  ${s}`);
  console.log(
    `${label}: top-1 agrees at ${agree}/${n} positions (${f(100 * r.all, 2)}%), ` +
      `at ${decidedAgree}/${decided} where llama.cpp's margin >= ${DECIDED_LOGITS} ` +
      `(${f(100 * r.decided, 2)}%); |cflow - llama.cpp| margin over llama.cpp's top two: ` +
      `mean ${f(r.meanDelta, 4)}, max ${f(maxDelta, 4)}; ${n} positions in ${f(ms / 1000, 1)} s ` +
      `(${f(ms / n, 1)} ms/token)`,
  );
  return r;
}

/** Greedy continuations; asserts them equal to llama.cpp's but for near-ties. */
function greedy(model: Transformer, g: Greedy, label: string): void {
  const t0 = performance.now();
  let positions = 0;
  for (const p of g.prompts) {
    let pos = 0;
    let logits: Float32Array = new Float32Array(0);
    for (const id of p.prompt_ids) logits = model.forward(id, pos++);
    const out: number[] = [];
    let split: string | undefined;
    for (let step = 0; step < g.tokens; step++) {
      const got = argmax(logits);
      const want = p.generated_ids[step];
      if (got !== want && split === undefined) {
        const margin = logits[got] - logits[want];
        const theirs = p.top2[step] === got
          ? `llama.cpp's margin ${f(p.margin[step], 4)} over it`
          : `llama.cpp's runner-up was ${p.top2[step]} (margin ${f(p.margin[step], 4)})`;
        split = `${label} ${p.name}: split at generated token ${step} (position ${pos}): ` +
          `cflow ${got}, llama.cpp ${want} (${theirs}); cflow margin ${f(margin, 4)}`;
        console.log(split);
        assert.ok(
          margin < TIE_LOGITS,
          `${split}: cflow's margin is not a near-tie (< ${TIE_LOGITS} logits)`,
        );
      }
      out.push(got);
      if (step + 1 < g.tokens) logits = model.forward(got, pos++);
    }
    positions += pos;
    const same = split === undefined;
    console.log(
      `${label} ${p.name}: ${same ? "identical" : "diverged"} ${fnv1a64(out)} ` +
        `(llama.cpp ${p.fnv1a64})`,
    );
    if (same) assert.equal(fnv1a64(out), p.fnv1a64);
  }
  const ms = performance.now() - t0;
  console.log(`${label} greedy: ${positions} positions in ${f(ms / 1000, 1)} s`);
}

const skip = skipReason();

Deno.test({
  name: `cflow agrees with llama.cpp on SmolLM2-135M Q8_0${skip ? ` (skipped: ${skip})` : ""}`,
  ignore: skip !== undefined,
  async fn(t) {
    const tf = readJson<TeacherForced>("teacher_forced.json");
    const g = readJson<Greedy>("greedy.json");
    assert.equal(await sha256File(GGUF), tf.gguf_sha256, `${GGUF} is not the file llama.cpp ran`);
    assert.equal(g.gguf_sha256, tf.gguf_sha256);
    const dir = await Deno.makeTempDir({ prefix: "cflow-llamacpp-" });
    try {
      const out = `${dir}/smollm2-q8_0.cflow`;
      const c0 = performance.now();
      await convertFile(GGUF, out, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      console.log(`converted in ${f((performance.now() - c0) / 1000, 1)} s`);
      const self = tf.llama_cpp_self_agreement;
      for (
        const [name, c] of Object.entries({
          "batch 32": self.teacher_forced_batch_32,
          "flash attention": self.teacher_forced_flash_attention,
        })
      ) {
        console.log(
          `llama.cpp vs itself (${name}): top-1 agrees at ${c.agree}/${c.positions} ` +
            `(${f((100 * c.agree) / c.positions, 2)}%); margin delta mean ` +
            `${f(c.mean_abs_margin_delta, 4)}, max ${f(c.max_abs_margin_delta, 4)}; ` +
            `its own margin at a split up to ${f(c.max_own_margin_at_split, 4)}`,
        );
      }
      for (
        const [name, splits] of Object.entries({
          "prompt batched": self.greedy_prompt_batched,
          "flash attention": self.greedy_flash_attention,
        })
      ) {
        const shown = splits.map((s) =>
          s.identical
            ? `${s.name} identical`
            : `${s.name} splits at ${s.step} (${s.tokens?.join(" vs ")}, by ${s.own_margin})`
        );
        console.log(`llama.cpp vs itself, greedy (${name}): ${shown.join("; ")}`);
      }
      const ctx = Math.max(
        tf.tokens.length,
        ...g.prompts.map((p) => p.prompt_ids.length + g.tokens),
      );
      for (const kvCache of ["f16", "f32"] as const) {
        using model = Transformer.load(out, { contextLength: ctx, kvCache });
        await t.step(`teacher-forced top-1, ${kvCache} KV cache`, () => {
          const a = teacherForced(model, tf, `${kvCache} cache`);
          assert.ok(a.all >= MIN_AGREEMENT, `agreement ${a.all} is below ${MIN_AGREEMENT}`);
          assert.ok(
            a.decided >= MIN_DECIDED_AGREEMENT,
            `agreement ${a.decided} at decided positions is below ${MIN_DECIDED_AGREEMENT}`,
          );
          assert.ok(
            a.meanDelta <= MAX_MEAN_MARGIN_DELTA,
            `mean margin delta ${a.meanDelta} is above ${MAX_MEAN_MARGIN_DELTA}`,
          );
        });
        await t.step(`greedy continuations, ${kvCache} KV cache`, () => {
          greedy(model, g, `${kvCache} cache`);
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
