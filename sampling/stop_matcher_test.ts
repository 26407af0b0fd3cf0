import assert from "node:assert/strict";
import { StopMatcher } from "./stop_matcher.ts";

/** Feeds `chunks`, returns everything emitted (plus the flush if not stopped) and the stop. */
function run(
  stops: string[],
  chunks: string[],
): { text: string; stopped: boolean; matched?: string } {
  const m = new StopMatcher(stops);
  let text = "";
  for (const c of chunks) {
    const r = m.push(c);
    // Never emits anything after stopping.
    if (m.stopped) assert.equal(r.stopped, true);
    text += r.emit;
  }
  if (!m.stopped) text += m.flush();
  return { text, stopped: m.stopped, matched: m.matched };
}

/** The reference answer: the text cut before the stop that is completed first. */
function reference(stops: string[], full: string): { text: string; stopped: boolean } {
  let end = -1, at = -1;
  for (const s of stops) {
    const i = full.indexOf(s);
    if (i < 0) continue;
    const e = i + s.length;
    if (end < 0 || e < end || (e === end && i < at)) {
      end = e;
      at = i;
    }
  }
  return at < 0 ? { text: full, stopped: false } : { text: full.slice(0, at), stopped: true };
}

/** Every way to cut `s` into chunks at the given number of random places (deterministic). */
function splits(s: string, seed: number, count: number): string[][] {
  const out: string[][] = [];
  let x = seed;
  for (let k = 0; k < count; k++) {
    const cuts: number[] = [];
    for (let i = 1; i < s.length; i++) {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      if (x % 3 === 0) cuts.push(i);
    }
    const parts: string[] = [];
    let prev = 0;
    for (const c of [...cuts, s.length]) {
      parts.push(s.slice(prev, c));
      prev = c;
    }
    out.push(parts);
  }
  return out;
}

Deno.test("a stop string split across chunks is never emitted", () => {
  const m = new StopMatcher(["<|im_end|>"]);
  assert.deepEqual(m.push("Hello"), { emit: "Hello", stopped: false });
  assert.deepEqual(m.push(" world<|"), { emit: " world", stopped: false });
  assert.deepEqual(m.push("im_"), { emit: "", stopped: false });
  assert.deepEqual(m.push("end"), { emit: "", stopped: false });
  assert.deepEqual(m.push("|>and more"), { emit: "", stopped: true });
  assert.equal(m.matched, "<|im_end|>");
  assert.deepEqual(m.push("x"), { emit: "", stopped: true });
  assert.equal(m.flush(), "");
});

Deno.test("a false start is released once it cannot be a stop any more", () => {
  const m = new StopMatcher(["<|im_end|>"]);
  assert.deepEqual(m.push("a<|im"), { emit: "a", stopped: false });
  assert.deepEqual(m.push("age|>"), { emit: "<|image|>", stopped: false });
  // At the end, held text is flushed.
  assert.deepEqual(m.push("b<|"), { emit: "b", stopped: false });
  assert.equal(m.flush(), "<|");
  assert.equal(m.stopped, false);
});

Deno.test("overlapping and self-overlapping stop strings", () => {
  // Self-overlap: "aab" in "aaab" starts at 1.
  assert.deepEqual(run(["aab"], ["a", "a", "a", "b"]), {
    text: "a",
    stopped: true,
    matched: "aab",
  });
  // Two stops that overlap: the one completed first wins, even if it starts later, so the
  // answer does not depend on the chunking.
  for (const chunks of [["xab", "cd"], ["xabcd"], ["x", "a", "b", "c", "d"]]) {
    assert.deepEqual(run(["abcd", "bc"], chunks), { text: "xa", stopped: true, matched: "bc" });
  }
  assert.deepEqual(run(["bcd", "abcde"], ["xabcde"]), {
    text: "xa",
    stopped: true,
    matched: "bcd",
  });
  assert.deepEqual(run(["cde", "abcde"], ["xab", "cde"]), {
    text: "x",
    stopped: true,
    matched: "abcde",
  });
  // Same end: the longer one is reported.
  assert.deepEqual(run(["bc", "abc"], ["zabc"]), { text: "z", stopped: true, matched: "abc" });
  // A stop that is a prefix of another.
  assert.deepEqual(run(["\n", "\n\nUser:"], ["hi", "\n"]), {
    text: "hi",
    stopped: true,
    matched: "\n",
  });
  // Repetitive text against a repetitive stop.
  assert.deepEqual(run(["abab"], ["aba", "bab"]), { text: "", stopped: true, matched: "abab" });
  assert.deepEqual(run(["abac"], ["ab", "ab", "ac"]), {
    text: "ab",
    stopped: true,
    matched: "abac",
  });
});

Deno.test("random chunkings agree with cutting the whole text", () => {
  const stops = ["</s>", "\n\n", "ANSWER:", "aa", "\u{1F600}!", "abcd", "bc", "s> w"];
  const texts = [
    "Hello</s> world",
    "no stop here at all <",
    "one\ntwo\n\nthree",
    "baba aab",
    "smile \u{1F600} and \u{1F600}! done",
    "ANSWE ANSWER ANSWER: 42",
    "</</s",
    "xabcd abcd",
    "",
  ];
  for (const full of texts) {
    const expected = reference(stops, full);
    for (const chunks of [...splits(full, 1, 20), [...full], [full]]) {
      const got = run(stops, chunks);
      assert.equal(got.text, expected.text, `${JSON.stringify(full)} as ${JSON.stringify(chunks)}`);
      assert.equal(got.stopped, expected.stopped);
    }
  }
});

Deno.test("emitted text never contains a stop, and is always a prefix of the answer", () => {
  const stops = ["xyz", "yy"];
  const full = "axyxyyzxyz";
  const expected = reference(stops, full).text;
  const m = new StopMatcher(stops);
  let emitted = "";
  for (const c of full) {
    emitted += m.push(c).emit;
    assert.ok(expected.startsWith(emitted), emitted);
  }
  assert.equal(emitted, expected);
});

Deno.test("no stop strings: everything passes through at once", () => {
  const m = new StopMatcher([]);
  assert.deepEqual(m.push("anything"), { emit: "anything", stopped: false });
  assert.equal(m.flush(), "");
});

Deno.test("reset and flush start over", () => {
  const m = new StopMatcher(["END"]);
  m.push("aEN");
  m.reset();
  assert.deepEqual(m.push("D"), { emit: "D", stopped: false });
  m.push("xE");
  assert.equal(m.flush(), "E");
  // After a flush the old partial match is gone.
  assert.deepEqual(m.push("ND"), { emit: "ND", stopped: false });
  m.push("END");
  assert.equal(m.stopped, true);
  m.reset();
  assert.equal(m.stopped, false);
  assert.equal(m.matched, undefined);
  assert.deepEqual(m.push("ok"), { emit: "ok", stopped: false });
});

Deno.test("long stops and texts stay linear", () => {
  const stop = "a".repeat(4095) + "b";
  const m = new StopMatcher([stop]);
  const t0 = performance.now();
  let emitted = 0;
  for (let i = 0; i < 2000; i++) emitted += m.push("a".repeat(50)).emit.length;
  assert.equal(emitted, 2000 * 50 - 4095);
  assert.deepEqual(m.push("b"), { emit: "", stopped: true });
  assert.ok(performance.now() - t0 < 2000);
});

Deno.test("StopMatcher validates its arguments", () => {
  assert.throws(() => new StopMatcher("x" as never), TypeError);
  assert.throws(() => new StopMatcher([1] as never), /stops\[0\] must be a string, got number/);
  assert.throws(() => new StopMatcher(["a", ""]), /stops\[1\] length 0 is not in \[1, 4096\]/);
  assert.throws(() => new StopMatcher(["x".repeat(4097)]), /stops\[0\] length 4097/);
  assert.throws(() => new StopMatcher(Array(65).fill("x")), /65 stop strings, more than 64/);
  assert.throws(() => new StopMatcher(["a"]).push(3 as never), /text must be a string, got number/);
  // Duplicates are fine.
  assert.deepEqual(run(["x", "x"], ["axb"]), { text: "a", stopped: true, matched: "x" });
});
