/**
 * {@link ToolCallParser}: a model's reply in the Hermes/Qwen2.5 tool-call format
 * (`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, possibly several) split into
 * plain content and OpenAI-shaped {@link ToolCall}s, whole or as the text streams in.
 *
 * @module
 */

/** The text that opens a call in the Hermes/Qwen2.5 format. */
const OPEN = "<tool_call>";
/** The text that closes it. */
const CLOSE = "</tool_call>";
/** The first key of a bare call (a reply that is the call's JSON without the markup). */
const BARE_KEY = '"name"';

/**
 * The longest call block parsed, in UTF-16 code units (256 KiB): a longer one is plain content.
 *
 * @example
 * ```ts
 * import { MAX_TOOL_CALL_LENGTH } from "./tool_call_parser.ts";
 * console.log(MAX_TOOL_CALL_LENGTH); // 262144
 * ```
 */
export const MAX_TOOL_CALL_LENGTH = 1 << 18;

/**
 * The most calls taken from one reply; later blocks are plain content.
 *
 * @example
 * ```ts
 * import { MAX_TOOL_CALLS } from "./tool_call_parser.ts";
 * console.log(MAX_TOOL_CALLS); // 64
 * ```
 */
export const MAX_TOOL_CALLS = 64;

/**
 * One function call of a reply, as OpenAI's `message.tool_calls[]` carries it: `arguments` is a
 * JSON object as a string.
 *
 * @example
 * ```ts
 * import type { ToolCall } from "./tool_call_parser.ts";
 * const c: ToolCall = {
 *   id: "call_abc",
 *   type: "function",
 *   function: { name: "get_weather", arguments: '{"city":"Paris"}' },
 * };
 * console.log(JSON.parse(c.function.arguments).city); // Paris
 * ```
 */
export interface ToolCall {
  /** `call_` and 24 random letters and digits. */
  id: string;
  /** Always `"function"`. */
  type: "function";
  /** The function called and its arguments, a JSON object as a string. */
  function: { name: string; arguments: string };
}

/**
 * What the parser finds in the text so far: content to pass on, or a whole call (the `index`-th
 * of the reply).
 *
 * @example
 * ```ts
 * import type { ToolCallEvent } from "./tool_call_parser.ts";
 * const e: ToolCallEvent = { kind: "content", text: "Hello" };
 * console.log(e.kind);
 * ```
 */
export type ToolCallEvent =
  | { kind: "content"; text: string }
  | { kind: "call"; index: number; call: ToolCall };

/**
 * Options of {@link ToolCallParser}.
 *
 * @example
 * ```ts
 * import type { ToolCallParserOptions } from "./tool_call_parser.ts";
 * const o: ToolCallParserOptions = { names: new Set(["add"]), parallel: false };
 * console.log(o.parallel);
 * ```
 */
export interface ToolCallParserOptions {
  /** The functions offered: a call of any other name is plain content. Default: any name. */
  names?: ReadonlySet<string>;
  /**
   * Several calls per reply (OpenAI's `parallel_tool_calls`, default true). When false, the
   * blocks after the first call are dropped (neither calls nor content).
   */
  parallel?: boolean;
  /** The reply starts inside a call block (the prompt ends with the opener `<tool_call>`). */
  opened?: boolean;
  /** Makes call ids (default: `call_` and 24 random letters and digits). */
  newId?: () => string;
}

const ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A fresh call id: `call_` and 24 random letters and digits.
 *
 * @example
 * ```ts
 * import { newToolCallId } from "./tool_call_parser.ts";
 * console.log(/^call_[A-Za-z0-9]{24}$/.test(newToolCallId())); // true
 * ```
 */
export function newToolCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  let out = "call_";
  for (const b of bytes) out += ID_CHARS[b % ID_CHARS.length];
  return out;
}

/**
 * The call in one block's text, or undefined when it is not a JSON object with a string `name`
 * (one of `names`, when given) and an object `arguments` (or `parameters`, or a string holding
 * a JSON object).
 */
function parseBlock(
  body: string,
  names: ReadonlySet<string> | undefined,
): { name: string; arguments: string } | undefined {
  if (body.length > MAX_TOOL_CALL_LENGTH) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const o = value as Record<string, unknown>;
  if (typeof o.name !== "string" || (names !== undefined && !names.has(o.name))) return undefined;
  let args = Object.hasOwn(o, "arguments") ? o.arguments : o.parameters;
  if (args === undefined) args = {};
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      return undefined;
    }
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) return undefined;
  try {
    return { name: o.name, arguments: JSON.stringify(args) };
  } catch {
    return undefined; // nested past what the engine serializes: content
  }
}

/** A bare call is told from the first this many characters of the reply. */
const BARE_HEAD = 256;

/**
 * Whether a reply that begins with `head` is a bare call's start (`{"name"`, after whitespace and
 * maybe a json code fence line): true, false, or undefined while `head` is too short to tell.
 */
function bareStart(head: string): boolean | undefined {
  let t = head.trimStart();
  if (t === "") return undefined;
  if (t.startsWith("`")) {
    // A Markdown fence first: its opening line, then the call.
    const line = /^```(?:json)?[ \t]*\n/.exec(t);
    if (line === null) {
      return !t.includes("\n") && /^`{1,3}(?:j(?:s(?:o(?:n)?)?)?)?[ \t]*$/.test(t)
        ? undefined
        : false;
    }
    t = t.slice(line[0].length).trimStart();
    if (t === "") return undefined;
  }
  if (t[0] !== "{") return false;
  const rest = t.slice(1).trimStart();
  if (rest.length >= BARE_KEY.length) return rest.startsWith(BARE_KEY);
  return BARE_KEY.startsWith(rest) ? undefined : false;
}

/** The length of the longest end of `text` that begins `OPEN`. */
function partialOpen(text: string): number {
  for (let n = Math.min(OPEN.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(OPEN.slice(0, n))) return n;
  }
  return 0;
}

/**
 * Splits a reply into content and calls as its text arrives: `push` each piece, then `end`.
 * Content that may be the start of `<tool_call>` is held until the next piece says; a call is
 * reported when its block closes (or at the end, when the text stops inside a block that holds
 * a whole JSON object). A block that is not a valid call of an offered function is plain
 * content, markup included.
 *
 * A reply that is only calls' JSON without the markup (one object, or one per line, possibly
 * inside a Markdown code fence with the language json) is taken as calls too: small
 * Qwen2.5-Coder models answer so, and llama.cpp's Hermes parser also accepts an untagged
 * `{"name"` object. A reply that starts like one is held to its end to tell.
 *
 * Whitespace at the end of content is held until content follows it (dropped before a call,
 * and at the end of a reply with calls). Pushing the same text in any pieces gives the same
 * content and calls.
 *
 * @example
 * ```ts
 * import { ToolCallParser } from "./tool_call_parser.ts";
 * import assert from "node:assert/strict";
 *
 * const p = new ToolCallParser({ newId: () => "call_1" });
 * const events = [
 *   ...p.push('<tool_call>\n{"name": "add", "arguments": {"a": 1'),
 *   ...p.push(', "b": 2}}\n</tool_call>'),
 *   ...p.end(),
 * ];
 * assert.deepEqual(events, [{
 *   kind: "call",
 *   index: 0,
 *   call: { id: "call_1", type: "function", function: { name: "add", arguments: '{"a":1,"b":2}' } },
 * }]);
 * ```
 */
export class ToolCallParser {
  readonly #names: ReadonlySet<string> | undefined;
  readonly #parallel: boolean;
  readonly #newId: () => string;
  /** The reply may still be a bare call (JSON without the markup): held until known. */
  #bare: boolean;
  /** The reply starts like a bare call: held to its end (or past the block bound). */
  #bareKnown = false;
  /** Inside a call block (after `<tool_call>`). */
  #inCall: boolean;
  /** A call block's body so far, but for its last characters (`#window`). */
  #parts: string[] = [];
  #partsLength = 0;
  /** The body's last characters, where `</tool_call>` may have begun. */
  #window = "";
  /** Text not yet reported outside a block: the start of an opener, or a held bare reply. */
  #buffer = "";
  /** Whitespace content held until something follows it. */
  #space = "";
  #ended = false;
  /** The calls found so far. */
  readonly calls: ToolCall[] = [];

  /** A parser of one reply; see {@link ToolCallParserOptions}. */
  constructor(options: ToolCallParserOptions = {}) {
    this.#names = options.names;
    this.#parallel = options.parallel ?? true;
    this.#newId = options.newId ?? newToolCallId;
    this.#inCall = options.opened ?? false;
    this.#bare = !this.#inCall;
  }

  /** The events of the next piece of the reply's text. */
  push(text: string): ToolCallEvent[] {
    if (this.#ended) throw new Error("ToolCallParser: push after end");
    const out: ToolCallEvent[] = [];
    if (this.#bare) {
      this.#buffer += text;
      if (this.#mayBeBare()) return out;
      text = this.#buffer;
      this.#buffer = "";
    }
    this.#scan(text, out);
    return out;
  }

  /**
   * Whether the reply so far may still be a bare call (it starts `{"name"`): then it is held;
   * else bare calls are off for this reply.
   */
  #mayBeBare(): boolean {
    if (this.#bareKnown) {
      if (this.#buffer.length <= MAX_TOOL_CALL_LENGTH) return true;
      this.#bare = false;
      return false;
    }
    // Decided on the first BARE_HEAD characters only (so each piece costs O(BARE_HEAD), and the
    // same text decides the same in any pieces).
    const head = this.#buffer.slice(0, BARE_HEAD);
    const known = bareStart(head);
    if (known === true) this.#bareKnown = true;
    else if (known === false || this.#buffer.length >= BARE_HEAD) this.#bare = false;
    return this.#bare;
  }

  /**
   * Reports `text` after what is held, keeping what may be the start of markup. Each piece costs
   * its own length (and the opener's or closer's): a block's body is kept in parts, never
   * searched again.
   */
  #scan(text: string, out: ToolCallEvent[]): void {
    while (true) {
      if (!this.#inCall) {
        const s = this.#buffer + text;
        const at = s.indexOf(OPEN);
        if (at < 0) {
          const keep = partialOpen(s);
          this.#content(s.slice(0, s.length - keep), out);
          this.#buffer = s.slice(s.length - keep);
          return;
        }
        this.#content(s.slice(0, at), out);
        this.#buffer = "";
        text = s.slice(at + OPEN.length);
        this.#inCall = true;
      } else {
        const s = this.#window + text;
        const at = s.indexOf(CLOSE);
        const before = this.#partsLength;
        if (
          at >= 0
            ? before + at > MAX_TOOL_CALL_LENGTH
            : before + s.length > MAX_TOOL_CALL_LENGTH + CLOSE.length
        ) {
          // Too long to be a call (the same whether it arrived whole or in pieces): the opener
          // is content, and what follows is read as text again.
          this.#content(OPEN, out);
          text = this.#takeBody() + s;
          this.#inCall = false;
          continue;
        }
        if (at < 0) {
          const cut = Math.max(0, s.length - (CLOSE.length - 1));
          this.#parts.push(s.slice(0, cut));
          this.#partsLength += cut;
          this.#window = s.slice(cut);
          return;
        }
        this.#block(this.#takeBody() + s.slice(0, at), true, out);
        text = s.slice(at + CLOSE.length);
        this.#inCall = false;
      }
    }
  }

  /** The body held in parts (not the window), emptied. */
  #takeBody(): string {
    const body = this.#parts.join("");
    this.#parts = [];
    this.#partsLength = 0;
    this.#window = "";
    return body;
  }

  /** The events of the end of the reply (what was held back). */
  end(): ToolCallEvent[] {
    if (this.#ended) return [];
    const out: ToolCallEvent[] = [];
    if (this.#bare) {
      // The whole reply is held: calls if it is one JSON call, or one per line.
      this.#bare = false;
      const held = this.#buffer;
      this.#buffer = "";
      if (this.#bareCalls(held, out)) {
        this.#ended = true;
        return out;
      }
      this.#scan(held, out);
    }
    if (this.#inCall) {
      const window = this.#window;
      this.#block(this.#takeBody() + window, false, out);
    } else this.#content(this.#buffer, out);
    this.#buffer = "";
    this.#ended = true;
    if (this.calls.length === 0 && this.#space !== "") {
      out.push({ kind: "content", text: this.#space });
    }
    this.#space = "";
    return out;
  }

  /** Reports the held reply as bare calls, if it is: one JSON call, or one per line. */
  #bareCalls(held: string, out: ToolCallEvent[]): boolean {
    let text = held.trim();
    const fenced = /^```(?:json)?[ \t]*\n([^]*)\n[ \t]*```$/.exec(text);
    if (fenced !== null) text = fenced[1].trim();
    else if (text.startsWith("`")) return false;
    if (text === "") return false;
    let found = [parseBlock(text, this.#names)];
    if (found[0] === undefined) {
      found = text.split("\n").filter((line) => line.trim() !== "").map((line) =>
        parseBlock(line.trim(), this.#names)
      );
    }
    if (found.length > MAX_TOOL_CALLS || found.some((c) => c === undefined)) return false;
    for (const call of found.slice(0, this.#parallel ? found.length : 1)) {
      const c: ToolCall = { id: this.#newId(), type: "function", function: call! };
      out.push({ kind: "call", index: this.calls.length, call: c });
      this.calls.push(c);
    }
    this.#space = "";
    return true;
  }

  /** A block's body: a call, or content with its markup. */
  #block(body: string, closed: boolean, out: ToolCallEvent[]): void {
    const dropped = !this.#parallel && this.calls.length > 0;
    const call = this.calls.length < MAX_TOOL_CALLS
      ? parseBlock(body.trim(), this.#names)
      : undefined;
    if (call !== undefined) {
      if (dropped) return;
      this.#space = "";
      const c: ToolCall = { id: this.#newId(), type: "function", function: call };
      out.push({ kind: "call", index: this.calls.length, call: c });
      this.calls.push(c);
      return;
    }
    this.#content(OPEN + body + (closed ? CLOSE : ""), out);
  }

  /**
   * Content; its trailing whitespace is held until something follows (dropped before a call),
   * so that the same text gives the same content in any pieces.
   */
  #content(text: string, out: ToolCallEvent[]): void {
    const body = text.trimEnd();
    if (body !== "") {
      out.push({ kind: "content", text: this.#space + body });
      this.#space = "";
    }
    this.#space += text.slice(body.length);
  }
}

/**
 * A whole reply split into content and calls (what a {@link ToolCallParser} reports for it):
 * `content` is null when the reply is only calls.
 *
 * @example
 * ```ts
 * import { parseToolCalls } from "./tool_call_parser.ts";
 * import assert from "node:assert/strict";
 *
 * const r = parseToolCalls('<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>', {
 *   newId: () => "call_1",
 * });
 * assert.equal(r.content, null);
 * assert.equal(r.toolCalls[0].function.name, "now");
 * assert.equal(parseToolCalls("Just text.").content, "Just text.");
 * ```
 */
export function parseToolCalls(
  text: string,
  options: ToolCallParserOptions = {},
): { content: string | null; toolCalls: ToolCall[] } {
  const parser = new ToolCallParser(options);
  let content = "";
  for (const e of [...parser.push(text), ...parser.end()]) {
    if (e.kind === "content") content += e.text;
  }
  return {
    content: content === "" && parser.calls.length > 0 ? null : content,
    toolCalls: parser.calls,
  };
}
