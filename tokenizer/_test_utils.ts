/**
 * Helpers for the tokenizer tests: fixtures, the compact id encoding the
 * generators write, hashes, reading a GGUF's tokenizer keys without mapping
 * the file, and rebuilding the `tokenizer.json` transformers derives from a
 * GGUF.
 *
 * @module
 */

import type { ByteSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";
import { parseGguf } from "../formats/gguf/parse_gguf.ts";
import { BYTE_TO_CHAR } from "./_unicode.ts";

/** tests/fixtures/tokenizer/ */
export const FIXTURES = new URL("../tests/fixtures/tokenizer/", import.meta.url);

/** A fixture file parsed as JSON. */
export function fixture<T = unknown>(name: string): T {
  return JSON.parse(Deno.readTextFileSync(new URL(name, FIXTURES)));
}

/** One corpus entry. */
export interface Chunk {
  /** Its name (`prose:german#0`, `edge12` …). */
  name: string;
  /** Its text. */
  text: string;
}

/** The corpus every fixture encodes. */
export function corpus(): Chunk[] {
  return fixture<{ chunks: Chunk[] }>("corpus.json").chunks;
}

/** Decodes the generators' base64 of unsigned LEB128 varints. */
export function unvarint(b64: string): number[] {
  const bin = atob(b64);
  const out: number[] = [];
  let cur = 0;
  let scale = 1;
  for (let i = 0; i < bin.length; i++) {
    const b = bin.charCodeAt(i);
    cur += (b & 0x7f) * scale;
    scale *= 128;
    if (b < 0x80) {
      out.push(cur);
      cur = 0;
      scale = 1;
    }
  }
  return out;
}

/** Hex sha256 of a string's UTF-8. */
export async function sha256(text: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The first 16 hex digits of {@link sha256}, as the generators store them. */
export async function short(text: string): Promise<string> {
  return (await sha256(text)).slice(0, 16);
}

/** The test models, relative to the repository root. */
export const MODELS = {
  smollm2: "cache/models/smollm2-135m-instruct.Q4_1.gguf",
  gemma3: "cache/models/gemma-3-270m-q4_k_m.gguf",
  /** Qwen2.5-Coder-0.5B-Instruct: `tokenizer.ggml.pre = qwen2`, 151,936 ids, 151,387 merges. */
  qwen05b: "cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
} as const;

/** Absolute path of a test model. */
export function modelPath(model: keyof typeof MODELS): string {
  return new URL(`../${MODELS[model]}`, import.meta.url).pathname;
}

/** Why a test needing `model` cannot run here, or undefined when it can. */
export function skipReason(model: keyof typeof MODELS): string | undefined {
  const path = modelPath(model);
  if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") {
    return "needs --allow-read";
  }
  try {
    Deno.statSync(path);
  } catch {
    return `${MODELS[model]} is absent (fetch it: bash scripts/fetch-models.sh ${model})`;
  }
  return undefined;
}

/** The 1 MiB blocks {@link fileSource} reads. */
const BLOCK = 1 << 20;

/** A read-only ByteSource over a file, through 1 MiB cached blocks (no FFI needed). */
function fileSource(path: string): ByteSource & Disposable & { bytesRead(): number } {
  const file = Deno.openSync(path, { read: true });
  // The size from a seek, not fstat: Deno checks fstat against where a link leads, and
  // cache/models is a link into the user cache, outside what `deno task fuzz` may read.
  const size = file.seekSync(0, Deno.SeekMode.End);
  let bytesRead = 0;
  const blocks = new Map<number, Uint8Array>();
  const block = (k: number): Uint8Array => {
    let b = blocks.get(k);
    if (b === undefined) {
      const len = Math.min(BLOCK, size - k * BLOCK);
      b = new Uint8Array(len);
      file.seekSync(k * BLOCK, Deno.SeekMode.Start);
      let got = 0;
      while (got < len) {
        const n = file.readSync(b.subarray(got));
        if (n === null) break;
        got += n;
      }
      bytesRead += got;
      blocks.set(k, b);
    }
    return b;
  };
  return {
    name: path,
    size,
    read(offset: number, length: number, field = "data"): Uint8Array {
      if (offset < 0 || length < 0 || offset + length > size) {
        throw new FormatError(path, field, offset, `needs ${length} bytes past the end (${size})`);
      }
      const out = new Uint8Array(length);
      let at = 0;
      while (at < length) {
        const k = Math.floor((offset + at) / BLOCK);
        const b = block(k);
        const from = offset + at - k * BLOCK;
        const n = Math.min(b.length - from, length - at);
        out.set(b.subarray(from, from + n), at);
        at += n;
      }
      return out;
    },
    bytesRead: () => bytesRead,
    [Symbol.dispose]() {
      file.close();
    },
  };
}

/** What {@link ggufTokenizerMetadata} read of the file. */
export interface MetadataRead {
  /** Bytes read from the file (whole 1 MiB blocks, each at most once). */
  bytesRead: number;
  /** The file's size. */
  fileSize: number;
  /** Where the first tensor's data starts: everything before it is header, metadata and tensor infos. */
  dataStart: number;
}

/**
 * The `tokenizer.*` metadata of a GGUF file, as parsed GGUF values. Only the header, the metadata
 * and the tensor infos are read (in 1 MiB blocks), never the tensor data; `read`, when given, is
 * filled in with what was read, so that a test can bound it.
 */
export function ggufTokenizerMetadata(path: string, read?: MetadataRead): Record<string, unknown> {
  using src = fileSource(path);
  const gguf = parseGguf(src);
  const out: Record<string, unknown> = {};
  for (const [k, v] of gguf.metadata) if (k.startsWith("tokenizer.")) out[k] = v;
  if (read !== undefined) {
    read.bytesRead = src.bytesRead();
    read.fileSize = src.size;
    read.dataStart = Math.min(src.size, ...gguf.tensors.map((t) => t.offset));
  }
  return out;
}

/** The most {@link ggufTokenizerMetadata} may read of a file whose tensor data starts at `dataStart`. */
export function metadataReadBound(dataStart: number): number {
  return (Math.floor(dataStart / BLOCK) + 1) * BLOCK;
}

/** The plain value of a (possibly parsed) metadata entry. */
export function plain<T>(v: unknown): T {
  return (v !== null && typeof v === "object" && "value" in v
    ? (v as { value: unknown }).value
    : v) as T;
}

/** What gen_tokenizer_hf.py keeps of a transformers-built tokenizer.json. */
export interface Skeleton {
  /** tokenizer.json without model.vocab, model.merges and added_tokens. */
  tokenizer_json: Record<string, unknown> & { model: Record<string, unknown> };
  /** Number of ids in the vocabulary. */
  vocab_size: number;
  /** sha256 of the tokens in id order, joined by U+0000. */
  vocab_sha256: string;
  /** Number of merges. */
  merges_count: number;
  /** sha256 of the merges, each `a U+0001 b U+0000`. */
  merges_sha256: string;
  /** Number of added tokens. */
  added_tokens_count: number;
  /** sha256 of the added tokens, each `id U+0001 content U+0001 special(0|1) U+0000`. */
  added_tokens_sha256: string;
  /** transformers' add_bos_token. */
  add_bos_token: boolean | null;
  /** Ids with add_special_tokens=True for a few texts. */
  with_special: Record<string, number[]>;
  /** SmolLM2 only: the pre-tokenizer of its published tokenizer.json (Digits, then ByteLevel). */
  digits_pre_tokenizer?: unknown;
}

/** The parts transformers derives from a GGUF (integrations/gguf/gguf_tokenizer_mapping.py). */
export interface DerivedTokenizer {
  /** Token → id. */
  vocab: Map<string, number>;
  /** Merge pairs in rank order. */
  merges: [string, string][];
  /** Added tokens in id order. */
  added: { id: number; content: string; special: boolean }[];
}

// Python's str.isspace() (which counts the information separators U+001C..U+001F).
const PY_SPACE =
  // deno-lint-ignore no-control-regex
  /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/u;

/**
 * transformers' byte_level_tokenizer / gemma_tokenizer + add_gguf_special_tokens, in TypeScript:
 * Gemma 3's SentencePiece vocabulary, or any other model's byte-level one (checked against
 * transformers' own output for SmolLM2 only: hf_smollm2_skeleton.json).
 */
export function deriveHfTokenizer(
  model: keyof typeof MODELS,
  meta: Record<string, unknown>,
): DerivedTokenizer {
  const tokens = plain<string[]>(meta["tokenizer.ggml.tokens"]);
  const types = plain<ArrayLike<number>>(meta["tokenizer.ggml.token_type"]);
  const vocab = new Map<string, number>();
  let merges: [string, string][];
  let spelled: Set<string> | undefined;
  if (model !== "gemma3") {
    spelled = new Set(BYTE_TO_CHAR);
    const utf8 = new TextEncoder();
    tokens.forEach((t, i) => {
      const ok = [...t].every((c) => spelled!.has(c));
      vocab.set(ok ? t : Array.from(utf8.encode(t), (b) => BYTE_TO_CHAR[b]).join(""), i);
    });
    merges = plain<string[]>(meta["tokenizer.ggml.merges"]).map((m) => {
      const [a, b] = m.split(" ");
      return [a, b];
    });
  } else {
    const respelled = tokens.map((
      t,
    ) => (t.includes(" ") && PY_SPACE.test(t) ? "\u2581".repeat([...t].length) : t));
    const positions = new Map<string, number>();
    respelled.forEach((t, i) => {
      vocab.set(t, i);
      positions.set(t, -i);
    });
    // transformers' generate_merges(vocab, vocab_scores=positions).
    type M = {
      l: string;
      r: string;
      score: number;
      ll: number;
      lr: number;
      il: number;
      ir: number;
    };
    const all: M[] = [];
    for (const [merge, score] of positions) {
      const local: M[] = [];
      let k = 0; // code points before the cut
      const n = [...merge].length;
      for (let cut = 0; cut < merge.length;) {
        cut += merge.codePointAt(cut)! > 0xffff ? 2 : 1;
        k++;
        if (cut >= merge.length) break;
        const l = merge.slice(0, cut);
        const il = vocab.get(l);
        if (il === undefined) continue;
        const r = merge.slice(cut);
        const ir = vocab.get(r);
        if (ir !== undefined) local.push({ l, r, score, ll: k, lr: n - k, il, ir });
      }
      if (local.length > 1) local.sort((x, y) => x.il - y.il || x.ir - y.ir);
      for (const m of local) all.push(m);
    }
    all.sort((x, y) => y.score - x.score || y.ll - x.ll || y.lr - x.lr);
    merges = all.map((m) => [m.l, m.r]);
  }
  const added: { id: number; content: string; special: boolean }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (types[i] === 3 && (spelled === undefined || [...t].every((c) => spelled!.has(c)))) {
      added.push({ id: vocab.get(t) ?? i, content: t, special: true });
    } else if (types[i] === 4 && vocab.has(t)) {
      added.push({ id: vocab.get(t)!, content: t, special: false });
    }
  }
  added.sort((a, b) => a.id - b.id);
  return { vocab, merges, added };
}

/** The tokenizer.json text for a skeleton and derived parts. */
export function hfJson(skeleton: Skeleton, d: DerivedTokenizer): string {
  const j = structuredClone(skeleton.tokenizer_json);
  j.model.vocab = Object.fromEntries(d.vocab);
  j.model.merges = d.merges;
  j.added_tokens = d.added.map((a) => ({
    id: a.id,
    content: a.content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: a.special,
  }));
  return JSON.stringify(j);
}

/** A small byte-fallback BPE tokenizer.json (8 tokens, a BOS template), as an object. */
export function smallHfJson(): Record<string, unknown> {
  return {
    added_tokens: [
      { id: 0, content: "<eos>", special: true, normalized: false },
      { id: 7, content: "<bos>", special: true, normalized: false },
    ],
    normalizer: { type: "Replace", pattern: { String: " " }, content: "▁" },
    pre_tokenizer: null,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<bos>", type_id: 0 } }, {
        Sequence: { id: "A", type_id: 0 },
      }],
      special_tokens: { "<bos>": { id: "<bos>", ids: [7], tokens: ["<bos>"] } },
    },
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "▁" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
      ],
    },
    model: {
      type: "BPE",
      byte_fallback: true,
      vocab: { "<eos>": 0, h: 1, i: 2, "▁": 3, hi: 4, "▁hi": 5, "<0x21>": 6, "<bos>": 7 },
      merges: ["h i", "▁ hi"],
    },
  };
}
