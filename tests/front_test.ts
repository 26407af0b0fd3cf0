/**
 * The front (deploy/run.sh: nginx before two `cflow serve` replicas) under
 * load, on loopback: 200 requests from 16 concurrent clients holding
 * conversations (each turn sends the conversation so far, with its
 * `X-Session-Id`), some clients disconnecting at random, and one replica
 * killed (SIGKILL) mid-run and restarted by the supervisor. Every request
 * must either complete with the answer it gets alone or fail with a clear
 * error status, none may hang, requests not started on the killed replica
 * go to the other one, and while both replicas are up at least 90% of
 * follow-up turns must find their conversation in a warm prompt cache.
 * Ignored, with the reason printed, where nginx cannot be found or
 * installed (scripts/install-nginx.sh).
 *
 * @module
 */
import assert from "node:assert/strict";
import { installedTool } from "./util/installed_tool.ts";
import { smollm2Present, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;

const nginx = smollm2Present
  ? installedTool("install-nginx.sh")
  : { why: "the test model is not fetched" };
if (nginx.path === undefined) console.log(`front test ignored: ${nginx.why}`);

/** A free loopback port (bound and released). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A deterministic pseudo-random sequence. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const OPENERS = [
  "Name a fruit.",
  "Name a color.",
  "Name a city.",
  "Name an animal.",
  "Name a planet.",
  "Name a tree.",
  "Name a river.",
  "Name a flower.",
];
const FOLLOW_UPS = ["Why that one?", "Say it again in one word."];
type Message = { role: string; content: string };

Deno.test({
  name:
    "front: nginx before 2 replicas, 200 requests from 16 clients, one replica killed and restarted",
  ignore: nginx.path === undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const port = freePort();
    const first = freePort();
    const front = new Deno.Command("bash", {
      args: [
        `${ROOT}deploy/run.sh`,
        "--replicas",
        "2",
        "--port",
        String(port),
        "--first-port",
        String(first),
        "--",
        "--parallel",
        "16",
        "--ctx",
        "512",
        "--drain-timeout",
        "5",
      ],
      env: { ...TEST_CACHE_ENV, CFLOW_THREADS: "1", CFLOW_KERNELS: "", CFLOW_KERNEL_VARIANT: "" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const log: string[] = [];
    const logging = (async () => {
      for await (const c of front.stderr.pipeThrough(new TextDecoderStream())) log.push(c);
    })();
    let exited = false;
    try {
      const reader = front.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let line = "";
      while (!line.includes("\n")) {
        const r = await reader.read();
        assert.ok(!r.done, `the front did not start: ${log.join("").slice(-2000)}`);
        line += r.value;
      }
      const m = /^front: listening on (\S+) .*process ids in (\S+)\)$/m.exec(line);
      assert.ok(m, line);
      const [, url, run] = m;
      const chat = `${url}/v1/chat/completions`;
      const ask = (messages: Message[], session: string, signal?: AbortSignal) =>
        fetch(chat, {
          method: "POST",
          headers: { "content-type": "application/json", "x-session-id": session },
          body: JSON.stringify({ messages, temperature: 0, max_tokens: 12 }),
          signal,
        });
      // Each conversation's answers alone: straight to replica 0, one request at a time.
      const solo = new Map<string, string>();
      const conversation = (o: number, turns: number, answers: (m: Message[]) => string) => {
        const messages: Message[] = [{ role: "user", content: OPENERS[o] }];
        for (let t = 0; t < turns; t++) {
          messages.push({ role: "assistant", content: answers(messages) });
          messages.push({ role: "user", content: FOLLOW_UPS[t] });
        }
        return messages;
      };
      for (let o = 0; o < OPENERS.length; o++) {
        for (let turns = 0; turns <= FOLLOW_UPS.length; turns++) {
          const messages = conversation(o, turns, (m) => solo.get(JSON.stringify(m))!);
          const r = await fetch(`http://127.0.0.1:${first}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ messages, temperature: 0, max_tokens: 12 }),
          });
          solo.set(JSON.stringify(messages), (await r.json()).choices[0].message.content);
        }
      }

      // 16 clients, 200 requests; each client holds a conversation of up to three turns, then
      // starts another (a new session id).
      const total = 200;
      let issued = 0;
      let done = 0;
      let killedAt = -1;
      let bothUp = true;
      const outcome = { completed: 0, failed: 0, disconnected: 0, followUps: 0, warm: 0 };
      const failures: string[] = [];
      const clients = Array.from({ length: 16 }, async (_, c) => {
        const random = rng(1000 + c);
        let session = 0;
        while (issued < total) {
          const o = (c + session * 3) % OPENERS.length;
          const id = `client${c}-conversation${session++}`;
          for (let turns = 0; turns <= FOLLOW_UPS.length && issued < total; turns++) {
            issued++;
            const messages = conversation(o, turns, (m) => solo.get(JSON.stringify(m))!);
            const want = solo.get(JSON.stringify(messages))!;
            const abort = new AbortController();
            const leaves = random() < 0.1;
            const timer = setTimeout(() => abort.abort(), leaves ? 5 + random() * 80 : 60_000);
            const upBefore = bothUp;
            try {
              const r = await ask(messages, id, abort.signal);
              let body;
              try {
                body = await r.json();
              } catch (error) {
                // A response the killed replica had begun: nginx relayed its status line and
                // then the connection dropped. The client sees a clear error, as with a 502.
                if (abort.signal.aborted || killedAt < 0) throw error;
                outcome.failed++;
                failures.push(`${r.status}, then the body cut off: ${(error as Error).message}`);
                continue;
              }
              if (r.status === 200) {
                assert.equal(body.choices[0].message.content, want, `${id} turn ${turns}`);
                outcome.completed++;
                if (turns > 0 && upBefore && bothUp) {
                  outcome.followUps++;
                  if (body.usage.prompt_tokens_details.cached_tokens > 0) outcome.warm++;
                }
              } else {
                // A clear error: an HTTP error status with a JSON or nginx error page.
                assert.ok(r.status >= 500, `${id}: status ${r.status}`);
                outcome.failed++;
                failures.push(`${r.status} ${JSON.stringify(body).slice(0, 120)}`);
              }
            } catch (error) {
              if (!abort.signal.aborted) throw error;
              if (!leaves) throw new Error(`${id} turn ${turns} hung for 60 s`);
              outcome.disconnected++;
              break; // the client left: its conversation ends
            } finally {
              clearTimeout(timer);
              done++;
            }
            if (done >= 70 && killedAt < 0) {
              // Mid-run: SIGKILL replica 1; its supervisor restarts it.
              killedAt = done;
              bothUp = false;
              const pid = Number(await Deno.readTextFile(`${run}/replica1.pid`));
              Deno.kill(pid, "SIGKILL");
              void (async () => {
                for (let t = 0; t < 600; t++) {
                  await new Promise((r) => setTimeout(r, 100));
                  const p = Number(await Deno.readTextFile(`${run}/replica1.pid`).catch(() => "0"));
                  if (p === pid || p === 0) continue;
                  const h = await fetch(`http://127.0.0.1:${first + 1}/health`).catch(() =>
                    undefined
                  );
                  await h?.body?.cancel();
                  if (h?.status === 200) return void (bothUp = true);
                }
              })();
            }
          }
        }
      });
      const start = performance.now();
      await Promise.all(clients);
      const seconds = (performance.now() - start) / 1000;
      console.log(
        `front: ${total} requests in ${seconds.toFixed(1)} s: ${outcome.completed} completed, ` +
          `${outcome.failed} failed (${
            failures.slice(0, 3).join("; ")
          }), ${outcome.disconnected} ` +
          `left; warm follow-ups ${outcome.warm} of ${outcome.followUps} while both replicas were up; ` +
          `replica 1 killed after ${killedAt} requests`,
      );
      assert.equal(outcome.completed + outcome.failed + outcome.disconnected, total);
      assert.ok(killedAt > 0);
      // Requests not started on the killed replica went to the other one: few failures at most.
      assert.ok(outcome.failed <= 16, `${outcome.failed} failed`);
      assert.ok(outcome.followUps >= 40, `${outcome.followUps} follow-ups measured`);
      assert.ok(
        outcome.warm >= 0.9 * outcome.followUps,
        `warm ${outcome.warm} of ${outcome.followUps}`,
      );
      // The killed replica came back.
      const back = await fetch(`http://127.0.0.1:${first + 1}/health`);
      assert.equal(back.status, 200);
      await back.body?.cancel();
      front.kill("SIGTERM");
      const status = await front.status;
      exited = true;
      assert.ok(status.success || status.signal === null, `the front exited with ${status.code}`);
      await logging;
    } finally {
      if (!exited) {
        try {
          front.kill("SIGTERM");
        } catch { /* gone */ }
        await front.status;
      }
    }
  },
});
