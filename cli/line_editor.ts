/**
 * A small line editor for `cflow chat` on a terminal: the keys a shell user
 * expects (arrows, Home/End, Ctrl-A/E/B/F/K/U/W/L, Delete, Backspace, Up and
 * Down through the history), Ctrl-C to give up a line, Ctrl-D at an empty
 * line to end. It is pure: bytes of terminal input go in, the text to write
 * back (escape sequences that redraw the line) and what was entered come
 * out, so it is tested without a terminal; {@linkcode readLineFromTerminal}
 * runs it on the real one in raw mode.
 *
 * The line is drawn on one row and scrolls sideways when it is wider than
 * the terminal (as linenoise's single-line mode). Widths follow a short
 * table: East Asian wide and emoji code points take two columns, combining
 * marks and zero-width characters none, everything else one.
 *
 * @module
 */

/** What a key press ended with: a line, Ctrl-C, or Ctrl-D at an empty line. */
export type LineEvent =
  | { kind: "line"; text: string }
  | { kind: "interrupt" }
  | { kind: "eof" };

/** Options of {@linkcode LineEditor}. */
export interface LineEditorOptions {
  /** Drawn before the text ("> "). */
  prompt: string;
  /** Columns of the terminal, asked at every redraw (it may be resized). */
  columns?: () => number;
  /** Earlier lines, oldest first; entered lines are appended (at most `historySize`). */
  history?: string[];
  /** Most lines kept in the history (default 500). */
  historySize?: number;
}

const ESC = "\x1b";
/** Longest escape sequence kept while waiting for its end; longer ones are dropped. */
const MAX_SEQUENCE = 16;

/**
 * The editing state of one prompt and the history across prompts.
 *
 * @example
 * ```ts
 * import { LineEditor } from "./line_editor.ts";
 * const ed = new LineEditor({ prompt: "> ", columns: () => 80 });
 * ed.redraw();
 * ed.feed("helo");
 * ed.feed("\x1b[D"); // Left
 * ed.feed("l");
 * const { event } = ed.feed("\r");
 * console.log(event); // { kind: "line", text: "hello" }
 * ```
 */
export class LineEditor {
  readonly #prompt: string;
  readonly #columns: () => number;
  readonly #history: string[];
  readonly #historySize: number;
  /** The line, one code point per element. */
  #chars: string[] = [];
  /** Cursor position in code points, 0..#chars.length. */
  #cursor = 0;
  /** First code point shown when the line is wider than the terminal. */
  #scroll = 0;
  /** Position in the history while browsing it (#history.length: the draft). */
  #historyAt = 0;
  /** The line being written before Up was pressed. */
  #draft: string[] = [];
  /** An escape sequence split across reads. */
  #pending = "";

  /** A new editor; nothing is drawn until {@linkcode LineEditor.start}. */
  constructor(options: LineEditorOptions) {
    this.#prompt = options.prompt;
    this.#columns = options.columns ?? (() => 80);
    this.#history = options.history ?? [];
    this.#historySize = options.historySize ?? 500;
    this.#historyAt = this.#history.length;
  }

  /** The lines entered so far (the history), oldest first. */
  get history(): readonly string[] {
    return this.#history;
  }

  /** The text that draws the prompt and the line as it stands (a fresh prompt after an event). */
  redraw(): string {
    return this.#render();
  }

  /**
   * Feeds terminal input (any number of keys, possibly a partial escape
   * sequence); returns what to write back and the event (a line, Ctrl-C,
   * Ctrl-D) that the keys completed, if any. Input after an event is kept
   * for the next line: `feed("")` after the next `redraw()` edits with it,
   * so a pasted block enters one line per prompt.
   */
  feed(input: string): { output: string; event?: LineEvent } {
    let output = "";
    const cps = Array.from(this.#pending + input);
    this.#pending = "";
    let i = 0;
    while (i < cps.length) {
      const c = cps[i];
      if (c === ESC) {
        const seq = escapeSequence(cps, i);
        if (seq === undefined) {
          // Incomplete: keep it for the next read, unless it is absurdly long.
          const rest = cps.slice(i).join("");
          if (rest.length <= MAX_SEQUENCE) this.#pending = rest;
          break;
        }
        i += seq.length;
        output += this.#key(seq.join(""));
        continue;
      }
      i++;
      const ended = this.#control(c);
      if (ended === undefined) {
        output += this.#key(c);
        continue;
      }
      // The next line starts fresh, with what was typed after this one.
      this.#pending = cps.slice(i).join("");
      this.#chars = [];
      this.#cursor = 0;
      this.#scroll = 0;
      this.#historyAt = this.#history.length;
      this.#draft = [];
      return { output: output + ended.output, event: ended.event };
    }
    return { output };
  }

  /** Whether keys typed after the last event wait for the next line. */
  get hasPending(): boolean {
    return this.#pending !== "";
  }

  /** Enter, Ctrl-C and Ctrl-D at an empty line end the line; undefined for other keys. */
  #control(c: string): { output: string; event: LineEvent } | undefined {
    if (c === "\r" || c === "\n") {
      const line = this.#chars.join("");
      if (line.trim() !== "" && this.#history.at(-1) !== line) {
        this.#history.push(line);
        if (this.#history.length > this.#historySize) this.#history.shift();
      }
      this.#cursor = this.#chars.length;
      return { output: this.#render() + "\r\n", event: { kind: "line", text: line } };
    }
    if (c === "\x03") return { output: "^C\r\n", event: { kind: "interrupt" } };
    if (c === "\x04" && this.#chars.length === 0) return { output: "\r\n", event: { kind: "eof" } };
    return undefined;
  }

  /** One key that edits the line; returns the redraw (empty when nothing changed). */
  #key(key: string): string {
    const before = this.#chars.join("") + "\0" + this.#cursor;
    switch (key) {
      case "\x01": // Ctrl-A
      case `${ESC}[H`:
      case `${ESC}OH`:
      case `${ESC}[1~`:
      case `${ESC}[7~`:
        this.#cursor = 0;
        break;
      case "\x05": // Ctrl-E
      case `${ESC}[F`:
      case `${ESC}OF`:
      case `${ESC}[4~`:
      case `${ESC}[8~`:
        this.#cursor = this.#chars.length;
        break;
      case "\x02": // Ctrl-B
      case `${ESC}[D`:
      case `${ESC}OD`:
        this.#cursor = Math.max(0, this.#cursor - 1);
        break;
      case "\x06": // Ctrl-F
      case `${ESC}[C`:
      case `${ESC}OC`:
        this.#cursor = Math.min(this.#chars.length, this.#cursor + 1);
        break;
      case `${ESC}[1;5D`: // Ctrl-Left
      case `${ESC}[1;3D`: // Alt-Left
      case `${ESC}b`:
        this.#cursor = this.#wordStart();
        break;
      case `${ESC}[1;5C`:
      case `${ESC}[1;3C`:
      case `${ESC}f`:
        this.#cursor = this.#wordEnd();
        break;
      case "\x7f": // Backspace
      case "\x08": // Ctrl-H
        if (this.#cursor > 0) {
          this.#chars.splice(this.#cursor - 1, 1);
          this.#cursor--;
        }
        break;
      case "\x04": // Ctrl-D on a line that is not empty: delete under the cursor
      case `${ESC}[3~`: // Delete
        this.#chars.splice(this.#cursor, 1);
        break;
      case "\x0b": // Ctrl-K
        this.#chars.splice(this.#cursor);
        break;
      case "\x15": // Ctrl-U
        this.#chars.splice(0, this.#cursor);
        this.#cursor = 0;
        break;
      case "\x17": { // Ctrl-W
        const start = this.#wordStart();
        this.#chars.splice(start, this.#cursor - start);
        this.#cursor = start;
        break;
      }
      case "\x0c": // Ctrl-L: clear the screen, then the line as it was
        return `${ESC}[H${ESC}[2J` + this.#render();
      case "\x10": // Ctrl-P
      case `${ESC}[A`:
      case `${ESC}OA`:
        this.#browse(-1);
        break;
      case "\x0e": // Ctrl-N
      case `${ESC}[B`:
      case `${ESC}OB`:
        this.#browse(1);
        break;
      case "\t":
        this.#insert([" ", " ", " ", " "]);
        break;
      default:
        // Printable text is inserted; other control keys and unknown escape sequences are ignored.
        if (key.length > 0 && !key.startsWith(ESC) && !isControl(key)) this.#insert([key]);
        else return "";
    }
    const after = this.#chars.join("") + "\0" + this.#cursor;
    return after === before ? "" : this.#render();
  }

  #insert(cps: string[]): void {
    this.#chars.splice(this.#cursor, 0, ...cps);
    this.#cursor += cps.length;
  }

  /** Up (-1) or Down (+1) through the history; the draft is kept below the newest line. */
  #browse(step: number): void {
    const to = this.#historyAt + step;
    if (to < 0 || to > this.#history.length) return;
    if (this.#historyAt === this.#history.length) this.#draft = this.#chars;
    this.#historyAt = to;
    this.#chars = to === this.#history.length ? this.#draft : Array.from(this.#history[to]);
    this.#cursor = this.#chars.length;
  }

  #wordStart(): number {
    let i = this.#cursor;
    while (i > 0 && this.#chars[i - 1] === " ") i--;
    while (i > 0 && this.#chars[i - 1] !== " ") i--;
    return i;
  }

  #wordEnd(): number {
    let i = this.#cursor;
    const n = this.#chars.length;
    while (i < n && this.#chars[i] === " ") i++;
    while (i < n && this.#chars[i] !== " ") i++;
    return i;
  }

  /** The text that redraws prompt and line on the current row, the cursor in place. */
  #render(): string {
    const promptWidth = textWidth(Array.from(this.#prompt));
    // A pseudo-terminal nobody sized reports 0 columns: assume 80 there.
    const asked = Math.floor(this.#columns());
    const columns = Number.isFinite(asked) && asked >= 8 ? asked : 80;
    const room = Math.max(1, columns - promptWidth - 1);
    // Scroll so that the cursor stays on the row.
    if (this.#cursor < this.#scroll) this.#scroll = this.#cursor;
    while (textWidth(this.#chars.slice(this.#scroll, this.#cursor)) > room) this.#scroll++;
    let end = this.#scroll;
    let width = 0;
    while (end < this.#chars.length && width + charWidth(this.#chars[end]) <= room) {
      width += charWidth(this.#chars[end]);
      end++;
    }
    const shown = this.#chars.slice(this.#scroll, end).join("");
    const column = promptWidth + textWidth(this.#chars.slice(this.#scroll, this.#cursor));
    return `\r${this.#prompt}${shown}${ESC}[K\r${column > 0 ? `${ESC}[${column}C` : ""}`;
  }
}

/**
 * The escape sequence starting at `cps[i]` (ESC), as code points: CSI
 * (`ESC [` parameters, then a final byte), SS3 (`ESC O x`) or `ESC x`;
 * undefined while it is incomplete.
 */
function escapeSequence(cps: readonly string[], i: number): string[] | undefined {
  if (i + 1 >= cps.length) return undefined;
  const second = cps[i + 1];
  if (second === "[") {
    for (let j = i + 2; j < cps.length && j - i <= MAX_SEQUENCE; j++) {
      const code = cps[j].codePointAt(0)!;
      if (code >= 0x40 && code <= 0x7e) return cps.slice(i, j + 1);
    }
    // Too long to be a key: drop the ESC and the bracket, keep the rest as text.
    return cps.length - i > MAX_SEQUENCE ? cps.slice(i, i + 2) : undefined;
  }
  if (second === "O") return i + 2 < cps.length ? cps.slice(i, i + 3) : undefined;
  return cps.slice(i, i + 2);
}

function isControl(cp: string): boolean {
  const c = cp.codePointAt(0)!;
  return c < 0x20 || c === 0x7f || (c >= 0x80 && c < 0xa0);
}

/** Columns one code point takes on a terminal (0, 1 or 2). */
export function charWidth(cp: string): number {
  const c = cp.codePointAt(0)!;
  if (
    (c >= 0x0300 && c <= 0x036f) || (c >= 0x200b && c <= 0x200f) ||
    (c >= 0xfe00 && c <= 0xfe0f) || c === 0x20e3 || (c >= 0xe0100 && c <= 0xe01ef)
  ) return 0;
  if (
    (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0x303e) ||
    (c >= 0x3041 && c <= 0x33ff) || (c >= 0x3400 && c <= 0x4dbf) ||
    (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xa000 && c <= 0xa4cf) ||
    (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
    (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
    (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
    (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd)
  ) return 2;
  return 1;
}

function textWidth(cps: readonly string[]): number {
  let w = 0;
  for (const c of cps) w += charWidth(c);
  return w;
}

/** The terminal's side of {@linkcode readLineFromTerminal} (Deno's stdin and stdout by default). */
export interface Terminal {
  /** Reads some input bytes; null at end of input. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes bytes to the screen. */
  write(bytes: Uint8Array): void;
  /** Turns raw mode (no echo, no line buffering, Ctrl-C as a byte) on or off. */
  setRaw(on: boolean): void;
  /** Columns of the screen. */
  columns(): number;
}

/** Deno's stdin and stdout as a {@linkcode Terminal}. */
export function denoTerminal(): Terminal {
  return {
    read: (b) => Deno.stdin.read(b),
    write: (b) => {
      let done = 0;
      while (done < b.length) done += Deno.stdout.writeSync(b.subarray(done));
    },
    setRaw: (on) => Deno.stdin.setRaw(on),
    columns: () => {
      try {
        return Deno.consoleSize().columns;
      } catch {
        return 80;
      }
    },
  };
}

/**
 * Reads one line on a terminal with `editor`: raw mode for the time of the
 * line (so Ctrl-C arrives as a key, not a signal), restored before it
 * returns, whatever happens. Keys typed after the line's end (the rest of a
 * paste) wait in the editor for the next call.
 *
 * @example
 * ```ts ignore
 * import { denoTerminal, LineEditor, readLineFromTerminal } from "./line_editor.ts";
 * const editor = new LineEditor({ prompt: "> " });
 * const event = await readLineFromTerminal(editor, denoTerminal());
 * if (event.kind === "line") console.log(event.text);
 * ```
 */
export async function readLineFromTerminal(
  editor: LineEditor,
  terminal: Terminal,
): Promise<LineEvent> {
  const enc = new TextEncoder();
  const dec = new TextDecoder("utf-8");
  const buffer = new Uint8Array(4096);
  terminal.setRaw(true);
  try {
    terminal.write(enc.encode(editor.redraw()));
    let input = "";
    while (true) {
      const { output, event } = editor.feed(input);
      terminal.write(enc.encode(output));
      if (event !== undefined) return event;
      const n = await terminal.read(buffer);
      if (n === null) {
        terminal.write(enc.encode("\r\n"));
        return { kind: "eof" };
      }
      input = dec.decode(buffer.subarray(0, n), { stream: true });
    }
  } finally {
    terminal.setRaw(false);
  }
}
