/**
 * The chat page (`GET /`) in headless Chromium, driven over the DevTools
 * protocol as a user would use it: type a message, press Enter, wait for
 * the streamed reply. The reply must be the greedy answer the API gives for
 * the same message, the page must show its tokens per second and the
 * server's slots and queue, and a screenshot is taken (written to
 * cache/page_test.png) and checked to be a real image. Ignored, with the
 * reason printed, where Chromium cannot be found or installed
 * (scripts/install-chromium.sh).
 *
 * @module
 */
import assert from "node:assert/strict";
import { installedTool } from "../tests/util/installed_tool.ts";
import { post, present, withServer } from "./_test_server.ts";

const ROOT = new URL("..", import.meta.url).pathname;

const chromium = present
  ? installedTool("install-chromium.sh")
  : { why: "the test model is not fetched" };
if (chromium.path === undefined) console.log(`chat page test ignored: ${chromium.why}`);

/** A DevTools protocol connection: commands with ids, optionally on a target's session. */
class Devtools {
  readonly #ws: WebSocket;
  #id = 0;
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      const p = m.id === undefined ? undefined : this.#pending.get(m.id);
      if (p === undefined) return;
      this.#pending.delete(m.id);
      if (m.error) p.reject(new Error(`${m.error.message} (${m.error.code})`));
      else p.resolve(m.result);
    };
  }
  static open(url: string): Promise<Devtools> {
    const ws = new WebSocket(url);
    return new Promise((resolve, reject) => {
      ws.onopen = () => resolve(new Devtools(ws));
      ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
  }
  // deno-lint-ignore no-explicit-any
  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<any> {
    const id = ++this.#id;
    this.#ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject }));
  }
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#ws.onclose = () => resolve();
      this.#ws.close();
    });
  }
}

Deno.test({
  name: "chat page in headless Chromium: streams the greedy reply, shows tokens/s, slots and queue",
  ignore: chromium.path === undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withServer({ parallel: 2 }, async (server) => {
      // Static, with a policy that lets the page talk to this server only.
      const page = await fetch(`${server.url}/`);
      assert.equal(page.status, 200);
      assert.match(page.headers.get("content-security-policy")!, /connect-src 'self'/);
      assert.match(await page.text(), /<script src="\/page\.js" defer><\/script>/);
      const question = "Name a fruit.";
      const want = (await (await post(`${server.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: question }],
        temperature: 0,
        max_tokens: 256,
      })).json()).choices[0].message.content;

      const profile = await Deno.makeTempDir({ prefix: "cflow-chromium-" });
      const browser = new Deno.Command(chromium.path!, {
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--no-first-run",
          "--remote-debugging-port=0",
          `--user-data-dir=${profile}`,
          "--window-size=1100,700",
          "about:blank",
        ],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      let devtools: Devtools | undefined;
      try {
        // Chromium says where its DevTools endpoint is on stderr.
        const reader = browser.stderr.pipeThrough(new TextDecoderStream()).getReader();
        let err = "";
        let ws: string | undefined;
        while (ws === undefined) {
          const r = await reader.read();
          assert.ok(!r.done, `chromium exited: ${err.slice(-1000)}`);
          err += r.value;
          ws = /DevTools listening on (ws:\/\/\S+)/.exec(err)?.[1];
        }
        void (async () => {
          while (!(await reader.read()).done) { /* drain */ }
        })();
        devtools = await Devtools.open(ws);
        const { targetId } = await devtools.send("Target.createTarget", { url: `${server.url}/` });
        const { sessionId } = await devtools.send("Target.attachToTarget", {
          targetId,
          flatten: true,
        });
        const js = async (expression: string) =>
          (await devtools!.send("Runtime.evaluate", {
            expression,
            returnByValue: true,
            awaitPromise: true,
          }, sessionId))
            .result.value;
        const until = async (expression: string, what: string) => {
          for (let t = 0; t < 600; t++) {
            if (await js(expression)) return;
            await new Promise((r) => setTimeout(r, 50));
          }
          throw new Error(`the page never showed ${what}: ${await js("document.body.innerText")}`);
        };
        await until(
          `document.readyState === "complete" && !!document.getElementById("form")`,
          "its form",
        );
        // The slots and the queue, polled from /health and /slots.
        await until(`document.querySelectorAll("#slots tbody tr").length === 2`, "two slots");
        await until(`/0 queued/.test(document.getElementById("status").textContent)`, "the queue");
        // Type the message and press Enter, as a user does.
        await js(`document.getElementById("temperature").value = "0"`);
        await js(`document.getElementById("input").focus()`);
        await devtools.send("Input.insertText", { text: question }, sessionId);
        for (const type of ["keyDown", "keyUp"]) {
          await devtools.send(
            "Input.dispatchKeyEvent",
            {
              type,
              key: "Enter",
              code: "Enter",
              windowsVirtualKeyCode: 13,
              text: type === "keyDown" ? "\r" : undefined,
            },
            sessionId,
          );
        }
        await until(`!!document.getElementById("speed").dataset.tokens`, "the reply's speed");
        const shown = await js(`({
          user: document.querySelector("#messages li.user")?.textContent,
          reply: document.querySelector("#messages li.assistant")?.textContent,
          tokens: Number(document.getElementById("speed").dataset.tokens),
          rate: Number(document.getElementById("speed").dataset.rate),
          speed: document.getElementById("speed").textContent,
          model: document.getElementById("model").textContent,
        })`);
        assert.equal(shown.user, question);
        assert.equal(shown.reply, want);
        assert.ok(shown.tokens > 1 && shown.rate > 0, JSON.stringify(shown));
        assert.match(shown.speed, /^\d+ tokens, [\d.]+ tokens\/s, first token after [\d.]+ s$/);
        assert.ok(shown.model.length > 0, "the model's name");
        // The screenshot, as a user would see the page.
        const shot = await devtools.send("Page.captureScreenshot", { format: "png" }, sessionId);
        const png = Uint8Array.from(atob(shot.data), (c) => c.charCodeAt(0));
        assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
        const view = new DataView(png.buffer);
        const [width, height] = [view.getUint32(16), view.getUint32(20)];
        assert.ok(width >= 600 && height >= 400, `a ${width} x ${height} screenshot`);
        assert.ok(png.length > 10_000, `${png.length} bytes: a blank page?`);
        await Deno.mkdir(`${ROOT}cache`, { recursive: true });
        await Deno.writeFile(`${ROOT}cache/page_test.png`, png);
      } finally {
        await devtools?.close();
        browser.kill("SIGKILL");
        await browser.status;
        await Deno.remove(profile, { recursive: true }).catch(() => {});
      }
    });
  },
});
