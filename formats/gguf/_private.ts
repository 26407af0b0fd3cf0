/**
 * Internals of the GGUF reader: a bounded, buffered cursor over a
 * {@link ByteSource}, a strict UTF-8 decoder, the value-type table and
 * field-name formatting. Not part of the public API.
 *
 * @module
 */

import { FormatError } from "../errors.ts";
import type { ByteSource } from "../byte_source.ts";
import type { GgufValueType } from "./gguf_value.ts";

/** True on little-endian hosts (every platform Deno ships for). */
export const LITTLE_ENDIAN: boolean = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Value type names indexed by their GGUF id (0..12). */
export const VALUE_TYPE_NAMES: readonly GgufValueType[] = [
  "u8",
  "i8",
  "u16",
  "i16",
  "u32",
  "i32",
  "f32",
  "bool",
  "string",
  "array",
  "u64",
  "i64",
  "f64",
];

/** GGUF id of each value type name. */
export const VALUE_TYPE_IDS: ReadonlyMap<GgufValueType, number> = new Map(
  VALUE_TYPE_NAMES.map((n, i) => [n, i]),
);

/** Smallest encoding of one value of each type, in bytes (array: u32 type + u64 count). */
export const MIN_VALUE_BYTES: Readonly<Record<GgufValueType, number>> = {
  u8: 1,
  i8: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  bool: 1,
  string: 8,
  array: 12,
  u64: 8,
  i64: 8,
  f64: 8,
};

/** Fixed element size of the numeric (and bool) types; strings and arrays have none. */
export const FIXED_SIZE: Readonly<Partial<Record<GgufValueType, number>>> = {
  u8: 1,
  i8: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  bool: 1,
  u64: 8,
  i64: 8,
  f64: 8,
};

/** Header bytes: magic, version, tensor count, kv count. */
export const HEADER_BYTES = 24;

/** Bytes the cursor copies out of the source per refill. */
const CHUNK = 256 * 1024;

const TWO_32 = 4294967296;

/** A key shown in a field name, JSON-quoted and shortened when very long. */
export function quoteKey(key: string): string {
  const shown = key.length > 80 ? `${key.slice(0, 77)}...` : key;
  return JSON.stringify(shown);
}

/** `kv["key"]`: how fields of one metadata entry are named in errors. */
export function kvField(key: string): string {
  return `kv[${quoteKey(key)}]`;
}

/** Formats a byte count or a u64 for messages: exact, with 2^k shorthands for huge ones. */
export function showU64(v: bigint): string {
  if (v === (1n << 64n) - 1n) return `${v} (2^64-1)`;
  if (v >= 1n << 53n && (v & (v - 1n)) === 0n) return `${v} (2^${v.toString(2).length - 1})`;
  return `${v}`;
}

/**
 * Strict UTF-8 decoding, as `TextDecoder("utf-8", { fatal: true, ignoreBOM: true })`:
 * returns undefined for invalid input instead of throwing. Short strings are
 * decoded in JavaScript (a native decode call per vocabulary entry costs more
 * than the decoding); long ones by the TextDecoder.
 */
export function decodeUtf8(bytes: Uint8Array, start: number, end: number): string | undefined {
  const n = end - start;
  if (n > SHORT_STRING) {
    try {
      return DECODER.decode(bytes.subarray(start, end));
    } catch {
      return undefined;
    }
  }
  const units = UNITS;
  let u = 0;
  let i = start;
  while (i < end) {
    const b0 = bytes[i];
    if (b0 < 0x80) {
      units[u++] = b0;
      i++;
      continue;
    }
    let need: number;
    let cp: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      need = 1;
      cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      need = 2;
      cp = b0 & 0x0f;
      if (b0 === 0xe0) lo = 0xa0;
      else if (b0 === 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      need = 3;
      cp = b0 & 0x07;
      if (b0 === 0xf0) lo = 0x90;
      else if (b0 === 0xf4) hi = 0x8f;
    } else {
      return undefined;
    }
    if (i + need >= end) return undefined; // the sequence is cut off
    const b1 = bytes[i + 1];
    if (b1 < lo || b1 > hi) return undefined;
    cp = (cp << 6) | (b1 & 0x3f);
    for (let k = 2; k <= need; k++) {
      const b = bytes[i + k];
      if (b < 0x80 || b > 0xbf) return undefined;
      cp = (cp << 6) | (b & 0x3f);
    }
    i += need + 1;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      units[u++] = 0xd800 | (cp >> 10);
      units[u++] = 0xdc00 | (cp & 0x3ff);
    } else {
      units[u++] = cp;
    }
  }
  return String.fromCharCode.apply(null, units.subarray(0, u) as unknown as number[]);
}

/** Longest string (bytes) decoded in JavaScript. */
const SHORT_STRING = 256;
const UNITS = new Uint16Array(SHORT_STRING);
const DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Reads a {@link ByteSource} front to back through a buffer of copied
 * chunks. Every read checks the bytes left first and throws a
 * {@link FormatError} naming the field and its offset.
 */
export class Cursor {
  /** The source read. */
  readonly src: ByteSource;
  /** Absolute offset of the next byte to read. */
  pos = 0;
  #buf: Uint8Array = new Uint8Array(0);
  #view: DataView = new DataView(new ArrayBuffer(0));
  #start = 0;

  constructor(src: ByteSource) {
    this.src = src;
  }

  /** Bytes between the cursor and the end of the source. */
  get remaining(): number {
    return this.src.size - this.pos;
  }

  /** A FormatError at `offset` (default: the cursor) in this source. */
  error(field: string, detail: string, offset: number = this.pos): FormatError {
    return new FormatError(this.src.name, field, offset, detail);
  }

  /** Ensures [pos, pos + n) is buffered; returns its index in the buffer. */
  #need(n: number, field: string): number {
    const rel = this.pos - this.#start;
    if (rel >= 0 && rel + n <= this.#buf.length) return rel;
    if (n > this.remaining) {
      throw this.error(
        field,
        `needs ${n} bytes but the file ends at byte ${this.src.size} (truncated?)`,
      );
    }
    const len = Math.min(Math.max(n, CHUNK), this.remaining);
    this.#buf = this.src.read(this.pos, len, field);
    this.#view = new DataView(this.#buf.buffer, this.#buf.byteOffset, this.#buf.byteLength);
    this.#start = this.pos;
    return 0;
  }

  u8(field: string): number {
    const i = this.#need(1, field);
    this.pos += 1;
    return this.#buf[i];
  }

  i8(field: string): number {
    const i = this.#need(1, field);
    this.pos += 1;
    return this.#view.getInt8(i);
  }

  u16(field: string): number {
    const i = this.#need(2, field);
    this.pos += 2;
    return this.#view.getUint16(i, true);
  }

  i16(field: string): number {
    const i = this.#need(2, field);
    this.pos += 2;
    return this.#view.getInt16(i, true);
  }

  u32(field: string): number {
    const i = this.#need(4, field);
    this.pos += 4;
    return this.#view.getUint32(i, true);
  }

  i32(field: string): number {
    const i = this.#need(4, field);
    this.pos += 4;
    return this.#view.getInt32(i, true);
  }

  f32(field: string): number {
    const i = this.#need(4, field);
    this.pos += 4;
    return this.#view.getFloat32(i, true);
  }

  f64(field: string): number {
    const i = this.#need(8, field);
    this.pos += 8;
    return this.#view.getFloat64(i, true);
  }

  u64(field: string): bigint {
    const i = this.#need(8, field);
    this.pos += 8;
    return this.#view.getBigUint64(i, true);
  }

  i64(field: string): bigint {
    const i = this.#need(8, field);
    this.pos += 8;
    return this.#view.getBigInt64(i, true);
  }

  /**
   * A u64 as a number: exact below 2^53; at or above 2^53 the result is
   * only approximate, but still at least 2^53, which every caller treats as
   * too large. Error messages re-read the exact value with {@link u64At}.
   */
  u64n(field: string): number {
    const i = this.#need(8, field);
    this.pos += 8;
    return this.#view.getUint32(i + 4, true) * TWO_32 + this.#view.getUint32(i, true);
  }

  /** The exact u64 at an absolute offset (for error messages). */
  u64At(offset: number): bigint {
    const b = this.src.read(offset, 8, "u64");
    return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true);
  }

  /**
   * The next `n` bytes. The result may be a view into the cursor's buffer,
   * valid until the next read: copy what must be kept. Spans of a chunk or
   * more are read from the source with one call.
   */
  bytes(n: number, field: string): Uint8Array {
    const rel = this.pos - this.#start;
    if (rel >= 0 && rel + n <= this.#buf.length) {
      this.pos += n;
      return this.#buf.subarray(rel, rel + n);
    }
    if (n >= CHUNK) {
      if (n > this.remaining) {
        throw this.error(
          field,
          `needs ${n} bytes but the file ends at byte ${this.src.size} (truncated?)`,
        );
      }
      const out = this.src.read(this.pos, n, field);
      this.pos += n;
      return out;
    }
    const i = this.#need(n, field);
    this.pos += n;
    return this.#buf.subarray(i, i + n);
  }

  /**
   * A GGUF string: u64 byte length (at most `maxBytes`, and no more than
   * the bytes left), then strict UTF-8.
   */
  string(field: string, maxBytes: number): string {
    const at = this.pos;
    const n = this.u64n(`${field}.length`);
    if (n > maxBytes) {
      throw this.error(
        `${field}.length`,
        `string of ${showU64(this.u64At(at))} bytes exceeds the limit of ${maxBytes}`,
        at,
      );
    }
    if (n > this.remaining) {
      throw this.error(
        `${field}.length`,
        `string of ${n} bytes runs past the end of the file at byte ${this.src.size} (truncated?)`,
        at,
      );
    }
    const start = this.pos;
    if (n <= SHORT_STRING) {
      const i = this.#need(n, field);
      this.pos += n;
      const s = decodeUtf8(this.#buf, i, i + n);
      if (s === undefined) throw this.error(field, "string is not valid UTF-8", start);
      return s;
    }
    const b = this.bytes(n, field);
    const s = decodeUtf8(b, 0, n);
    if (s === undefined) throw this.error(field, "string is not valid UTF-8", start);
    return s;
  }
}
