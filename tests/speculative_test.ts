/**
 * Speculative decoding (runtime/speculative.ts, draft_model.ts,
 * ngram_lookup.ts): the output is the one plain decoding gives, token for
 * token and log-probability for log-probability, greedy and seeded, with a
 * draft model and with prompt lookup, on SmolLM2 (a Q4_0 draft for the Q8_0
 * target), on pipeline-native fixtures and on the sequences of a batch
 * engine; the token distribution of sampled continuations matches plain
 * sampling's (a two-sample chi-square test); and the KV cache after a
 * speculative run is the one a plain run leaves (the next plain step gives
 * the same logits).
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/mod.ts";
import { BatchEngine } from "../runtime/batch_engine.ts";
import { checkDraftVocabulary, DraftModel } from "../runtime/draft_model.ts";
import { generate, type GenerationModel, type GenerationTokenizer } from "../runtime/generate.ts";
import { NgramLookup } from "../runtime/ngram_lookup.ts";
import { type OpenedModel, openModel } from "../runtime/open_model.ts";
import type { SpeculationOptions, SpeculationStats } from "../runtime/speculative.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { convertFixture } from "./util/fixture_model.ts";
import { isFile, sameBits } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const Q8 = `${ROOT}cache/models/smollm2-135m-instruct.Q8_0.gguf`;
const Q4 = `${ROOT}cache/models/smollm2-135m-instruct.Q4_0.gguf`;

/** Prompts with repeats for lookup to find and prose for a draft (written for this test). */
const PROMPTS = [
  "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
  "The river runs through the old town. On market days the bridge is crowded with people. " +
  "The river runs through the old town. On market days",
  "Rename x to count:\nfor x in range(10):\n    print(x)\n    total += x\nAnswer:\n",
  "Once upon a time",
];

interface Run {
  ids: number[];
  logprobs: number[];
  reason: string;
  speculation?: SpeculationStats;
}

async function run(
  model: GenerationModel,
  tokenizer: GenerationTokenizer,
  prompt: number[],
  sampling: SamplerOptions,
  maxTokens: number,
  speculation?: SpeculationOptions,
): Promise<Run> {
  const it = generate(model, tokenizer, new Sampler(model.config.vocab, sampling), prompt, {
    maxTokens,
    logprobs: 0,
    speculation,
  });
  const ids: number[] = [];
  const logprobs: number[] = [];
  for (;;) {
    const r = await it.next();
    if (r.done) {
      return { ids, logprobs, reason: r.value.stopReason, speculation: r.value.speculation };
    }
    if (r.value.id < 0) continue;
    ids.push(r.value.id);
    logprobs.push(r.value.logprob!);
  }
}

/** SmolLM2 Q8_0 (target) and Q4_0 (draft) as `.cflow` files in a temporary folder. */
async function withSmolLM2(
  fn: (target: string, draft: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "speculative-" });
  try {
    const target = `${dir}/q8.cflow`;
    const draft = `${dir}/q4.cflow`;
    const o = { format: "cflow", rule: "ggml", measureError: false } as const;
    await convertFile(Q8, target, { ...o, quant: "auto" });
    await convertFile(Q4, draft, { ...o, quant: "q4_0" });
    await fn(target, draft);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const both = isFile(Q8) && isFile(Q4);

/** The target and the draft opened with `contextLength` positions, closed after `fn`. */
function withPair(
  contextLength: number,
  fn: (t: OpenedModel, d: OpenedModel, paths: { target: string; draft: string }) => Promise<void>,
): Promise<void> {
  return withSmolLM2(async (target, draft) => {
    openKernels({ threads: 2 });
    const t = openModel(target, { contextLength });
    const d = openModel(draft, { contextLength });
    try {
      await fn(t, d, { target, draft });
    } finally {
      d.model.close();
      t.model.close();
    }
  });
}

Deno.test({
  name: "speculation: SmolLM2 gives the plain tokens with a draft model and with lookup",
  ignore: !both,
  fn: () =>
    withPair(256, async (t, d) => {
      checkDraftVocabulary(t.tokenizer, d.tokenizer, "q4");
      const tok = t.tokenizer;
      const kept = { draft: 0, lookup: 0, fixed: 0 };
      for (const [i, text] of PROMPTS.entries()) {
        const prompt = tok.encode(text, { addSpecial: true });
        for (
          const sampling of [{ temperature: 0 }, { temperature: 0.8, topK: 40, seed: 5 + i }]
        ) {
          const plain = await run(t.model, tok, prompt, sampling, 40);
          const label = `prompt ${i} ${JSON.stringify(sampling)}`;
          for (
            const [kind, spec] of [
              ["draft", { drafter: new DraftModel(d.model, { minP: 0 }), maxDraft: 6 }],
              ["lookup", { drafter: new NgramLookup(3), maxDraft: 8 }],
              ["fixed", { drafter: new DraftModel(d.model), maxDraft: 5, adaptive: false }],
            ] as const
          ) {
            const got = await run(t.model, tok, prompt, sampling, 40, spec);
            assert.deepEqual(got.ids, plain.ids, `${label} ${kind}: tokens`);
            assert.deepEqual(got.logprobs, plain.logprobs, `${label} ${kind}: log-probabilities`);
            assert.equal(got.reason, plain.reason, `${label} ${kind}: stop reason`);
            const s = got.speculation!;
            assert.ok(
              s.accepted <= s.drafted && s.checks <= s.drafted,
              `${label} ${kind}: ${JSON.stringify(s)}`,
            );
            if (kind === "draft") kept.draft += s.accepted;
            if (kind === "lookup") kept.lookup += s.accepted;
            if (kind === "fixed") kept.fixed += s.accepted;
          }
        }
      }
      // Drafts were kept (the checks really ran several rows). The adaptive draft model drafts
      // little here: the Q4_0 draft costs about what the Q8_0 target does.
      assert.ok(kept.fixed > 40 && kept.draft > 5 && kept.lookup > 10, JSON.stringify(kept));
    }),
});

Deno.test({
  name: "speculation: the KV cache after a speculative run is a plain run's",
  ignore: !both,
  fn: () =>
    withPair(256, async (t, d, paths) => {
      using plainModel = Transformer.load(paths.target, { contextLength: 256 });
      const prompt = t.tokenizer.encode(PROMPTS[1], { addSpecial: true });
      const spec = { drafter: new DraftModel(d.model, { minP: 0 }), maxDraft: 8 };
      const got = await run(
        t.model,
        t.tokenizer,
        prompt,
        { temperature: 0.9, seed: 3 },
        30,
        spec,
      );
      // Some drafts were rejected, so rows were written past what was kept.
      assert.ok(
        got.speculation!.accepted < got.speculation!.drafted,
        JSON.stringify(got.speculation),
      );
      const n = got.ids.length;
      const at = prompt.length + n - 1;
      const after = t.model.forward(got.ids[n - 1], at).slice();
      plainModel.prefill([...prompt, ...got.ids.slice(0, -1)], 0);
      sameBits(after, plainModel.forward(got.ids[n - 1], at), "the next plain step");
    }),
});

/** Counts of each (first, second) continuation, and the two-sample chi-square statistic. */
function chiSquare(a: Map<string, number>, b: Map<string, number>): { stat: number; df: number } {
  const na = [...a.values()].reduce((x, y) => x + y, 0);
  const nb = [...b.values()].reduce((x, y) => x + y, 0);
  // Categories seen fewer than 10 times in both samples together are pooled into one.
  let stat = 0;
  let df = -1;
  let restA = 0;
  let restB = 0;
  const cell = (x: number, y: number) => {
    const total = x + y;
    const ea = total * na / (na + nb);
    const eb = total * nb / (na + nb);
    stat += (x - ea) ** 2 / ea + (y - eb) ** 2 / eb;
    df++;
  };
  for (const k of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(k) ?? 0;
    const y = b.get(k) ?? 0;
    if (x + y < 10) {
      restA += x;
      restB += y;
    } else cell(x, y);
  }
  if (restA + restB > 0) cell(restA, restB);
  return { stat, df };
}

Deno.test({
  name: "speculation: sampled continuations follow the target's distribution (chi-square)",
  ignore: !both,
  fn: () =>
    withPair(64, async (t, d) => {
      const prompt = t.tokenizer.encode("My favourite colour is", { addSpecial: true });
      const sampling = (seed: number) => ({ temperature: 1, topK: 4, seed });
      const drafter = new DraftModel(d.model, { minP: 0 });
      const draws = 200;
      const plain = new Map<string, number>();
      const spec = new Map<string, number>();
      let drafted = 0;
      let accepted = 0;
      for (let i = 0; i < draws; i++) {
        // Different seeds for the two samples: independent draws, not the same ones twice.
        const p = await run(t.model, t.tokenizer, prompt, sampling(1 + i), 3);
        const key = p.ids.slice(0, 3).join(",");
        plain.set(key, (plain.get(key) ?? 0) + 1);
        const s = await run(t.model, t.tokenizer, prompt, sampling(100_000 + i), 3, {
          drafter,
          maxDraft: 2,
          adaptive: false,
        });
        const k2 = s.ids.slice(0, 3).join(",");
        spec.set(k2, (spec.get(k2) ?? 0) + 1);
        drafted += s.speculation!.drafted;
        accepted += s.speculation!.accepted;
      }
      // Drafts were both kept and rejected: the rule was exercised both ways.
      assert.ok(accepted > 50 && accepted < drafted - 50, `${accepted} of ${drafted} kept`);
      const { stat, df } = chiSquare(plain, spec);
      assert.ok(df >= 4, `only ${df + 1} categories`);
      // The 0.999 quantile of chi-square is below 3.3 * df + 10 for every df >= 1.
      assert.ok(
        stat < 3.3 * df + 10,
        `chi-square ${stat.toFixed(1)} with ${df} degrees of freedom`,
      );
      // And a real difference is caught: plain sampling against draws with half as many
      // again of the most common continuation (as a sampler that leaned to the draft would).
      const biased = new Map(plain);
      const top = [...plain].sort((x, y) => y[1] - x[1])[0][0];
      biased.set(top, (biased.get(top) ?? 0) + draws / 2);
      assert.ok(chiSquare(plain, biased).stat > 3.3 * df + 10, "the test can fail");
    }),
});

Deno.test({
  name: "speculation: a draft of another vocabulary is refused, naming the difference",
  fn: () => {
    const view = (tokens: string[], eog: number[]) => ({
      vocabSize: tokens.length,
      tokenBytes: (id: number) => new TextEncoder().encode(tokens[id]),
      eogIds: eog,
    });
    assert.throws(
      () => checkDraftVocabulary(view(["a", "b", "c"], [2]), view(["a", "x", "c"], [2]), "d.cflow"),
      /draft model d\.cflow: its vocabulary is not the target's: token 1 is "x" there and "b"/,
    );
    assert.throws(
      () => checkDraftVocabulary(view(["a", "b"], [1]), view(["a", "b"], [0]), "d"),
      /end-of-generation tokens \[0\], the target's \[1\]/,
    );
    checkDraftVocabulary(view(["a", "b"], [1]), view(["a", "b", "pad"], [1]), "padded");
  },
});

/** No end of generation, one letter per token: for the random-init fixtures. */
const LETTERS: GenerationTokenizer = {
  encode: () => [],
  isEog: () => false,
  tokenBytes: (id: number) => new Uint8Array([0x61 + (id % 26)]),
};

Deno.test("speculation: pipeline-native fixtures give the plain tokens", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "speculative-pn-" });
  try {
    openKernels({ threads: 2 });
    for (
      const name of [
        "pipeline_native/arch1_decoupled_streams",
        "pipeline_native/arch4_async_experts",
      ]
    ) {
      const path = await convertFixture(name, dir);
      using target = Transformer.load(path, { contextLength: 96 });
      using draft = Transformer.load(path, { contextLength: 96 });
      const vocab = target.config.vocab;
      // A prompt that repeats, so that lookup has spans to propose.
      const base = Array.from({ length: 9 }, (_, i) => 1 + (i * 37) % (vocab - 1));
      const prompt = [...base, ...base, ...base.slice(0, 4)];
      for (const sampling of [{ temperature: 0 }, { temperature: 0.7, seed: 9 }]) {
        const plain = await run(target, LETTERS, prompt, sampling, 30);
        for (
          const spec of [
            { drafter: new NgramLookup(2), maxDraft: 6, adaptive: false },
            // The model as its own draft: every greedy draft is kept.
            { drafter: new DraftModel(draft, { minP: 0 }), maxDraft: 4 },
          ]
        ) {
          const got = await run(target, LETTERS, prompt, sampling, 30, spec);
          const label = `${name} ${JSON.stringify(sampling)} ${spec.drafter.kind}`;
          assert.deepEqual(got.ids, plain.ids, label);
          assert.deepEqual(got.logprobs, plain.logprobs, label);
          assert.ok(got.speculation!.drafted > 0, label);
          if (spec.drafter.kind === "draft-model" && sampling.temperature === 0) {
            assert.equal(got.speculation!.accepted, got.speculation!.drafted, label);
          }
        }
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "speculation: generations on a batch engine's sequences give what they give alone",
  ignore: !both,
  fn: () =>
    withPair(128, async (t, _d, paths) => {
      const tok: Tokenizer = t.tokenizer;
      const jobs = PROMPTS.slice(0, 3).map((text, i) => ({
        prompt: tok.encode(text, { addSpecial: true }),
        sampling: i === 1 ? { temperature: 0.8, seed: 21 } : { temperature: 0 },
      }));
      const alone: Run[] = [];
      for (const j of jobs) alone.push(await run(t.model, tok, j.prompt, j.sampling, 24));
      using shared = Transformer.load(paths.target, { contextLength: 128, sequences: 3 });
      using draft = Transformer.load(paths.draft, { contextLength: 128, sequences: 3 });
      const engine = new BatchEngine(shared);
      const drafts = new BatchEngine(draft);
      const together = await Promise.all(jobs.map(async (j, i) => {
        const seq = engine.sequences[i];
        // Sequence 0 drafts with lookup, the others with the draft model's own sequences.
        const drafter = i === 0
          ? new NgramLookup(3)
          : new DraftModel(drafts.sequences[i], { minP: 0 });
        try {
          return await run(seq, tok, j.prompt, j.sampling, 24, { drafter, maxDraft: 5 });
        } finally {
          seq.idle();
        }
      }));
      together.forEach((out, i) => {
        assert.deepEqual(out.ids, alone[i].ids, `job ${i}`);
        assert.deepEqual(out.logprobs, alone[i].logprobs, `job ${i}`);
        assert.ok(out.speculation!.drafted > 0, `job ${i}`);
      });
      await drafts.close();
      await engine.close();
    }),
});
