/**
 * `POST /v1/embeddings` end to end on SmolLM2-135M-Instruct (skipped when the test model is
 * absent): the official `openai` client (which asks for base64 and decodes it) against the float
 * answer, token-id inputs, a batch against each input alone, refused requests, and the slot's
 * next generation after an embedding, with one slot and beside a running generation with two.
 */
import assert from "node:assert/strict";
import OpenAI from "npm:openai@4.104.0";
import { post, present, withServer } from "./_test_server.ts";
import { MAX_EMBEDDING_INPUTS, validateEmbeddingsRequest } from "./embeddings.ts";
import { ApiError } from "./api_error.ts";
import { DEFAULT_LIMITS } from "./validate_request.ts";

const SMOLLM2_HIDDEN = 576;

async function expectError(r: Response, status: number, param: string | null, re: RegExp) {
  const body = await r.json();
  assert.equal(r.status, status, JSON.stringify(body));
  assert.equal(body.error.param, param, JSON.stringify(body));
  assert.match(body.error.message, re);
}

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function fromBase64(b64: string): Float32Array {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  return Float32Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(4 * i, true));
}

async function embed(url: string, body: Record<string, unknown>): Promise<number[][]> {
  const r = await post(`${url}/v1/embeddings`, body);
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j.data.map((d: { embedding: number[] }) => d.embedding);
}

async function complete(url: string, prompt: string, maxTokens = 16): Promise<string> {
  const r = await post(`${url}/v1/completions`, { prompt, max_tokens: maxTokens, temperature: 0 });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j.choices[0].text;
}

Deno.test("validateEmbeddingsRequest: the input shapes, and each refusal names its field", () => {
  const v = (body: unknown, ignored: string[] = []) =>
    validateEmbeddingsRequest(body, DEFAULT_LIMITS, 100, 64, ignored);
  assert.deepEqual(v({ input: "a" }), { inputs: ["a"], params: ["input"], encoding: "float" });
  assert.deepEqual(v({ input: [1, 2] }).inputs, [[1, 2]]);
  assert.deepEqual(v({ input: [1, 2] }).params, ["input"]);
  assert.deepEqual(v({ input: [[1], [2, 3]] }).params, ["input[0]", "input[1]"]);
  assert.deepEqual(v({ input: ["a", "b"], encoding_format: "base64" }).encoding, "base64");
  // model, user, a null encoding_format and the model's own width are accepted.
  v({ input: "a", model: "m", user: "u", encoding_format: null, dimensions: 64 });
  const ignored: string[] = [];
  v({ input: "a", extra: 1 }, ignored);
  assert.deepEqual(ignored, ["extra"]);
  const refused = (body: unknown, param: string | null, re: RegExp, strict = false) => {
    try {
      validateEmbeddingsRequest(body, DEFAULT_LIMITS, 100, 64, strict ? undefined : []);
    } catch (e) {
      assert.ok(e instanceof ApiError && e.status === 400, String(e));
      assert.equal(e.param, param);
      assert.match(e.message, re);
      return;
    }
    assert.fail(`accepted ${JSON.stringify(body)}`);
  };
  refused({ input: "a", extra: 1 }, "extra", /unknown or unsupported field/, true);
  refused([], null, /JSON object/);
  refused({ input: null }, "input", /got null/);
  refused({ input: "" }, "input", /empty string/);
  refused({ input: ["a", ""] }, "input[1]", /empty string/);
  refused({ input: [1.5] }, "input", /integer token ids/);
  refused({ input: [-1] }, "input", /integer token ids/);
  refused({ input: [100] }, "input", /in \[0, 100\)/);
  refused({ input: [[1], ["a"]] }, "input[1]", /integer token ids/);
  refused({ input: [[1], 2] }, "input", /not a mix/);
  refused({ input: "a", model: 3 }, "model", /model must be a string/);
  refused({ input: "a", user: {} }, "user", /user must be a string/);
  refused({ input: "a", dimensions: "64" }, "dimensions", /a string is not supported/);
  refused({ input: "a".repeat(DEFAULT_LIMITS.maxTextLength + 1) }, "input", /longer than/);
  refused({ input: new Array(MAX_EMBEDDING_INPUTS + 1).fill([1]) }, "input", /more than 2048/);
});

const SENTENCES = [
  "The cat sat on the mat.",
  "A kitten was sitting on the rug.",
  "Quarterly revenue rose by 4 percent.",
];

Deno.test({
  name: "embeddings: the openai client, float and base64, token ids, a batch is each alone",
  ignore: !present,
  async fn() {
    await withServer({}, async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const got = await client.embeddings.create({ model: "smollm2", input: SENTENCES });
      assert.equal(got.object, "list");
      assert.equal(got.data.length, 3);
      assert.ok(got.usage.prompt_tokens > 3 && got.usage.total_tokens === got.usage.prompt_tokens);
      for (const [i, d] of got.data.entries()) {
        assert.equal(d.object, "embedding");
        assert.equal(d.index, i);
        assert.equal(d.embedding.length, SMOLLM2_HIDDEN);
        assert.ok(d.embedding.every(Number.isFinite));
        assert.ok(Math.abs(dot(d.embedding, d.embedding) - 1) < 1e-5);
      }
      const [cat, kitten, revenue] = got.data.map((d) => d.embedding);
      assert.ok(dot(cat, kitten) > dot(cat, revenue), "related sentences score closer");

      // The float answer is what the client decoded from base64, bit for bit.
      const floats = await embed(server.url, { input: SENTENCES, encoding_format: "float" });
      floats.forEach((v, i) => assert.deepEqual(v, got.data[i].embedding));
      const r = await post(`${server.url}/v1/embeddings`, {
        input: SENTENCES[0],
        encoding_format: "base64",
        dimensions: SMOLLM2_HIDDEN,
      });
      const b = await r.json();
      assert.equal(typeof b.data[0].embedding, "string");
      assert.deepEqual([...fromBase64(b.data[0].embedding)], floats[0]);
      const listed = await (await fetch(`${server.url}/v1/models`)).json();
      assert.equal(b.model, listed.data[0].id);

      // Each input alone, and as token ids (the text's own tokens), gives the same vector.
      for (const [i, s] of SENTENCES.entries()) {
        assert.deepEqual(await embed(server.url, { input: s }), [floats[i]]);
      }
      const t = await post(`${server.url}/tokenize`, { content: SENTENCES[1], add_special: true });
      const ids: number[] = (await t.json()).tokens;
      assert.deepEqual(await embed(server.url, { input: ids }), [floats[1]]);
      assert.deepEqual(await embed(server.url, { input: [ids, ids] }), [floats[1], floats[1]]);
    });
  },
});

Deno.test({
  name: "embeddings: refused requests name the field",
  ignore: !present,
  async fn() {
    await withServer({ contextLength: 32, limits: { maxTokens: 40 } }, async (server) => {
      const url = `${server.url}/v1/embeddings`;
      await expectError(await post(url, {}), 400, "input", /input must be a string or an array/);
      await expectError(await post(url, { input: [] }), 400, "input", /empty array/);
      await expectError(await post(url, { input: ["a", ""] }), 400, "input[1]", /empty string/);
      await expectError(await post(url, { input: ["a", 1] }), 400, "input", /not a mix/);
      await expectError(await post(url, { input: [[1], []] }), 400, "input[1]", /is empty/);
      await expectError(await post(url, { input: [1, 1e9] }), 400, "input", /token ids in/);
      await expectError(await post(url, { input: 5 }), 400, "input", /got a number/);
      await expectError(
        await post(url, { input: new Array(MAX_EMBEDDING_INPUTS + 1).fill("a") }),
        400,
        "input",
        /more than 2048 items/,
      );
      await expectError(
        await post(url, { input: "hi", dimensions: 64 }),
        400,
        "dimensions",
        /dimensions 64 is not supported: this model's embeddings have 576/,
      );
      await expectError(
        await post(url, { input: "hi", encoding_format: "int8" }),
        400,
        "encoding_format",
        /"float" or "base64"/,
      );
      const long = "word ".repeat(60);
      const r = await post(url, { input: ["short", long] });
      const body = await r.json();
      assert.equal(r.status, 400);
      assert.equal(body.error.code, "context_length_exceeded");
      assert.equal(body.error.param, "input[1]");
      assert.match(body.error.message, /input\[1\] has \d+ tokens; the context holds 32/);
      const many = new Array(8).fill("one two three four five six");
      await expectError(await post(url, { input: many }), 400, "input", /more than 40 tokens/);
      // Still serving; /metrics counts the route by name.
      assert.equal((await embed(server.url, { input: "hello" }))[0].length, SMOLLM2_HIDDEN);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /cflow_requests_total\{endpoint="\/v1\/embeddings",status="200"\} 1/);
      assert.match(metrics, /cflow_requests_total\{endpoint="\/v1\/embeddings",status="400"\} 12/);
    });
  },
});

Deno.test({
  name: "embeddings on a generation's slot: the next generation is unchanged (1 and 2 slots)",
  ignore: !present,
  async fn() {
    const prompt = "The three primary colors are";
    const other = "The three little pigs built their houses of straw, of sticks and of bricks.";
    let solo = "";
    let alone: number[][] = [];
    await withServer({}, async (server) => {
      solo = await complete(server.url, prompt);
      // The slot holds the prompt and its answer; the embeddings overwrite its positions.
      alone = await embed(server.url, { input: [other, prompt + " red"] });
      assert.equal(await complete(server.url, prompt), solo);
      await embed(server.url, { input: "Something else entirely, to overwrite more." });
      assert.equal(await complete(server.url, prompt), solo);
      // A client that leaves during a long request: the slot comes back (at once when the server
      // hears of the disconnect, which Deno reports seconds late; else when the inputs are done)
      // and its next generation is still the solo answer.
      const leave = new AbortController();
      const gone = post(
        `${server.url}/v1/embeddings`,
        { input: new Array(600).fill("Hi") },
        {},
        leave.signal,
      ).catch((e) => e);
      await new Promise((r) => setTimeout(r, 500));
      leave.abort();
      assert.ok((await gone) instanceof Error);
      const deadline = Date.now() + 60_000;
      while ((await (await fetch(`${server.url}/health`)).json()).slots_idle !== 1) {
        assert.ok(Date.now() < deadline, "the slot was not freed");
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(await complete(server.url, prompt), solo);
    });
    await withServer({ parallel: 2 }, async (server) => {
      const long = "Write a long list of fruits and vegetables:";
      let longSolo = "";
      longSolo = await complete(server.url, long, 40);
      // A generation on one slot while embeddings run on the other, between its steps.
      const [text, vectors] = await Promise.all([
        complete(server.url, long, 40),
        new Promise((r) => setTimeout(r, 5)).then(() =>
          embed(server.url, { input: [other, prompt + " red"] })
        ),
      ]);
      assert.equal(text, longSolo);
      assert.deepEqual(vectors, alone);
      // Both slots' next generations are still their solo answers.
      const again = await Promise.all([complete(server.url, prompt), complete(server.url, prompt)]);
      assert.deepEqual(again, [solo, solo]);
    });
  },
});
