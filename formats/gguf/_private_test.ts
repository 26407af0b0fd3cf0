import assert from "node:assert/strict";
import { Rng } from "../../tests/util/rng.ts";
import { decodeUtf8, showU64 } from "./_private.ts";

const reference = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function expected(b: Uint8Array): string | undefined {
  try {
    return reference.decode(b);
  } catch {
    return undefined;
  }
}

function check(b: Uint8Array): void {
  const got = decodeUtf8(b, 0, b.length);
  const want = expected(b);
  if (got !== want) {
    assert.fail(`[${Array.from(b, (x) => x.toString(16)).join(" ")}]: ${got} !== ${want}`);
  }
}

Deno.test("decodeUtf8 agrees with a fatal TextDecoder on every 1- and 2-byte input", () => {
  for (let a = 0; a < 256; a++) {
    check(new Uint8Array([a]));
    for (let b = 0; b < 256; b++) check(new Uint8Array([a, b]));
  }
});

Deno.test("decodeUtf8 agrees with a fatal TextDecoder on edge sequences and random input", () => {
  const edges = [
    [0xe0, 0x9f, 0xbf], // overlong
    [0xe0, 0xa0, 0x80], // U+0800
    [0xed, 0x9f, 0xbf], // U+D7FF
    [0xed, 0xa0, 0x80], // surrogate
    [0xef, 0xbb, 0xbf], // BOM, kept
    [0xef, 0xbf, 0xbf], // U+FFFF
    [0xf0, 0x8f, 0xbf, 0xbf], // overlong
    [0xf0, 0x90, 0x80, 0x80], // U+10000
    [0xf4, 0x8f, 0xbf, 0xbf], // U+10FFFF
    [0xf4, 0x90, 0x80, 0x80], // > U+10FFFF
    [0xf5, 0x80, 0x80, 0x80],
    [0xf0, 0x9f, 0xa6],
    [0x41, 0xf0, 0x9f, 0xa6, 0x99, 0x42],
  ];
  for (const e of edges) check(new Uint8Array(e));
  const rng = new Rng(42);
  const pieces = [
    () => [rng.int(0, 0x7f)],
    () => [rng.int(0xc0, 0xdf), rng.int(0x70, 0xc0)],
    () => [rng.int(0xe0, 0xef), rng.int(0x70, 0xc0), rng.int(0x70, 0xc0)],
    () => [rng.int(0xf0, 0xf7), rng.int(0x70, 0xc0), rng.int(0x70, 0xc0), rng.int(0x70, 0xc0)],
    () => [rng.int(0, 255)],
  ];
  for (let i = 0; i < 50_000; i++) {
    const bytes: number[] = [];
    const n = rng.next() < 0.05 ? rng.int(200, 400) : rng.int(0, 12);
    while (bytes.length < n) bytes.push(...pieces[rng.int(0, pieces.length - 1)]());
    check(new Uint8Array(bytes));
  }
  // Valid text of every length around the JavaScript/TextDecoder switch.
  for (let n = 250; n < 262; n++) {
    const s = "\u00e9".repeat(n);
    const b = new TextEncoder().encode(s);
    assert.equal(decodeUtf8(b, 0, b.length), s);
    assert.equal(decodeUtf8(b, 2, b.length - 2), s.slice(1, -1));
  }
});

Deno.test("showU64 spells out huge values", () => {
  assert.equal(showU64((1n << 64n) - 1n), "18446744073709551615 (2^64-1)");
  assert.equal(showU64(1n << 63n), "9223372036854775808 (2^63)");
  assert.equal(showU64(1000n), "1000");
});
