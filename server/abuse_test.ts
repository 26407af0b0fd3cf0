/**
 * `cflow serve` under hostile input, end to end on SmolLM2-135M-Instruct (the real server, a
 * real model, no mocks): oversized and malformed bodies, oversized headers and URLs, every
 * bounded field out of range or mistyped, invalid UTF-8 in and partial UTF-8 out, prompts
 * beyond the context, 64 concurrent streams cut off at random points, and disconnects that
 * must cancel only their own generation. Skipped when the test model has not been fetched.
 */
import assert from "node:assert/strict";
import type { RequestLogEntry, Server } from "./mod.ts";
import { post, present, withServer } from "./_test_server.ts";

const enc = new TextEncoder();
const strict = new TextDecoder("utf-8", { fatal: true });

/** Asserts an OpenAI-style JSON error with `status` (and `param`, and `code`, when given). */
async function expectError(
  r: Response,
  status: number,
  param?: string | null,
  code?: string,
): Promise<{ message: string; param: string | null; code: string | null }> {
  const raw = new Uint8Array(await r.arrayBuffer());
  const text = strict.decode(raw);
  const body = JSON.parse(text);
  assert.equal(r.status, status, text);
  assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
  assert.equal(typeof body.error.message, "string", text);
  assert.equal(typeof body.error.type, "string", text);
  if (param !== undefined) assert.equal(body.error.param, param, text);
  if (code !== undefined) assert.equal(body.error.code, code, text);
  return body.error;
}

/** GET /health without its `kv_cache` object (server_test.ts checks that). */
async function health(url: string): Promise<Record<string, unknown>> {
  const r = await fetch(`${url}/health`);
  assert.equal(r.status, 200);
  const { kv_cache: _, ...slots } = await r.json();
  return slots;
}

/** Polls /health until every slot is idle and nothing waits; returns how long that took. */
async function waitIdle(server: Server, slots: number, timeoutMs = 5000): Promise<number> {
  const start = performance.now();
  let h: Record<string, unknown> = {};
  while (performance.now() - start < timeoutMs) {
    h = await health(server.url);
    if (h.slots_idle === slots && h.queued === 0) return performance.now() - start;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`the slots never all came back: ${JSON.stringify(h)}`);
}

/** mulberry32: a small seeded PRNG, so a failing schedule can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Raw HTTP/1.1 over TCP, for what fetch cannot send (lying headers, endless bodies). */
async function rawConnect(server: Server): Promise<Deno.TcpConn> {
  return await Deno.connect({ hostname: "127.0.0.1", port: server.port });
}

/** Reads from `conn` until EOF, an error, or a complete response; never throws. */
async function rawRead(conn: Deno.Conn, timeoutMs = 5000): Promise<string> {
  const buf = new Uint8Array(65536);
  const bytes: number[] = [];
  const deadline = performance.now() + timeoutMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    while (performance.now() < deadline) {
      const n = await Promise.race([
        conn.read(buf).catch(() => null),
        new Promise<"timeout">((r) => {
          timer = setTimeout(() => r("timeout"), Math.max(0, deadline - performance.now()));
        }),
      ]);
      clearTimeout(timer);
      if (n === null || n === "timeout") break;
      bytes.push(...buf.subarray(0, n));
      const text = new TextDecoder().decode(new Uint8Array(bytes));
      const end = text.indexOf("\r\n\r\n");
      if (end >= 0) {
        const m = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
        if (m !== null && enc.encode(text.slice(end + 4)).length >= Number(m[1])) break;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** Status and JSON body of a raw response. */
function parseRaw(raw: string): { status: number; body: string } {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
  assert.ok(m !== null, `no HTTP response: ${JSON.stringify(raw.slice(0, 200))}`);
  return { status: Number(m[1]), body: raw.slice(raw.indexOf("\r\n\r\n") + 4) };
}

// ---------------------------------------------------------------------------------------------

Deno.test({
  name: "abuse: a body that trickles in too slowly gets 408 JSON and frees the connection",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ limits: { bodyTimeoutMs: 300 } }, async (server) => {
      const conn = await rawConnect(server);
      try {
        const t0 = performance.now();
        // Promise 100 bytes, send 10, then nothing.
        await conn.write(enc.encode(
          "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
            'content-length: 100\r\n\r\n{"prompt":',
        ));
        const raw = await rawRead(conn, 5000);
        const ms = performance.now() - t0;
        const { status, body } = parseRaw(raw);
        assert.equal(status, 408, raw);
        assert.equal(JSON.parse(body).error.code, "body_timeout");
        assert.ok(ms < 3000, `answered after ${ms.toFixed(0)} ms`);
      } finally {
        conn.close();
      }
      // The server goes on; a prompt body that arrives in time is served.
      const ok = await post(`${server.url}/v1/completions`, { prompt: "Hi", max_tokens: 1 });
      assert.equal(ok.status, 200, await ok.text());
    });
    await assert.rejects(
      () => withServer({ limits: { bodyTimeoutMs: 0 } }, async () => {}),
      /limits\.bodyTimeoutMs 0 is not an integer/,
    );
  },
});

Deno.test({
  name: "abuse: oversized bodies get 413 JSON; a chunked body past the cap is cut off unread",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({}, async (server) => {
      const cap = 1 << 20;
      const u = server.url;
      // At the cap exactly (JSON padded with spaces) is fine; one byte more is not.
      const small = JSON.stringify({ prompt: "Hi", max_tokens: 1, temperature: 0 });
      const atCap = small + " ".repeat(cap - small.length);
      const ok = await post(`${u}/v1/completions`, atCap);
      assert.equal(ok.status, 200, await ok.clone().text());
      await ok.body?.cancel();
      for (const path of ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]) {
        await expectError(await post(`${u}${path}`, atCap + " "), 413, null, "request_too_large");
      }

      // A Content-Length beyond the cap is refused before any body byte is read.
      {
        const conn = await rawConnect(server);
        await conn.write(enc.encode(
          "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
            "content-length: 99999999999999\r\n\r\n{",
        ));
        const { status, body } = parseRaw(await rawRead(conn));
        assert.equal(status, 413);
        assert.equal(JSON.parse(body).error.code, "request_too_large");
        conn.close();
      }

      // Chunked, no Content-Length, never ending: the 413 comes while the client is still
      // sending, then the server stops reading (the client's writes fail long before 64 MiB).
      {
        const conn = await rawConnect(server);
        await conn.write(enc.encode(
          "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
            "transfer-encoding: chunked\r\n\r\n",
        ));
        const piece = new Uint8Array(64 << 10).fill(0x20);
        const frame = new Uint8Array([
          ...enc.encode(`${piece.length.toString(16)}\r\n`),
          ...piece,
          ...enc.encode("\r\n"),
        ]);
        let sent = 0;
        let sentWhenAnswered = -1;
        const answer = rawRead(conn, 10_000).then((raw) => {
          sentWhenAnswered = sent;
          return raw;
        });
        let writeError: string | undefined;
        const limit = 64 << 20;
        try {
          while (sent < limit) {
            await conn.write(frame);
            sent += piece.length;
          }
        } catch (error) {
          writeError = (error as Error).name;
        }
        const { status, body } = parseRaw(await answer);
        assert.equal(status, 413);
        assert.equal(JSON.parse(body).error.code, "request_too_large");
        assert.ok(writeError !== undefined, `the server read all ${sent} bytes`);
        assert.ok(sent < limit / 2, `the server took ${sent} bytes before closing`);
        assert.ok(
          sentWhenAnswered >= 0 && sentWhenAnswered < limit / 2,
          `answered after ${sentWhenAnswered} bytes`,
        );
        try {
          conn.close();
        } catch { /* closed */ }
      }

      // A request body streamed by fetch (chunked) past the cap: 413 or a cut connection.
      {
        let pushed = 0;
        const endless = new ReadableStream<Uint8Array>({
          pull(c) {
            if (pushed > 64 << 20) return c.close();
            pushed += 64 << 10;
            c.enqueue(new Uint8Array(64 << 10).fill(0x20));
          },
        });
        try {
          const r = await fetch(`${u}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: endless,
          });
          await expectError(r, 413, null, "request_too_large");
        } catch (error) {
          // The server closed the connection mid-upload: also a refusal.
          assert.ok(error instanceof TypeError, String(error));
        }
        assert.ok(pushed < 32 << 20, `fetch pushed ${pushed} bytes`);
      }
      assert.deepEqual(await health(u), { status: "ok", slots_idle: 1, slots_total: 1, queued: 0 });
    });
  },
});

Deno.test({
  name: "abuse: huge URLs and headers are refused by the HTTP layer; the server stays up",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({}, async (server) => {
      // A long but tolerated path: 404 JSON, the path echoed only in part.
      const e = await expectError(
        await fetch(`${server.url}/${"a".repeat(10_000)}`),
        404,
        null,
        "not_found",
      );
      assert.ok(e.message.length < 300, `404 message of ${e.message.length} characters`);

      const cases: [string, string][] = [
        ["100 kB URL", `GET /${"a".repeat(100_000)} HTTP/1.1\r\nhost: x\r\n\r\n`],
        ["1 MB URL", `POST /v1/completions?${"q".repeat(1 << 20)} HTTP/1.1\r\nhost: x\r\n\r\n`],
        ["1 MB header", `GET /health HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(1 << 20)}\r\n\r\n`],
        [
          "5000 headers",
          `GET /health HTTP/1.1\r\nhost: x\r\n${
            Array.from({ length: 5000 }, (_, i) => `x-h${i}: v\r\n`).join("")
          }\r\n`,
        ],
        ["garbage request line", "\x00\xff GARBAGE\r\n\r\n"],
      ];
      for (const [what, request] of cases) {
        const conn = await rawConnect(server);
        const writing = conn.write(enc.encode(request)).catch(() => 0);
        const raw = await rawRead(conn);
        await writing;
        try {
          conn.close();
        } catch { /* closed */ }
        // Refused (4xx) or the connection closed: never a 2xx/5xx, never a hang.
        if (raw !== "") {
          const { status } = parseRaw(raw);
          assert.ok(status >= 400 && status < 500, `${what}: status ${status}`);
        }
      }
      assert.deepEqual(await health(server.url), {
        status: "ok",
        slots_idle: 1,
        slots_total: 1,
        queued: 0,
      });
    });
  },
});

Deno.test({
  name: "abuse: invalid JSON, non-objects, wrong content types, invalid UTF-8 → 4xx JSON",
  ignore: !present,
  async fn() {
    // --strict: what llama-server would accept (unknown fields, bodies not typed JSON) is refused.
    await withServer({ strict: true }, async (server) => {
      const chat = `${server.url}/v1/chat/completions`;
      const cmpl = `${server.url}/v1/completions`;
      for (
        const body of ["", "{", '{"prompt":', "{not json}", "{'a':1}", "nul", "[1,]", "\u0000"]
      ) {
        await expectError(await post(cmpl, body), 400, null, "invalid_json");
      }
      for (const body of ["[]", "[{}]", '"prompt"', "42", "null", "true", "[[[[[[]]]]]]"]) {
        await expectError(await post(cmpl, body), 400, null, "invalid_value");
        await expectError(await post(chat, body), 400, null, "invalid_value");
      }
      // Deep nesting within the cap neither overflows a stack nor crashes.
      const deep = "[".repeat(400_000) + "]".repeat(400_000);
      await expectError(await post(chat, deep), 400, null, "invalid_value");
      await expectError(await post(`${server.url}/tokenize`, deep), 400, null);

      // Prototype keys are fields like any other: unknown, refused.
      await expectError(
        await post(cmpl, '{"prompt":"x","__proto__":{"max_tokens":1}}'),
        400,
        "__proto__",
        "unknown_field",
      );
      await expectError(await post(cmpl, { prompt: "x", constructor: 1 }), 400, "constructor");

      // Under --strict only application/json (any charset parameter) is read.
      const body = JSON.stringify({ prompt: "Hi", max_tokens: 1 });
      for (
        const type of [
          undefined,
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "application/jsonp",
          "application/json-patch+json",
          "text/json",
        ]
      ) {
        const headers: Record<string, string> = type === undefined ? {} : { "content-type": type };
        const r = await fetch(cmpl, { method: "POST", headers, body });
        await expectError(r, 415, null, "unsupported_media_type");
      }
      for (const type of ["application/json; charset=utf-8", "APPLICATION/JSON"]) {
        const r = await post(cmpl, body, { "content-type": type });
        assert.equal(r.status, 200, `${type}: ${await r.clone().text()}`);
        await r.body?.cancel();
      }

      // Invalid UTF-8 inside a JSON string: 400, never a U+FFFD passed on to the model.
      const head = enc.encode('{"max_tokens":1,"prompt":"ab');
      const tail = enc.encode('"}');
      const invalid: [string, number[]][] = [
        ["lone 0xff", [0xff]],
        ["lone continuation byte", [0x80]],
        ["overlong '/'", [0xc0, 0xaf]],
        ["overlong NUL", [0xe0, 0x80, 0x80]],
        ["UTF-8 encoded surrogate", [0xed, 0xa0, 0x80]],
        ["truncated 3-byte sequence", [0xe2, 0x82]],
        ["truncated 4-byte sequence", [0xf0, 0x9f, 0xa6]],
        ["beyond U+10FFFF", [0xf4, 0x90, 0x80, 0x80]],
        ["5-byte form", [0xf8, 0x88, 0x80, 0x80, 0x80]],
        ["Latin-1 é", [0xe9]],
      ];
      for (const [what, bytes] of invalid) {
        const raw = new Uint8Array([...head, ...bytes, ...tail]);
        const e = await expectError(await post(cmpl, raw), 400, null, "invalid_utf8");
        assert.ok(e.message.length > 0, what);
      }
      // A body cut inside a multi-byte sequence (no closing quote either).
      await expectError(await post(cmpl, new Uint8Array([...head, 0xf0, 0x9f])), 400, null);
      // Lone surrogates written as JSON escapes are valid JSON but no text: refused too.
      for (
        const [raw, url, param] of [
          [String.raw`{"prompt":"a\ud800b"}`, cmpl, "prompt"],
          [String.raw`{"prompt":"\udc00"}`, cmpl, "prompt"],
          [String.raw`{"prompt":"x","stop":["\ud83e"]}`, cmpl, "stop[0]"],
          [
            String.raw`{"messages":[{"role":"user","content":"hi \ud83e"}]}`,
            chat,
            "messages[0].content",
          ],
          [String.raw`{"content":"\ud800"}`, `${server.url}/tokenize`, "content"],
        ]
      ) {
        await expectError(await post(url, raw), 400, param, "invalid_unicode");
      }
      // A well-formed surrogate pair and a UTF-8 BOM are fine.
      const crab = await post(cmpl, String.raw`{"prompt":"\ud83e\udd80","max_tokens":1}`);
      assert.equal(crab.status, 200);
      await crab.body?.cancel();
      const bom = await post(cmpl, new Uint8Array([0xef, 0xbb, 0xbf, ...enc.encode(body)]));
      assert.equal(bom.status, 200, await bom.clone().text());
      await bom.body?.cancel();
      assert.equal((await health(server.url)).status, "ok");
    });
  },
});

Deno.test({
  name: "abuse: by default unknown fields are ignored and named, and curl's untyped bodies read",
  ignore: !present,
  async fn() {
    const logged: RequestLogEntry[] = [];
    await withServer({ log: (e) => logged.push(e) }, async (server) => {
      const cmpl = `${server.url}/v1/completions`;
      // llama-server's own fields cflow does not take, and a prototype key: ignored, named in
      // a header, never used.
      const r = await post(cmpl, {
        prompt: "Hi",
        max_tokens: 2,
        n_predict: 50,
        cache_prompt: true,
        ignore_eos: true,
      });
      assert.equal(r.status, 200, await r.clone().text());
      assert.equal(r.headers.get("x-cflow-ignored-fields"), "n_predict, cache_prompt");
      // ignore_eos is llama-server's and honoured: exactly max_tokens tokens.
      assert.equal((await r.json()).usage.completion_tokens, 2);
      const proto = await post(cmpl, '{"prompt":"x","max_tokens":1,"__proto__":{"stream":true}}');
      assert.equal(proto.status, 200);
      assert.equal(proto.headers.get("x-cflow-ignored-fields"), "__proto__");
      assert.equal((await proto.json()).object, "text_completion");
      // Nested unknown fields are named with their path; at most 16 names are kept.
      const many: Record<string, unknown> = { prompt: "x", max_tokens: 1 };
      for (let i = 0; i < 40; i++) many[`f${i}`] = i;
      const m = await post(cmpl, many);
      assert.equal(m.status, 200);
      assert.equal(m.headers.get("x-cflow-ignored-fields")!.split(", ").length, 16);
      await m.body?.cancel();
      const chat = await post(`${server.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "Hi", id: 7 }],
        max_tokens: 1,
      });
      assert.equal(chat.status, 200);
      assert.equal(chat.headers.get("x-cflow-ignored-fields"), "messages[0].id");
      await chat.body?.cancel();
      // Known fields keep their checks.
      await expectError(await post(cmpl, { prompt: "x", temperature: "hot" }), 400, "temperature");

      // Bodies without a JSON type are read as JSON when no web page sent them (no Origin):
      // curl -d's default, text/plain (fetch's default for a string) and no type at all.
      const body = JSON.stringify({ prompt: "Hi", max_tokens: 1 });
      for (const type of ["application/x-www-form-urlencoded", "text/plain;charset=UTF-8", ""]) {
        const headers = new Headers(type === "" ? {} : { "content-type": type });
        const req = new Request(cmpl, { method: "POST", headers, body });
        if (type === "") req.headers.delete("content-type");
        const ok = await fetch(req);
        assert.equal(ok.status, 200, `${type}: ${await ok.clone().text()}`);
        await ok.body?.cancel();
        // A page's cross-site request (it has an Origin) still needs application/json.
        const page = await fetch(cmpl, {
          method: "POST",
          headers: { ...(type === "" ? {} : { "content-type": type }), origin: "http://evil.test" },
          body,
        });
        await expectError(page, 415, null, "unsupported_media_type");
      }
      for (const type of ["multipart/form-data; boundary=x", "text/json", "application/jsonp"]) {
        const bad = await fetch(cmpl, { method: "POST", headers: { "content-type": type }, body });
        await expectError(bad, 415, null, "unsupported_media_type");
      }
    });
    // One log entry per request, with its status, tokens and ignored fields.
    const first = logged[0];
    assert.equal(first.method, "POST");
    assert.equal(first.path, "/v1/completions");
    assert.equal(first.status, 200);
    assert.equal(first.promptTokens !== undefined && first.promptTokens > 0, true);
    assert.equal(first.completionTokens, 2);
    assert.deepEqual(first.ignored, ["n_predict", "cache_prompt"]);
    assert.ok(logged.some((e) => e.status === 415));
    assert.ok(logged.some((e) => e.status === 400 && e.completionTokens === undefined));
  },
});

Deno.test({
  name: "abuse: every bounded field, out of range or mistyped, gets a 400 naming it",
  ignore: !present,
  async fn() {
    const ctx = 128;
    // --strict, so that unknown nested fields (stream_options.bogus) are refused too.
    await withServer({ contextLength: ctx, strict: true }, async (server) => {
      // SmolLM2's vocabulary: the last id detokenizes, the next does not.
      const vocab = 49152;
      assert.equal((await post(`${server.url}/detokenize`, { tokens: [vocab - 1] })).status, 200);
      // [field, value]: each must be refused with param naming the field.
      const bad: [string, unknown][] = [
        ...[0, -1, 1.5, "8", true, [], {}, 1e300, 2 ** 53, ctx + 1, 1e9].map((
          v,
        ): [string, unknown] => ["max_tokens", v]),
        ...[0, 2, -1, 1.5, "1", true, 1e9].map((v): [string, unknown] => ["n", v]),
        ...[-1, 1.5, "5", true, vocab + 1, 1e12].map((v): [string, unknown] => ["top_k", v]),
        ...[0, -0.1, 1.01, "0.5", true, []].map((v): [string, unknown] => ["top_p", v]),
        ...[-0.1, 1.5, "0", false].map((v): [string, unknown] => ["min_p", v]),
        ...[-0.01, 2.01, "0", true, {}].map((v): [string, unknown] => [
          "temperature",
          v,
        ]),
        // Chat takes a boolean, completions an integer in [0, 5]: these are neither.
        ...[-1, 1.5, 6, "x", {}].map((v): [string, unknown] => ["logprobs", v]),
        ...[5, 1, -1, "x", true].map((v): [string, unknown] => ["top_logprobs", v]),
        ...[-1, 2 ** 32, 1.5, "1", true, 1e20].map((v): [string, unknown] => ["seed", v]),
        ...[2.5, -3, "1", true].map((v): [string, unknown] => ["presence_penalty", v]),
        ...[2.5, -3, "1", true].map((v): [string, unknown] => ["frequency_penalty", v]),
        ...[0, -1, 11, "1.1", true].map((v): [string, unknown] => ["repeat_penalty", v]),
        ...[
          ["a", "b", "c", "d", "e"],
          Array(1000).fill("x"),
          [""],
          "",
          [1],
          [["a"]],
          [null],
          "x".repeat(257),
          {},
          42,
          true,
        ].map((v): [string, unknown] => ["stop", v]),
        ...[
          { "-1": 1 },
          { [String(vocab)]: 1 },
          { "99999999999": 1 },
          { "1e3": 1 },
          { "01": 1 },
          { "1.5": 1 },
          { " 1": 1 },
          { "abc": 1 },
          Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), 1])),
          [],
          [1, 2],
          "x",
          5,
          true,
        ].map((v): [string, unknown] => ["logit_bias", v]),
        ...["true", 1, 0, {}].map((v): [string, unknown] => ["stream", v]),
        ...[1, "x".repeat(300), [], true].map((v): [string, unknown] => ["model", v]),
        ...[1, "x".repeat(1000)].map((v): [string, unknown] => ["user", v]),
      ];
      for (const endpoint of ["chat", "completions"] as const) {
        const url = `${server.url}/v1/${endpoint === "chat" ? "chat/completions" : "completions"}`;
        const base: Record<string, unknown> = endpoint === "chat"
          ? { messages: [{ role: "user", content: "Hi" }] }
          : { prompt: "Hi" };
        for (const [field, value] of bad) {
          const e = await expectError(await post(url, { ...base, [field]: value }), 400);
          assert.equal(
            e.param,
            field,
            `${endpoint} ${field}=${JSON.stringify(value)}: ${e.message}`,
          );
        }
        // Values the JSON encoder cannot write, sent raw: 1e400 parses as Infinity.
        for (const field of ["temperature", "top_p", "presence_penalty", "max_tokens", "seed"]) {
          const raw = JSON.stringify(base).slice(0, -1) + `,"${field}":1e400}`;
          await expectError(await post(url, raw), 400, field);
        }
        // Nested fields name their path.
        const nested: [Record<string, unknown>, string][] = [
          [{ stream: true, stream_options: { include_usage: "yes" } }, "include_usage"],
          [{ stream: true, stream_options: { bogus: 1 } }, "stream_options.bogus"],
          [{ stream_options: { include_usage: true } }, "stream_options"],
          [{ stream: true, stream_options: [] }, "stream_options"],
        ];
        for (const [extra, param] of nested) {
          const e = await expectError(await post(url, { ...base, ...extra }), 400);
          assert.ok(
            e.param === param || e.param === `stream_options.${param}`,
            `${JSON.stringify(extra)}: param ${e.param}`,
          );
        }
      }
      // Chat-only fields.
      const chat = `${server.url}/v1/chat/completions`;
      const m = [{ role: "user", content: "Hi" }];
      const chatBad: [Record<string, unknown>, string][] = [
        [{ messages: m, max_completion_tokens: 0 }, "max_completion_tokens"],
        [{ messages: m, max_completion_tokens: "8" }, "max_completion_tokens"],
        [{ messages: m, max_completion_tokens: ctx + 1 }, "max_completion_tokens"],
        [{ messages: m, max_tokens: 4, max_completion_tokens: 4 }, "max_tokens"],
        [{ messages: [] }, "messages"],
        [{ messages: "Hi" }, "messages"],
        [{}, "messages"],
        [{ messages: Array(257).fill(m[0]) }, "messages"],
        [{ messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
        [{ messages: [{ role: "critic", content: "x" }] }, "messages[0].role"],
        [{ messages: [{ role: "user" }] }, "messages[0].content"],
        [{ messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
        [{ messages: [{ role: "user", content: "x", extra: 1 }] }, "messages[0].extra"],
        [
          { messages: [{ role: "user", content: [{ type: "image_url" }] }] },
          "messages[0].content[0].type",
        ],
        [{ messages: [null] }, "messages[0]"],
        [{ prompt: "Hi", messages: m }, "prompt"],
      ];
      for (const [body, param] of chatBad) {
        await expectError(await post(chat, body), 400, param);
      }
      // Chat's log-probability edges are accepted.
      for (const extra of [{ logprobs: true, top_logprobs: 20 }, { logprobs: false }]) {
        const r = await post(chat, { messages: m, max_tokens: 1, ...extra });
        assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${await r.clone().text()}`);
        await r.body?.cancel();
      }
      await expectError(
        await post(chat, { messages: m, logprobs: true, top_logprobs: 21 }),
        400,
        "top_logprobs",
      );
      const cmpl = `${server.url}/v1/completions`;
      for (
        const [body, param] of [
          [{}, "prompt"],
          [{ prompt: ["a", "b"] }, "prompt"],
          [{ prompt: [1, 2, 3] }, "prompt"],
          [{ prompt: 5 }, "prompt"],
          [{ prompt: null }, "prompt"],
          [{ prompt: "x", messages: m }, "messages"],
          [{ prompt: "x", suffix: "y" }, "suffix"],
          [{ prompt: "x", echo: true }, "echo"],
          [{ prompt: "x", best_of: 2 }, "best_of"],
        ] as [Record<string, unknown>, string][]
      ) {
        await expectError(await post(cmpl, body), 400, param);
      }
      for (
        const [path, body, param] of [
          ["/tokenize", { content: 5 }, "content"],
          ["/tokenize", { content: "x", add_special: "yes" }, "add_special"],
          ["/detokenize", { tokens: [-1] }, "tokens"],
          ["/detokenize", { tokens: [1.5] }, "tokens"],
          ["/detokenize", { tokens: [vocab] }, "tokens"],
          ["/detokenize", { tokens: ["1"] }, "tokens"],
          ["/detokenize", { tokens: "1" }, "tokens"],
        ] as [string, Record<string, unknown>, string][]
      ) {
        await expectError(await post(`${server.url}${path}`, body), 400, param);
      }
      // The edges themselves are accepted.
      const edges: Record<string, unknown>[] = [
        { max_tokens: 1, n: 1, top_k: 0, top_p: 1, min_p: 0, temperature: 0, seed: 0 },
        { max_tokens: 1, top_k: vocab, top_p: 1e-9, min_p: 1, temperature: 2, seed: 2 ** 32 - 1 },
        { max_tokens: 1, presence_penalty: -2, frequency_penalty: 2, repeat_penalty: 10 },
        { max_tokens: 1, logprobs: 5, stop: ["a", "b", "c", "d"] },
        { max_tokens: 1, logprobs: 0 },
        { max_tokens: 1, logit_bias: { "0": -100, [String(vocab - 1)]: 100 }, user: "u" },
      ];
      for (const extra of edges) {
        const r = await post(cmpl, { prompt: "Hi", ...extra });
        assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${await r.clone().text()}`);
        await r.body?.cancel();
      }
      assert.deepEqual(await health(server.url), {
        status: "ok",
        slots_idle: 1,
        slots_total: 1,
        queued: 0,
      });
    });
  },
});

Deno.test({
  name: "abuse: a logit_bias value out of range or mistyped gets a 400 naming logit_bias",
  ignore: !present,
  async fn() {
    await withServer({ contextLength: 128 }, async (server) => {
      for (const path of ["/v1/chat/completions", "/v1/completions"]) {
        const base = path.includes("chat")
          ? { messages: [{ role: "user", content: "Hi" }] }
          : { prompt: "Hi" };
        for (const v of [101, -101, "1", true, [], {}]) {
          const e = await expectError(
            await post(`${server.url}${path}`, { ...base, logit_bias: { "5": v } }),
            400,
          );
          // The token id alone ("5") names no field a client sent.
          assert.ok(
            e.param === "logit_bias" || e.param === "logit_bias.5",
            `${path} logit_bias {"5": ${JSON.stringify(v)}}: param ${e.param} (${e.message})`,
          );
        }
      }
    });
  },
});

// ---------------------------------------------------------------------------------------------

/** What a stream delivered. */
interface Streamed {
  text: string;
  /** `data: [DONE]` arrived. */
  done: boolean;
  finish: string | null;
  /** Content events. */
  pieces: number;
}

/**
 * Reads an SSE response byte by byte: every event must decode as strict UTF-8 and parse as
 * JSON, and every text piece must be well-formed (no lone surrogate). `onPiece` may stop the
 * read early (return true) after cutting the connection.
 */
async function readSse(
  r: Response,
  onPiece?: (pieces: number) => boolean | Promise<boolean>,
): Promise<Streamed> {
  assert.equal(r.status, 200, r.status === 200 ? "" : await r.text());
  assert.match(r.headers.get("content-type") ?? "", /^text\/event-stream/);
  const reader = r.body!.getReader();
  let buffer = new Uint8Array(0);
  const out: Streamed = { text: "", done: false, finish: null, pieces: 0 };
  while (true) {
    const { value, done } = await reader.read();
    if (done) return out;
    const joined = new Uint8Array(buffer.length + value.length);
    joined.set(buffer);
    joined.set(value, buffer.length);
    buffer = joined;
    let i;
    while ((i = buffer.findIndex((b, k) => b === 0x0a && buffer[k + 1] === 0x0a)) >= 0) {
      const event = strict.decode(buffer.subarray(0, i)); // throws on broken UTF-8
      buffer = buffer.subarray(i + 2);
      assert.ok(event.startsWith("data: "), event);
      const data = event.slice(6);
      if (data === "[DONE]") {
        out.done = true;
        continue;
      }
      const chunk = JSON.parse(data);
      assert.equal(chunk.error, undefined, data);
      const choice = chunk.choices[0];
      if (choice === undefined) continue; // the usage chunk
      const piece: string = choice.delta?.content ?? choice.text ?? "";
      assert.ok(piece.isWellFormed(), `a lone surrogate in ${JSON.stringify(piece)}`);
      out.finish = choice.finish_reason ?? out.finish;
      if (piece !== "") {
        out.text += piece;
        out.pieces++;
        if (onPiece !== undefined && await onPiece(out.pieces)) {
          await reader.cancel().catch(() => {});
          return out;
        }
      }
    }
  }
}

/** The whole (non-streamed) text of a chat or text completion. */
async function wholeText(r: Response): Promise<{ text: string; finish: string; tokens: number }> {
  const raw = strict.decode(new Uint8Array(await r.arrayBuffer()));
  assert.equal(r.status, 200, raw);
  const body = JSON.parse(raw);
  const c = body.choices[0];
  const text: string = c.message?.content ?? c.text;
  assert.ok(text.isWellFormed());
  return { text, finish: c.finish_reason, tokens: body.usage.completion_tokens };
}

Deno.test({
  name: "abuse: generated text never splits a UTF-8 sequence in SSE; streamed equals whole",
  ignore: !present,
  async fn() {
    await withServer({ contextLength: 256 }, async (server) => {
      const u = server.url;
      // The crab is four bytes over three byte-level tokens: F0 9F | A6 | 80.
      const crab = (await (await post(`${u}/tokenize`, { content: "🦀" })).json()).tokens;
      assert.equal(crab.length, 3);
      const singles: string[] = [];
      for (const id of crab) {
        singles.push((await (await post(`${u}/detokenize`, { tokens: [id] })).json()).content);
      }
      assert.ok(singles.every((s) => s === "\ufffd"), "each piece alone is no text");
      const bias = (ids: number[], v: number) => Object.fromEntries(ids.map((id) => [id, v]));
      const cases: [string, string, Record<string, unknown>, (text: string) => void][] = [
        // Whole crabs, each held back until its last byte: the stream has them intact; the
        // budget ends inside the sixth, whose first bytes come out (flushed) as U+FFFD.
        ["completions", "/v1/completions", {
          prompt: "Crabs: 🦀 🦀 🦀 🦀 🦀 🦀",
          logit_bias: bias(crab, 4),
          max_tokens: 16,
        }, (t) => assert.ok(t.includes("🦀🦀") && t.endsWith("\ufffd"), JSON.stringify(t))],
        ["chat", "/v1/chat/completions", {
          messages: [{ role: "user", content: "Reply with crab emoji only: 🦀🦀🦀🦀" }],
          logit_bias: bias(crab, 4),
        }, (t) => assert.ok(t.includes("🦀"), `no crab in ${JSON.stringify(t)}`)],
        // Japanese, unbiased: characters split over byte-level tokens, all whole (but for one
        // the budget may cut at the very end).
        ["japanese", "/v1/completions", { prompt: "日本語の文章です。日本語" }, (t) =>
          assert.ok(
            /[\u3040-\u30ff\u4e00-\u9fff]/.test(t) && !t.slice(0, -1).includes("\ufffd"),
            JSON.stringify(t),
          )],
        // Only lead bytes (F0 9F), then only continuation bytes (A6): invalid sequences become
        // U+FFFD the same way streamed and whole, and never reach the client as raw bytes.
        ["lead bytes", "/v1/completions", {
          prompt: "🦀🦀",
          logit_bias: bias([crab[0]], 100),
        }, (t) => assert.ok(/^\ufffd+$/.test(t), JSON.stringify(t))],
        ["continuation bytes", "/v1/completions", {
          prompt: "🦀🦀",
          logit_bias: bias([crab[1]], 100),
        }, (t) => assert.ok(/^\ufffd+$/.test(t), JSON.stringify(t))],
        // The budget ends mid-crab after one whole one.
        ["cut mid-sequence", "/v1/completions", {
          prompt: "Crabs: 🦀 🦀 🦀 🦀 🦀 🦀",
          logit_bias: bias(crab, 4),
          max_tokens: 5,
        }, (t) => assert.ok(t.includes("🦀") && t.endsWith("\ufffd"), JSON.stringify(t))],
      ];
      for (const [what, path, body, check] of cases) {
        const request = { max_tokens: 24, temperature: 0, ...body };
        const whole = await wholeText(await post(`${u}${path}`, request));
        const streamed = await readSse(await post(`${u}${path}`, { ...request, stream: true }));
        assert.ok(streamed.done, what);
        assert.equal(streamed.text, whole.text, what);
        assert.equal(streamed.finish, whole.finish, what);
        check(whole.text);
      }
    });
  },
});

Deno.test({
  name: "abuse: prompts beyond the context get 400; max_tokens <= context - prompt is the contract",
  ignore: !present,
  async fn() {
    const ctx = 128;
    await withServer({ contextLength: ctx }, async (server) => {
      const u = server.url;
      const cmpl = `${u}/v1/completions`;
      const count = async (text: string) =>
        (await (await post(`${u}/tokenize`, { content: text, add_special: true })).json()).tokens
          .length;
      /** A prompt of exactly n tokens. */
      const promptOf = async (n: number) => {
        let p = "word ".repeat(n);
        while ((await count(p)) > n) p = p.slice(0, -5);
        while ((await count(p)) < n) p += "x";
        assert.equal(await count(p), n);
        return p;
      };
      // Far beyond, both endpoints, streamed or not: a JSON 400 before any event.
      for (const stream of [false, true]) {
        const e = await expectError(
          await post(cmpl, { prompt: "word ".repeat(5000), stream }),
          400,
          "prompt",
          "context_length_exceeded",
        );
        assert.match(e.message, /\d+ tokens.*128/);
        await expectError(
          await post(`${u}/v1/chat/completions`, {
            messages: [{ role: "user", content: "word ".repeat(5000) }],
            stream,
          }),
          400,
          "messages",
          "context_length_exceeded",
        );
      }
      // The prompt fills the context exactly: no room for one token.
      await expectError(
        await post(cmpl, { prompt: await promptOf(ctx) }),
        400,
        "prompt",
        "context_length_exceeded",
      );
      // 100 prompt tokens leave 28: 29 is refused, 28 is served in full (end of text banned).
      const p = await promptOf(100);
      const noEnd = { "0": -100, "1": -100, "2": -100 };
      const e = await expectError(
        await post(cmpl, { prompt: p, max_tokens: ctx - 100 + 1 }),
        400,
        "max_tokens",
        "context_length_exceeded",
      );
      assert.match(e.message, /28/);
      const full = await wholeText(
        await post(cmpl, { prompt: p, max_tokens: ctx - 100, temperature: 0, logit_bias: noEnd }),
      );
      assert.equal(full.tokens, ctx - 100);
      assert.equal(full.finish, "length");
      // Without max_tokens the budget is what the context has left.
      const rest = await wholeText(
        await post(cmpl, { prompt: p, temperature: 0, logit_bias: noEnd }),
      );
      assert.equal(rest.tokens, ctx - 100);
      assert.equal(rest.text, full.text);
      const last = await wholeText(
        await post(cmpl, { prompt: await promptOf(ctx - 1), temperature: 0, logit_bias: noEnd }),
      );
      assert.equal(last.tokens, 1);
      assert.equal(last.finish, "length");
    });
  },
});

// ---------------------------------------------------------------------------------------------

/** The four greedy requests the burst mixes: two chats and two text completions. */
const VARIANTS: { path: string; body: Record<string, unknown> }[] = [
  {
    path: "/v1/chat/completions",
    body: { messages: [{ role: "user", content: "Name a fruit." }] },
  },
  { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Say hello." }] } },
  { path: "/v1/completions", body: { prompt: "The capital of France is" } },
  { path: "/v1/completions", body: { prompt: "One, two, three," } },
].map((v) => ({ path: v.path, body: { ...v.body, temperature: 0, seed: 7, max_tokens: 8 } }));

type Fate = "survive" | "abort-after-delay" | "abort-after-pieces" | "cancel-after-pieces";

/** One stream of the burst; never throws for a stream meant to be cut. */
async function burstStream(
  server: Server,
  variant: number,
  fate: Fate,
  delayMs: number,
  pieces: number,
): Promise<Streamed | "cut"> {
  const abort = new AbortController();
  const v = VARIANTS[variant];
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (fate === "abort-after-delay") timer = setTimeout(() => abort.abort(), delayMs);
  try {
    const r = await post(`${server.url}${v.path}`, { ...v.body, stream: true }, {}, abort.signal);
    const s = await readSse(r, (n) => {
      if (fate === "abort-after-pieces" && n >= pieces) {
        abort.abort();
        return true;
      }
      return fate === "cancel-after-pieces" && n >= pieces; // readSse cancels the body
    });
    return fate === "survive" ? s : "cut";
  } catch (error) {
    if (fate === "survive") throw error;
    return "cut";
  } finally {
    clearTimeout(timer);
  }
}

Deno.test({
  name: "abuse: 64 concurrent streams, cut at random points: the server stays up, slots and " +
    "memory come back, survivors match their solo runs",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2, contextLength: 256 }, async (server) => {
      const solo: string[] = [];
      for (const v of VARIANTS) {
        solo.push((await wholeText(await post(`${server.url}${v.path}`, v.body))).text);
      }
      const seed = 0x5eed_abcd;
      const random = rng(seed);
      const plan = Array.from({ length: 64 }, (_, i) => {
        const x = random();
        const fate: Fate = x < 0.4
          ? "survive"
          : x < 0.6
          ? "abort-after-delay"
          : x < 0.8
          ? "abort-after-pieces"
          : "cancel-after-pieces";
        return {
          variant: i % VARIANTS.length,
          fate,
          delay: random() * 400,
          pieces: 1 + random() * 5,
        };
      });
      const rssBefore = Deno.memoryUsage().rss;
      const burst = async () => {
        const t = performance.now();
        const results = await Promise.all(
          plan.map((p) => burstStream(server, p.variant, p.fate, p.delay, Math.floor(p.pieces))),
        );
        const ms = performance.now() - t;
        let survivors = 0;
        results.forEach((r, i) => {
          if (plan[i].fate !== "survive") return;
          survivors++;
          assert.ok(r !== "cut" && r.done, `stream ${i} finished (seed ${seed})`);
          assert.equal(
            r.text,
            solo[plan[i].variant],
            `stream ${i} equals its solo run (seed ${seed})`,
          );
        });
        const idleMs = await waitIdle(server, 2);
        return { ms, survivors, idleMs };
      };
      const first = await burst();
      const rssFirst = Deno.memoryUsage().rss;
      const second = await burst();
      const rssSecond = Deno.memoryUsage().rss;
      const mb = (b: number) => (b / (1 << 20)).toFixed(1);
      console.log(
        `64 streams (seed ${seed}, ${first.survivors} survive): ${first.ms.toFixed(0)} ms then ` +
          `${second.ms.toFixed(0)} ms; idle ${first.idleMs.toFixed(0)}/${
            second.idleMs.toFixed(0)
          } ` +
          `ms after; RSS ${mb(rssBefore)} -> ${mb(rssFirst)} -> ${mb(rssSecond)} MiB`,
      );
      // Bounded memory: a burst of 64 streams costs far less than one more model instance, and
      // the same burst again does not keep growing (a leak per request would).
      assert.ok(
        rssFirst - rssBefore < 256 << 20,
        `first burst grew RSS by ${mb(rssFirst - rssBefore)} MiB`,
      );
      assert.ok(
        rssSecond - rssFirst < 128 << 20,
        `second burst grew RSS by ${mb(rssSecond - rssFirst)} MiB`,
      );
      assert.deepEqual(await health(server.url), {
        status: "ok",
        slots_idle: 2,
        slots_total: 2,
        queued: 0,
      });
      for (const [i, v] of VARIANTS.entries()) {
        const again = await readSse(
          await post(`${server.url}${v.path}`, { ...v.body, stream: true }),
        );
        assert.equal(again.text, solo[i]);
      }
    });
  },
});

Deno.test({
  name: "abuse: a streaming client that disconnects cancels only its own generation",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2, contextLength: 2048 }, async (server) => {
      const u = server.url;
      // End-of-text banned: only a disconnect can end this one before 2000 tokens.
      const long = {
        prompt: "Once upon a time",
        temperature: 0,
        max_tokens: 2000,
        logit_bias: { "0": -100, "1": -100, "2": -100 },
        stream: true,
      };
      const short = { ...VARIANTS[0].body, max_tokens: 24 };
      const solo = (await wholeText(await post(`${u}${VARIANTS[0].path}`, short))).text;

      /** Starts a long stream; resolves once it has produced `pieces` pieces, then runs on. */
      const startLong = async (pieces: number) => {
        const abort = new AbortController();
        let started!: () => void;
        const running = new Promise<void>((r) => started = r);
        const read = post(`${u}/v1/completions`, long, {}, abort.signal)
          .then((r) =>
            readSse(r, (n) => {
              if (n === pieces) started();
              return false;
            })
          )
          .catch((e) => e);
        await running;
        return { abort: () => abort.abort(), read };
      };

      // 1. A and B run side by side; A's client leaves; B is untouched, A's slot comes back.
      const a = await startLong(3);
      const b = post(`${u}${VARIANTS[0].path}`, { ...short, stream: true }).then(readSse);
      await new Promise((r) => setTimeout(r, 50));
      a.abort();
      const freedMs = await waitIdle(server, 2, 5000).catch(() => Infinity);
      const bDone = await b;
      assert.ok(bDone.done);
      assert.equal(bDone.text, solo, "the neighbour's output is unchanged");
      assert.ok((await a.read) instanceof Error, "A's stream was cut");
      // (Both slots: A's, cut, and B's, done; A alone would run 2000 tokens, tens of seconds.)
      assert.ok(freedMs < 4000, `the slots came back after ${freedMs} ms`);

      // 2. Both slots busy with long streams, C waits in the queue. The first long client
      //    leaves: C gets that slot and finishes at once, while the other long one runs on.
      const x = await startLong(2);
      const y = await startLong(2);
      const c = post(`${u}${VARIANTS[0].path}`, { ...short, stream: true }).then(readSse);
      let h: Record<string, unknown> = {};
      for (let t = 0; t < 200 && h.queued !== 1; t++) {
        h = await health(u);
        if (h.queued !== 1) await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(h.queued, 1, "C waits for a slot");
      const cutAt = performance.now();
      x.abort();
      const cDone = await c;
      const cMs = performance.now() - cutAt;
      assert.ok(cDone.done);
      assert.equal(cDone.text, solo);
      h = await health(u);
      assert.equal(h.slots_idle, 1, `Y still runs: ${JSON.stringify(h)}`);
      y.abort();
      const yMs = await waitIdle(server, 2, 5000);
      assert.ok((await x.read) instanceof Error && (await y.read) instanceof Error);
      console.log(
        `both slots back in ${freedMs.toFixed(0)} ms after A left; C served ${
          cMs.toFixed(0)
        } ms after X left; ` +
          `Y's slot back in ${yMs.toFixed(0)} ms`,
      );
      // 2000 tokens take tens of seconds here: C did not wait for X to run to its budget.
      assert.ok(cMs < 5000, `C took ${cMs} ms after X left`);
    });
  },
});

Deno.test({
  name: "abuse: a flood beyond the queue gets 503 JSON (queue_full), never a hang",
  ignore: !present,
  async fn() {
    await withServer({ parallel: 1, maxQueue: 2, contextLength: 256 }, async (server) => {
      const v = VARIANTS[2];
      const body = { ...v.body, max_tokens: 16, logit_bias: { "0": -100, "1": -100, "2": -100 } };
      const responses = await Promise.all(
        Array.from({ length: 12 }, () => post(`${server.url}${v.path}`, body)),
      );
      let served = 0;
      let refused = 0;
      for (const r of responses) {
        if (r.status === 200) {
          served++;
          assert.equal((await wholeText(r)).tokens, 16);
        } else {
          refused++;
          await expectError(r, 503, null, "queue_full");
        }
      }
      assert.ok(
        served >= 1 && served <= 12 && refused >= 1,
        `${served} served, ${refused} refused`,
      );
      await waitIdle(server, 1);
    });
  },
});
