/**
 * The GGUF reader (versions 2 and 3, little-endian). It reads the header,
 * the metadata and the tensor infos through a {@link ByteSource}, checks
 * every count against the bytes left before allocating anything, and
 * checks the tensor layout against the file. Tensor data is not read.
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { ggmlBytes, ggmlType, type GgmlTypeInfo } from "../ggml/types.ts";
import {
  Cursor,
  FIXED_SIZE,
  HEADER_BYTES,
  kvField,
  LITTLE_ENDIAN,
  MIN_VALUE_BYTES,
  quoteKey,
  showU64,
  VALUE_TYPE_NAMES,
} from "./_private.ts";
import type { GgufArray, GgufElementType, GgufValue } from "./gguf_value.ts";

/**
 * Caps on what a file may ask the reader to allocate. Every cap is also
 * bounded by the file itself: a count is rejected when the bytes left could
 * not hold that many items of the smallest size.
 *
 * @example
 * ```ts
 * import { DEFAULT_GGUF_LIMITS, type GgufLimits } from "./parse_gguf.ts";
 * const strict: GgufLimits = { ...DEFAULT_GGUF_LIMITS, maxTensors: 4096 };
 * ```
 */
export interface GgufLimits {
  /** Most metadata key/value pairs. Default 2^20. */
  readonly maxKvs: number;
  /** Most tensors. Default 2^20. */
  readonly maxTensors: number;
  /** Longest metadata key, in bytes. Default 65,535 (the GGUF spec's own cap). */
  readonly maxKeyBytes: number;
  /** Longest string value (also each string in an array), in bytes. Default 16 MiB. */
  readonly maxStringBytes: number;
  /** Longest tensor name, in bytes. Default 256 (ggml itself stops at 63). */
  readonly maxTensorNameBytes: number;
  /** Most elements in one array value. Default 2^26. */
  readonly maxArrayElements: number;
}

/**
 * The caps used for fields a caller leaves out.
 *
 * @example
 * ```ts
 * import { DEFAULT_GGUF_LIMITS } from "./parse_gguf.ts";
 * console.log(DEFAULT_GGUF_LIMITS.maxStringBytes); // 16777216
 * ```
 */
export const DEFAULT_GGUF_LIMITS: GgufLimits = Object.freeze({
  maxKvs: 2 ** 20,
  maxTensors: 2 ** 20,
  maxKeyBytes: 65535,
  maxStringBytes: 16 * 2 ** 20,
  maxTensorNameBytes: 256,
  maxArrayElements: 2 ** 26,
});

/**
 * One tensor as described by its tensor info, with the derived sizes and
 * the absolute position of its data, all checked against the file.
 *
 * @example
 * ```ts
 * import { parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { ggmlTypeByName } from "../ggml/types.ts";
 * const bytes = writeGguf({
 *   tensors: [{ name: "w", dims: [32, 2], type: ggmlTypeByName("Q8_0")!, data: new Uint8Array(68) }],
 * });
 * const t = parseGguf(bytesSource("t.gguf", bytes)).tensors[0];
 * console.log(t.dims, t.type.name, t.elements, t.bytes); // [32, 2] "Q8_0" 64 68
 * ```
 */
export interface GgufTensorInfo {
  /** Tensor name, e.g. `blk.0.attn_q.weight`. */
  readonly name: string;
  /** Position among the file's tensor infos. */
  readonly index: number;
  /** Dimensions in ggml order: `dims[0]` (ne[0]) is the contiguous one, the row length. */
  readonly dims: readonly number[];
  /** The ggml element type. */
  readonly type: GgmlTypeInfo;
  /** Absolute byte offset of the data in the file (data section start + stored offset). */
  readonly offset: number;
  /** Bytes of data. */
  readonly bytes: number;
  /** Number of elements (product of dims). */
  readonly elements: number;
  /** Absolute byte offset of this tensor info, for errors raised by later checks. */
  readonly infoOffset: number;
}

/**
 * A parsed GGUF file: everything but the tensor data.
 *
 * @example
 * ```ts
 * import { parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * const f = parseGguf(bytesSource("m.gguf", writeGguf({
 *   metadata: [["general.architecture", { type: "string", value: "llama" }]],
 * })));
 * console.log(f.version, f.alignment, f.metadata.get("general.architecture")?.value); // 3 32 "llama"
 * ```
 */
export interface GgufFile {
  /** The source's name (used in errors). */
  readonly name: string;
  /** GGUF version: 2 or 3. */
  readonly version: number;
  /** Data alignment: `general.alignment`, or 32 when absent. */
  readonly alignment: number;
  /** Metadata in file order. */
  readonly metadata: ReadonlyMap<string, GgufValue>;
  /** Absolute offset of each metadata value's type field, for errors raised later. */
  readonly metadataOffsets: ReadonlyMap<string, number>;
  /** Tensor infos in file order. */
  readonly tensors: readonly GgufTensorInfo[];
  /**
   * Absolute offset of the data section (end of the tensor infos, aligned
   * up). In a file without tensors it may lie past the end of the file.
   */
  readonly dataOffset: number;
  /** Size of the file in bytes. */
  readonly size: number;
}

/** The 4 magic bytes, "GGUF". */
const MAGIC = [0x47, 0x47, 0x55, 0x46];
/** Smallest kv: key length (u64) + value type (u32) + 1-byte value. */
const MIN_KV_BYTES = 8 + 4 + 1;
/** Smallest tensor info: name length + n_dims + one dim + type + offset. */
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8;
/** ggml's GGML_MAX_DIMS. */
const MAX_DIMS = 4;
const ALIGNMENT_KEY = "general.alignment";
const DEFAULT_ALIGNMENT = 32;

/**
 * Parses the header, metadata and tensor infos of a GGUF v2/v3 file and
 * checks the tensor layout. Every malformed input (truncation, bad counts,
 * lengths, types, dims, offsets, overlaps, duplicates) throws a
 * {@link FormatError} naming the file, the field and the byte offset.
 * Limits left out of `limits` take their {@link DEFAULT_GGUF_LIMITS} value.
 *
 * Checks beyond the byte format: keys and tensor names are non-empty and
 * unique; 1 to 4 dims, none zero; the element count and byte size are safe
 * integers; ne[0] is a whole number of blocks; tensor offsets are multiples
 * of the alignment; tensor data lies inside the file without overlapping.
 * Gaps between tensors are allowed.
 *
 * @example
 * ```ts
 * import { parseGguf, writeGguf } from "./mod.ts";
 * import { bytesSource } from "../byte_source.ts";
 * import { FormatError } from "../errors.ts";
 * const bytes = writeGguf({ metadata: [["a", { type: "u8", value: 1 }]] });
 * console.log(parseGguf(bytesSource("ok.gguf", bytes)).metadata.size); // 1
 * try {
 *   parseGguf(bytesSource("cut.gguf", bytes.subarray(0, 30)));
 * } catch (e) {
 *   console.log(e instanceof FormatError); // true
 * }
 * ```
 */
export function parseGguf(src: ByteSource, limits?: Partial<GgufLimits>): GgufFile {
  const lim = resolveLimits(limits);
  const c = new Cursor(src);

  // Header.
  const magic = c.bytes(4, "magic");
  if (MAGIC.some((b, i) => magic[i] !== b)) {
    const hex = Array.from(magic, (b) => b.toString(16).padStart(2, "0")).join(" ");
    throw c.error("magic", `expected "GGUF" (47 47 55 46), found ${hex}: not a GGUF file`, 0);
  }
  const version = c.u32("version");
  if (version !== 2 && version !== 3) {
    // ggml's test: a byte-swapped small version has its low 16 bits clear.
    const hint = version !== 0 && (version & 0xffff) === 0
      ? " (a big-endian GGUF file? only little-endian files are read)"
      : version === 1
      ? " (GGUF v1 used 32-bit counts and is long obsolete)"
      : "";
    throw c.error("version", `unsupported GGUF version ${version}${hint}; 2 and 3 are read`, 4);
  }
  const tensorCount = c.u64n("tensor_count");
  const kvCount = c.u64n("metadata_kv_count");
  if (kvCount > lim.maxKvs) {
    throw c.error(
      "metadata_kv_count",
      `${showU64(c.u64At(16))} key/value pairs exceed the limit of ${lim.maxKvs}`,
      16,
    );
  }
  if (tensorCount > lim.maxTensors) {
    throw c.error(
      "tensor_count",
      `${showU64(c.u64At(8))} tensors exceed the limit of ${lim.maxTensors}`,
      8,
    );
  }
  const left = src.size - HEADER_BYTES;
  if (kvCount * MIN_KV_BYTES > left) {
    throw c.error(
      "metadata_kv_count",
      `${kvCount} key/value pairs need at least ${kvCount * MIN_KV_BYTES} bytes ` +
        `but only ${left} follow the header`,
      16,
    );
  }
  if (tensorCount * MIN_TENSOR_INFO_BYTES > left - kvCount * MIN_KV_BYTES) {
    throw c.error(
      "tensor_count",
      `${tensorCount} tensor infos need at least ${tensorCount * MIN_TENSOR_INFO_BYTES} bytes ` +
        `but only ${left - kvCount * MIN_KV_BYTES} are left after the smallest possible metadata`,
      8,
    );
  }

  // Metadata.
  const metadata = new Map<string, GgufValue>();
  const metadataOffsets = new Map<string, number>();
  const keys = new Map<string, [index: number, offset: number]>();
  for (let i = 0; i < kvCount; i++) {
    const keyAt = c.pos;
    const key = c.string(`kv[${i}].key`, lim.maxKeyBytes);
    if (key.length === 0) throw c.error(`kv[${i}].key`, "empty key", keyAt);
    const first = keys.get(key);
    if (first !== undefined) {
      throw c.error(
        `kv[${i}].key`,
        `duplicate key ${quoteKey(key)} (also kv[${first[0]}] at byte ${first[1]})`,
        keyAt,
      );
    }
    keys.set(key, [i, keyAt]);
    const field = kvField(key);
    const typeAt = c.pos;
    const typeId = c.u32(`${field}.type`);
    metadata.set(key, readValue(c, typeId, field, typeAt, lim));
    metadataOffsets.set(key, typeAt);
  }

  // Alignment.
  let alignment = DEFAULT_ALIGNMENT;
  const align = metadata.get(ALIGNMENT_KEY);
  if (align !== undefined) {
    const at = metadataOffsets.get(ALIGNMENT_KEY)!;
    const field = `${kvField(ALIGNMENT_KEY)}.value`;
    if (align.type !== "u32") {
      const t = align.type === "array" ? `array<${align.elementType}>` : align.type;
      throw c.error(field, `must be a u32, found ${t}`, at);
    }
    const a = align.value;
    if (a === 0 || (a & (a - 1)) !== 0) {
      throw c.error(field, `alignment ${a} is not a power of two`, at + 4);
    }
    alignment = a;
  }

  // Tensor infos.
  interface Pending {
    name: string;
    dims: number[];
    type: GgmlTypeInfo;
    bytes: number;
    elements: number;
    infoOffset: number;
    relOffset: number;
    offsetAt: number;
  }
  const pending: Pending[] = [];
  const names = new Map<string, number>();
  for (let i = 0; i < tensorCount; i++) {
    const base = `tensor_infos[${i}]`;
    const infoOffset = c.pos;
    const name = c.string(`${base}.name`, lim.maxTensorNameBytes);
    if (name.length === 0) throw c.error(`${base}.name`, "empty tensor name", infoOffset);
    const prior = names.get(name);
    if (prior !== undefined) {
      throw c.error(
        `${base}.name`,
        `duplicate tensor name ${quoteKey(name)} (also tensor_infos[${prior}])`,
        infoOffset,
      );
    }
    names.set(name, i);
    const label = `tensor ${quoteKey(name)}`;
    const nDimsAt = c.pos;
    const nDims = c.u32(`${base}.n_dims`);
    if (nDims === 0 || nDims > MAX_DIMS) {
      throw c.error(
        `${base}.n_dims`,
        `${label}: n_dims ${nDims} is not in 1..${MAX_DIMS}`,
        nDimsAt,
      );
    }
    const dims: number[] = [];
    let elements = 1;
    for (let d = 0; d < nDims; d++) {
      const at = c.pos;
      const field = `${base}.dims[${d}]`;
      const dim = c.u64n(field);
      if (dim === 0) throw c.error(field, `${label}: dimension ${d} is 0`, at);
      if (dim > Number.MAX_SAFE_INTEGER || elements > Number.MAX_SAFE_INTEGER / dim) {
        throw c.error(
          field,
          `${label}: dimension ${d} = ${showU64(c.u64At(at))} makes the element count ` +
            `overflow 2^53`,
          at,
        );
      }
      elements *= dim;
      dims.push(dim);
    }
    const typeAt = c.pos;
    const typeId = c.u32(`${base}.type`);
    const type = ggmlType(typeId);
    if (type === undefined) {
      throw c.error(
        `${base}.type`,
        `${label}: unknown or unsupported ggml type id ${typeId}`,
        typeAt,
      );
    }
    if (dims[0] % type.blockSize !== 0) {
      throw c.error(
        `${base}.dims[0]`,
        `${label}: row length ne[0] = ${dims[0]} is not a multiple of the ${type.name} ` +
          `block size ${type.blockSize}`,
        nDimsAt + 4,
      );
    }
    const bytes = ggmlBytes(type, elements);
    if (bytes === undefined) {
      throw c.error(
        `${base}.type`,
        `${label}: ${elements} ${type.name} elements take more than 2^53 bytes`,
        typeAt,
      );
    }
    const offsetAt = c.pos;
    const relOffset = c.u64n(`${base}.offset`);
    pending.push({ name, dims, type, bytes, elements, infoOffset, relOffset, offsetAt });
  }

  // Data section and tensor layout.
  const infosEnd = c.pos;
  const dataOffset = Math.ceil(infosEnd / alignment) * alignment;
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < pending.length; i++) {
    const p = pending[i];
    const field = `tensor_infos[${i}].offset`;
    const label = `tensor ${quoteKey(p.name)}`;
    if (p.relOffset > src.size - Math.min(dataOffset, src.size)) {
      throw c.error(
        field,
        `${label}: data offset ${showU64(c.u64At(p.offsetAt))} (+ data section at byte ` +
          `${dataOffset}) is past the end of the file at byte ${src.size}`,
        p.offsetAt,
      );
    }
    if (p.relOffset % alignment !== 0) {
      throw c.error(
        field,
        `${label}: data offset ${p.relOffset} is not a multiple of the alignment ${alignment}`,
        p.offsetAt,
      );
    }
    const offset = dataOffset + p.relOffset;
    if (p.bytes > src.size - offset) {
      throw c.error(
        field,
        `${label}: ${p.bytes} bytes of data at byte ${offset} run past the end of the file ` +
          `at byte ${src.size} (truncated?)`,
        p.offsetAt,
      );
    }
    tensors.push({
      name: p.name,
      index: i,
      dims: Object.freeze(p.dims),
      type: p.type,
      offset,
      bytes: p.bytes,
      elements: p.elements,
      infoOffset: p.infoOffset,
    });
  }
  const byOffset = tensors.slice().sort((a, b) => a.offset - b.offset || a.index - b.index);
  for (let k = 1; k < byOffset.length; k++) {
    const prev = byOffset[k - 1];
    const t = byOffset[k];
    if (t.offset < prev.offset + prev.bytes) {
      const later = t.index > prev.index ? t : prev;
      const other = later === t ? prev : t;
      throw c.error(
        `tensor_infos[${later.index}].offset`,
        `tensor ${quoteKey(later.name)} data [${later.offset}, ${later.offset + later.bytes}) ` +
          `overlaps tensor ${quoteKey(other.name)} (tensor_infos[${other.index}]) data ` +
          `[${other.offset}, ${other.offset + other.bytes})`,
        pending[later.index].offsetAt,
      );
    }
  }

  return {
    name: src.name,
    version,
    alignment,
    metadata,
    metadataOffsets,
    tensors,
    dataOffset,
    size: src.size,
  };
}

function resolveLimits(limits: Partial<GgufLimits> | undefined): GgufLimits {
  const lim = { ...DEFAULT_GGUF_LIMITS, ...limits };
  for (const [k, v] of Object.entries(lim)) {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`parseGguf: limit ${k} must be a non-negative safe integer, got ${v}`);
    }
  }
  return lim;
}

/** Reads the value of type `typeId` whose type field is at `typeAt`. */
function readValue(
  c: Cursor,
  typeId: number,
  field: string,
  typeAt: number,
  lim: GgufLimits,
): GgufValue {
  const type = VALUE_TYPE_NAMES[typeId];
  if (type === undefined) {
    throw c.error(`${field}.type`, `unknown value type ${typeId}`, typeAt);
  }
  const vf = `${field}.value`;
  switch (type) {
    case "u8":
      return { type, value: c.u8(vf) };
    case "i8":
      return { type, value: c.i8(vf) };
    case "u16":
      return { type, value: c.u16(vf) };
    case "i16":
      return { type, value: c.i16(vf) };
    case "u32":
      return { type, value: c.u32(vf) };
    case "i32":
      return { type, value: c.i32(vf) };
    case "f32":
      return { type, value: c.f32(vf) };
    case "f64":
      return { type, value: c.f64(vf) };
    case "u64":
      return { type, value: c.u64(vf) };
    case "i64":
      return { type, value: c.i64(vf) };
    case "bool": {
      const at = c.pos;
      const b = c.u8(vf);
      if (b > 1) throw c.error(vf, `bool must be 0 or 1, found ${b}`, at);
      return { type, value: b === 1 };
    }
    case "string":
      return { type, value: c.string(vf, lim.maxStringBytes) };
    case "array":
      return readArray(c, field, lim);
  }
}

function readArray(c: Cursor, field: string, lim: GgufLimits): GgufArray {
  const etAt = c.pos;
  const etId = c.u32(`${field}.element_type`);
  const et = VALUE_TYPE_NAMES[etId];
  if (et === undefined) {
    throw c.error(`${field}.element_type`, `unknown array element type ${etId}`, etAt);
  }
  if (et === "array") {
    throw c.error(
      `${field}.element_type`,
      "nested arrays (arrays of arrays) are not supported",
      etAt,
    );
  }
  const countAt = c.pos;
  const count = c.u64n(`${field}.count`);
  if (count > lim.maxArrayElements) {
    throw c.error(
      `${field}.count`,
      `array of ${showU64(c.u64At(countAt))} elements exceeds the limit of ${lim.maxArrayElements}`,
      countAt,
    );
  }
  const min = MIN_VALUE_BYTES[et];
  if (count * min > c.remaining) {
    throw c.error(
      `${field}.count`,
      `${count} ${et} elements need at least ${count * min} bytes but only ${c.remaining} are left`,
      countAt,
    );
  }
  const vf = `${field}.value`;
  if (et === "string") {
    const out: string[] = new Array(count);
    for (let i = 0; i < count; i++) out[i] = c.string(`${vf}[${i}]`, lim.maxStringBytes);
    return { type: "array", elementType: et, value: out };
  }
  const size = FIXED_SIZE[et]!;
  const start = c.pos;
  const raw = c.bytes(count * size, vf);
  if (et === "bool") {
    const out: boolean[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const b = raw[i];
      if (b > 1) throw c.error(`${vf}[${i}]`, `bool must be 0 or 1, found ${b}`, start + i);
      out[i] = b === 1;
    }
    return { type: "array", elementType: et, value: out };
  }
  return { type: "array", elementType: et, value: numericArray(et, raw, count) } as GgufArray;
}

type NumericElement = Exclude<GgufElementType, "string" | "bool">;

const TYPED: {
  [K in NumericElement]: new (n: number) => ArrayBufferView & { [i: number]: number | bigint };
} = {
  u8: Uint8Array,
  i8: Int8Array,
  u16: Uint16Array,
  i16: Int16Array,
  u32: Uint32Array,
  i32: Int32Array,
  f32: Float32Array,
  u64: BigUint64Array,
  i64: BigInt64Array,
  f64: Float64Array,
};

/** Copies little-endian elements into a fresh typed array of the element type. */
function numericArray(et: NumericElement, raw: Uint8Array, count: number): ArrayBufferView {
  const out = new TYPED[et](count);
  if (LITTLE_ENDIAN) {
    new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(raw);
    return out;
  }
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  for (let i = 0; i < count; i++) {
    switch (et) {
      case "u8":
        out[i] = dv.getUint8(i);
        break;
      case "i8":
        out[i] = dv.getInt8(i);
        break;
      case "u16":
        out[i] = dv.getUint16(2 * i, true);
        break;
      case "i16":
        out[i] = dv.getInt16(2 * i, true);
        break;
      case "u32":
        out[i] = dv.getUint32(4 * i, true);
        break;
      case "i32":
        out[i] = dv.getInt32(4 * i, true);
        break;
      case "f32":
        out[i] = dv.getFloat32(4 * i, true);
        break;
      case "u64":
        out[i] = dv.getBigUint64(8 * i, true);
        break;
      case "i64":
        out[i] = dv.getBigInt64(8 * i, true);
        break;
      case "f64":
        out[i] = dv.getFloat64(8 * i, true);
        break;
    }
  }
  return out;
}
