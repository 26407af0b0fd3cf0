import assert from "node:assert/strict";
import { progressBar } from "./progress.ts";

function capture(): { write: (b: Uint8Array) => void; text: () => string } {
  const parts: string[] = [];
  const d = new TextDecoder();
  return { write: (b) => void parts.push(d.decode(b)), text: () => parts.join("") };
}

/** What a terminal shows after `text`: \r returns to column 0, ESC[K erases to the end. */
function screen(text: string): string[] {
  const rows: string[] = [""];
  let col = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "\r") col = 0;
    else if (ch === "\n") {
      rows.push("");
      col = 0;
    } else if (text.startsWith("\x1b[K", i)) {
      rows[rows.length - 1] = rows[rows.length - 1].slice(0, col);
      i += 2;
    } else {
      const row = rows[rows.length - 1];
      rows[rows.length - 1] = row.slice(0, col) + ch + row.slice(col + 1);
      col++;
    }
  }
  return rows;
}

Deno.test("progressBar: none off a terminal when lines are not wanted either", () => {
  assert.equal(progressBar({ terminal: false, lineDelayMs: Infinity }), undefined);
});

Deno.test("progressBar: a labelled bar that ends its line at 100%", () => {
  const out = capture();
  const bar = progressBar({ terminal: true, label: "converting", write: out.write })!;
  bar(0, 2_000_000);
  bar(2_000_000, 2_000_000);
  bar(2_000_000, 2_000_000); // after the end: nothing more
  const lines = out.text().split("\r").filter((l) => l !== "");
  assert.equal(lines.length, 2);
  // deno-lint-ignore no-control-regex
  assert.match(lines[0], /^converting \[\.{30}\]   0% 0\.0\/2\.0 MB [0-9.]+ MB\/s ETA \?\x1b\[K$/);
  // deno-lint-ignore no-control-regex
  assert.match(lines[1], /^converting \[#{30}\] 100% 2\.0\/2\.0 MB [0-9.]+ MB\/s ETA 0s\x1b\[K\n$/);
});

Deno.test("progressBar: a redraw with shorter figures leaves no debris on the screen", () => {
  const out = capture();
  let t = 0;
  const bar = progressBar({ terminal: true, label: "converting", write: out.write, now: () => t })!;
  // A slow start (ETA in the hundreds of seconds), then fast: the ETA and the rate shrink.
  t = 1000;
  bar(1_000_000, 1_000_000_000);
  t = 2000;
  bar(900_000_000, 1_000_000_000);
  const before = screen(out.text());
  assert.equal(before.length, 1);
  assert.match(
    before[0],
    /^converting \[#{27}\.{3}\] {2}90% 900\.0\/1000\.0 MB 450\.0 MB\/s ETA 0s$/,
  );
  t = 2100;
  bar(1_000_000_000, 1_000_000_000);
  const after = screen(out.text());
  assert.deepEqual(after.slice(1), [""]); // the line ended
  assert.match(after[0], /^converting \[#{30}\] 100% 1000\.0\/1000\.0 MB [0-9.]+ MB\/s ETA 0s$/);
});

Deno.test("progressBar: work done within delayMs draws nothing", () => {
  const out = capture();
  const bar = progressBar({ terminal: true, delayMs: 60_000, write: out.write })!;
  bar(1, 10);
  bar(10, 10);
  assert.equal(out.text(), "");
});

Deno.test("progressBar: off a terminal, a few lines with percent and elapsed time, no escapes", () => {
  const out = capture();
  let t = 0;
  const bar = progressBar({
    terminal: false,
    label: "converting",
    write: out.write,
    now: () => t,
  })!;
  for (let i = 0; i <= 100; i++) {
    t = i * 300; // 30 s of work, a report every 0.3 s
    bar(i * 4_910_000, 491_000_000);
  }
  const lines = out.text().split("\n");
  assert.equal(lines.pop(), "");
  assert.ok(!out.text().includes("\x1b") && !out.text().includes("\r"));
  assert.equal(lines[0], "cflow: converting 7% (34.4 of 491.0 MB, 2.1 s)");
  assert.equal(lines.at(-1), "cflow: converting done (491.0 MB, 30.0 s)");
  // One line per quarter crossed or every 10 s: a handful, never one per report.
  assert.ok(lines.length >= 5 && lines.length <= 9, lines.join("\n"));
  for (const l of lines.slice(1, -1)) {
    assert.match(l, /^cflow: converting \d+% \(.* MB, \d+\.\d s\)$/);
  }
});

Deno.test("progressBar: off a terminal, quick work prints nothing", () => {
  const out = capture();
  let t = 0;
  const bar = progressBar({ terminal: false, write: out.write, now: () => t })!;
  bar(0, 10);
  t = 1500;
  bar(10, 10);
  bar(10, 10);
  assert.equal(out.text(), "");
});
