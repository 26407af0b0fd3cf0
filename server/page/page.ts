/**
 * The server's own chat page (`GET /`): one HTML document, its script and
 * its style sheet, served from this module by `cflow serve` (no build step,
 * no CDN, nothing fetched from elsewhere; the page's Content-Security-Policy
 * allows only this server). It streams a reply from `/v1/chat/completions`,
 * shows the reply's tokens per second, and lists the slots and the queue
 * from `/health` and `/slots` once a second.
 *
 * @module
 */

/** The page's HTML. */
export const PAGE_HTML: string = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cflow</title>
<link rel="stylesheet" href="/page.css">
<script src="/page.js" defer></script>
</head>
<body>
<header><h1>cflow</h1><span id="model"></span></header>
<main>
  <section id="chat">
    <ol id="messages"></ol>
    <form id="form">
      <textarea id="input" rows="2" placeholder="Type a message; Enter sends, Shift-Enter is a new line"></textarea>
      <button id="send" type="submit">Send</button>
    </form>
    <p id="speed">&nbsp;</p>
  </section>
  <aside>
    <h2>Server</h2>
    <p id="status">connecting...</p>
    <table id="slots"><thead><tr><th>slot</th><th>state</th><th>cached</th></tr></thead><tbody></tbody></table>
    <label>Temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
    <label>API key <input id="key" type="password" autocomplete="off"></label>
    <button id="clear" type="button">New conversation</button>
  </aside>
</main>
</body>
</html>
`;

/** The page's style sheet. */
export const PAGE_CSS: string = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { display: flex; gap: 1em; align-items: baseline; padding: 0.6em 1.2em; background: #20232a; color: #fff; }
header h1 { font-size: 1.2em; margin: 0; }
main { display: grid; grid-template-columns: 1fr 16em; gap: 1.2em; padding: 1.2em; }
#messages { list-style: none; padding: 0; margin: 0 0 1em; min-height: 12em; }
#messages li { margin: 0.4em 0; padding: 0.5em 0.8em; border-radius: 6px; white-space: pre-wrap; }
#messages li.user { background: #dbe9ff; }
#messages li.assistant { background: #fff; border: 1px solid #ddd; }
#messages li.error { background: #ffe0e0; }
form { display: flex; gap: 0.5em; }
textarea { flex: 1; font: inherit; padding: 0.4em; }
#speed { color: #555; font-size: 0.9em; }
aside { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 0.8em; }
aside h2 { font-size: 1em; margin: 0 0 0.5em; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1em; font-size: 0.9em; }
td, th { text-align: left; padding: 0.15em 0.3em; border-bottom: 1px solid #eee; }
label { display: block; font-size: 0.9em; margin-bottom: 0.6em; }
label input { width: 100%; box-sizing: border-box; }
`;

/** The page's script. */
export const PAGE_JS: string = `"use strict";
const $ = (id) => document.getElementById(id);
const history = [];
const keyInput = $("key");
keyInput.value = localStorage.getItem("cflow-key") ?? "";
keyInput.addEventListener("change", () => localStorage.setItem("cflow-key", keyInput.value));
function headers() {
  const h = { "content-type": "application/json" };
  if (keyInput.value) h.authorization = "Bearer " + keyInput.value;
  return h;
}
function add(role, text) {
  const li = document.createElement("li");
  li.className = role;
  li.textContent = text;
  $("messages").appendChild(li);
  return li;
}
async function send(text) {
  history.push({ role: "user", content: text });
  add("user", text);
  const li = add("assistant", "");
  $("send").disabled = true;
  const start = performance.now();
  let first = 0;
  let tokens = 0;
  let reply = "";
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({
        messages: history,
        temperature: Number($("temperature").value),
        max_tokens: 256,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    if (!r.ok) throw new Error((await r.json()).error?.message ?? r.statusText);
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let i;
      while ((i = buffer.indexOf("\\n\\n")) >= 0) {
        const event = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
        const j = JSON.parse(event.slice(6));
        if (j.error) throw new Error(j.error.message);
        if (j.usage) tokens = j.usage.completion_tokens;
        const piece = j.choices?.[0]?.delta?.content ?? "";
        if (piece !== "") {
          if (first === 0) first = performance.now();
          reply += piece;
          li.textContent = reply;
          $("speed").textContent = "streaming...";
        }
      }
    }
    history.push({ role: "assistant", content: reply });
    const seconds = (performance.now() - (first || start)) / 1000;
    const rate = tokens > 1 && seconds > 0 ? (tokens - 1) / seconds : 0;
    $("speed").textContent = tokens + " tokens, " + rate.toFixed(1) + " tokens/s, first token after " +
      ((first - start) / 1000).toFixed(2) + " s";
    $("speed").dataset.tokens = String(tokens);
    $("speed").dataset.rate = String(rate);
  } catch (e) {
    li.className = "error";
    li.textContent = String(e.message ?? e);
    history.pop();
  } finally {
    $("send").disabled = false;
  }
}
$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (text === "") return;
  $("input").value = "";
  void send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("form").requestSubmit();
  }
});
$("clear").addEventListener("click", () => {
  history.length = 0;
  $("messages").textContent = "";
  $("speed").textContent = "";
});
async function poll() {
  try {
    const h = await (await fetch("/health")).json();
    $("status").textContent = h.status + ": " + (h.slots_total - h.slots_idle) + " of " + h.slots_total +
      " slots busy, " + h.queued + " queued";
    $("status").dataset.queued = String(h.queued);
    const s = await fetch("/slots", { headers: headers() });
    if (s.ok) {
      const body = $("slots").querySelector("tbody");
      body.textContent = "";
      for (const slot of await s.json()) {
        const tr = document.createElement("tr");
        for (const v of [slot.id, slot.is_processing ? "busy" : "idle", slot.cached_tokens]) {
          const td = document.createElement("td");
          td.textContent = String(v);
          tr.appendChild(td);
        }
        body.appendChild(tr);
      }
    }
    const m = await fetch("/v1/models", { headers: headers() });
    if (m.ok) $("model").textContent = (await m.json()).data[0].id;
  } catch (e) {
    $("status").textContent = "unreachable: " + (e.message ?? e);
  }
}
void poll();
setInterval(poll, 1000);
`;
