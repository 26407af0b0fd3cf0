/**
 * `cflow chat`: a conversation with the model's own chat template. On a
 * terminal it has a banner, a line editor with history (cli/line_editor.ts)
 * and the commands `/help`, `/?`, `/clear`, `/stats`, `/bye` and `/exit`;
 * with stdin piped it answers one message per line, as before.
 *
 * @module
 */

import { type ChatMessage, chatPromptIds, chatTemplateFrom } from "../chat/mod.ts";
import { generate, type GenerationStats } from "../runtime/generate.ts";
import { PromptCache } from "../runtime/prompt_cache.ts";
import { Sampler, type SamplerOptions } from "../sampling/mod.ts";
import { EXIT } from "./exit_codes.ts";
import { type ModelArgs, openSession, speculationOf } from "./generate.ts";
import { compileConstraint, type ConstraintSpec } from "../grammar/mod.ts";
import { denoTerminal, LineEditor, type LineEvent, readLineFromTerminal } from "./line_editor.ts";

/** The chat commands, as `/help` lists them. */
export const CHAT_HELP: string = [
  "  /help, /?     this list",
  "  /clear        start the conversation over (the system message stays)",
  "  /stats        the last answer's tokens and speed, and how much of the context is used",
  "  /bye, /exit   end the chat (Ctrl-D at an empty prompt too)",
  "Ctrl-C stops an answer; at the prompt it gives up the line. Arrows, Home/End and",
  "Ctrl-A/E/K/U/W edit the line; Up and Down recall earlier messages.",
].join("\n");

/** What a line typed at the chat prompt asks for. */
export type ChatCommand =
  | { kind: "message"; text: string }
  | { kind: "empty" }
  | { kind: "help" }
  | { kind: "clear" }
  | { kind: "stats" }
  | { kind: "bye" }
  | { kind: "unknown"; name: string };

const COMMANDS: Record<string, "help" | "clear" | "stats" | "bye"> = {
  "/help": "help",
  "/?": "help",
  "/clear": "clear",
  "/stats": "stats",
  "/bye": "bye",
  "/exit": "bye",
};

/**
 * Reads one chat line: a known command as its first word (`/bye now` ends
 * the chat), a lone `/word` that is no command is refused rather than sent
 * (a typo of a command), and anything else, paths like `/usr/bin` included,
 * is a message for the model.
 *
 * @example
 * ```ts
 * import { parseChatLine } from "./chat.ts";
 * console.log(parseChatLine(" /? ").kind); // "help"
 * console.log(parseChatLine("/usr/bin is where?").kind); // "message"
 * console.log(parseChatLine("/hlep")); // { kind: "unknown", name: "/hlep" }
 * ```
 */
export function parseChatLine(line: string): ChatCommand {
  const trimmed = line.trim();
  if (trimmed === "") return { kind: "empty" };
  const first = trimmed.split(/\s+/, 1)[0];
  const known = COMMANDS[first.toLowerCase()];
  if (known !== undefined) return { kind: known };
  if (first === trimmed && /^\/[A-Za-z?]+$/.test(first)) return { kind: "unknown", name: first };
  return { kind: "message", text: line };
}

/**
 * The conversation's prompt with room for `room` answer tokens in `context`:
 * the earliest messages after any leading system messages are left out, up
 * to the next user message each time, until it fits. `prompt` is undefined when even the last message
 * alone (after the system messages) does not fit. The messages themselves are
 * not changed: drop `dropped` of them from `firstKept`.
 *
 * @example
 * ```ts
 * import { fitConversation } from "./chat.ts";
 * const render = (m: readonly { role: string; content: string }[]) =>
 *   m.flatMap((x) => x.content.split(" ").map(() => 0));
 * const msgs = [
 *   { role: "user", content: "a b c" },
 *   { role: "assistant", content: "d e" },
 *   { role: "user", content: "f" },
 * ];
 * console.log(fitConversation(msgs, render, 4, 1).dropped); // 2
 * ```
 */
export function fitConversation<M extends { role: string }>(
  messages: readonly M[],
  render: (messages: readonly M[]) => number[],
  context: number,
  room: number,
): { prompt?: number[]; firstKept: number; dropped: number } {
  let firstKept = 0;
  while (firstKept < messages.length && messages[firstKept].role === "system") firstKept++;
  const system = messages.slice(0, firstKept);
  for (let drop = 0; firstKept + drop < messages.length; drop++) {
    // Keep the conversation starting with a user message: templates that
    // check the roles alternate refuse anything else.
    if (drop > 0 && messages[firstKept + drop].role !== "user") continue;
    const prompt = render([...system, ...messages.slice(firstKept + drop)]);
    if (prompt.length + room <= context) return { prompt, firstKept, dropped: drop };
  }
  return { firstKept, dropped: 0 };
}

/**
 * `/stats`: the last answer's counts and speeds, and the context in use.
 *
 * @example
 * ```ts
 * import { formatChatStats } from "./chat.ts";
 * console.log(formatChatStats(undefined, 0, 2048)); // "no answer yet; context 0 of 2048 tokens"
 * ```
 */
export function formatChatStats(
  s: GenerationStats | undefined,
  contextUsed: number,
  contextLength: number,
): string {
  const context = `context ${contextUsed} of ${contextLength} tokens`;
  if (s === undefined) return `no answer yet; ${context}`;
  return `prompt ${s.promptTokens} tokens (${s.cachedTokens} cached) at ${
    s.prefillTokS.toFixed(1)
  } tok/s, first token after ${s.ttftMs.toFixed(0)} ms; answer ${s.generatedTokens} tokens at ${
    s.decodeTokS.toFixed(1)
  } tok/s (${s.stopReason}); ${context}`;
}

/** Where chat lines come from: the line editor on a terminal, plain lines otherwise. */
interface ChatInput {
  /** Whether a person is typing at a terminal (banner, editor, "> " prompt). */
  readonly interactive: boolean;
  next(): Promise<LineEvent>;
}

function terminalInput(): ChatInput {
  const editor = new LineEditor({
    prompt: "> ",
    columns: () => {
      try {
        return Deno.consoleSize().columns;
      } catch {
        return 80;
      }
    },
  });
  const terminal = denoTerminal();
  return { interactive: true, next: () => readLineFromTerminal(editor, terminal) };
}

function pipedInput(): ChatInput {
  const reader = Deno.stdin.readable
    .pipeThrough(new TextDecoderStream("utf-8", { fatal: true }))
    .getReader();
  // stdin is a terminal but stdout is not: a prompt on stderr, the answers stay clean.
  const prompt = Deno.stdin.isTerminal() ? new TextEncoder().encode("> ") : undefined;
  let buffered = "";
  return {
    interactive: false,
    async next() {
      if (prompt) Deno.stderr.writeSync(prompt);
      while (!buffered.includes("\n")) {
        const r = await reader.read();
        if (r.done) {
          if (buffered === "") return { kind: "eof" };
          const last = buffered;
          buffered = "";
          return { kind: "line", text: last };
        }
        buffered += r.value;
      }
      const i = buffered.indexOf("\n");
      const text = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      return { kind: "line", text };
    },
  };
}

/** `cflow chat`: an interactive conversation using the model's template. */
export async function runChat(
  args: ModelArgs & {
    maxTokens?: number;
    sampling: SamplerOptions;
    system?: string;
    /** --json-schema / --grammar: what each answer must match. */
    constraint?: ConstraintSpec;
  },
): Promise<number> {
  const session = await openSession(args);
  const { model, tokenizer } = session;
  try {
    // One drafter for the whole chat: a draft model keeps the conversation in its cache too.
    const speculation = speculationOf(session, args.speculation);
    const constraint = args.constraint && compileConstraint(args.constraint, tokenizer);
    const choice = chatTemplateFrom({ "tokenizer.chat_template": tokenizer.chatTemplate }, {
      override: args.template,
      model: args.model,
    });
    const messages: ChatMessage[] = args.system ? [{ role: "system", content: args.system }] : [];
    const sampler = new Sampler(model.config.vocab, args.sampling);
    // The KV cache keeps the conversation: each turn runs only what was added
    // since the last one (the user's message and the template's framing).
    const cache = new PromptCache(model);
    const render = (m: readonly ChatMessage[]): number[] =>
      chatPromptIds(tokenizer, choice.template, m, { addGenerationPrompt: true });
    // Room kept for the answer when old messages must go to fit the context.
    const room = Math.min(args.maxTokens ?? Infinity, Math.floor(model.contextLength / 4));
    const enc = new TextEncoder();
    const input = Deno.stdin.isTerminal() && Deno.stdout.isTerminal()
      ? terminalInput()
      : pipedInput();
    const say = (text: string) => {
      // Notes go where the person reads them: the screen, or stderr when the answers are piped.
      if (input.interactive) console.log(text);
      else console.error(text);
    };
    if (input.interactive) {
      const name = args.model.split("/").filter((p) => p !== "").at(-1) ?? args.model;
      console.log(
        `cflow chat: ${name} (${model.config.architecture}, context ${model.contextLength} tokens)`,
      );
      console.log("Type a message, /help for commands, Ctrl-D or /bye to leave.");
    }
    let abort = new AbortController();
    const onSigint = () => abort.abort();
    Deno.addSignalListener("SIGINT", onSigint);
    let last: GenerationStats | undefined;
    let contextUsed = 0;
    try {
      while (true) {
        const event = await input.next();
        if (event.kind === "eof") break;
        if (event.kind === "interrupt") continue;
        const command = parseChatLine(event.text);
        if (command.kind === "empty") continue;
        if (command.kind === "bye") break;
        if (command.kind === "help") {
          say(CHAT_HELP);
          continue;
        }
        if (command.kind === "stats") {
          say(formatChatStats(last, contextUsed, model.contextLength));
          continue;
        }
        if (command.kind === "unknown") {
          say(`unknown command ${command.name}; /help lists them`);
          continue;
        }
        if (command.kind === "clear") {
          messages.splice(args.system ? 1 : 0);
          contextUsed = 0;
          say("(conversation cleared)");
          continue;
        }
        messages.push({ role: "user", content: command.text });
        const fitted = fitConversation(messages, render, model.contextLength, room);
        if (fitted.dropped > 0) {
          say(
            `(the ${fitted.dropped} earliest message${
              fitted.dropped === 1 ? "" : "s"
            } no longer fit the context of ${model.contextLength} tokens and were left out)`,
          );
          messages.splice(fitted.firstKept, fitted.dropped);
        }
        if (fitted.prompt === undefined) {
          console.error(
            `cflow: error: the message does not fit the context of ${model.contextLength} tokens ` +
              `with room for an answer (use --ctx to raise it)`,
          );
          messages.pop();
          continue;
        }
        const prompt = fitted.prompt;
        abort = new AbortController();
        sampler.reset();
        let answer = "";
        const it = generate(model, tokenizer, sampler, prompt, {
          maxTokens: args.maxTokens ?? model.contextLength,
          signal: abort.signal,
          cache,
          speculation,
          constraint,
        });
        while (true) {
          const r = await it.next();
          if (r.done) {
            last = r.value;
            break;
          }
          answer += r.value.text;
          await Deno.stdout.write(enc.encode(r.value.text));
        }
        await Deno.stdout.write(enc.encode("\n"));
        contextUsed = prompt.length + (last?.generatedTokens ?? 0);
        messages.push({ role: "assistant", content: answer });
      }
    } finally {
      Deno.removeSignalListener("SIGINT", onSigint);
    }
    return EXIT.OK;
  } finally {
    session.draft?.close();
    model.close();
  }
}
