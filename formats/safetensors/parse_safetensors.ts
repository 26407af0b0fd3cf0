/**
 * A safetensors header parser that trusts nothing.
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { type JsonNode, jsonPath, kindName, parseJson } from "./_json.ts";
import { type SafetensorsDtype, safetensorsDtype } from "./dtype.ts";

/**
 * Largest header accepted, in bytes (the limit of the reference Rust
 * implementation, `MAX_HEADER_SIZE`).
 *
 * @example
 * ```ts
 * import { MAX_SAFETENSORS_HEADER_BYTES } from "./parse_safetensors.ts";
 * console.log(MAX_SAFETENSORS_HEADER_BYTES); // 100000000
 * ```
 */
export const MAX_SAFETENSORS_HEADER_BYTES = 100_000_000;

/**
 * One tensor of a safetensors file, with its data located in the file.
 *
 * @example
 * ```ts
 * import type { SafetensorsTensor } from "./parse_safetensors.ts";
 * const t: SafetensorsTensor = {
 *   name: "w", dtype: "F32", shape: [2, 3], elements: 6, offset: 80, bytes: 24,
 * };
 * ```
 */
export interface SafetensorsTensor {
  /** The header key. */
  readonly name: string;
  /** Element type. */
  readonly dtype: SafetensorsDtype;
  /** Dimensions, outermost first (row-major). Empty for a scalar. */
  readonly shape: readonly number[];
  /** Product of the dimensions (1 for a scalar). */
  readonly elements: number;
  /** Absolute byte offset of the data in the file. */
  readonly offset: number;
  /** Size of the data in bytes (`elements` × dtype size). */
  readonly bytes: number;
}

/**
 * The parsed header of a safetensors file.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { parseSafetensors } from "./parse_safetensors.ts";
 * import { writeSafetensors } from "./write_safetensors.ts";
 * const bytes = writeSafetensors([{ name: "w", dtype: "F32", shape: [2], data: new Float32Array([1, 2]) }]);
 * const file = parseSafetensors(bytesSource("w.safetensors", bytes));
 * console.log(file.byName.get("w")?.shape); // [2]
 * ```
 */
export interface SafetensorsFile {
  /** The source's name. */
  readonly name: string;
  /** Length N of the JSON header (the u64 at the start of the file). */
  readonly headerBytes: number;
  /** Absolute offset of the data section: 8 + N. */
  readonly dataOffset: number;
  /** Tensors in header order. */
  readonly tensors: readonly SafetensorsTensor[];
  /** Tensors by name. */
  readonly byName: ReadonlyMap<string, SafetensorsTensor>;
  /** `__metadata__` (string → string), empty when absent. */
  readonly metadata: Readonly<Record<string, string>>;
}

const U64_FIELD = "header_length";

/**
 * Parses and validates the header of a safetensors file, reading only the
 * first 8 + N bytes. Every inconsistency is a {@link FormatError} naming the
 * file, the field (a JSON path such as `header["lm_head.weight"].shape[0]`)
 * and the byte offset:
 *
 * - header length below 2, above {@link MAX_SAFETENSORS_HEADER_BYTES} or past
 *   the end of the file; a header that is not UTF-8, not JSON, or not an
 *   object; nesting deeper than 64 levels or more than 2 000 000 JSON
 *   values (which bounds the memory a hostile header can cost);
 * - duplicate keys anywhere in the header (the reference implementation
 *   keeps the last one silently; cflow refuses the file, since the data of
 *   the shadowed entry would become an unexplained hole);
 * - an entry that is not an object, lacks `dtype`, `shape` or
 *   `data_offsets`, or has them with the wrong type; unknown dtypes;
 *   dimensions that are not non-negative safe integers; element counts or
 *   byte sizes beyond `Number.MAX_SAFE_INTEGER`;
 * - `data_offsets` that are not two safe integers with begin ≤ end, whose
 *   span differs from elements × dtype size, or that reach past the data;
 * - gaps or overlaps between tensors (sorted by offset, the data must be
 *   covered exactly once), and data that does not end at the end of the
 *   file;
 * - `__metadata__` that is not an object of strings.
 *
 * Unknown keys inside a tensor entry are ignored, as the reference
 * implementation does.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { parseSafetensors } from "./parse_safetensors.ts";
 * import { writeSafetensors } from "./write_safetensors.ts";
 * const bytes = writeSafetensors(
 *   [{ name: "w", dtype: "F16", shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) }],
 *   { format: "pt" },
 * );
 * const file = parseSafetensors(bytesSource("w.safetensors", bytes));
 * console.log(file.tensors[0].bytes, file.metadata.format); // 8 "pt"
 * ```
 */
export function parseSafetensors(src: ByteSource): SafetensorsFile {
  const file = src.name;
  if (src.size < 8) {
    throw new FormatError(
      file,
      U64_FIELD,
      0,
      `file is ${src.size} bytes, shorter than the 8-byte header length`,
    );
  }
  const lenBytes = src.read(0, 8, U64_FIELD);
  const n64 = new DataView(lenBytes.buffer, lenBytes.byteOffset, 8).getBigUint64(0, true);
  if (n64 < 2n) throw new FormatError(file, U64_FIELD, 0, `header length ${n64} is below 2 ("{}")`);
  if (n64 > BigInt(MAX_SAFETENSORS_HEADER_BYTES)) {
    throw new FormatError(
      file,
      U64_FIELD,
      0,
      `header length ${n64} is above the limit of ${MAX_SAFETENSORS_HEADER_BYTES} bytes`,
    );
  }
  const n = Number(n64);
  if (n > src.size - 8) {
    throw new FormatError(
      file,
      U64_FIELD,
      0,
      `header length ${n} goes past the end of the file (${src.size} bytes; truncated?)`,
    );
  }
  const dataOffset = 8 + n;
  const dataSize = src.size - dataOffset;
  const root = parseJson(src.read(8, n, "header"), { file, base: 8, root: "header" });
  if (root.kind !== "object") {
    throw new FormatError(
      file,
      "header",
      root.offset,
      `must be a JSON object, found ${kindName(root)}`,
    );
  }

  const tensors: SafetensorsTensor[] = [];
  const byName = new Map<string, SafetensorsTensor>();
  const begins: number[] = [];
  const nodes: JsonNode[] = [];
  let metadata: Record<string, string> = Object.create(null);

  for (const [name, entry] of root.entries) {
    const field = (...parts: (string | number)[]): string => jsonPath("header", [name, ...parts]);
    if (name === "__metadata__") {
      metadata = parseMetadata(file, entry);
      continue;
    }
    if (entry.kind !== "object") {
      throw new FormatError(
        file,
        field(),
        entry.offset,
        `must be an object, found ${kindName(entry)}`,
      );
    }
    const get = (key: string): JsonNode => {
      const v = entry.entries.get(key);
      if (v === undefined) throw new FormatError(file, field(), entry.offset, `missing "${key}"`);
      return v;
    };

    const dtypeNode = get("dtype");
    if (dtypeNode.kind !== "string") {
      throw new FormatError(
        file,
        field("dtype"),
        dtypeNode.offset,
        `must be a string, found ${kindName(dtypeNode)}`,
      );
    }
    const info = safetensorsDtype(dtypeNode.value);
    if (info === undefined) {
      throw new FormatError(
        file,
        field("dtype"),
        dtypeNode.offset,
        `unknown dtype ${JSON.stringify(dtypeNode.value)}`,
      );
    }

    const shapeNode = get("shape");
    if (shapeNode.kind !== "array") {
      throw new FormatError(
        file,
        field("shape"),
        shapeNode.offset,
        `must be an array, found ${kindName(shapeNode)}`,
      );
    }
    const shape: number[] = [];
    let elements = 1;
    for (let d = 0; d < shapeNode.items.length; d++) {
      const dim = nonNegativeInt(file, field("shape", d), shapeNode.items[d], "dimension");
      shape.push(dim);
      if (elements !== 0 && dim !== 0 && elements > Number.MAX_SAFE_INTEGER / dim) {
        throw new FormatError(
          file,
          field("shape", d),
          shapeNode.items[d].offset,
          `element count ${shape.join(" × ")} exceeds 2^53 - 1`,
        );
      }
      elements *= dim;
    }
    if (elements > Number.MAX_SAFE_INTEGER / info.bytes) {
      throw new FormatError(
        file,
        field("shape"),
        shapeNode.offset,
        `${elements} elements × ${info.bytes} bytes exceeds 2^53 - 1`,
      );
    }
    const bytes = elements * info.bytes;

    const offNode = get("data_offsets");
    if (offNode.kind !== "array" || offNode.items.length !== 2) {
      throw new FormatError(
        file,
        field("data_offsets"),
        offNode.offset,
        `must be an array [begin, end], found ${
          offNode.kind === "array" ? `${offNode.items.length} items` : kindName(offNode)
        }`,
      );
    }
    const begin = nonNegativeInt(file, field("data_offsets", 0), offNode.items[0], "offset");
    const end = nonNegativeInt(file, field("data_offsets", 1), offNode.items[1], "offset");
    if (begin > end) {
      throw new FormatError(
        file,
        field("data_offsets"),
        offNode.offset,
        `begin ${begin} is after end ${end}`,
      );
    }
    if (end - begin !== bytes) {
      throw new FormatError(
        file,
        field("data_offsets"),
        offNode.offset,
        `spans ${end - begin} bytes but ${info.name} [${shape.join(", ")}] needs ${bytes}`,
      );
    }
    if (end > dataSize) {
      throw new FormatError(
        file,
        field("data_offsets"),
        offNode.offset,
        `end ${end} is past the ${dataSize} bytes of data (file ends at byte ${src.size}; truncated?)`,
      );
    }
    const tensor: SafetensorsTensor = Object.freeze({
      name,
      dtype: info.name,
      shape: Object.freeze(shape),
      elements,
      offset: dataOffset + begin,
      bytes,
    });
    tensors.push(tensor);
    byName.set(name, tensor);
    begins.push(begin);
    nodes.push(offNode);
  }

  // Coverage: sorted by (begin, end), each tensor starts where the previous ended.
  const order = tensors.map((_, k) => k).sort((a, b) =>
    begins[a] - begins[b] || tensors[a].bytes - tensors[b].bytes
  );
  let cursor = 0;
  let last = "";
  for (const k of order) {
    const t = tensors[k];
    if (begins[k] !== cursor) {
      const what = begins[k] > cursor
        ? `a gap: bytes [${cursor}, ${begins[k]}) of the data belong to no tensor`
        : `overlaps ${JSON.stringify(last)}, which ends at data byte ${cursor}`;
      throw new FormatError(
        file,
        jsonPath("header", [t.name, "data_offsets"]),
        nodes[k].offset,
        what,
      );
    }
    cursor += t.bytes;
    last = t.name;
  }
  if (cursor !== dataSize) {
    throw new FormatError(
      file,
      "data",
      dataOffset + cursor,
      `tensors cover ${cursor} bytes of data but the file has ${dataSize} after the header`,
    );
  }

  return Object.freeze({
    name: file,
    headerBytes: n,
    dataOffset,
    tensors: Object.freeze(tensors),
    byName,
    metadata: Object.freeze(metadata),
  });
}

function nonNegativeInt(file: string, field: string, node: JsonNode, what: string): number {
  if (node.kind !== "number") {
    throw new FormatError(
      file,
      field,
      node.offset,
      `${what} must be a number, found ${kindName(node)}`,
    );
  }
  const v = node.value;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new FormatError(
      file,
      field,
      node.offset,
      `${what} ${v} is not an integer in [0, 2^53 - 1]`,
    );
  }
  return v;
}

function parseMetadata(file: string, node: JsonNode): Record<string, string> {
  if (node.kind !== "object") {
    throw new FormatError(
      file,
      "header.__metadata__",
      node.offset,
      `must be an object of strings, found ${kindName(node)}`,
    );
  }
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of node.entries) {
    if (v.kind !== "string") {
      throw new FormatError(
        file,
        jsonPath("header.__metadata__", [k]),
        v.offset,
        `must be a string, found ${kindName(v)}`,
      );
    }
    out[k] = v.value;
  }
  return out;
}
