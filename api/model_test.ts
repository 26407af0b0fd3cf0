/**
 * The library API end to end on SmolLM2 (skipped when the test model is absent): a script using
 * only `mod.ts` streams a generation, aborts it midway with an AbortSignal, and reuses the model
 * for a second prompt; logprobs, chat, tokenize/detokenize and teacher-forced logits.
 */
import assert from "node:assert/strict";
import { loadModel } from "../mod.ts";
import { SMOLLM2_GGUF, smollm2Present } from "../tests/util/test_models.ts";

const GGUF = SMOLLM2_GGUF;
const present = smollm2Present;

Deno.test({
  name: "mod.ts: stream, abort midway, reuse the model; logprobs, chat, tokens, logits",
  ignore: !present,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-api-" });
    try {
      using model = await loadModel(GGUF, { quant: "q8_0", cache, contextLength: 256 });
      const greedy = { temperature: 0, maxTokens: 24 } as const;

      // A full greedy run, as the reference.
      const full: number[] = [];
      for await (const t of model.generate("The three primary colors are", greedy)) {
        if (t.id >= 0) full.push(t.id);
      }
      assert.equal(full.length, 24);

      // The same prompt, aborted after 5 tokens: it stops there and says why.
      const stop = new AbortController();
      const part: number[] = [];
      const it = model.generate("The three primary colors are", { ...greedy, signal: stop.signal });
      let r = await it.next();
      while (!r.done) {
        if (r.value.id >= 0) part.push(r.value.id);
        if (part.length === 5) stop.abort();
        r = await it.next();
      }
      assert.equal(r.value.stopReason, "aborted");
      assert.deepEqual(part, full.slice(0, 5));

      // The model is reused: the same prompt again gives the same tokens.
      const again: number[] = [];
      for await (const t of model.generate("The three primary colors are", greedy)) {
        if (t.id >= 0) again.push(t.id);
      }
      assert.deepEqual(again, full);

      // Log-probabilities: the greedy token is the most likely alternative, probabilities <= 1.
      for await (
        const t of model.generate("Paris is the capital of", {
          ...greedy,
          maxTokens: 4,
          logprobs: 3,
        })
      ) {
        if (t.id < 0) continue;
        assert.ok(t.logprob! <= 0 && t.top!.length === 3);
        assert.equal(t.top![0].id, t.id);
        assert.ok(t.top![0].logprob >= t.top![1].logprob && t.top![1].logprob >= t.top![2].logprob);
      }

      // Chat with the model's own template; tokens and text round trip.
      let answer = "";
      for await (const t of model.chat([{ role: "user", content: "Say hello." }], greedy)) {
        answer += t.text;
      }
      assert.ok(answer.trim().length > 0);
      const ids = model.tokenize("Hello, world!", { addSpecial: false });
      assert.equal(model.detokenize(ids), "Hello, world!");

      // Teacher-forced logits: the argmax after the prompt is the first greedy token.
      const prompt = model.tokenize("The three primary colors are");
      const logits = model.logits(prompt);
      assert.equal(logits.length, prompt.length);
      const last = logits[logits.length - 1];
      let best = 0;
      for (let i = 1; i < last.length; i++) if (last[i] > last[best]) best = i;
      assert.equal(best, full[0]);

      // Bad input is refused before anything runs.
      assert.throws(() => model.logits([]), RangeError);
      assert.throws(() => model.logits([model.config.vocab]), RangeError);
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "mod.ts: with sequences: 2, three concurrent generations share steps and give their solo output",
  ignore: !present,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-api-" });
    try {
      const prompts = ["The three primary colors are", "Paris is the capital of", "Once upon a"];
      const opts = [
        { temperature: 0, maxTokens: 20 },
        { temperature: 0.8, seed: 5, maxTokens: 16 },
        { temperature: 0, maxTokens: 12 },
      ];
      const ids = async (m: Awaited<ReturnType<typeof loadModel>>, i: number) => {
        const out: number[] = [];
        for await (const t of m.generate(prompts[i], opts[i])) if (t.id >= 0) out.push(t.id);
        return out;
      };
      const solo: number[][] = [];
      {
        using one = await loadModel(GGUF, { quant: "q8_0", cache, contextLength: 128 });
        for (let i = 0; i < 3; i++) solo.push(await ids(one, i));
        // One generation at a time without sequences.
        const first = one.generate(prompts[0], opts[0]);
        await first.next();
        await assert.rejects(
          () => one.generate(prompts[1], opts[1]).next(),
          /one generation at a time/,
        );
        await first.return(undefined as never);
      }
      using model = await loadModel(GGUF, {
        quant: "q8_0",
        cache,
        contextLength: 128,
        sequences: 2,
      });
      // Three at once on two sequences: two run together, the third waits its turn.
      const together = await Promise.all([0, 1, 2].map((i) => ids(model, i)));
      assert.deepEqual(together, solo);
      // logits() runs once no generation is (sequence 0, whose cache it resets).
      assert.equal(model.logits([1, 2, 3]).length, 3);
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});

Deno.test({
  name: "mod.ts: generate with a draft model or prompt lookup gives the plain tokens",
  ignore: !present,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-api-spec-" });
    try {
      using model = await loadModel(GGUF, { quant: "q8_0", cache, contextLength: 256 });
      using draft = await loadModel(GGUF, { quant: "q4_0", cache, contextLength: 256 });
      const prompt = "One, two, three. One, two, three. One, two,";
      const greedy = { temperature: 0, maxTokens: 24 } as const;
      const ids = async (o: Record<string, unknown>) => {
        const out: number[] = [];
        for await (const t of model.generate(prompt, { ...greedy, ...o })) {
          if (t.id >= 0) out.push(t.id);
        }
        return out;
      };
      const plain = await ids({});
      assert.deepEqual(await ids({ draft, draftMax: 4 }), plain);
      assert.deepEqual(await ids({ lookupNgram: 3 }), plain);
      // A second run keeps what the draft's cache holds and still agrees.
      assert.deepEqual(await ids({ draft }), plain);
      await assert.rejects(
        () => ids({ draft, lookupNgram: 2 }),
        /give draft or lookupNgram, not both/,
      );
      await assert.rejects(() => ids({ draft: model }), /draft must be another loaded Model/);
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});
