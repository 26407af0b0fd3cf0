/**
 * A strict JSON parser over UTF-8 bytes that remembers where every value
 * starts, refuses duplicate object keys and bounds its nesting depth.
 *
 * `JSON.parse` cannot do any of this: it silently keeps the last of two
 * duplicate keys, reports positions in UTF-16 code units rather than bytes,
 * and recurses as deep as the input asks. The safetensors header, the
 * checkpoint index and `config.json` all go through this parser, so every
 * error can name the byte it is about.
 *
 * Internal to `formats/`: not re-exported by any `mod.ts`.
 *
 * @module
 */

import { FormatError } from "../errors.ts";

/** A parsed JSON value and the byte offset (in the file) where it starts. */
export type JsonNode =
  | JsonObject
  | { readonly kind: "array"; readonly offset: number; readonly items: readonly JsonNode[] }
  | { readonly kind: "string"; readonly offset: number; readonly value: string }
  | { readonly kind: "number"; readonly offset: number; readonly value: number }
  | { readonly kind: "boolean"; readonly offset: number; readonly value: boolean }
  | { readonly kind: "null"; readonly offset: number };

/** A JSON object: keys in document order, each with its value and key offset. */
export interface JsonObject {
  /** Discriminant. */
  readonly kind: "object";
  /** Byte offset of `{`. */
  readonly offset: number;
  /** Values by key, in document order (a Map, so `__proto__` is just a key). */
  readonly entries: ReadonlyMap<string, JsonNode>;
  /** Byte offset of each key's opening quote. */
  readonly keyOffsets: ReadonlyMap<string, number>;
}

/** Where the bytes came from, for error messages. */
export interface JsonOrigin {
  /** File name for {@link FormatError}. */
  readonly file: string;
  /** Offset of the JSON text inside the file (e.g. 8 for a safetensors header). */
  readonly base: number;
  /** Field name used for the document root, e.g. `header` (may be empty). */
  readonly root: string;
  /** Most values (of any kind, nested ones included) accepted; default {@link MAX_JSON_VALUES}. */
  readonly maxValues?: number;
}

/** Nesting deeper than this is refused (the stack is finite). */
export const MAX_JSON_DEPTH = 64;

/**
 * Documents with more values than this are refused: each parsed value costs
 * tens of bytes of heap, and a 100 MB header of `0,0,0,…` would otherwise
 * become a multi-gigabyte tree. A safetensors header needs about 8 values
 * per tensor, so this allows some 250 000 tensors per file.
 */
export const MAX_JSON_VALUES = 2_000_000;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Formats a JSON path: `root.key`, `root["odd.key"]`, `root[3]`. */
export function jsonPath(root: string, parts: readonly (string | number)[]): string {
  let out = root;
  for (const p of parts) {
    if (typeof p === "number") out += `[${p}]`;
    else if (IDENT.test(p)) out += out === "" ? p : `.${p}`;
    else out += `[${JSON.stringify(p)}]`;
  }
  return out === "" ? "(root)" : out;
}

/**
 * Returns the index of the first byte that does not belong to well-formed
 * UTF-8 (overlongs, surrogates and code points above U+10FFFF included), or
 * -1 when all of `bytes` is valid.
 */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else return i;
    if (i + need >= n) return i;
    const c1 = bytes[i + 1];
    if (c1 < lo || c1 > hi) return i;
    for (let k = 2; k <= need; k++) {
      const c = bytes[i + k];
      if (c < 0x80 || c > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1;
}

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * Parses `bytes` as one JSON document (RFC 8259; surrounding whitespace
 * allowed). Throws a {@link FormatError} naming the JSON path and the byte
 * offset (`origin.base` + position) for invalid UTF-8, syntax errors,
 * duplicate keys and nesting deeper than {@link MAX_JSON_DEPTH}.
 */
export function parseJson(bytes: Uint8Array, origin: JsonOrigin): JsonNode {
  const bad = firstInvalidUtf8(bytes);
  if (bad >= 0) {
    throw new FormatError(
      origin.file,
      origin.root || "(root)",
      origin.base + bad,
      "not valid UTF-8",
    );
  }
  const n = bytes.length;
  const path: (string | number)[] = [];
  const maxValues = origin.maxValues ?? MAX_JSON_VALUES;
  let values = 0;
  let i = 0;

  const fail = (at: number, detail: string): never => {
    throw new FormatError(origin.file, jsonPath(origin.root, path), origin.base + at, detail);
  };
  const describe = (at: number): string =>
    at >= n
      ? "the end of the text"
      : `'${String.fromCharCode(bytes[at])}' (0x${bytes[at].toString(16).padStart(2, "0")})`;

  const skipWs = (): void => {
    while (i < n) {
      const c = bytes[i];
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
  };

  const expectLiteral = (word: string): void => {
    for (let k = 0; k < word.length; k++) {
      if (i + k >= n || bytes[i + k] !== word.charCodeAt(k)) {
        fail(i + k, `expected '${word}', found ${describe(i + k)}`);
      }
    }
    i += word.length;
  };

  const parseString = (): string => {
    // bytes[i] is the opening quote.
    const start = i;
    i++;
    let out = "";
    let seg = i;
    for (;;) {
      if (i >= n) fail(start, "unterminated string");
      const c = bytes[i];
      if (c === 0x22) {
        out += decoder.decode(bytes.subarray(seg, i));
        i++;
        return out;
      }
      if (c < 0x20) fail(i, `control character 0x${c.toString(16).padStart(2, "0")} in a string`);
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += decoder.decode(bytes.subarray(seg, i));
      const e = bytes[i + 1];
      switch (e) {
        case 0x22:
          out += '"';
          break;
        case 0x5c:
          out += "\\";
          break;
        case 0x2f:
          out += "/";
          break;
        case 0x62:
          out += "\b";
          break;
        case 0x66:
          out += "\f";
          break;
        case 0x6e:
          out += "\n";
          break;
        case 0x72:
          out += "\r";
          break;
        case 0x74:
          out += "\t";
          break;
        case 0x75: {
          let code = 0;
          for (let k = 0; k < 4; k++) {
            const h = i + 2 + k < n ? bytes[i + 2 + k] : -1;
            let v: number;
            if (h >= 0x30 && h <= 0x39) v = h - 0x30;
            else if (h >= 0x41 && h <= 0x46) v = h - 0x37;
            else if (h >= 0x61 && h <= 0x66) v = h - 0x57;
            else return fail(i, "\\u must be followed by 4 hex digits");
            code = (code << 4) | v;
          }
          out += String.fromCharCode(code);
          i += 4;
          break;
        }
        default:
          fail(i, `invalid escape '\\${i + 1 < n ? String.fromCharCode(e) : ""}'`);
      }
      i += 2;
      seg = i;
    }
  };

  const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

  const parseNumber = (): number => {
    const start = i;
    if (bytes[i] === 0x2d) i++;
    if (i < n && bytes[i] === 0x30) i++;
    else if (i < n && isDigit(bytes[i])) { while (i < n && isDigit(bytes[i])) i++; }
    else fail(i, `expected a digit, found ${describe(i)}`);
    if (i < n && bytes[i] === 0x2e) {
      i++;
      if (!(i < n && isDigit(bytes[i]))) {
        fail(i, `expected a digit after '.', found ${describe(i)}`);
      }
      while (i < n && isDigit(bytes[i])) i++;
    }
    if (i < n && (bytes[i] === 0x65 || bytes[i] === 0x45)) {
      i++;
      if (i < n && (bytes[i] === 0x2b || bytes[i] === 0x2d)) i++;
      if (!(i < n && isDigit(bytes[i]))) {
        fail(i, `expected an exponent digit, found ${describe(i)}`);
      }
      while (i < n && isDigit(bytes[i])) i++;
    }
    if (i - start > 1024) fail(start, "number literal longer than 1024 characters");
    return Number(decoder.decode(bytes.subarray(start, i)));
  };

  const parseValue = (depth: number): JsonNode => {
    skipWs();
    const offset = origin.base + i;
    if (i >= n) return fail(i, "expected a value, found the end of the text");
    if (++values > maxValues) fail(i, `more than ${maxValues} JSON values`);
    const c = bytes[i];
    if (c === 0x7b || c === 0x5b) {
      if (depth >= MAX_JSON_DEPTH) fail(i, `nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    if (c === 0x7b) {
      i++;
      const entries = new Map<string, JsonNode>();
      const keyOffsets = new Map<string, number>();
      skipWs();
      if (i < n && bytes[i] === 0x7d) {
        i++;
        return { kind: "object", offset, entries, keyOffsets };
      }
      for (;;) {
        skipWs();
        if (i >= n || bytes[i] !== 0x22) fail(i, `expected a key string, found ${describe(i)}`);
        const keyAt = i;
        const key = parseString();
        if (entries.has(key)) {
          path.push(key);
          fail(keyAt, `duplicate key (first at byte ${keyOffsets.get(key)})`);
        }
        skipWs();
        if (i >= n || bytes[i] !== 0x3a) fail(i, `expected ':', found ${describe(i)}`);
        i++;
        path.push(key);
        const value = parseValue(depth + 1);
        path.pop();
        entries.set(key, value);
        keyOffsets.set(key, origin.base + keyAt);
        skipWs();
        if (i < n && bytes[i] === 0x2c) {
          i++;
          continue;
        }
        if (i < n && bytes[i] === 0x7d) {
          i++;
          return { kind: "object", offset, entries, keyOffsets };
        }
        fail(i, `expected ',' or '}', found ${describe(i)}`);
      }
    }
    if (c === 0x5b) {
      i++;
      const items: JsonNode[] = [];
      skipWs();
      if (i < n && bytes[i] === 0x5d) {
        i++;
        return { kind: "array", offset, items };
      }
      for (;;) {
        path.push(items.length);
        items.push(parseValue(depth + 1));
        path.pop();
        skipWs();
        if (i < n && bytes[i] === 0x2c) {
          i++;
          continue;
        }
        if (i < n && bytes[i] === 0x5d) {
          i++;
          return { kind: "array", offset, items };
        }
        fail(i, `expected ',' or ']', found ${describe(i)}`);
      }
    }
    if (c === 0x22) return { kind: "string", offset, value: parseString() };
    if (c === 0x2d || isDigit(c)) return { kind: "number", offset, value: parseNumber() };
    if (c === 0x74) {
      expectLiteral("true");
      return { kind: "boolean", offset, value: true };
    }
    if (c === 0x66) {
      expectLiteral("false");
      return { kind: "boolean", offset, value: false };
    }
    if (c === 0x6e) {
      expectLiteral("null");
      return { kind: "null", offset };
    }
    return fail(i, `expected a value, found ${describe(i)}`);
  };

  const root = parseValue(0);
  skipWs();
  if (i < n) fail(i, `unexpected ${describe(i)} after the JSON value`);
  return root;
}

/**
 * Converts a node back to a plain JavaScript value. Objects get own
 * properties only (a `__proto__` key stays a key, it never sets the
 * prototype).
 */
export function toPlain(node: JsonNode): unknown {
  switch (node.kind) {
    case "object": {
      const out: Record<string, unknown> = {};
      for (const [k, v] of node.entries) {
        Object.defineProperty(out, k, {
          value: toPlain(v),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    case "array":
      return node.items.map(toPlain);
    case "null":
      return null;
    default:
      return node.value;
  }
}

/** Human-readable kind for error messages ("an object", "a string", …). */
export function kindName(node: JsonNode): string {
  switch (node.kind) {
    case "object":
      return "an object";
    case "array":
      return "an array";
    case "string":
      return "a string";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "null":
      return "null";
  }
}
