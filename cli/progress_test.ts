import assert from "node:assert/strict";
import { progressBar } from "./progress.ts";

function capture(): { write: (b: Uint8Array) => void; text: () => string } {
  const parts: string[] = [];
  const d = new TextDecoder();
  return { write: (b) => void parts.push(d.decode(b)), text: () => parts.join("") };
}

Deno.test("progressBar: none when stderr is not a terminal", () => {
  assert.equal(progressBar({ terminal: false }), undefined);
});

Deno.test("progressBar: a labelled bar that ends its line at 100%", () => {
  const out = capture();
  const bar = progressBar({ terminal: true, label: "converting", write: out.write })!;
  bar(0, 2_000_000);
  bar(2_000_000, 2_000_000);
  bar(2_000_000, 2_000_000); // after the end: nothing more
  const lines = out.text().split("\r").filter((l) => l !== "");
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^converting \[\.{30}\]   0% 0\.0\/2\.0 MB [0-9.]+ MB\/s ETA \? $/);
  assert.match(lines[1], /^converting \[#{30}\] 100% 2\.0\/2\.0 MB [0-9.]+ MB\/s ETA 0s \n$/);
});

Deno.test("progressBar: work done within delayMs draws nothing", () => {
  const out = capture();
  const bar = progressBar({ terminal: true, delayMs: 60_000, write: out.write })!;
  bar(1, 10);
  bar(10, 10);
  assert.equal(out.text(), "");
});
