/**
 * `Model.embed` on SmolLM2 (skipped when the test model is absent): unit vectors of the model's
 * width; a batch of inputs gives what each gives alone; related sentences score closer than
 * unrelated ones; refused inputs name their index; an embedding on a generation's slot leaves
 * the next generation's answer unchanged, with one slot and beside a running generation of a
 * shared engine (`sequences: 2`).
 */
import assert from "node:assert/strict";
import { loadModel, type Model } from "../mod.ts";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE } from "../tests/util/test_models.ts";

const ignore = !smollm2Present;
const open = (o: { contextLength?: number; sequences?: number } = {}) =>
  loadModel(SMOLLM2_GGUF, {
    cache: `${TEST_CACHE}/converted`,
    quant: "q4_0",
    contextLength: 256,
    ...o,
  });

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function sameBits(a: Float32Array, b: Float32Array, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) assert.fail(`${what}: value ${i} is ${a[i]}, expected ${b[i]}`);
  }
}

async function greedy(model: Model, prompt: string, maxTokens = 12): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of model.generate(prompt, { temperature: 0, maxTokens })) {
    if (t.id >= 0) ids.push(t.id);
  }
  return ids;
}

/**
 * Each a sentence, a paraphrase and an unrelated sentence. With mean pooling all 8 hold on
 * SmolLM2-135M (the closest margin about 0.08) and on Qwen2.5-Coder-0.5B; last-token pooling
 * holds 8 on SmolLM2 but 6 on Qwen (docs/CORRECTNESS.md).
 */
const TRIPLES: [string, string, string][] = [
  [
    "The cat sat on the mat.",
    "A kitten was sitting on the rug.",
    "Quarterly revenue rose by 4 percent.",
  ],
  [
    "How do I bake bread at home?",
    "What is a simple recipe for homemade bread?",
    "The train to Berlin leaves at noon.",
  ],
  [
    "The stock market fell sharply today.",
    "Shares dropped steeply on Wall Street this afternoon.",
    "My dog loves playing fetch in the park.",
  ],
  [
    "It is raining heavily outside.",
    "There is a big storm with lots of rain.",
    "She plays the violin in an orchestra.",
  ],
  [
    "Python is a popular programming language.",
    "Many developers write code in Python.",
    "The Eiffel Tower is in Paris.",
  ],
  [
    "He scored the winning goal in the final minute.",
    "The match was decided by a last-minute goal.",
    "Add two cups of flour to the bowl.",
  ],
  [
    "The doctor prescribed antibiotics for the infection.",
    "The physician gave her medicine to treat the infection.",
    "The rocket launched into orbit yesterday.",
  ],
  [
    "I forgot my password and cannot log in.",
    "How can I reset my account password?",
    "Whales migrate thousands of miles each year.",
  ],
];

Deno.test({
  name: "Model.embed: unit vectors; a batch is each alone; related sentences score closer",
  ignore,
  async fn() {
    using model = await open();
    const texts = TRIPLES.flat();
    const { embeddings, promptTokens } = await model.embed(texts);
    assert.equal(embeddings.length, texts.length);
    let tokens = 0;
    for (const [i, e] of embeddings.entries()) {
      assert.equal(e.length, model.config.hidden);
      assert.ok(e.every(Number.isFinite), `input ${i}: not finite`);
      assert.ok(Math.abs(dot(e, e) - 1) < 1e-5, `input ${i}: |e|^2 = ${dot(e, e)}`);
      tokens += model.tokenize(texts[i]).length;
    }
    assert.equal(promptTokens, tokens);
    // One at a time, in another order: the same bits.
    for (const i of [5, 0, 17, 3]) {
      const alone = await model.embed(texts[i]);
      assert.equal(alone.promptTokens, model.tokenize(texts[i]).length);
      sameBits(alone.embeddings[0], embeddings[i], `input ${i} alone`);
    }
    const margins = TRIPLES.map((_, t) => {
      const [a, b, c] = embeddings.slice(3 * t, 3 * t + 3);
      return dot(a, b) - dot(a, c);
    });
    console.log(`related minus unrelated cosine: ${margins.map((m) => m.toFixed(3)).join(" ")}`);
    assert.ok(margins.every((m) => m > 0), `margins ${margins}`);
    // Explicit pooling: cls is the first row's state, the same for every input that starts alike.
    const cls = await model.embed(["The cat", "The dog"], { pooling: "cls" });
    assert.equal(model.tokenize("The cat")[0], model.tokenize("The dog")[0]);
    sameBits(cls.embeddings[0], cls.embeddings[1], "cls of a shared first token");
  },
});

Deno.test({
  name: "Model.embed refuses empty, too long and non-string inputs, naming the index",
  ignore,
  async fn() {
    using model = await open({ contextLength: 16 });
    await assert.rejects(model.embed(["ok", ""]), /input 1 is empty/);
    await assert.rejects(model.embed([]), /non-empty array/);
    await assert.rejects(
      model.embed(["short", "word ".repeat(40)]),
      /input 1 has \d+ tokens; the context holds 16/,
    );
    await assert.rejects(model.embed(["a", 3 as unknown as string]), /input 1 is not a string/);
    await assert.rejects(model.embed("hello", { pooling: "max" as "mean" }), /pooling max/);
    const stop = new AbortController();
    stop.abort(new Error("stopped"));
    await assert.rejects(model.embed("hello", { signal: stop.signal }), /stopped/);
    // The model still works after the refusals.
    assert.equal((await model.embed("hello")).embeddings.length, 1);
  },
});

Deno.test({
  name: "Model.embed on a generation's slot: the next generation still gives its solo answer",
  ignore,
  async fn() {
    const prompt = "The three primary colors are";
    let solo: number[];
    {
      using fresh = await open();
      solo = await greedy(fresh, prompt);
    }
    using model = await open();
    // The slot's cache holds the prompt and its answer; an embedding that shares the prompt's
    // first tokens, and one that does not, overwrite the positions after what they share.
    assert.deepEqual(await greedy(model, prompt), solo);
    await model.embed("The three little pigs built houses of straw, sticks and bricks.");
    assert.deepEqual(await greedy(model, prompt), solo);
    await model.embed("Completely different words fill these positions now, and more of them.");
    assert.deepEqual(await greedy(model, prompt), solo);
    // Cancelled midway through its inputs: refused with the signal's reason, the slot still right.
    const stop = new AbortController();
    const long = model.embed(new Array(200).fill("Red, yellow and blue are the colors."), {
      signal: stop.signal,
    });
    setTimeout(() => stop.abort(new Error("stopped")), 100);
    await assert.rejects(long, /stopped/);
    assert.deepEqual(await greedy(model, prompt), solo);
  },
});

Deno.test({
  name: "Model.embed with sequences: 2 beside a running generation: both as alone",
  ignore,
  async fn() {
    const prompt = "Write a list of fruits:";
    // More tokens than a batch (64): the embedding runs as two batches, between the engine's steps.
    const text = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    let solo: number[];
    let alone: Float32Array;
    {
      using fresh = await open();
      solo = await greedy(fresh, prompt, 24);
      alone = (await fresh.embed(text)).embeddings[0];
    }
    using model = await open({ sequences: 2 });
    const [generated, embedded] = await Promise.all([
      greedy(model, prompt, 24),
      // Starts while the generation reads its prompt, and runs between its steps.
      new Promise((r) => setTimeout(r, 1)).then(() => model.embed(text)),
    ]);
    assert.deepEqual(generated, solo);
    sameBits(embedded.embeddings[0], alone, "embedding beside a generation");
    // Each slot again: both sequences' next generations are unchanged.
    const again = await Promise.all([greedy(model, prompt, 24), greedy(model, prompt, 24)]);
    assert.deepEqual(again, [solo, solo]);
  },
});
