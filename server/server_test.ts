/**
 * `cflow serve` end to end on SmolLM2-135M-Instruct: the official `openai`
 * client as the caller, refused requests, and concurrent streams with
 * disconnects. Skipped when the test model has not been fetched.
 */
import assert from "node:assert/strict";
import OpenAI from "npm:openai@4.104.0";
import { model, post, present, withServer } from "./_test_server.ts";
import { TEST_CACHE_ENV } from "../tests/util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;

async function expectError(r: Response, status: number, param?: string): Promise<void> {
  const body = await r.json();
  assert.equal(r.status, status, JSON.stringify(body));
  assert.equal(typeof body.error.message, "string");
  assert.equal(typeof body.error.type, "string");
  if (param !== undefined) assert.equal(body.error.param, param);
}

const messages = [{ role: "user" as const, content: "What is the capital of France?" }];

Deno.test({
  name: "serve: the openai client streams and completes the same greedy chat",
  ignore: !present,
  async fn() {
    await withServer({}, async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const whole = await client.chat.completions.create({
        model: "smollm2",
        messages,
        temperature: 0,
        max_tokens: 16,
      });
      assert.equal(whole.object, "chat.completion");
      const text = whole.choices[0].message.content ?? "";
      assert.ok(text.length > 0);
      assert.ok(whole.usage!.completion_tokens > 0 && whole.usage!.completion_tokens <= 16);
      assert.equal(
        whole.usage!.total_tokens,
        whole.usage!.prompt_tokens + whole.usage!.completion_tokens,
      );
      const stream = await client.chat.completions.create({
        model: "smollm2",
        messages,
        temperature: 0,
        max_tokens: 16,
        stream: true,
        stream_options: { include_usage: true },
      });
      let streamed = "";
      let finish: string | null = null;
      let usage;
      for await (const chunk of stream) {
        assert.equal(chunk.object, "chat.completion.chunk");
        if (chunk.usage) usage = chunk.usage;
        const c = chunk.choices[0];
        if (c === undefined) continue;
        streamed += c.delta.content ?? "";
        finish = c.finish_reason ?? finish;
      }
      assert.equal(streamed, text);
      assert.equal(finish, whole.choices[0].finish_reason);
      // The one slot's KV cache holds the first request's prompt: the second runs only its
      // last token again, and gives the same tokens.
      assert.equal(whole.usage!.prompt_tokens_details?.cached_tokens, 0);
      assert.deepEqual(usage, {
        ...whole.usage,
        prompt_tokens_details: { cached_tokens: whole.usage!.prompt_tokens - 1 },
      });

      // The next turn of the conversation runs only what was added to it.
      const next = await client.chat.completions.create({
        model: "smollm2",
        messages: [...messages, { role: "assistant", content: text }, {
          role: "user",
          content: "And of Italy?",
        }],
        temperature: 0,
        max_tokens: 8,
      });
      const cached = next.usage!.prompt_tokens_details!.cached_tokens!;
      assert.ok(
        cached >= whole.usage!.prompt_tokens && cached < next.usage!.prompt_tokens,
        `cached ${cached} of ${next.usage!.prompt_tokens}`,
      );

      // /v1/completions, whole and streamed, agree too.
      const c1 = await client.completions.create({
        model: "smollm2",
        prompt: "The three primary colors are",
        temperature: 0,
        max_tokens: 8,
      });
      const s = await client.completions.create({
        model: "smollm2",
        prompt: "The three primary colors are",
        temperature: 0,
        max_tokens: 8,
        stream: true,
      });
      let t2 = "";
      for await (const chunk of s) t2 += chunk.choices[0]?.text ?? "";
      assert.equal(t2, c1.choices[0].text);
      console.log(`chat: ${JSON.stringify(text)}; completion: ${JSON.stringify(t2)}`);
    });
  },
});

Deno.test({
  name: "serve: two conversations taking turns on two instances each keep their own KV cache",
  ignore: !present,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const turn = async (history: { role: "user" | "assistant"; content: string }[]) => {
        const r = await client.chat.completions.create({
          model: "smollm2",
          messages: history,
          temperature: 0,
          max_tokens: 12,
        });
        history.push({ role: "assistant", content: r.choices[0].message.content ?? "" });
        return r.usage!;
      };
      const a = [{ role: "user" as const, content: "Name a primary color." }];
      const b = [{ role: "user" as const, content: "Write the word hello in French." }];
      const a1 = await turn(a);
      const b1 = await turn(b);
      // a's first turn finds nothing to reuse; b takes the other, empty slot, and reuses at most
      // the chat template's opening the two prompts share (copied from a's slot).
      assert.equal(a1.prompt_tokens_details?.cached_tokens, 0);
      assert.ok(b1.prompt_tokens_details!.cached_tokens! < b1.prompt_tokens);
      a.push({ role: "user", content: "And another one?" });
      b.push({ role: "user", content: "And in Spanish?" });
      const a2 = await turn(a);
      const b2 = await turn(b);
      // Each second turn lands on the instance that holds its first one.
      for (const [first, second] of [[a1, a2], [b1, b2]]) {
        assert.ok(
          second.prompt_tokens_details!.cached_tokens! >= first.prompt_tokens,
          `${JSON.stringify(second)} after ${JSON.stringify(first)}`,
        );
      }
    });
  },
});

Deno.test({
  name:
    "serve: a prompt another slot holds a prefix of starts from a copy of it, with its solo output",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const system = "You are a careful assistant. " +
      "Answer in one short sentence, use plain words, and never use lists or headings. ".repeat(4);
    const ask = (content: string, maxTokens: number) => ({
      messages: [{ role: "system", content: system }, { role: "user", content }],
      temperature: 0,
      max_tokens: maxTokens,
    });
    let solo = "";
    await withServer({ parallel: 1 }, async (server) => {
      const r = await (await post(`${server.url}/v1/chat/completions`, ask("Name a fruit.", 12)))
        .json();
      solo = r.choices[0].message.content;
    });
    await withServer({ parallel: 2 }, async (server) => {
      const chat = `${server.url}/v1/chat/completions`;
      // The system prompt runs once, on one slot.
      const first = await (await post(chat, ask("Name a color.", 8))).json();
      assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
      // That slot stays busy with the conversation's next turn (which continues its cache) ...
      const abort = new AbortController();
      const next = {
        messages: [
          ...ask("Name a color.", 8).messages,
          { role: "assistant", content: first.choices[0].message.content },
          { role: "user", content: "Count slowly from one to one hundred." },
        ],
        temperature: 0,
        max_tokens: 400,
        stream: true,
      };
      const busy = await post(chat, next, {}, abort.signal);
      const reader = busy.body!.getReader();
      await reader.read();
      try {
        // ... so this request takes the other, empty slot, which copies the system prompt's keys
        // and values from the busy one instead of running them, and answers as it does alone.
        const r = await (await post(chat, ask("Name a fruit.", 12))).json();
        assert.equal(r.choices[0].message.content, solo);
        const cached = r.usage.prompt_tokens_details.cached_tokens;
        assert.ok(cached >= 40 && cached < r.usage.prompt_tokens, JSON.stringify(r.usage));
        // GET /slots: each slot, whether it is generating, and the KV cache it holds.
        const slots = await (await fetch(`${server.url}/slots`)).json();
        assert.equal(slots.length, 2);
        assert.deepEqual(slots.map((x: { id: number }) => x.id), [0, 1]);
        assert.equal(slots.filter((x: { is_processing: boolean }) => x.is_processing).length, 1);
        for (const x of slots) {
          assert.ok(x.n_ctx > 0 && x.cached_tokens > 40 && x.cached_tokens <= x.n_ctx);
        }
        // GET /health: the KV use of all slots, in positions and bytes (f16: 2 bytes a value).
        const h = await (await fetch(`${server.url}/health`)).json();
        const held = slots.reduce(
          (n: number, x: { cached_tokens: number }) => n + x.cached_tokens,
          0,
        );
        const perToken = 30 * 2 * 3 * 64 * 2; // SmolLM2: 30 layers, K and V, 3 KV heads of 64
        // The busy slot goes on generating between the two requests: /health holds as many
        // tokens as /slots said, or a few more.
        const tokens = h.kv_cache.tokens;
        assert.ok(tokens >= held && tokens <= held + 16, `${tokens} tokens, /slots said ${held}`);
        assert.deepEqual(h.kv_cache, {
          type: "f16",
          tokens,
          bytes: tokens * perToken,
          capacity_tokens: 2 * slots[0].n_ctx,
          capacity_bytes: 2 * slots[0].n_ctx * perToken,
        });
        for (const x of slots) assert.equal(x.kv_bytes, x.cached_tokens * perToken);
      } finally {
        abort.abort();
        await reader.cancel().catch(() => {});
      }
    });
  },
});

Deno.test({
  name: "serve: bad requests get 400/401/404/405/413/415 with a JSON error; the server stays up",
  ignore: !present,
  async fn() {
    await withServer({ apiKey: "sesame", contextLength: 128 }, async (server) => {
      const u = server.url;
      const auth = { authorization: "Bearer sesame" };
      const health = await fetch(`${u}/health`); // no key needed
      assert.equal((await health.json()).status, "ok");
      await expectError(await post(`${u}/v1/chat/completions`, { messages }), 401);
      await expectError(
        await post(`${u}/v1/chat/completions`, { messages }, { authorization: "Bearer wrong" }),
        401,
      );
      const models = await fetch(`${u}/v1/models`, { headers: auth });
      const list = await models.json();
      assert.equal(list.object, "list");
      assert.equal(list.data.length, 1);
      assert.equal(typeof list.data[0].id, "string");
      const chat = `${u}/v1/chat/completions`;
      await expectError(await post(chat, "{not json", auth), 400);
      await expectError(await post(chat, new Uint8Array([0x7b, 0xff, 0x7d]), auth), 400);
      await expectError(await post(chat, { messages, n: 2 }, auth), 400, "n");
      await expectError(await post(chat, { messages, max_tokens: 200 }, auth), 400, "max_tokens");
      await expectError(await post(chat, { messages, max_tokens: 120 }, auth), 400, "max_tokens");
      await expectError(await post(chat, { messages, temperature: 3 }, auth), 400, "temperature");
      await expectError(
        await post(chat, { messages, top_logprobs: 2 }, auth),
        400,
        "top_logprobs",
      );
      // Unknown fields are ignored and named (--strict refuses them: abuse_test.ts).
      const bogus = await post(chat, { messages, bogus: 1, max_tokens: 1 }, auth);
      assert.equal(bogus.status, 200);
      assert.equal(bogus.headers.get("x-cflow-ignored-fields"), "bogus");
      await bogus.body?.cancel();
      await expectError(
        await post(chat, { messages: [{ role: "user", content: "word ".repeat(400) }] }, auth),
        400,
      );
      await expectError(
        await post(chat, { messages: [{ role: "user", content: "x".repeat(2 << 20) }] }, auth),
        413,
      );
      // A web page's POST (it sends Origin) must be typed application/json.
      await expectError(
        await fetch(chat, {
          method: "POST",
          headers: { ...auth, origin: "http://page.test" },
          body: JSON.stringify({ messages }),
        }),
        415,
      );
      await expectError(await fetch(chat, { headers: auth }), 405);
      await expectError(await fetch(`${u}/nope`, { headers: auth }), 404);

      const tok = await post(`${u}/tokenize`, { content: "Hello, world! é" }, auth);
      const { tokens } = await tok.json();
      assert.ok(Array.isArray(tokens) && tokens.length > 0);
      const detok = await post(`${u}/detokenize`, { tokens }, auth);
      assert.equal((await detok.json()).content, "Hello, world! é");
      await expectError(await post(`${u}/detokenize`, { tokens: [1e9] }, auth), 400, "tokens");

      const ok = await post(chat, { messages, max_tokens: 4, temperature: 0 }, auth);
      assert.equal(ok.status, 200);
      assert.equal((await ok.json()).choices[0].message.role, "assistant");
    });
  },
});

/** Reads a chat SSE stream to the end; aborts after `abortAfter` content chunks if given. */
async function readStream(
  url: string,
  body: unknown,
  abortAfter?: number,
): Promise<{ text: string; done: boolean }> {
  const abort = new AbortController();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: abort.signal,
  });
  assert.equal(r.status, 200);
  const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let text = "";
  let chunks = 0;
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) return { text, done: false };
      buffer += value;
      let i;
      while ((i = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        assert.ok(event.startsWith("data: "), event);
        const data = event.slice(6);
        if (data === "[DONE]") return { text, done: true };
        const chunk = JSON.parse(data);
        assert.equal(chunk.error, undefined, data);
        const piece = chunk.choices[0].delta.content;
        if (piece) {
          text += piece;
          chunks++;
          if (abortAfter !== undefined && chunks >= abortAfter) {
            abort.abort();
            await reader.cancel().catch(() => {});
            return { text, done: false };
          }
        }
      }
    }
  } catch (error) {
    if (abortAfter !== undefined) return { text, done: false };
    throw error;
  }
}

Deno.test({
  name: "serve: 8 concurrent streams on 2 instances, half cut off midway; survivors unaffected",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      const prompts = ["Tell me a story about a cat.", "List three fruits."];
      const request = (p: string) => ({
        messages: [{ role: "user", content: p }],
        temperature: 0,
        max_tokens: 16,
        seed: 1,
        stream: true,
      });
      const solo: string[] = [];
      for (const p of prompts) {
        const r = await readStream(server.url, request(p));
        assert.ok(r.done);
        solo.push(r.text);
      }
      const runs = await Promise.all(
        Array.from(
          { length: 8 },
          (_, i) => readStream(server.url, request(prompts[i % 2]), i % 4 >= 2 ? 2 : undefined),
        ),
      );
      for (let i = 0; i < 8; i++) {
        if (i % 4 >= 2) continue;
        assert.ok(runs[i].done, `stream ${i} finished`);
        assert.equal(runs[i].text, solo[i % 2], `stream ${i} equals its solo run`);
      }
      // The aborted streams gave their instances back.
      let h;
      for (let t = 0; t < 50; t++) {
        h = await (await fetch(`${server.url}/health`)).json();
        if (h.slots_idle === 2) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const { kv_cache: _, ...slotsOf } = h;
      assert.deepEqual(slotsOf, { status: "ok", slots_idle: 2, slots_total: 2, queued: 0 });
      const again = await readStream(server.url, request(prompts[0]));
      assert.equal(again.text, solo[0]);
    });
  },
});

Deno.test({
  name: "serve: a client that leaves frees its slot, queued or running (non-streamed)",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 1, contextLength: 1024 }, async (server) => {
      // End-of-generation tokens banned: only the disconnect can end it early.
      const long = {
        messages,
        temperature: 0,
        max_tokens: 900,
        logit_bias: { "0": -100, "2": -100, "4": -100 },
      };
      const running = new AbortController();
      const queued = new AbortController();
      const a = fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(long),
        signal: running.signal,
      }).catch((e) => e);
      await new Promise((r) => setTimeout(r, 150));
      const b = fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(long),
        signal: queued.signal,
      }).catch((e) => e);
      let h;
      for (let t = 0; t < 100; t++) {
        h = await (await fetch(`${server.url}/health`)).json();
        if (h.queued === 1) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(h.queued, 1, "the second request waits");
      queued.abort();
      running.abort();
      await Promise.all([a, b]);
      const start = performance.now();
      for (let t = 0; t < 200; t++) {
        h = await (await fetch(`${server.url}/health`)).json();
        if (h.slots_idle === 1 && h.queued === 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const { kv_cache: _, ...slotsOf } = h;
      assert.deepEqual(slotsOf, { status: "ok", slots_idle: 1, slots_total: 1, queued: 0 });
      const ok = await post(`${server.url}/v1/chat/completions`, { ...long, max_tokens: 4 });
      assert.equal(ok.status, 200);
      await ok.body?.cancel();
      assert.ok(performance.now() - start < 5000, "freed without running 900 tokens");
    });
  },
});

Deno.test({
  name: "./cflow serve listens on 127.0.0.1 with scoped permissions and stops on SIGTERM",
  ignore: !present,
  async fn() {
    const child = new Deno.Command(`${ROOT}cflow`, {
      args: ["serve", "--port", "0", "--ctx", "256", "--json"],
      env: {
        CFLOW_KERNELS: "",
        CFLOW_THREADS: "",
        CFLOW_KERNEL_VARIANT: "",
        CFLOW_CPU_DISABLE: "",
        ...TEST_CACHE_ENV,
      },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let line = "";
    while (!line.includes("\n")) {
      const r = await reader.read();
      if (r.done) break;
      line += r.value;
    }
    try {
      const { url } = JSON.parse(line);
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const r = await fetch(`${url}/health`);
      assert.equal((await r.json()).status, "ok");
    } finally {
      child.kill("SIGTERM");
      await reader.cancel().catch(() => {});
      const status = await child.status;
      await child.stderr.cancel().catch(() => {});
      assert.equal(status.code, 0);
    }
  },
});

Deno.test({
  name: "serve: logprobs and top_logprobs as OpenAI returns them (chat, completions, streamed)",
  ignore: !present,
  async fn() {
    await withServer({ contextLength: 256 }, async (server) => {
      const u = server.url;
      const greedy = { max_tokens: 8, temperature: 0 };
      const r = await post(`${u}/v1/chat/completions`, {
        messages,
        ...greedy,
        logprobs: true,
        top_logprobs: 3,
      });
      assert.equal(r.status, 200);
      const body = await r.json();
      const choice = body.choices[0];
      const content = choice.logprobs.content;
      assert.ok(content.length >= 1 && content.length <= body.usage.completion_tokens);
      const dec = new TextDecoder();
      for (const c of content) {
        assert.ok(c.logprob <= 0 && Number.isFinite(c.logprob));
        assert.equal(c.top_logprobs.length, 3);
        // Greedy picks the most likely token: the first alternative is the token itself.
        assert.equal(c.top_logprobs[0].token, c.token);
        assert.equal(c.top_logprobs[0].logprob, c.logprob);
        for (let i = 1; i < 3; i++) {
          assert.ok(c.top_logprobs[i].logprob <= c.top_logprobs[i - 1].logprob);
        }
        assert.equal(dec.decode(new Uint8Array(c.bytes)), c.token);
      }
      assert.equal(content.map((c: { token: string }) => c.token).join(""), choice.message.content);
      // Without logprobs the field stays null, as OpenAI sends it.
      const plain = await (await post(`${u}/v1/chat/completions`, { messages, ...greedy })).json();
      assert.equal(plain.choices[0].logprobs, null);
      assert.equal(plain.choices[0].message.content, choice.message.content);

      // Streamed: every chunk carries its own tokens' entries, the same ones in all.
      const s = await fetch(`${u}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages, ...greedy, logprobs: true, stream: true }),
      });
      const events = (await s.text()).split("\n\n").filter((e) => e.startsWith("data: {"));
      const streamed = events.flatMap((e) =>
        JSON.parse(e.slice(6)).choices[0].logprobs?.content ?? []
      );
      assert.deepEqual(
        streamed.map((c: { token: string; logprob: number }) => [c.token, c.logprob]),
        content.map((c: { token: string; logprob: number }) => [c.token, c.logprob]),
      );
      for (const c of streamed) assert.deepEqual(c.top_logprobs, []);

      // Legacy completions: parallel arrays and alternatives as a map.
      const t = await (await post(`${u}/v1/completions`, {
        prompt: "The capital of France is",
        ...greedy,
        logprobs: 2,
      })).json();
      const lp = t.choices[0].logprobs;
      assert.equal(lp.tokens.length, lp.token_logprobs.length);
      assert.equal(lp.tokens.length, lp.top_logprobs.length);
      assert.equal(lp.tokens.join(""), t.choices[0].text);
      let at = 0;
      lp.tokens.forEach((tok: string, i: number) => {
        assert.equal(lp.text_offset[i], at);
        at += tok.length;
        const alts = Object.entries(lp.top_logprobs[i]) as [string, number][];
        assert.ok(alts.length >= 1 && alts.length <= 2);
        assert.equal(alts[0][0], tok);
        assert.equal(alts[0][1], lp.token_logprobs[i]);
      });
      await expectError(
        await post(`${u}/v1/completions`, { prompt: "x", logprobs: 6 }),
        400,
        "logprobs",
      );
    });
  },
});

Deno.test({
  name:
    "serve --kv-cache q8_0: batched slots answer as one slot alone does, at 34/64 of f16's KV bytes",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const ask = (content: string) => ({
      messages: [{ role: "user", content }],
      temperature: 0,
      max_tokens: 16,
    });
    const questions = ["Name a fruit.", "Name a color.", "Name a city."];
    const solo: string[] = [];
    await withServer({ parallel: 1, kvCache: "q8_0" }, async (server) => {
      for (const q of questions) {
        const r = await (await post(`${server.url}/v1/chat/completions`, ask(q))).json();
        solo.push(r.choices[0].message.content);
      }
    });
    await withServer({ parallel: 3, kvCache: "q8_0" }, async (server) => {
      const got = await Promise.all(
        questions.map(async (q) =>
          (await (await post(`${server.url}/v1/chat/completions`, ask(q))).json()).choices[0]
            .message.content
        ),
      );
      assert.deepEqual(got, solo);
      const h = await (await fetch(`${server.url}/health`)).json();
      assert.equal(h.kv_cache.type, "q8_0");
      const perToken = 30 * 2 * 3 * 68; // a head row of 64 values is two 34-byte Q8_0 blocks
      assert.equal(h.kv_cache.bytes, h.kv_cache.tokens * perToken);
      assert.ok(h.kv_cache.tokens > 0);
    });
  },
});

Deno.test({
  name:
    "serve with speculation (a draft model, prompt lookup): the same answers, and timings say what was drafted",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const ask = (content: string, stream = false) => ({
      messages: [{ role: "user", content }],
      temperature: 0,
      max_tokens: 24,
      stream,
    });
    const questions = [
      "Repeat after me: one two three one two three.",
      "Name a color.",
      "Count to five.",
    ];
    const answer = async (url: string, q: string) => {
      const r = await (await post(`${url}/v1/chat/completions`, ask(q))).json();
      return { text: r.choices[0].message.content as string, timings: r.timings };
    };
    const plain: string[] = [];
    await withServer({ parallel: 1 }, async (server) => {
      for (const q of questions) {
        const a = await answer(server.url, q);
        plain.push(a.text);
        assert.equal(a.timings.draft_n, undefined);
        assert.ok(a.timings.predicted_n >= 1 && a.timings.predicted_n <= 24);
      }
    });
    // The model as its own draft (another copy, one sequence per slot), and lookup.
    const draftModel = await model();
    for (
      const [parallel, speculation] of [
        [1, { draftModel, minP: 0 }],
        [2, { draftModel, draftMax: 4, minP: 0 }],
        [2, { lookupNgram: 2 }],
      ] as const
    ) {
      await withServer({ parallel, speculation }, async (server) => {
        const got = await Promise.all(questions.map((q) => answer(server.url, q)));
        assert.deepEqual(got.map((a) => a.text), plain, JSON.stringify(speculation));
        const drafted = got.reduce((n, a) => n + a.timings.draft_n, 0);
        const accepted = got.reduce((n, a) => n + a.timings.draft_n_accepted, 0);
        assert.ok(accepted > 0 && accepted <= drafted, `${accepted} of ${drafted}`);
        // Its own draft: every draft is kept but those after the end of an answer (the target
        // stops there; the last check may hold a few past its budget of drafts).
        if (speculation.draftModel !== undefined) {
          assert.ok(accepted >= drafted - questions.length * 4, `${accepted} of ${drafted}`);
        }
        // Streamed: the chunk with the finish reason carries the timings.
        const res = await post(`${server.url}/v1/chat/completions`, ask(questions[0], true));
        const text = await res.text();
        const last = text.split("\n").filter((l) => l.startsWith("data: {")).map((l) =>
          JSON.parse(l.slice(6))
        ).pop();
        assert.ok(last.choices[0].finish_reason !== null);
        assert.ok(last.timings.draft_n > 0, JSON.stringify(last.timings));
      });
    }
  },
});
