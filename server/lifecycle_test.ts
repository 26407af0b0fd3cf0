/**
 * The server as a replica behind a load balancer sees it: Prometheus
 * metrics that move as requests are served (parsed), `/health` through
 * loading, ready and draining, and a SIGTERM drain of the real `./cflow
 * serve` process during four streams (all finish in full, a new request
 * gets 503, the process exits 0).
 *
 * @module
 */
import assert from "node:assert/strict";
import { model, post, present, withServer } from "./_test_server.ts";
import { startServer } from "./mod.ts";
import { TEST_CACHE_ENV } from "../tests/util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** One sample of the text format: name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Parses Prometheus' text exposition format (what a scraper reads): every
 * sample line `name{label="v",...} value`, every `# TYPE` declared once and
 * before its samples. Throws on a line it cannot read.
 */
function parseMetrics(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ")) continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$/.exec(line);
    if (type) {
      assert.ok(!types.has(type[1]), `${type[1]} declared twice`);
      types.set(type[1], type[2]);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `unreadable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const part of (m[2] ?? "").split(",").filter((p) => p !== "")) {
      const l = /^([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"$/.exec(part);
      assert.ok(l, `unreadable label ${part} in ${line}`);
      labels[l[1]] = l[2];
    }
    const value = m[3] === "+Inf" ? Infinity : Number(m[3]);
    assert.ok(!Number.isNaN(value), `value of ${line}`);
    const family = m[1].replace(/_(bucket|sum|count)$/, "");
    assert.ok(types.has(m[1]) || types.has(family), `${m[1]} has no # TYPE before it`);
    samples.push({ name: m[1], labels, value });
  }
  return { samples, types };
}

/** The value of the sample `name` whose labels include `labels` (0 if absent). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const s = samples.find((x) =>
    x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v)
  );
  return s?.value ?? 0;
}

async function scrape(url: string): Promise<Sample[]> {
  const r = await fetch(`${url}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
  const { samples, types } = parseMetrics(await r.text());
  assert.equal(types.get("cflow_requests_total"), "counter");
  assert.equal(types.get("cflow_time_to_first_token_seconds"), "histogram");
  assert.equal(types.get("cflow_queue_depth"), "gauge");
  // Every histogram: cumulative buckets, +Inf equal to the count.
  for (const [name, type] of types) {
    if (type !== "histogram") continue;
    const buckets = samples.filter((s) => s.name === `${name}_bucket`);
    for (let i = 1; i < buckets.length; i++) {
      assert.ok(buckets[i].value >= buckets[i - 1].value, name);
    }
    assert.equal(buckets.at(-1)!.labels.le, "+Inf");
    assert.equal(buckets.at(-1)!.value, value(samples, `${name}_count`), name);
  }
  return samples;
}

Deno.test({
  name: "metrics: counters and histograms move as requests are served (parsed, not grepped)",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      const before = await scrape(server.url);
      assert.equal(value(before, "cflow_slots"), 2);
      assert.equal(value(before, "cflow_ready"), 1);
      assert.ok(value(before, "cflow_model_load_seconds") > 0);
      const chat = `${server.url}/v1/chat/completions`;
      const ask = {
        messages: [{ role: "user", content: "Name a fruit." }],
        temperature: 0,
        max_tokens: 12,
      };
      const a = await (await post(chat, ask)).json();
      // The same conversation again: its prompt comes from the KV cache.
      const b = await (await post(chat, ask)).json();
      const streamed = await post(chat, {
        ...ask,
        stream: true,
        stream_options: { include_usage: true },
      });
      const text = await streamed.text();
      const usage = JSON.parse(
        text.split("\n").filter((l) => l.startsWith("data: {") && l.includes('"usage":{')).at(-1)!
          .slice(6),
      ).usage;
      assert.equal((await fetch(`${server.url}/no/such/path`)).status, 404);
      const after = await scrape(server.url);
      const delta = (name: string, labels: Record<string, string> = {}) =>
        value(after, name, labels) - value(before, name, labels);
      assert.equal(
        delta("cflow_requests_total", { endpoint: "/v1/chat/completions", status: "200" }),
        3,
      );
      assert.equal(delta("cflow_requests_total", { endpoint: "other", status: "404" }), 1);
      assert.equal(delta("cflow_generations_total"), 3);
      const generated = a.usage.completion_tokens + b.usage.completion_tokens +
        usage.completion_tokens;
      assert.equal(delta("cflow_generated_tokens_total"), generated);
      assert.equal(
        delta("cflow_prompt_tokens_total"),
        a.usage.prompt_tokens + b.usage.prompt_tokens + usage.prompt_tokens,
      );
      assert.ok(delta("cflow_prompt_cache_hits_total") >= 1, "the repeated prompt hit the cache");
      assert.equal(
        delta("cflow_prompt_cache_tokens_total"),
        b.usage.prompt_tokens_details.cached_tokens + usage.prompt_tokens_details.cached_tokens,
      );
      assert.equal(delta("cflow_time_to_first_token_seconds_count"), 3);
      // One inter-token gap per generated token after each generation's first.
      assert.equal(delta("cflow_inter_token_latency_seconds_count"), generated - 3);
      assert.ok(delta("cflow_time_to_first_token_seconds_sum") > 0);
      assert.equal(value(after, "cflow_queue_depth"), 0);
      assert.equal(value(after, "cflow_slots_busy"), 0);
      assert.ok(value(after, "cflow_kv_cache_tokens") > 0);
    });
  },
});

Deno.test({
  name: "health: 503 while the model loads, 200 when ready, /health/live 200 throughout",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    let seen:
      | { health: number; status: string; live: number; completion: number; code: string }
      | undefined;
    const server = await startServer({
      model: await model(),
      port: 0,
      onListen: async (url) => {
        // Bound, and the model not loaded yet.
        const h = await fetch(`${url}/health`);
        const live = await fetch(`${url}/health/live`);
        await live.body?.cancel();
        const c = await post(`${url}/v1/completions`, { prompt: "Hi", max_tokens: 2 });
        seen = {
          health: h.status,
          status: (await h.json()).status,
          live: live.status,
          completion: c.status,
          code: (await c.json()).error.code,
        };
        assert.equal(h.headers.get("retry-after"), "1");
      },
    });
    try {
      assert.deepEqual(seen, {
        health: 503,
        status: "loading",
        live: 200,
        completion: 503,
        code: "loading",
      });
      const h = await fetch(`${server.url}/health`);
      assert.equal(h.status, 200);
      assert.equal((await h.json()).status, "ok");
    } finally {
      await server.close();
    }
  },
});

/** Reads an SSE chat stream to its end: the text, whether [DONE] came, the last finish reason. */
async function readChat(body: ReadableStream<Uint8Array>, onFirst?: () => void) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let text = "";
  let done = false;
  let finish: string | null = null;
  let error: string | undefined;
  let first = true;
  while (true) {
    const r = await reader.read();
    if (r.done) break;
    buffer += r.value;
    let i;
    while ((i = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      if (!event.startsWith("data: ")) continue;
      const data = event.slice(6);
      if (data === "[DONE]") {
        done = true;
        continue;
      }
      const j = JSON.parse(data);
      if (j.error) error = j.error.code;
      for (const c of j.choices ?? []) {
        text += c.delta?.content ?? "";
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (first) {
        first = false;
        onFirst?.();
      }
    }
  }
  return { text, done, finish, error };
}

Deno.test({
  name: "SIGTERM drains ./cflow serve: 4 streams finish in full, a new request gets 503, exit 0",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const child = new Deno.Command(`${ROOT}cflow`, {
      args: ["serve", "--port", "0", "--parallel", "2", "--json", "--drain-timeout", "60"],
      env: { CFLOW_KERNELS: "", CFLOW_THREADS: "", CFLOW_KERNEL_VARIANT: "", ...TEST_CACHE_ENV },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = child.stderr.pipeThrough(new TextDecoderStream());
    const logs: string[] = [];
    const logDone = (async () => {
      for await (const chunk of stderr) logs.push(chunk);
    })();
    try {
      const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let head = "";
      while (!head.includes("\n")) {
        const r = await lines.read();
        assert.ok(!r.done, `serve printed no listening line: ${logs.join("")}`);
        head += r.value;
      }
      const url: string = JSON.parse(head.split("\n")[0]).url;
      const chat = `${url}/v1/chat/completions`;
      const prompts = [
        "Count from one to twenty.",
        "Name ten animals.",
        "List the planets.",
        "Say hello.",
      ];
      const ask = (content: string, stream: boolean) => ({
        messages: [{ role: "user", content }],
        temperature: 0,
        max_tokens: 64,
        ignore_eos: true,
        stream,
      });
      // Each prompt's whole answer, served before the drain.
      const solo: string[] = [];
      for (const p of prompts) {
        solo.push((await (await post(chat, ask(p, false))).json()).choices[0].message.content);
      }
      // Four streams on two slots (two run, two wait in the queue); SIGTERM once the first speaks.
      let signalled!: () => void;
      const started = new Promise<void>((resolve) => signalled = resolve);
      const streams = prompts.map(async (p, i) => {
        const r = await post(chat, ask(p, true));
        assert.equal(r.status, 200);
        return await readChat(r.body!, i === 0 ? signalled : undefined);
      });
      await started;
      // Every request taken before the signal: two generating, two in the queue.
      for (let t = 0; t < 500; t++) {
        const h = await (await fetch(`${url}/health`)).json();
        if (h.slots_idle === 0 && h.queued === 2) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      child.kill("SIGTERM");
      // Draining: readiness goes 503, new generations get 503 with Retry-After, liveness stays 200.
      let health = 200;
      for (let t = 0; t < 200 && health === 200; t++) {
        const h = await fetch(`${url}/health`);
        health = h.status;
        await h.body?.cancel();
        if (health === 200) await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(health, 503);
      const refused = await post(chat, ask("Hi", false));
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get("retry-after"), "1");
      assert.equal((await refused.json()).error.code, "draining");
      const live = await fetch(`${url}/health/live`);
      assert.equal(live.status, 200);
      await live.body?.cancel();
      const results = await Promise.all(streams);
      for (const [i, r] of results.entries()) {
        assert.ok(r.done && r.error === undefined, `stream ${i}: ${JSON.stringify(r)}`);
        assert.equal(r.finish, "length", `stream ${i}`);
        assert.equal(r.text, solo[i], `stream ${i} is its whole answer`);
      }
      const status = await child.status;
      await logDone;
      assert.equal(status.code, 0, logs.join(""));
      assert.match(logs.join(""), /draining/);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
    }
  },
});

Deno.test({
  name: "drain: a generation still running at the timeout ends with a server_shutdown error",
  ignore: !present,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startServer({ model: await model(), port: 0 });
    let closed = false;
    try {
      const r = await post(`${server.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "Write a long story." }],
        temperature: 0,
        max_tokens: 3000,
        ignore_eos: true,
        stream: true,
      });
      let first!: () => void;
      const spoke = new Promise<void>((resolve) => first = resolve);
      const reading = readChat(r.body!, first);
      await spoke;
      const { ended } = await server.drain(50);
      closed = true;
      assert.equal(ended, 1);
      const got = await reading;
      assert.deepEqual([got.error, got.done, got.finish], ["server_shutdown", true, null]);
    } finally {
      if (!closed) await server.close();
    }
  },
});
