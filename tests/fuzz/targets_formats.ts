/**
 * Fuzz targets for the file-format readers: GGUF, safetensors, HF
 * `config.json` and the `.cflow` / `.vflow` reader.
 *
 * @module
 */

import fc from "fast-check";
import { bytesSource } from "../../formats/byte_source.ts";
import { FormatError } from "../../formats/errors.ts";
import { parse as parseGgufBytes, sampleParts } from "../../formats/gguf/_test_utils.ts";
import type { GgufFile } from "../../formats/gguf/parse_gguf.ts";
import type { GgufValue } from "../../formats/gguf/gguf_value.ts";
import { writeGguf } from "../../formats/gguf/write_gguf.ts";
import { ggmlTypeByName } from "../../formats/ggml/types.ts";
import { SAFETENSORS_DTYPES, safetensorsDtype } from "../../formats/safetensors/dtype.ts";
import { parseSafetensors } from "../../formats/safetensors/parse_safetensors.ts";
import { writeSafetensors } from "../../formats/safetensors/write_safetensors.ts";
import { CONFIG_CASES } from "../../formats/hf/_test_configs.ts";
import {
  HF_CONFIG_LIMITS,
  type HfConfig,
  parseHfConfig,
} from "../../formats/hf/parse_hf_config.ts";
import { readF32Entry, readTiledFile, untile } from "../../formats/cflow/reader.ts";
import { ENTRY_KIND } from "../../formats/cflow/container.ts";
import { TILE_TYPE } from "../../formats/cflow/tile.ts";
import { randomModelBytes, resealTiled } from "../util/tiled_file.ts";
import { ensure, formatErrorOnly, type Outcome, type Target } from "./harness.ts";
import { applyEdits, hex, mutationArb, randomAfter } from "./mutate.ts";

// ---------------------------------------------------------------- GGUF

/** What a parsed GGUF file promises: tensors aligned, inside the file, disjoint, names unique. */
export function checkGguf(f: GgufFile, size: number): void {
  ensure(f.version === 2 || f.version === 3, `version ${f.version}`);
  ensure(f.alignment > 0 && (f.alignment & (f.alignment - 1)) === 0, `alignment ${f.alignment}`);
  // Documented: without tensors the (aligned-up) data section may start past the end.
  ensure(f.dataOffset % f.alignment === 0, `dataOffset ${f.dataOffset}`);
  ensure(f.tensors.length === 0 || f.dataOffset <= size, `dataOffset ${f.dataOffset} > ${size}`);
  const names = new Set<string>();
  const spans: [number, number][] = [];
  for (const t of f.tensors) {
    ensure(!names.has(t.name), `duplicate tensor ${t.name}`);
    names.add(t.name);
    ensure(t.dims.length >= 1 && t.dims.length <= 4, `${t.name}: ${t.dims.length} dims`);
    ensure(t.dims.every((d) => Number.isSafeInteger(d) && d > 0), `${t.name}: dims ${t.dims}`);
    ensure(t.elements === t.dims.reduce((a, b) => a * b, 1), `${t.name}: elements`);
    ensure(t.elements % t.type.blockSize === 0 && t.dims[0] % t.type.blockSize === 0, t.name);
    ensure(t.bytes === (t.elements / t.type.blockSize) * t.type.typeSize, `${t.name}: bytes`);
    ensure((t.offset - f.dataOffset) % f.alignment === 0, `${t.name}: offset alignment`);
    ensure(t.offset >= f.dataOffset && t.offset + t.bytes <= size, `${t.name}: outside the file`);
    spans.push([t.offset, t.offset + t.bytes]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) ensure(spans[i][0] >= spans[i - 1][1], "overlap");
}

function ggufCheck(bytes: Uint8Array): Outcome {
  let f: GgufFile;
  try {
    f = parseGgufBytes(bytes);
  } catch (e) {
    return formatErrorOnly(e, "t.gguf", bytes.length);
  }
  checkGguf(f, bytes.length);
  return "accepted";
}

function ggufSeeds(): Uint8Array[] {
  const f32 = ggmlTypeByName("F32")!;
  return [
    writeGguf(sampleParts()),
    writeGguf({ ...sampleParts(), version: 2, alignment: 64 }),
    writeGguf({
      metadata: [["general.architecture", { type: "string", value: "llama" }]],
      tensors: [{ name: "a", dims: [4], type: f32, data: new Uint8Array(16) }],
    }),
    writeGguf({}),
  ];
}

const GGUF_MAGIC = new Uint8Array([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0]);

/** A metadata value of any type (arrays of any element type, short). */
function ggufValueArb(): fc.Arbitrary<GgufValue> {
  const n = (min: number, max: number) => fc.integer({ min, max });
  return fc.oneof(
    n(0, 255).map((value) => ({ type: "u8", value }) as const),
    n(-128, 127).map((value) => ({ type: "i8", value }) as const),
    n(0, 0xffffffff).map((value) => ({ type: "u32", value }) as const),
    n(-(2 ** 31), 2 ** 31 - 1).map((value) => ({ type: "i32", value }) as const),
    fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((value) => ({ type: "u64", value }) as const),
    fc.double().map((value) => ({ type: "f64", value }) as const),
    fc.boolean().map((value) => ({ type: "bool", value }) as const),
    fc.string({ unit: "binary", maxLength: 8 }).map((value) =>
      ({ type: "string", value }) as const
    ),
    fc.array(fc.string({ maxLength: 4 }), { maxLength: 4 }).map((value) =>
      ({ type: "array", elementType: "string", value }) as const
    ),
    fc.array(n(0, 0xffffffff), { maxLength: 4 }).map((v) =>
      ({ type: "array", elementType: "u32", value: Uint32Array.from(v) }) as const
    ),
    fc.array(fc.boolean(), { maxLength: 4 }).map((value) =>
      ({ type: "array", elementType: "bool", value }) as const
    ),
  );
}

/** Whole files from parts: duplicate keys and names, odd dims and types, data sizes and offsets. */
function ggufStructured(): fc.Arbitrary<Uint8Array> {
  const types = ["F32", "F16", "Q4_0", "Q8_0", "Q4_K", "Q6_K", "BF16"].map((t) =>
    ggmlTypeByName(t)!
  );
  const dim = fc.oneof(
    { arbitrary: fc.constantFrom(1, 2, 32, 64, 256), weight: 6 },
    {
      arbitrary: fc.constantFrom<number | bigint>(
        0,
        3,
        2 ** 31,
        2 ** 32,
        2n ** 62n,
        2n ** 63n,
        2n ** 64n - 1n,
      ),
      weight: 1,
    },
  );
  const tensor = fc.record({
    name: fc.oneof(fc.constantFrom("a", "b", "c", ""), fc.string({ maxLength: 4 })),
    dims: fc.array(dim, { minLength: 0, maxLength: 5 }),
    type: fc.oneof(
      { arbitrary: fc.constantFrom(...types), weight: 8 },
      { arbitrary: fc.constantFrom(4, 5, 39, 99, 2 ** 31), weight: 1 },
    ),
    extra: fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, {
      arbitrary: fc.integer({ min: -8, max: 8 }),
      weight: 1,
    }),
    offset: fc.option(
      fc.oneof(fc.constantFrom<number | bigint>(0, 1, 32, 64, 2n ** 63n), fc.nat({ max: 4096 })),
      { freq: 8 },
    ),
  });
  return fc.record({
    version: fc.oneof({ arbitrary: fc.constant(3), weight: 8 }, {
      arbitrary: fc.constantFrom(1, 2, 4),
      weight: 1,
    }),
    alignment: fc.oneof(
      { arbitrary: fc.constant(null), weight: 3 },
      {
        arbitrary: fc.constantFrom(1, 8, 64, 256).map((value) => ({ type: "u32", value }) as const),
        weight: 2,
      },
      {
        arbitrary: fc.oneof(fc.constantFrom(0, 3, 2 ** 20, 2 ** 31), fc.nat()).map((value) =>
          ({ type: "u32", value }) as const
        ),
        weight: 1,
      },
    ),
    metadata: fc.oneof(
      {
        arbitrary: fc.uniqueArray(
          fc.tuple(fc.string({ minLength: 1, maxLength: 6 }), ggufValueArb()),
          {
            maxLength: 5,
            selector: (kv) => kv[0],
          },
        ),
        weight: 4,
      },
      {
        arbitrary: fc.array(
          fc.tuple(fc.constantFrom("general.architecture", "k", "k2", ""), ggufValueArb()),
          { maxLength: 5 },
        ),
        weight: 1,
      },
    ),
    tensors: fc.array(tensor, { maxLength: 4 }),
  }).map((p) => {
    const metadata: [string, GgufValue][] = [...p.metadata];
    if (p.alignment !== null) metadata.push(["general.alignment", p.alignment]);
    const tensors = p.tensors.map((t) => {
      let elements = 1;
      for (const d of t.dims) elements *= Number(d);
      const info = typeof t.type === "number" ? undefined : t.type;
      const natural = info && elements <= 4096
        ? Math.ceil(elements / info.blockSize) * info.typeSize
        : 8;
      return {
        name: t.name,
        dims: t.dims,
        type: t.type,
        data: new Uint8Array(Math.max(0, natural + t.extra)),
        ...(t.offset === null ? {} : { offset: t.offset }),
      };
    });
    try {
      return writeGguf({ version: p.version, metadata, tensors });
    } catch {
      return writeGguf({ version: p.version, metadata: p.metadata });
    }
  });
}

/** GGUF: edits of small valid files, and random bytes after the magic. */
export const ggufTarget: Target<Uint8Array> = {
  name: "gguf",
  minAccepted: 0.04, // measured 9% (seed 0x5eed, 1000 inputs)
  arbitrary() {
    const seeds = ggufSeeds();
    return fc.oneof(
      {
        arbitrary: mutationArb(seeds.length).map((m) => applyEdits(seeds[m.seed], m.edits)),
        weight: 4,
      },
      { arbitrary: ggufStructured(), weight: 3 },
      { arbitrary: randomAfter(GGUF_MAGIC), weight: 1 },
    ).map((b) => Object.assign(b, { toString: () => hex(b) }));
  },
  check: ggufCheck,
};

// ---------------------------------------------------------------- safetensors

const enc = new TextEncoder();

function checkSafetensors(bytes: Uint8Array): Outcome {
  let f;
  try {
    f = parseSafetensors(bytesSource("t.safetensors", bytes));
  } catch (e) {
    return formatErrorOnly(e, "t.safetensors", bytes.length);
  }
  ensure(f.dataOffset === 8 + f.headerBytes && f.dataOffset <= bytes.length, "dataOffset");
  let covered = 0;
  for (const t of f.tensors) {
    const info = safetensorsDtype(t.dtype);
    ensure(info !== undefined, `dtype ${t.dtype}`);
    ensure(t.shape.every((d) => Number.isSafeInteger(d) && d >= 0), `${t.name}: shape`);
    ensure(t.elements === t.shape.reduce((a, b) => a * b, 1), `${t.name}: elements`);
    ensure(t.bytes === t.elements * info.bytes, `${t.name}: bytes`);
    ensure(t.offset >= f.dataOffset && t.offset + t.bytes <= bytes.length, `${t.name}: range`);
    ensure(f.byName.get(t.name) === t, `${t.name}: byName`);
    covered += t.bytes;
  }
  ensure(covered === bytes.length - f.dataOffset, `covered ${covered} of the data`);
  ensure(Object.values(f.metadata).every((v) => typeof v === "string"), "metadata");
  return "accepted";
}

function safetensorsSeeds(): Uint8Array[] {
  return [
    writeSafetensors([
      {
        name: "model.embed_tokens.weight",
        dtype: "BF16",
        shape: [4, 3],
        data: new Float32Array(12),
      },
      { name: "scalar", dtype: "F32", shape: [], data: new Float32Array([7]) },
      { name: "empty", dtype: "F16", shape: [0, 5], data: new Uint8Array(0) },
      { name: "ids", dtype: "I64", shape: [2], data: new Uint8Array(16) },
    ], { format: "pt" }),
    writeSafetensors([{ name: "w", dtype: "U8", shape: [3], data: new Uint8Array([1, 2, 3]) }]),
  ];
}

/** A value that is sometimes right and sometimes any JSON (or a boundary number). */
function sometimes<T>(right: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: right, weight: 12 },
    { arbitrary: weirdJson(), weight: 1 },
  );
}

/** Boundary numbers, wrong types and small structures. */
export function weirdJson(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom(
      -1,
      0,
      0.5,
      -0,
      1,
      2 ** 31,
      2 ** 32,
      2 ** 53 - 1,
      2 ** 53,
      2 ** 63,
      2 ** 64,
      1e308,
      -1e308,
      "",
      "0",
      null,
      true,
      false,
      [],
      {},
    ),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string({ maxLength: 8 }),
    fc.jsonValue({ maxDepth: 2 }),
  );
}

interface StEntry {
  name: string;
  dtype: unknown;
  shape: unknown;
  offsets: unknown;
  extra: [string, unknown] | null;
}

/** A header built from parts: mostly consistent, with some fields replaced by anything. */
function safetensorsStructured(): fc.Arbitrary<Uint8Array> {
  const dtypes = SAFETENSORS_DTYPES.map((d) => d.name);
  const tensor = fc.record({
    name: fc.oneof(fc.constantFrom("w", "b", "__proto__", "", "a.b"), fc.string({ maxLength: 6 })),
    dtype: fc.constantFrom(...dtypes),
    shape: fc.array(fc.nat({ max: 5 }), { maxLength: 3 }),
  });
  return fc.record({
    tensors: fc.uniqueArray(tensor, { maxLength: 4, selector: (t) => t.name }),
    dtypes: fc.array(sometimes(fc.constant(undefined)), { maxLength: 4 }),
    shapes: fc.array(sometimes(fc.constant(undefined)), { maxLength: 4 }),
    offsets: fc.array(
      fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 10 },
        {
          arbitrary: fc.tuple(fc.integer({ min: -2, max: 2 }), fc.integer({ min: -2, max: 2 })),
          weight: 2,
        },
        { arbitrary: weirdJson(), weight: 1 },
      ),
      { maxLength: 4 },
    ),
    shuffle: fc.boolean(),
    metadata: fc.option(
      fc.oneof(
        fc.dictionary(fc.string({ maxLength: 4 }), fc.string({ maxLength: 4 })),
        weirdJson(),
      ),
    ),
    extraData: fc.oneof(
      { arbitrary: fc.constant(0), weight: 8 },
      { arbitrary: fc.integer({ min: -3, max: 3 }), weight: 1 },
    ),
    pad: fc.constantFrom("", " ", "   \n", "\u00a0"),
    declared: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 10 },
      { arbitrary: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), weight: 1 },
    ),
  }).map((p) => {
    const entries: StEntry[] = [];
    let cursor = 0;
    p.tensors.forEach((t, i) => {
      const info = safetensorsDtype(t.dtype)!;
      const bytes = t.shape.reduce((a, b) => a * b, 1) * info.bytes;
      let offsets: unknown = [cursor, cursor + bytes];
      const o = p.offsets[i];
      if (Array.isArray(o) && o.length === 2 && typeof o[0] === "number") {
        offsets = [cursor + (o[0] as number), cursor + bytes + (o[1] as number)];
      } else if (o !== undefined) offsets = o;
      cursor += bytes;
      entries.push({
        name: t.name,
        dtype: p.dtypes[i] === undefined ? t.dtype : p.dtypes[i],
        shape: p.shapes[i] === undefined ? t.shape : p.shapes[i],
        offsets,
        extra: null,
      });
    });
    if (p.shuffle) entries.reverse();
    const parts = entries.map((e) =>
      `${JSON.stringify(e.name)}:${
        JSON.stringify({ dtype: e.dtype, shape: e.shape, data_offsets: e.offsets })
      }`
    );
    if (p.metadata !== null) parts.unshift(`"__metadata__":${JSON.stringify(p.metadata)}`);
    const header = enc.encode(`{${parts.join(",")}}${p.pad}`);
    const data = Math.max(0, cursor + p.extraData);
    const out = new Uint8Array(8 + header.length + data);
    new DataView(out.buffer).setBigUint64(0, p.declared ?? BigInt(header.length), true);
    out.set(header, 8);
    return out;
  });
}

/** Safetensors: edits of valid files, random headers from parts, random bytes. */
export const safetensorsTarget: Target<Uint8Array> = {
  name: "safetensors",
  minAccepted: 0.04, // measured 9.5%
  arbitrary() {
    const seeds = safetensorsSeeds();
    return fc.oneof(
      {
        arbitrary: mutationArb(seeds.length, 4, 128).map((m) => applyEdits(seeds[m.seed], m.edits)),
        weight: 3,
      },
      { arbitrary: safetensorsStructured(), weight: 3 },
      { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
    ).map((b) => Object.assign(b, { toString: () => hex(b, 256) }));
  },
  check: checkSafetensors,
};

// ---------------------------------------------------------------- HF config.json

const CONFIG_KEYS = [
  "model_type",
  "architectures",
  "hidden_size",
  "num_hidden_layers",
  "num_attention_heads",
  "num_key_value_heads",
  "head_dim",
  "intermediate_size",
  "vocab_size",
  "rms_norm_eps",
  "max_position_embeddings",
  "tie_word_embeddings",
  "rope_theta",
  "rope_scaling",
  "rope_parameters",
  "rope_local_base_freq",
  "sliding_window",
  "use_sliding_window",
  "max_window_layers",
  "layer_types",
  "sliding_window_pattern",
  "num_experts",
  "num_local_experts",
  "num_experts_per_tok",
  "moe_intermediate_size",
  "shared_expert_intermediate_size",
  "norm_topk_prob",
  "decoder_sparse_step",
  "mlp_only_layers",
  "text_config",
  "torch_dtype",
  "dtype",
];

function configValue(): fc.Arbitrary<unknown> {
  const small = fc.oneof(fc.integer({ min: -2, max: 70 }), fc.constantFrom(128, 256, 4096, 65536));
  return fc.oneof(
    { arbitrary: small, weight: 4 },
    { arbitrary: weirdJson(), weight: 3 },
    {
      arbitrary: fc.array(
        fc.oneof(fc.constantFrom("full_attention", "sliding_attention", "x"), small),
        { maxLength: 6 },
      ),
      weight: 1,
    },
    {
      arbitrary: fc.record({
        rope_type: fc.constantFrom("default", "linear", "dynamic", "yarn", "llama3", "x"),
        type: fc.constantFrom("linear", "yarn"),
        factor: fc.oneof(fc.double(), weirdJson()),
        rope_theta: fc.oneof(fc.double(), weirdJson()),
        original_max_position_embeddings: small,
      }, { requiredKeys: [] }),
      weight: 1,
    },
    {
      arbitrary: fc.constantFrom(
        "llama",
        "qwen2",
        "qwen3",
        "gemma3",
        "gemma3_text",
        "mixtral",
        "x",
      ),
      weight: 1,
    },
  );
}

const NUMBER_SWAPS = ["1e999", "-1e999", "1e-400", "-0", "0.5", "1E2", "9007199254740993"];

function hfConfigArb(): fc.Arbitrary<Uint8Array> {
  const cases = Object.values(CONFIG_CASES).map((c) => c.config);
  const override = fc.record({
    inText: fc.boolean(),
    key: fc.constantFrom(...CONFIG_KEYS),
    value: fc.oneof({ arbitrary: fc.constant(undefined), weight: 1 }, {
      arbitrary: configValue(),
      weight: 6,
    }),
  });
  const structured = fc.record({
    base: fc.nat({ max: cases.length - 1 }),
    overrides: fc.array(override, { maxLength: 4 }),
    swap: fc.option(fc.tuple(fc.nat(), fc.constantFrom(...NUMBER_SWAPS))),
  }).map(({ base, overrides, swap }) => {
    const c = structuredClone(cases[base]) as Record<string, unknown>;
    for (const o of overrides) {
      const tc = c.text_config;
      const target = o.inText && tc !== null && typeof tc === "object" && !Array.isArray(tc)
        ? tc as Record<string, unknown>
        : c;
      if (o.value === undefined) delete target[o.key];
      else target[o.key] = o.value;
    }
    let text = JSON.stringify(c, null, 1);
    if (swap !== null) {
      const nums = [...text.matchAll(/-?\d+(\.\d+)?([eE][-+]?\d+)?/g)];
      if (nums.length > 0) {
        const m = nums[swap[0] % nums.length];
        text = text.slice(0, m.index) + swap[1] + text.slice(m.index! + m[0].length);
      }
    }
    return enc.encode(text);
  });
  const seeds = cases.map((c) => enc.encode(JSON.stringify(c)));
  return fc.oneof(
    { arbitrary: structured, weight: 4 },
    {
      arbitrary: mutationArb(seeds.length, 3, 4096).map((m) => applyEdits(seeds[m.seed], m.edits)),
      weight: 1,
    },
  ).map((b) => Object.assign(b, { toString: () => new TextDecoder().decode(b) }));
}

function finiteEverywhere(v: unknown): boolean {
  if (typeof v === "number") return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(finiteEverywhere);
  if (v !== null && typeof v === "object") return Object.values(v).every(finiteEverywhere);
  return true;
}

/** What a parsed config promises: every size in its limits, the head arithmetic consistent. */
export function checkHfConfig(c: HfConfig): void {
  const L = HF_CONFIG_LIMITS;
  const inLimit = (v: number, k: keyof typeof L & string) =>
    ensure(Number.isSafeInteger(v) && v >= L[k].min && v <= L[k].max, `${k} ${v}`);
  inLimit(c.hiddenSize, "hiddenSize");
  inLimit(c.numLayers, "numLayers");
  inLimit(c.numHeads, "numHeads");
  inLimit(c.headDim, "headDim");
  inLimit(c.intermediateSize, "intermediateSize");
  inLimit(c.vocabSize, "vocabSize");
  inLimit(c.maxPositionEmbeddings, "maxPositionEmbeddings");
  ensure(
    Number.isSafeInteger(c.numKvHeads) && c.numKvHeads >= 1 && c.numHeads % c.numKvHeads === 0,
    `numKvHeads ${c.numKvHeads} for ${c.numHeads} heads`,
  );
  ensure(c.rmsNormEps > 0 && c.rmsNormEps < 1, `rmsNormEps ${c.rmsNormEps}`);
  ensure(Number.isFinite(c.ropeTheta) && c.ropeTheta > 0, `ropeTheta ${c.ropeTheta}`);
  ensure(
    c.ropeLocalTheta === null || (Number.isFinite(c.ropeLocalTheta) && c.ropeLocalTheta > 0),
    `ropeLocalTheta ${c.ropeLocalTheta}`,
  );
  ensure(c.ropeScaling === null || finiteEverywhere(c.ropeScaling), "ropeScaling not finite");
  ensure(c.layerTypes.length === c.numLayers, `${c.layerTypes.length} layer types`);
  ensure(
    c.layerTypes.every((t) => t === "full_attention" || t === "sliding_attention"),
    "layer type",
  );
  if (c.layerTypes.includes("sliding_attention")) {
    ensure(c.slidingWindow !== null, "sliding layers without a window");
  }
  if (c.slidingWindow !== null) inLimit(c.slidingWindow, "slidingWindow");
  if (c.moe !== null) {
    inLimit(c.moe.numExperts, "numExperts");
    ensure(
      Number.isSafeInteger(c.moe.numExpertsPerTok) && c.moe.numExpertsPerTok >= 1 &&
        c.moe.numExpertsPerTok <= c.moe.numExperts,
      `top-k ${c.moe.numExpertsPerTok} of ${c.moe.numExperts}`,
    );
    ensure(
      Number.isSafeInteger(c.moe.expertIntermediateSize) && c.moe.expertIntermediateSize >= 1,
      `expert size ${c.moe.expertIntermediateSize}`,
    );
    ensure(Number.isSafeInteger(c.moe.decoderSparseStep) && c.moe.decoderSparseStep >= 1, "step");
    ensure(
      c.moe.mlpOnlyLayers.every((l) => Number.isSafeInteger(l) && l >= 0 && l < c.numLayers),
      `mlp_only_layers ${c.moe.mlpOnlyLayers}`,
    );
  }
}

/** HF config.json: overrides of real configs, number-literal swaps, byte edits. */
export const hfConfigTarget: Target<Uint8Array> = {
  name: "hf-config",
  minAccepted: 0.08, // measured 16%
  arbitrary: hfConfigArb,
  check(bytes) {
    let c: HfConfig;
    try {
      c = parseHfConfig(bytes, "config.json");
    } catch (e) {
      return formatErrorOnly(e, "config.json", bytes.length);
    }
    checkHfConfig(c);
    return "accepted";
  },
};

// ---------------------------------------------------------------- .cflow / .vflow

let tiledSeeds: Uint8Array[] | undefined;

async function buildTiledSeeds(): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  const shapes = [
    { hidden: 40, layers: 2, heads: 2, kvHeads: 1, headDim: 20, ffn: 70, vocab: 130 },
    { hidden: 1, layers: 1, heads: 1, kvHeads: 1, headDim: 1, ffn: 1, vocab: 1 },
  ];
  for (const format of ["cflow", "vflow"] as const) {
    for (const [i, shape] of shapes.entries()) {
      out.push(
        await randomModelBytes({
          ...shape,
          type: i === 0 ? TILE_TYPE.Q4_0 : TILE_TYPE.Q8_0,
          seed: i + 1,
          tied: i === 1,
        }, format),
      );
    }
    out.push(
      await randomModelBytes({
        hidden: 64,
        layers: 2,
        heads: 2,
        kvHeads: 1,
        headDim: 32,
        ffn: 64,
        vocab: 40,
        experts: 3,
        topK: 2,
        expertFfn: 32,
        expertDelay: 1,
        type: TILE_TYPE.Q4_0,
        seed: 9,
      }, format),
    );
  }
  return out;
}

interface TiledInput {
  bytes: Uint8Array;
  verify: boolean;
}

/** .cflow/.vflow: edits of small valid files, checksums fixed up or not; every entry read back. */
export const tiledTarget: Target<TiledInput> = {
  name: "cflow-vflow",
  minAccepted: 0.04, // measured 8.5%
  async init() {
    tiledSeeds ??= await buildTiledSeeds();
  },
  arbitrary() {
    const seeds = tiledSeeds!;
    return fc.record({
      m: mutationArb(seeds.length, 4, 1024),
      fix: fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, {
        arbitrary: fc.constant(false),
        weight: 1,
      }),
      verify: fc.boolean(),
    }).map(({ m, fix, verify }) => {
      const bytes = applyEdits(seeds[m.seed], m.edits);
      // The header and section-table checksums, so edits reach the deeper checks.
      if (fix) resealTiled(bytes, false);
      return {
        bytes,
        verify,
        toString: () =>
          `seed ${m.seed} ${
            JSON.stringify(m.edits, (_, x) => typeof x === "bigint" ? `${x}n` : x)
          } verify ${verify}`,
      };
    });
  },
  check({ bytes, verify }) {
    const src = bytesSource("t.cflow", bytes);
    try {
      const f = readTiledFile(src, { verifyChecksums: verify });
      ensure(f.size === bytes.length, "size");
      for (const s of f.sections) {
        ensure(s.offset >= 0 && s.offset + s.length <= bytes.length, "section outside the file");
      }
      for (const b of f.blocks) {
        ensure(b.offset >= 0 && b.offset <= bytes.length, "block outside the file");
        for (const e of b.entries) {
          if (e.kind === ENTRY_KIND.TILES) untile(src, f, e);
          else if (e.kind === ENTRY_KIND.F32) readF32Entry(src, e);
        }
      }
      for (const bank of f.experts.values()) {
        for (let x = 0; x < bank.spans.length; x++) {
          untile(src, f, bank.gate, x);
          untile(src, f, bank.up, x);
          untile(src, f, bank.down, x);
        }
      }
    } catch (e) {
      if (e instanceof FormatError) return formatErrorOnly(e, "t.cflow", bytes.length);
      throw new Error(`threw ${e} instead of a FormatError`, { cause: e });
    }
    return "accepted";
  },
};

/** Every format target. */
export const FORMAT_TARGETS: readonly Target<never>[] = [
  ggufTarget,
  safetensorsTarget,
  hfConfigTarget,
  tiledTarget,
] as unknown as Target<never>[];
