/**
 * Helpers shared by the GGUF tests: a sample file with every value type,
 * byte patching, and a FormatError assertion.
 *
 * @module
 */

import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { ggmlTypeByName, type GgmlTypeInfo } from "../ggml/types.ts";
import type { GgufValue } from "./gguf_value.ts";
import { type GgufFile, type GgufLimits, parseGguf } from "./parse_gguf.ts";
import type { GgufWriteParts } from "./write_gguf.ts";

/** A ggml type by name, asserting cflow knows it. */
export function ggml(name: string): GgmlTypeInfo {
  const t = ggmlTypeByName(name);
  assert.ok(t, name);
  return t;
}

/** Metadata with one value of every type and one array of every element type. */
export function everyValue(): [string, GgufValue][] {
  return [
    ["general.architecture", { type: "string", value: "llama" }],
    ["s.u8", { type: "u8", value: 255 }],
    ["s.i8", { type: "i8", value: -128 }],
    ["s.u16", { type: "u16", value: 65535 }],
    ["s.i16", { type: "i16", value: -32768 }],
    ["s.u32", { type: "u32", value: 4294967295 }],
    ["s.i32", { type: "i32", value: -2147483648 }],
    ["s.f32", { type: "f32", value: Math.fround(0.1) }],
    ["s.bool", { type: "bool", value: true }],
    ["s.string", { type: "string", value: "h\u00e9llo \u{1f999} \ufeff\u0000" }],
    ["s.u64", { type: "u64", value: (1n << 64n) - 1n }],
    ["s.i64", { type: "i64", value: -(1n << 63n) }],
    ["s.f64", { type: "f64", value: 1 / 3 }],
    ["a.u8", { type: "array", elementType: "u8", value: new Uint8Array([0, 1, 255]) }],
    ["a.i8", { type: "array", elementType: "i8", value: new Int8Array([-128, 0, 127]) }],
    ["a.u16", { type: "array", elementType: "u16", value: new Uint16Array([0, 65535]) }],
    ["a.i16", { type: "array", elementType: "i16", value: new Int16Array([-32768, 32767]) }],
    ["a.u32", { type: "array", elementType: "u32", value: new Uint32Array([0, 4294967295]) }],
    ["a.i32", { type: "array", elementType: "i32", value: new Int32Array([-1, 2147483647]) }],
    [
      "a.f32",
      { type: "array", elementType: "f32", value: new Float32Array([0.5, -1e-5, Infinity, NaN]) },
    ],
    ["a.bool", { type: "array", elementType: "bool", value: [true, false, true] }],
    ["a.string", { type: "array", elementType: "string", value: ["a", "", "\u00fc", "\u{1f999}"] }],
    ["a.u64", { type: "array", elementType: "u64", value: new BigUint64Array([0n, 1n << 63n]) }],
    ["a.i64", { type: "array", elementType: "i64", value: new BigInt64Array([-1n, 1n << 62n]) }],
    ["a.f64", { type: "array", elementType: "f64", value: new Float64Array([-0, 2.5]) }],
    ["a.empty", { type: "array", elementType: "string", value: [] }],
  ];
}

/** Deterministic bytes. */
export function pattern(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 17) & 0xff;
  return out;
}

/** A small valid file: every value type and three tensors of different types. */
export function sampleParts(): GgufWriteParts {
  return {
    metadata: everyValue(),
    tensors: [
      { name: "norm.weight", dims: [8], type: ggml("F32"), data: pattern(32, 1) },
      { name: "q.weight", dims: [32, 2], type: ggml("Q8_0"), data: pattern(68, 2) },
      { name: "k.weight", dims: [64, 1, 1], type: ggml("Q4_0"), data: pattern(36, 3) },
    ],
  };
}

/** Parses bytes as `name`. */
export function parse(bytes: Uint8Array, limits?: Partial<GgufLimits>, name = "t.gguf"): GgufFile {
  return parseGguf(bytesSource(name, bytes), limits);
}

/** A copy of `bytes` with a little-endian u32 written at `offset`. */
export function patchU32(bytes: Uint8Array, offset: number, v: number): Uint8Array {
  const out = bytes.slice();
  new DataView(out.buffer).setUint32(offset, v, true);
  return out;
}

/** A copy of `bytes` with a little-endian u64 written at `offset`. */
export function patchU64(bytes: Uint8Array, offset: number, v: bigint): Uint8Array {
  const out = bytes.slice();
  new DataView(out.buffer).setBigUint64(offset, v, true);
  return out;
}

/** Offset of the first occurrence of `needle` (bytes or ASCII) in `bytes`. */
export function find(bytes: Uint8Array, needle: Uint8Array | string, from = 0): number {
  const n = typeof needle === "string" ? new TextEncoder().encode(needle) : needle;
  outer: for (let i = from; i + n.length <= bytes.length; i++) {
    for (let j = 0; j < n.length; j++) if (bytes[i + j] !== n[j]) continue outer;
    return i;
  }
  throw new Error(`needle not found`);
}

/** What a FormatError is expected to carry. */
export interface Expected {
  field: string;
  offset?: number;
  detail?: RegExp;
  file?: string;
}

/** Asserts `fn` throws a FormatError with the expected file, field, offset and detail. */
export function assertFormatError(fn: () => unknown, want: Expected): FormatError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  if (!(caught instanceof FormatError)) {
    assert.fail(`expected a FormatError for ${want.field}, got ${caught}`);
  }
  assert.equal(caught.file, want.file ?? "t.gguf");
  assert.equal(caught.field, want.field, caught.message);
  if (want.offset !== undefined) assert.equal(caught.offset, want.offset, caught.message);
  if (want.detail !== undefined) assert.match(caught.message, want.detail);
  return caught;
}
