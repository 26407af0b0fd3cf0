/**
 * `cflow chat` on a terminal, as a person uses it: run under util-linux's
 * `script`, which gives it a pseudo-terminal, with keys sent one step at a
 * time and the screen read back. Edited lines must reach the model exactly
 * as a piped line does (the greedy answers are compared), Up recalls the
 * last message, Ctrl-C at an empty prompt starts a fresh line, `/help`,
 * `/?`, `/stats` and an unknown command are answered without the model, and
 * Ctrl-D ends the chat with a newline and exit status 0.
 */
import assert from "node:assert/strict";
import { TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const ENV = {
  CFLOW_KERNELS: "",
  CFLOW_THREADS: "",
  CFLOW_KERNEL_VARIANT: "",
  CFLOW_CPU_DISABLE: "",
  ...TEST_CACHE_ENV,
};
const CHAT = ["chat", "--max-tokens", "8", "--temperature", "0"];
const LEFT = "\x1b[D", UP = "\x1b[A";
/** How the editor draws a fresh, empty prompt. */
const FRESH_PROMPT = "\r> \x1b[K\r\x1b[2C";

function scriptMissing(): string | undefined {
  try {
    const r = new Deno.Command("script", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync();
    return r.success ? undefined : "util-linux `script` does not run here";
  } catch {
    return "util-linux `script` (which gives the chat a pseudo-terminal) is not installed";
  }
}

/** A process on a pseudo-terminal: keys in, the terminal's output read as it comes. */
class Pty {
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #out = "";
  #reading: Promise<void>;
  /** Where the next expect() starts looking. */
  #mark = 0;

  constructor(command: string[]) {
    const line = command.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
    const child = new Deno.Command("script", {
      // -q quiet, -f flush at once, -e the child's exit status, -c the command; no typescript file.
      args: ["-qfec", line, "/dev/null"],
      env: ENV,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    const dec = new TextDecoder();
    this.#reading = (async () => {
      for await (const chunk of child.stdout) this.#out += dec.decode(chunk, { stream: true });
    })();
  }

  get output(): string {
    return this.#out;
  }

  async send(keys: string): Promise<void> {
    this.#mark = this.#out.length;
    await this.#writer.write(new TextEncoder().encode(keys));
  }

  /** Waits until `text` appears after the last send (or the last match); returns what came before it. */
  async expect(text: string, timeoutMs = 120_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (true) {
      const at = this.#out.indexOf(text, this.#mark);
      if (at >= 0) {
        const before = this.#out.slice(this.#mark, at);
        this.#mark = at + text.length;
        return before;
      }
      if (Date.now() > deadline) {
        throw new Error(`no ${JSON.stringify(text)} on the terminal; it shows:\n${this.#out}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async close(): Promise<Deno.CommandStatus> {
    await this.#writer.close().catch(() => {});
    const status = await this.#child.status;
    await this.#reading;
    await this.#child.stderr.cancel();
    return status;
  }

  kill(): void {
    try {
      this.#child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** The greedy answer to one piped message, as the chat prints it. */
async function pipedAnswer(message: string): Promise<string> {
  const child = new Deno.Command(`${ROOT}cflow`, {
    args: CHAT,
    env: ENV,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(`${message}\n`));
  await w.close();
  const out = await child.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout);
}

/** An answer as the terminal showed it (between the Enter and the next prompt), newlines as "\n". */
function answerOnScreen(shown: string): string {
  return shown.replaceAll("\r\n", "\n");
}

const skip = scriptMissing();

Deno.test({
  name: `chat on a terminal: banner, line editing, history, Ctrl-C, /help, /stats, Ctrl-D${
    skip ? ` (skipped: ${skip})` : ""
  }`,
  ignore: skip !== undefined,
  async fn() {
    const expected = await pipedAnswer("Hi!");
    const pty = new Pty([`${ROOT}cflow`, ...CHAT]);
    try {
      // The banner names the model and the way to help, then a fresh prompt.
      await pty.expect("cflow chat: ");
      const banner = await pty.expect(FRESH_PROMPT);
      assert.match(banner, /smollm2.*\(llama, context \d+ tokens\)/);
      assert.match(banner, /\/help for commands, Ctrl-D or \/bye to leave/);

      // /? is answered by the chat, not sent to the model.
      await pty.send("/?\r");
      const help = await pty.expect(FRESH_PROMPT);
      assert.match(help, /\/help, \/\? +this list/);
      assert.match(help, /\/stats/);

      // "H!", Left, "i": the model gets "Hi!", exactly as a piped line.
      await pty.send("H!");
      await pty.expect("> H!");
      await pty.send(LEFT + "i");
      await pty.expect("> Hi!");
      await pty.send("\r");
      await pty.expect("\r\n"); // the editor ends the line
      assert.equal(answerOnScreen(await pty.expect(FRESH_PROMPT)), expected);

      // Up recalls the message; Enter sends it again (a second, shorter-context answer).
      await pty.send(UP);
      await pty.expect("> Hi!");
      await pty.send("\r");
      await pty.expect("\r\n");
      const again = answerOnScreen(await pty.expect(FRESH_PROMPT));
      assert.ok(again.trim().length > 0, "the recalled message was answered");

      // Ctrl-C at an empty prompt: ^C, a fresh line, nothing sent.
      await pty.send("\x03");
      // (Deno's raw mode keeps output processing, so the editor's "\r\n" may show as "\r\r\n".)
      assert.match(await pty.expect(FRESH_PROMPT), /^\^C\r+\n$/);

      // An unknown command is refused; /stats reports the last answer and the context used.
      await pty.send("/hlep\r");
      assert.match(await pty.expect(FRESH_PROMPT), /unknown command \/hlep; \/help lists them/);
      await pty.send("/stats\r");
      assert.match(
        await pty.expect(FRESH_PROMPT),
        /prompt \d+ tokens \(\d+ cached\) at [\d.]+ tok\/s, .*answer \d+ tokens at [\d.]+ tok\/s .*context \d+ of \d+ tokens/,
      );

      // Ctrl-D at an empty prompt ends the chat with a newline, exit status 0.
      await pty.send("\x04");
      const status = await pty.close();
      assert.equal(status.code, 0);
      // deno-lint-ignore no-control-regex
      assert.match(pty.output.slice(-20), /\r> \x1b\[K\r\x1b\[2C\r+\n$/);
      assert.ok(!pty.output.includes("^[["), "no raw escape codes echoed");
    } finally {
      pty.kill();
    }
  },
});
