/**
 * The Ollama API of `cflow serve` end to end on SmolLM2-135M-Instruct, with the official
 * `ollama` npm client as the caller: chat and generate (NDJSON streams and whole answers, the
 * same greedy tokens as the OpenAI routes), `context`, load requests, the listings, errors in
 * Ollama's shape, the API key, and a client that aborts its stream freeing its slot. Skipped
 * when the test model has not been fetched.
 */
import assert from "node:assert/strict";
import { Ajv } from "ajv";
import { Ollama } from "ollama/browser";
import { post, present, withServer } from "./_test_server.ts";
import type { RequestLogEntry } from "./handler.ts";
import { VERSION } from "../version.ts";

const messages = [{ role: "user" as const, content: "What is the capital of France?" }];

function positiveInt(v: unknown, name: string): void {
  assert.ok(Number.isSafeInteger(v) && (v as number) > 0, `${name} = ${v}`);
}

/** The counts and durations of a last object, checked. */
function checkDone(r: Record<string, unknown>, evalCount: number, promptCount: number): void {
  assert.equal(r.done, true);
  for (
    const k of ["total_duration", "load_duration", "prompt_eval_duration", "eval_duration"]
  ) positiveInt(r[k], k);
  assert.ok((r.total_duration as number) >= (r.eval_duration as number));
  assert.ok((r.total_duration as number) >= (r.prompt_eval_duration as number));
  assert.equal(r.eval_count, evalCount);
  assert.equal(r.prompt_eval_count, promptCount);
}

/** The client's ResponseError (not exported by the package): the server's message and status. */
interface ResponseError {
  error: string;
  status_code: number;
}

async function errorOf(p: Promise<unknown>): Promise<ResponseError> {
  try {
    await p;
  } catch (error) {
    const e = error as Partial<ResponseError> & Error;
    assert.equal(e.name, "ResponseError", String(error));
    assert.equal(typeof e.error, "string");
    return e as ResponseError;
  }
  assert.fail("the request succeeded");
}

Deno.test({
  name: "ollama: the official client chats and generates, streamed and whole, as /v1 greedy",
  ignore: !present,
  async fn() {
    await withServer({}, async (server) => {
      const ollama = new Ollama({ host: server.url });
      // The OpenAI route's greedy answer, with the Ollama routes' default repeat penalty.
      const ref = await (await post(`${server.url}/v1/chat/completions`, {
        messages,
        temperature: 0,
        max_tokens: 16,
        repeat_penalty: 1.1,
      })).json();
      const text: string = ref.choices[0].message.content;
      const n: number = ref.usage.completion_tokens;
      const promptTokens: number = ref.usage.prompt_tokens;
      const reason = ref.choices[0].finish_reason;
      assert.ok(text.length > 0);

      const whole = await ollama.chat({
        model: "smollm2",
        messages,
        options: { temperature: 0, num_predict: 16 },
      });
      assert.equal(whole.model, "smollm2");
      assert.equal(typeof whole.created_at, "string");
      assert.deepEqual(whole.message, { role: "assistant", content: text });
      assert.equal(whole.done_reason, reason);
      checkDone(whole as unknown as Record<string, unknown>, n, promptTokens);

      const stream = await ollama.chat({
        model: "smollm2",
        messages,
        options: { temperature: 0, num_predict: 16 },
        stream: true,
      });
      let streamed = "";
      let last: Record<string, unknown> = {};
      let parts = 0;
      for await (const part of stream) {
        assert.equal(part.message.role, "assistant");
        streamed += part.message.content;
        last = part as unknown as Record<string, unknown>;
        parts++;
      }
      assert.equal(streamed, text);
      assert.ok(parts > 2);
      assert.equal(last.done_reason, reason);
      checkDone(last, n, promptTokens);

      // /api/generate puts the prompt in the chat template as one user message: the same answer.
      const gen = await ollama.generate({
        model: "smollm2",
        prompt: messages[0].content,
        options: { temperature: 0, num_predict: 16 },
      });
      assert.equal(gen.response, text);
      checkDone(gen as unknown as Record<string, unknown>, n, promptTokens);
      assert.ok(Array.isArray(gen.context) && gen.context.length > promptTokens);
      const genStream = await ollama.generate({
        model: "smollm2",
        prompt: messages[0].content,
        options: { temperature: 0, num_predict: 16 },
        stream: true,
      });
      let genText = "";
      let genLast: Record<string, unknown> = {};
      for await (const part of genStream) {
        genText += part.response;
        genLast = part as unknown as Record<string, unknown>;
      }
      assert.equal(genText, text);
      assert.deepEqual(genLast.context, gen.context);

      // The next turn from the returned context: its tokens come first, as they are.
      const next = await ollama.generate({
        model: "smollm2",
        prompt: "And of Italy?",
        context: gen.context,
        options: { temperature: 0, num_predict: 8 },
      });
      assert.ok(next.prompt_eval_count > gen.context!.length);
      assert.deepEqual(next.context!.slice(0, gen.context!.length), gen.context);

      // raw: the prompt as it is, as /v1/completions takes it (no penalty on either side).
      const cref = await (await post(`${server.url}/v1/completions`, {
        prompt: "Once upon a time",
        temperature: 0,
        max_tokens: 12,
      })).json();
      const raw = await ollama.generate({
        model: "smollm2",
        prompt: "Once upon a time",
        raw: true,
        options: { temperature: 0, num_predict: 12, repeat_penalty: 1 },
      });
      assert.equal(raw.response, cref.choices[0].text);
      assert.equal(raw.eval_count, cref.usage.completion_tokens);

      // num_predict ends the answer: done_reason "length", eval_count the tokens generated.
      const short = await ollama.chat({
        model: "smollm2",
        messages,
        options: { temperature: 0, num_predict: 3 },
      });
      assert.equal(short.done_reason, "length");
      assert.equal(short.eval_count, 3);

      // Nothing to generate: Ollama's load answer.
      const load = await ollama.generate({ model: "smollm2", prompt: "" });
      assert.equal(load.done, true);
      assert.equal(load.done_reason, "load");
      const loadChat = await ollama.chat({ model: "smollm2", messages: [] });
      assert.equal(loadChat.done_reason, "load");
      assert.deepEqual(loadChat.message, { role: "assistant", content: "" });

      // format: a schema (chat) and "json" (generate) hold the output, which parses and
      // validates (ajv); a refused schema keyword is a 400 naming it.
      const schema = {
        type: "object",
        properties: { city: { type: "string", maxLength: 20 }, year: { type: "integer" } },
        required: ["city", "year"],
        additionalProperties: false,
      };
      const fmt = await ollama.chat({
        model: "smollm2",
        messages,
        format: schema,
        keep_alive: "5m",
        options: { temperature: 0.8, seed: 3, num_predict: 64 },
      });
      assert.equal(fmt.done_reason, "stop", fmt.message.content);
      const value = JSON.parse(fmt.message.content);
      assert.ok(new Ajv().compile(schema)(value), fmt.message.content);
      const json = await ollama.generate({
        model: "smollm2",
        prompt: "A fruit as JSON with its name and colour:",
        format: "json",
        options: { temperature: 0, num_predict: 96 },
      });
      assert.equal(json.done_reason, "stop", json.response);
      const object = JSON.parse(json.response ?? "");
      assert.ok(typeof object === "object" && object !== null && !Array.isArray(object));
      const refused = await errorOf(
        ollama.chat({ model: "smollm2", messages, format: { type: "object", allOf: [] } }),
      );
      assert.equal(refused.status_code, 400);
      assert.match(refused.error, /allOf/);
    });
  },
});

Deno.test({
  name: "ollama: tags, show, ps and version describe the loaded model",
  ignore: !present,
  async fn() {
    // While the model loads, the Ollama routes answer 503 in Ollama's shape.
    let loading: unknown[] = [];
    const onListen = async (url: string) => {
      const r = await fetch(`${url}/api/tags`);
      loading = [r.status, await r.json()];
    };
    await withServer({ onListen }, async (server) => {
      assert.deepEqual(loading, [503, { error: "the model is loading; retry shortly" }]);
      const ollama = new Ollama({ host: server.url });
      const tags = await ollama.list();
      assert.equal(tags.models.length, 1);
      const m = tags.models[0];
      assert.ok(m.name.endsWith(".cflow"));
      assert.equal(m.model, m.name);
      assert.match(m.digest, /^[0-9a-f]{64}$/);
      assert.ok(m.size > 50_000_000 && m.size < 200_000_000, `size ${m.size}`);
      assert.ok(!Number.isNaN(Date.parse(m.modified_at as unknown as string)));
      assert.equal(m.details.format, "cflow");
      assert.equal(m.details.family, "llama");
      assert.deepEqual(m.details.families, ["llama"]);
      assert.equal(m.details.quantization_level, "Q4_0");
      // SmolLM2-135M: 134.5M parameters (tied embeddings counted once).
      assert.match(m.details.parameter_size, /^13[45]\.\d\dM$/);

      const show = await ollama.show({ model: m.name });
      assert.ok(show.template.includes("im_start"), "the chat template");
      assert.ok(show.modelfile.includes(`FROM ${m.name}`));
      assert.ok(show.parameters.includes("temperature 0.8"));
      assert.deepEqual(show.details, m.details);
      const info = show.model_info as unknown as Record<string, unknown>;
      assert.equal(info["general.architecture"], "llama");
      assert.equal(info["llama.block_count"], 30);
      assert.equal(info["llama.embedding_length"], 576);
      assert.equal(info["llama.attention.head_count_kv"], 3);
      assert.equal(info["llama.context_length"], 8192);
      assert.ok((info["general.parameter_count"] as number) > 130e6);
      assert.deepEqual(show.capabilities, ["completion"]);

      const ps = await ollama.ps();
      assert.equal(ps.models.length, 1);
      assert.equal(ps.models[0].name, m.name);
      assert.equal(ps.models[0].digest, m.digest);
      assert.equal(ps.models[0].size_vram, 0);
      assert.ok(ps.models[0].size > m.size, "the file and the KV cache");
      const expires = Date.parse(ps.models[0].expires_at as unknown as string);
      assert.ok(expires > Date.now() + 100 * 365 * 86400e3, "kept loaded");

      assert.deepEqual(await ollama.version(), { version: VERSION });
      // Model management is not served here: 404 in Ollama's error shape.
      const e = await fetch(`${server.url}/api/pull`, { method: "POST", body: "{}" });
      assert.equal(e.status, 404);
      assert.deepEqual(Object.keys(await e.json()), ["error"]);
    });
  },
});

Deno.test({
  name: "ollama: the official client embeds (embed and the legacy embeddings) as /v1/embeddings",
  ignore: !present,
  async fn() {
    await withServer({ contextLength: 256 }, async (server) => {
      const ollama = new Ollama({ host: server.url });
      const texts = ["The cat sat on the mat.", "Quarterly revenue rose by 4 percent."];
      const ref = await (await post(`${server.url}/v1/embeddings`, { input: texts })).json();
      const r = await ollama.embed({ model: "smollm2", input: texts });
      assert.equal(r.model, "smollm2");
      assert.equal(r.embeddings.length, 2);
      r.embeddings.forEach((v, i) => assert.deepEqual(v, ref.data[i].embedding));
      assert.equal(r.prompt_eval_count, ref.usage.prompt_tokens);
      positiveInt(r.total_duration, "total_duration");
      const one = await ollama.embed({ model: "smollm2", input: texts[0] });
      assert.deepEqual(one.embeddings, [ref.data[0].embedding]);
      const legacy = await ollama.embeddings({ model: "smollm2", prompt: texts[1] });
      assert.deepEqual(legacy.embedding, ref.data[1].embedding);
      // truncate: false refuses an input longer than the context; true (the default) cuts it.
      const long = "word ".repeat(400);
      const refused = await errorOf(
        ollama.embed({ model: "smollm2", input: long, truncate: false }),
      );
      assert.equal(refused.status_code, 400);
      assert.match(refused.error, /context/);
      const cut = await ollama.embed({ model: "smollm2", input: long });
      assert.equal(cut.embeddings[0].length, ref.data[0].embedding.length);
      assert.equal(
        (await errorOf(ollama.embed({ model: "smollm2", input: [] }))).status_code,
        400,
      );
    });
  },
});

Deno.test({
  name: "ollama: refused requests answer {error} with the status; unknown fields are named",
  ignore: !present,
  async fn() {
    await withServer({}, async (server) => {
      const ollama = new Ollama({ host: server.url });
      const base = { model: "smollm2", messages, options: { num_predict: 2 } };
      const bad = await errorOf(
        ollama.chat({ ...base, options: { temperature: "hot" as unknown as number } }),
      );
      assert.equal(bad.status_code, 400);
      assert.match(bad.error, /options\.temperature must be a number/);
      const cases: [Record<string, unknown>, RegExp, string?][] = [
        [{ options: { top_k: 1.5 } }, /options\.top_k must be an integer/],
        [{ options: { num_predict: 0 } }, /num_predict/],
        [{ options: { mirostat: 2 } }, /mirostat is not supported/],
        [{ options: { num_ctx: 1 << 20 } }, /num_ctx/],
        [{ options: "fast" }, /options must be a JSON object/],
        [{ messages: [{ role: "user", content: "x", images: ["aGk="] }] }, /images/],
        [{ messages: [{ role: "tool", content: "x" }] }, /role must be/],
        [{ tools: [{ type: "function" }] }, /does not support tools/],
        [{ think: true }, /thinking/],
        [{ format: "yaml" }, /format must be "json" or a JSON schema/],
        [{ format: { type: 5 } }, /format\.type must be a string/],
        [{ keep_alive: "forever" }, /keep_alive/],
        [{ model: "" }, /model is required/],
        [{ prompt: "x", suffix: "y" }, /insert/, "/api/generate"],
        [{ prompt: "x", template: "{{ .Prompt }}" }, /template/, "/api/generate"],
        [{ prompt: "x", images: ["aGk="] }, /images/, "/api/generate"],
        [{ prompt: "x", context: [-1] }, /context must hold token ids/, "/api/generate"],
      ];
      for (const [change, message, path] of cases) {
        const r = await post(`${server.url}${path ?? "/api/chat"}`, { ...base, ...change });
        const body = await r.json();
        assert.equal(r.status, 400, `${JSON.stringify(change)}: ${JSON.stringify(body)}`);
        assert.deepEqual(Object.keys(body), ["error"]);
        assert.match(body.error, message);
      }
      // A prompt longer than num_ctx.
      const long = await post(`${server.url}/api/generate`, {
        model: "m",
        prompt: "word ".repeat(100),
        options: { num_ctx: 32 },
      });
      assert.equal(long.status, 400);
      assert.match((await long.json()).error, /context holds 32/);
      // Unknown fields and options with no effect here: served, and named.
      const r = await post(`${server.url}/api/chat`, {
        ...base,
        stream: false,
        truncate: true,
        options: { num_predict: 2, num_thread: 4 },
      });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("x-cflow-ignored-fields"), "truncate, options.num_thread");
      assert.equal((await r.json()).done, true);
      // The body checks the OpenAI routes have, in Ollama's shape: invalid JSON, too large, a
      // page's untyped body.
      const invalid = await post(`${server.url}/api/generate`, '{"model": ');
      assert.equal(invalid.status, 400);
      assert.deepEqual(Object.keys(await invalid.json()), ["error"]);
      const huge = await post(`${server.url}/api/generate`, {
        model: "m",
        prompt: "x".repeat(2e6),
      });
      assert.equal(huge.status, 413);
      assert.equal(typeof (await huge.json()).error, "string");
      const page = await fetch(`${server.url}/api/chat`, {
        method: "POST",
        headers: { "content-type": "text/plain", origin: "http://evil.example" },
        body: JSON.stringify(base),
      });
      assert.equal(page.status, 415);
      assert.equal(typeof (await page.json()).error, "string");
      // Wrong method: 405, Ollama's shape.
      const m = await fetch(`${server.url}/api/tags`, { method: "POST", body: "{}" });
      assert.equal(m.status, 405);
      assert.equal(typeof (await m.json()).error, "string");
    });
  },
});

Deno.test({
  name: "ollama: --strict refuses unknown fields; the API key guards /api/ like the rest",
  ignore: !present,
  async fn() {
    await withServer({ strict: true, apiKey: "k" }, async (server) => {
      const denied = await errorOf(new Ollama({ host: server.url }).list());
      assert.equal(denied.status_code, 401);
      assert.match(denied.error, /API key/);
      const ollama = new Ollama({ host: server.url, headers: { Authorization: "Bearer k" } });
      assert.equal((await ollama.list()).models.length, 1);
      const e = await errorOf(
        ollama.chat({
          model: "m",
          messages,
          options: { num_predict: 2, num_thread: 2 },
        }),
      );
      assert.equal(e.status_code, 400);
      assert.match(e.error, /options\.num_thread/);
      const ok = await ollama.chat({ model: "m", messages, options: { num_predict: 2 } });
      assert.equal(ok.eval_count, 2);
    });
  },
});

Deno.test({
  name: "ollama: a client that aborts its stream frees its slot at once",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const log: RequestLogEntry[] = [];
    await withServer({ parallel: 1, log: (e) => log.push(e) }, async (server) => {
      const ollama = new Ollama({ host: server.url });
      const request = {
        model: "m",
        prompt: "1, 2, 3, 4, 5, 6,",
        raw: true,
        options: { temperature: 0, num_predict: 120, repeat_penalty: 1 },
      };
      // The whole answer is long: a stream cut after 3 pieces stops far before it.
      const full = await ollama.generate(request);
      assert.equal(full.eval_count, 120, `the uncut answer has ${full.eval_count} tokens`);
      const stream = await ollama.generate({ ...request, stream: true });
      let pieces = 0;
      const cut = (async () => {
        for await (const _ of stream) {
          if (++pieces === 3) stream.abort();
        }
      })();
      await assert.rejects(cut);
      const start = performance.now();
      let idle = false;
      while (!idle && performance.now() - start < 5000) {
        const h = await (await fetch(`${server.url}/health`)).json();
        idle = h.slots_idle === 1;
        if (!idle) await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(idle, "the slot came back");
      // The next request gets the slot and is answered in full.
      const after = await ollama.generate({ ...request, options: { ...request.options } });
      assert.equal(after.response, full.response);
      const entries = log.filter((e) => e.path === "/api/generate");
      assert.equal(entries.length, 3);
      const aborted = entries.find((e) => (e.completionTokens ?? 0) < full.eval_count);
      assert.ok(aborted !== undefined, JSON.stringify(entries));
      assert.ok(aborted.completionTokens! < full.eval_count / 2, JSON.stringify(entries));
    });
  },
});

Deno.test({
  name: "ollama: a drain refuses new generations (503 {error}) and ends a running stream's NDJSON",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 1 }, async (server) => {
      const ollama = new Ollama({ host: server.url });
      const stream = await ollama.generate({
        model: "m",
        prompt: "1, 2, 3, 4, 5, 6,",
        raw: true,
        stream: true,
        options: { temperature: 0, num_predict: 2000, repeat_penalty: 1 },
      });
      let started!: () => void;
      const running = new Promise<void>((r) => started = r);
      let pieces = 0;
      const read = (async () => {
        for await (const _ of stream) if (++pieces === 2) started();
      })().then(() => undefined, (e: Error) => e);
      await running;
      const drained = server.drain(3000);
      const late = await post(`${server.url}/api/chat`, { model: "m", messages, stream: false });
      assert.equal(late.status, 503);
      assert.equal(late.headers.get("retry-after"), "1");
      assert.match((await late.json()).error, /shutting down/);
      // The client reads the last line, {"error": ...}, and throws it.
      const error = await read;
      assert.ok(error instanceof Error, "the stream ended without an error");
      assert.match(error.message, /shut down before the generation finished/);
      assert.deepEqual(await drained, { ended: 1 });
    });
  },
});

Deno.test({
  name: "ollama: --parallel 2 runs two streams together, each as it runs alone",
  ignore: !present,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      const ollama = new Ollama({ host: server.url });
      const asks = ["What is the capital of France?", "Name three colours."];
      const request = (content: string) => ({
        model: "m",
        messages: [{ role: "user" as const, content }],
        options: { temperature: 0, num_predict: 24 },
      });
      const solo: string[] = [];
      for (const a of asks) solo.push((await ollama.chat(request(a))).message.content);
      const together = await Promise.all(asks.map(async (a) => {
        let text = "";
        for await (const part of await ollama.chat({ ...request(a), stream: true })) {
          text += part.message.content;
        }
        return text;
      }));
      assert.deepEqual(together, solo);
      const h = await (await fetch(`${server.url}/health`)).json();
      assert.equal(h.slots_idle, 2);
    });
  },
});
