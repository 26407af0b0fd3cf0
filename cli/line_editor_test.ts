import assert from "node:assert/strict";
import {
  charWidth,
  LineEditor,
  type LineEvent,
  readLineFromTerminal,
  type Terminal,
} from "./line_editor.ts";

const LEFT = "\x1b[D", UP = "\x1b[A", DOWN = "\x1b[B";
const HOME = "\x1b[H", END = "\x1b[F", DEL = "\x1b[3~";

/** A screen of one row per line that understands what the editor writes. */
class Screen {
  rows: string[][] = [[]];
  row = 0;
  col = 0;
  write(text: string): void {
    for (let i = 0; i < text.length;) {
      // deno-lint-ignore no-control-regex
      const csi = /^\x1b\[(\d*)([A-Za-z])/.exec(text.slice(i));
      if (csi) {
        const n = csi[1] === "" ? 1 : Number(csi[1]);
        if (csi[2] === "C") this.col += n;
        else if (csi[2] === "K") this.rows[this.row].splice(this.col);
        else if (csi[2] === "H") [this.row, this.col] = [0, 0];
        else if (csi[2] === "J") this.rows = [[]];
        else throw new Error(`unexpected sequence ${JSON.stringify(csi[0])}`);
        i += csi[0].length;
        continue;
      }
      const cp = String.fromCodePoint(text.codePointAt(i)!);
      i += cp.length;
      if (cp === "\r") this.col = 0;
      else if (cp === "\n") {
        this.row++;
        this.rows[this.row] ??= [];
      } else {
        assert.ok(
          cp.codePointAt(0)! >= 0x20,
          `a control character ${cp.codePointAt(0)} was written`,
        );
        const line = this.rows[this.row];
        while (line.length < this.col) line.push(" ");
        line[this.col] = cp;
        this.col += 1;
      }
    }
  }
  /** The rows as text, and the cursor column on the last row. */
  text(): string[] {
    return this.rows.map((r) => r.join(""));
  }
}

function session(columns = 80): {
  ed: LineEditor;
  screen: Screen;
  type: (keys: string) => LineEvent | undefined;
} {
  const ed = new LineEditor({ prompt: "> ", columns: () => columns });
  const screen = new Screen();
  screen.write(ed.redraw());
  return {
    ed,
    screen,
    type(keys) {
      const { output, event } = ed.feed(keys);
      screen.write(output);
      if (event !== undefined) screen.write(ed.redraw());
      return event;
    },
  };
}

Deno.test("LineEditor: typing, arrows, Home/End and Backspace edit the line in place", () => {
  const s = session();
  s.type("wrld");
  s.type(LEFT + LEFT + LEFT + "o");
  assert.deepEqual(s.screen.text(), ["> world"]);
  assert.equal(s.screen.col, 4);
  s.type(HOME + "hello " + END + "!");
  assert.deepEqual(s.screen.text(), ["> hello world!"]);
  s.type("\x7f\x7f" + "d.");
  assert.deepEqual(s.screen.text(), ["> hello world."]);
  assert.deepEqual(s.type("\r"), { kind: "line", text: "hello world." });
  assert.deepEqual(s.screen.text(), ["> hello world.", "> "]);
});

Deno.test("LineEditor: Ctrl-A/E/B/F/K/U/W and Delete", () => {
  const s = session();
  s.type("one two three");
  s.type("\x17"); // Ctrl-W: the last word
  assert.deepEqual(s.screen.text(), ["> one two "]);
  s.type("\x01\x06\x06\x06" + "\x0b"); // Ctrl-A, three right, Ctrl-K
  assert.deepEqual(s.screen.text(), ["> one"]);
  s.type("\x05 more" + "\x02\x02\x02\x02" + "\x15"); // Ctrl-E, type, four left, Ctrl-U
  assert.deepEqual(s.screen.text(), ["> more"]);
  assert.equal(s.screen.col, 2);
  s.type(DEL + "\x04"); // Delete and Ctrl-D on a non-empty line both delete under the cursor
  assert.deepEqual(s.screen.text(), ["> re"]);
  assert.deepEqual(s.type("\n"), { kind: "line", text: "re" });
});

Deno.test("LineEditor: Up and Down walk the history and keep the draft", () => {
  const s = session();
  s.type("first\r");
  s.type("second\r");
  s.type("second\r"); // a repeat is kept once
  s.type("   \r"); // blank lines are not kept
  assert.deepEqual(s.ed.history, ["first", "second"]);
  s.type("draft");
  s.type(UP);
  assert.equal(s.screen.text().at(-1), "> second");
  s.type(UP + UP); // past the oldest: stays there
  assert.equal(s.screen.text().at(-1), "> first");
  s.type(DOWN + DOWN);
  assert.equal(s.screen.text().at(-1), "> draft");
  s.type(UP + " again");
  assert.deepEqual(s.type("\r"), { kind: "line", text: "second again" });
});

Deno.test("LineEditor: Ctrl-C gives up the line, Ctrl-D at an empty line ends", () => {
  const s = session();
  s.type("half a thought");
  assert.deepEqual(s.type("\x03"), { kind: "interrupt" });
  assert.deepEqual(s.screen.text(), ["> half a thought^C", "> "]);
  assert.deepEqual(s.type("\x03"), { kind: "interrupt" }); // at an empty prompt: a fresh line
  assert.deepEqual(s.screen.text(), ["> half a thought^C", "> ^C", "> "]);
  assert.deepEqual(s.type("\x04"), { kind: "eof" });
  assert.equal(s.screen.row, 3); // Ctrl-D ended the row with a newline
});

Deno.test("LineEditor: escape sequences split across reads, unknown ones ignored", () => {
  const s = session();
  s.type("ab");
  s.type("\x1b");
  s.type("[");
  s.type("D");
  s.type("X");
  s.type("\x1b[15~" + "\x1b[1;2P" + "\x1bOP"); // F5, Shift-F1, F1: nothing
  assert.deepEqual(s.screen.text(), ["> aXb"]);
  assert.deepEqual(s.type("\r"), { kind: "line", text: "aXb" });
});

Deno.test("LineEditor: a paste of several lines enters one line per prompt", () => {
  const s = session();
  assert.deepEqual(s.type("one\ntwo\nthr"), { kind: "line", text: "one" });
  assert.ok(s.ed.hasPending);
  assert.deepEqual(s.type(""), { kind: "line", text: "two" });
  assert.equal(s.type(""), undefined);
  assert.deepEqual(s.screen.text(), ["> one", "> two", "> thr"]);
});

Deno.test("LineEditor: a line wider than the terminal scrolls and keeps the cursor on the row", () => {
  const s = session(20);
  const long = "abcdefghijklmnopqrstuvwxyz0123456789";
  s.type(long);
  const row = s.screen.text()[0];
  assert.ok(row.length <= 20, row);
  assert.ok(row.startsWith("> ") && row.endsWith("6789"), row);
  assert.ok(s.screen.col < 20);
  s.type(HOME);
  assert.equal(s.screen.text()[0], "> abcdefghijklmnopq");
  assert.equal(s.screen.col, 2);
  assert.deepEqual(s.type("\r"), { kind: "line", text: long });
});

Deno.test("LineEditor: wide characters take two columns, combining marks none", () => {
  assert.deepEqual(["a", "é", "\u0301", "中", "😀", "\u200b"].map(charWidth), [1, 1, 0, 2, 2, 0]);
  const s = session();
  s.type("中文" + LEFT);
  assert.equal(s.screen.col, 4); // "> " + one wide character
  assert.deepEqual(s.type("\r"), { kind: "line", text: "中文" });
});

Deno.test("readLineFromTerminal: raw mode for the line only, restored on every path", async () => {
  const enc = new TextEncoder();
  const chunks = ["hi", "\x1b[D", "!", "\r", "next\r"];
  const modes: boolean[] = [];
  const written: string[] = [];
  const term: Terminal = {
    read(b) {
      const c = chunks.shift();
      if (c === undefined) return Promise.resolve(null);
      const bytes = enc.encode(c);
      b.set(bytes);
      return Promise.resolve(bytes.length);
    },
    write: (b) => void written.push(new TextDecoder().decode(b)),
    setRaw: (on) => void modes.push(on),
    columns: () => 80,
  };
  const ed = new LineEditor({ prompt: "> " });
  assert.deepEqual(await readLineFromTerminal(ed, term), { kind: "line", text: "h!i" });
  assert.deepEqual(await readLineFromTerminal(ed, term), { kind: "line", text: "next" });
  assert.deepEqual(await readLineFromTerminal(ed, term), { kind: "eof" }); // end of input
  assert.deepEqual(modes, [true, false, true, false, true, false]);
  const failing: Terminal = { ...term, read: () => Promise.reject(new Error("gone")) };
  await assert.rejects(() => readLineFromTerminal(ed, failing), /gone/);
  assert.equal(modes.at(-1), false);
});

Deno.test("LineEditor: a terminal that reports no width is taken as 80 columns", () => {
  const s = session(0);
  s.type("a line of some length");
  assert.deepEqual(s.screen.text(), ["> a line of some length"]);
});
