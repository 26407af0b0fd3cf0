import assert from "node:assert/strict";
import { FormatError } from "../errors.ts";
import { Rng } from "../../tests/util/rng.ts";
import {
  firstInvalidUtf8,
  jsonPath,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  parseJson,
  toPlain,
} from "./_json.ts";

const enc = new TextEncoder();
const origin = { file: "t.json", base: 100, root: "" };

function parse(text: string | Uint8Array) {
  return parseJson(typeof text === "string" ? enc.encode(text) : text, origin);
}

function fails(text: string | Uint8Array, field: string, offset: number, detail?: RegExp): void {
  assert.throws(() => parse(text), (e: unknown) => {
    assert.ok(e instanceof FormatError, `not a FormatError: ${e}`);
    assert.equal(e.file, "t.json");
    assert.equal(e.field, field, e.message);
    assert.equal(e.offset, offset, e.message);
    if (detail) assert.match(e.message, detail);
    return true;
  });
}

Deno.test("parseJson agrees with JSON.parse on valid documents and records byte offsets", () => {
  const text =
    ' {"a": [1, -2.5e3, true, false, null], "é": "x\\u00e9\\n\\"\\\\\\/", "b": {"c": {}}} ';
  const node = parse(text);
  assert.deepEqual(toPlain(node), JSON.parse(text));
  assert.equal(node.kind, "object");
  if (node.kind !== "object") return;
  assert.equal(node.offset, 101);
  assert.equal(node.keyOffsets.get("a"), 102);
  // "é" is two bytes in UTF-8: the offsets after it are byte offsets, not UTF-16 indices.
  const b = node.entries.get("b")!;
  assert.equal(b.offset, 100 + enc.encode(text).indexOf(enc.encode('{"c"')[0], 60));
  const arr = node.entries.get("a")!;
  assert.equal(arr.kind, "array");
  if (arr.kind === "array") {
    assert.deepEqual(arr.items.map((i) => i.offset - 100), [8, 11, 19, 25, 32]);
  }
});

Deno.test("parseJson round-trips random documents like JSON.parse", () => {
  const rng = new Rng(11);
  const gen = (depth: number): unknown => {
    switch (rng.int(0, depth > 4 ? 3 : 5)) {
      case 0:
        return rng.int(-1e6, 1e6) * (rng.next() < 0.5 ? 1 : 1e-3);
      case 1:
        return String.fromCharCode(
          ...Array.from({ length: rng.int(0, 6) }, () => rng.int(0, 0x2fff)),
        );
      case 2:
        return rng.next() < 0.5;
      case 3:
        return null;
      case 4:
        return Array.from({ length: rng.int(0, 4) }, () => gen(depth + 1));
      default:
        return Object.fromEntries(
          Array.from({ length: rng.int(0, 4) }, (_, k) => [`k${k}`, gen(depth + 1)]),
        );
    }
  };
  for (let k = 0; k < 300; k++) {
    const text = JSON.stringify(gen(0), null, k % 2 ? 1 : undefined);
    assert.deepEqual(toPlain(parse(text)), JSON.parse(text));
  }
});

Deno.test("parseJson refuses duplicate keys, naming the second one", () => {
  fails('{"a": 1, "a": 2}', "a", 109, /duplicate key \(first at byte 101\)/);
  fails('{"x": {"b": 1, "c": 2, "b": 3}}', "x.b", 123);
});

Deno.test("parseJson refuses syntax errors with the byte offset", () => {
  fails("", "(root)", 100, /end of the text/);
  fails("   ", "(root)", 103);
  fails("{", "(root)", 101);
  fails('{"a": 1,}', "(root)", 108);
  fails("[1, 2,]", "[2]", 106);
  fails("[01]", "(root)", 102, /expected ',' or '\]'/);
  fails("[1.]", "[0]", 103);
  fails("[1e]", "[0]", 103);
  fails("[-]", "[0]", 102);
  fails("NaN", "(root)", 100);
  fails('{"eps": NaN}', "eps", 108);
  fails('{"eps": Infinity}', "eps", 108);
  fails('{"eps": -Infinity}', "eps", 109);
  fails("{'a': 1}", "(root)", 101);
  fails('"abc', "(root)", 100, /unterminated/);
  fails('"a\tb"', "(root)", 102, /control character/);
  fails('"\\x"', "(root)", 101, /invalid escape/);
  fails('"\\u12"', "(root)", 101, /4 hex digits/);
  fails("[1] 2", "(root)", 104, /after the JSON value/);
  fails("tru", "(root)", 103);
  fails('{"a" 1}', "(root)", 105);
  fails("{1: 2}", "(root)", 101, /key string/);
});

Deno.test("parseJson refuses invalid UTF-8, naming the first bad byte", () => {
  const cases: [number[], number][] = [
    [[0x22, 0xff, 0x22], 1],
    [[0x22, 0x61, 0xc0, 0xaf, 0x22], 2], // overlong '/'
    [[0x22, 0xed, 0xa0, 0x80, 0x22], 1], // UTF-16 surrogate
    [[0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], 1], // above U+10FFFF
    [[0x22, 0xe2, 0x82], 1], // truncated sequence
  ];
  for (const [bytes, at] of cases) fails(new Uint8Array(bytes), "(root)", 100 + at, /UTF-8/);
});

Deno.test("firstInvalidUtf8 agrees with a fatal TextDecoder on random bytes", () => {
  const rng = new Rng(5);
  const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const pool = [
    0x41,
    0x7f,
    0x80,
    0xbf,
    0xc0,
    0xc2,
    0xdf,
    0xe0,
    0xa0,
    0xed,
    0x9f,
    0xef,
    0xf0,
    0x90,
    0xf4,
    0x8f,
    0xf5,
    0xff,
  ];
  for (let k = 0; k < 20_000; k++) {
    const b = Uint8Array.from({ length: rng.int(0, 8) }, () => pool[rng.int(0, pool.length - 1)]);
    let ok = true;
    try {
      fatal.decode(b);
    } catch {
      ok = false;
    }
    assert.equal(firstInvalidUtf8(b) < 0, ok, `[${[...b].map((x) => x.toString(16))}]`);
  }
});

Deno.test("parseJson bounds nesting depth instead of overflowing the stack", () => {
  const ok = "[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH);
  assert.doesNotThrow(() => parse(ok));
  fails(
    "[".repeat(MAX_JSON_DEPTH + 1),
    "[0]".repeat(MAX_JSON_DEPTH),
    100 + MAX_JSON_DEPTH,
    /nested/,
  );
  assert.throws(() => parse('{"a":'.repeat(100_000)), FormatError);
});

Deno.test("parseJson bounds the number of values instead of building a giant tree", () => {
  const small = { ...origin, maxValues: 6 };
  assert.doesNotThrow(() => parseJson(enc.encode("[1, 2, [3], 4]"), small));
  assert.throws(
    () => parseJson(enc.encode("[1, 2, [3], 4, 5]"), small),
    (e) =>
      e instanceof FormatError && e.offset === 100 + 15 && e.field === "[4]" &&
      /more than 6 JSON values/.test(e.message),
  );
  const many = "[" + "0,".repeat(MAX_JSON_VALUES) + "0]";
  assert.throws(
    () => parse(many),
    (e) => e instanceof FormatError && /more than 2000000 JSON values/.test(e.message),
  );
});

Deno.test("toPlain keeps __proto__ as a plain key", () => {
  const v = toPlain(parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(v), Object.prototype);
  assert.deepEqual(Object.keys(v), ["__proto__"]);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

Deno.test("jsonPath quotes keys that are not identifiers", () => {
  assert.equal(
    jsonPath("header", ["model.embed_tokens.weight", "shape", 1]),
    'header["model.embed_tokens.weight"].shape[1]',
  );
  assert.equal(jsonPath("", ["rope_scaling", "factor"]), "rope_scaling.factor");
  assert.equal(jsonPath("", []), "(root)");
});
