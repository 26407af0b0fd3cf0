/**
 * Hugging Face checkpoint directories: `config.json`, the safetensors
 * weights (one file or shards with an index), and where the tokenizer
 * files are.
 *
 * @module
 */

import { type ByteSource, bytesSource, mappedSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { mapFile } from "../../ffi/mod.ts";
import { jsonPath, kindName, parseJson } from "../safetensors/_json.ts";
import {
  parseSafetensors,
  type SafetensorsFile,
  type SafetensorsTensor,
} from "../safetensors/parse_safetensors.ts";
import { readTensorBytes, readTensorF32 } from "../safetensors/read_tensor_f32.ts";
import { isFile, joinPath, readBoundedFile } from "./_files.ts";
import { type HfConfig, parseHfConfig } from "./parse_hf_config.ts";

/**
 * An open weights file: its bytes and how to release them.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import type { ShardHandle } from "./open_hf_checkpoint.ts";
 * const h: ShardHandle = { source: bytesSource("x", new Uint8Array(8)), close() {} };
 * ```
 */
export interface ShardHandle {
  /** Bounded reads of the file. */
  readonly source: ByteSource;
  /** Releases the file (called once by {@link HfCheckpoint.close}). */
  close(): void;
}

/**
 * Opens a weights file by path.
 *
 * @example
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import type { ShardOpener } from "./open_hf_checkpoint.ts";
 * const inMemory: ShardOpener = (path) => ({ source: bytesSource(path, Deno.readFileSync(path)), close() {} });
 * ```
 */
export type ShardOpener = (path: string) => ShardHandle;

/**
 * The default {@link ShardOpener}: maps the file read-only with the kernel
 * library's `mapFile` (needs `--allow-ffi` for the library and read access to
 * the path). Nothing is copied until a tensor is read.
 *
 * @example
 * ```ts ignore
 * import { mapShard } from "./open_hf_checkpoint.ts";
 * const shard = mapShard("models/tiny/model.safetensors");
 * console.log(shard.source.size);
 * shard.close();
 * ```
 */
export function mapShard(path: string): ShardHandle {
  const file = mapFile(path);
  return { source: mappedSource(file), close: () => file.close() };
}

/**
 * The file-system calls {@link openHfCheckpoint} makes besides opening
 * weights: existence checks and whole reads of small JSON files.
 *
 * @example
 * ```ts
 * import type { CheckpointFs } from "./open_hf_checkpoint.ts";
 * const empty: CheckpointFs = {
 *   isFile: () => false,
 *   readFile: (path) => { throw new Deno.errors.NotFound(path); },
 * };
 * ```
 */
export interface CheckpointFs {
  /** Whether `path` is a regular file (following symlinks). */
  isFile(path: string): boolean;
  /**
   * Reads a whole file of at most `limit` bytes; a larger one is a
   * FormatError naming `field`.
   */
  readFile(path: string, limit: number, field: string): Uint8Array;
}

/**
 * The real file system (needs `--allow-read` for the directory).
 *
 * @example
 * ```ts
 * import { diskFs } from "./open_hf_checkpoint.ts";
 * console.log(diskFs.isFile("tests/fixtures/hf/llama/config.json")); // true
 * ```
 */
export const diskFs: CheckpointFs = Object.freeze({ isFile, readFile: readBoundedFile });

/**
 * Options for {@link openHfCheckpoint}.
 *
 * @example
 * ```ts
 * import type { OpenHfCheckpointOptions } from "./open_hf_checkpoint.ts";
 * const options: OpenHfCheckpointOptions = {};
 * ```
 */
export interface OpenHfCheckpointOptions {
  /** How to open each weights file (default {@link mapShard}). */
  readonly open?: ShardOpener;
  /** Existence checks and JSON reads (default {@link diskFs}). */
  readonly fs?: CheckpointFs;
}

/**
 * Options that make {@link openHfCheckpoint} read a checkpoint held in
 * memory, keyed by path (`dir/config.json`, `dir/model.safetensors`, …):
 * for tests, with no file-system or FFI permission.
 *
 * @example
 * ```ts
 * import { writeSafetensors } from "../safetensors/mod.ts";
 * import { inMemoryCheckpoint, openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * const config = {
 *   model_type: "llama", hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2,
 *   intermediate_size: 16, vocab_size: 4,
 * };
 * using ckpt = openHfCheckpoint("m", inMemoryCheckpoint({
 *   "m/config.json": JSON.stringify(config),
 *   "m/model.safetensors": writeSafetensors([
 *     { name: "model.norm.weight", dtype: "F32", shape: [8], data: new Float32Array(8).fill(1) },
 *   ]),
 * }));
 * console.log(ckpt.readF32("model.norm.weight")[0]); // 1
 * ```
 */
export function inMemoryCheckpoint(
  files: Readonly<Record<string, Uint8Array | string>>,
): Required<OpenHfCheckpointOptions> {
  const table = new Map<string, Uint8Array>();
  for (const [path, data] of Object.entries(files)) {
    table.set(path, typeof data === "string" ? new TextEncoder().encode(data) : data);
  }
  const get = (path: string): Uint8Array => {
    const bytes = table.get(path);
    if (bytes === undefined) throw new Deno.errors.NotFound(`${path}: no such file`);
    return bytes;
  };
  return {
    fs: {
      isFile: (path) => table.has(path),
      readFile(path, limit, field) {
        const bytes = get(path);
        if (bytes.length > limit) {
          throw new FormatError(
            path,
            field,
            0,
            `is ${bytes.length} bytes, more than the ${limit}-byte limit`,
          );
        }
        return bytes.slice();
      },
    },
    open: (path) => ({ source: bytesSource(path, get(path)), close() {} }),
  };
}

/**
 * One safetensors file of a checkpoint.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("models/tiny");
 * for (const shard of ckpt.shards) console.log(shard.file, shard.header.tensors.length);
 * ```
 */
export interface HfShard {
  /** File name inside the checkpoint directory. */
  readonly file: string;
  /** Full path. */
  readonly path: string;
  /** Bounded reads of the file. */
  readonly source: ByteSource;
  /** Its parsed header. */
  readonly header: SafetensorsFile;
}

/**
 * Where a tensor of the merged table lives.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("models/tiny");
 * const ref = ckpt.tensor("model.norm.weight");
 * console.log(ref.shard.file, ref.info.dtype, ref.info.shape);
 * ```
 */
export interface HfTensorRef {
  /** Tensor name. */
  readonly name: string;
  /** The shard holding it. */
  readonly shard: HfShard;
  /** Its dtype, shape and location in the shard. */
  readonly info: SafetensorsTensor;
}

/**
 * Paths of the side files found next to the weights (null when absent).
 * They are only located here; reading them is up to their own readers.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("models/tiny");
 * console.log(ckpt.files.tokenizerJson ?? "no tokenizer.json");
 * ```
 */
export interface HfCheckpointFiles {
  /** `config.json` (always present). */
  readonly config: string;
  /** `model.safetensors.index.json`, for sharded checkpoints. */
  readonly index: string | null;
  /** `tokenizer.json` (Hugging Face tokenizers). */
  readonly tokenizerJson: string | null;
  /** `tokenizer_config.json` (chat template, special tokens). */
  readonly tokenizerConfig: string | null;
  /** `tokenizer.model` (SentencePiece). */
  readonly tokenizerModel: string | null;
  /** `special_tokens_map.json`. */
  readonly specialTokensMap: string | null;
  /** `generation_config.json`. */
  readonly generationConfig: string | null;
}

/** Largest `model.safetensors.index.json` read, in bytes. */
const MAX_INDEX_BYTES = 64 << 20;
const INDEX = "model.safetensors.index.json";
const SINGLE = "model.safetensors";

/**
 * An open checkpoint: its config, its shards, and a merged tensor table.
 * Close it (or use `using`) to release the mapped files.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("models/tiny");
 * console.log(ckpt.config.family, ckpt.tensors.size);
 * const firstRows = ckpt.readF32("model.embed_tokens.weight", 0, 2);
 * ```
 */
export class HfCheckpoint {
  /** The directory, as given. */
  readonly dir: string;
  /** The validated `config.json`. */
  readonly config: HfConfig;
  /** Side files found in the directory. */
  readonly files: HfCheckpointFiles;
  /** Weights files, in file-name order. */
  readonly shards: readonly HfShard[];
  /** Every tensor of the checkpoint by name. */
  readonly tensors: ReadonlyMap<string, HfTensorRef>;
  #handles: ShardHandle[];
  #closed = false;

  /** @internal Use {@link openHfCheckpoint}. */
  constructor(
    dir: string,
    config: HfConfig,
    files: HfCheckpointFiles,
    shards: readonly HfShard[],
    tensors: ReadonlyMap<string, HfTensorRef>,
    handles: ShardHandle[],
  ) {
    this.dir = dir;
    this.config = config;
    this.files = files;
    this.shards = shards;
    this.tensors = tensors;
    this.#handles = handles;
  }

  /** True once {@link close} ran. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The tensor called `name`.
   *
   * @throws {RangeError} When the checkpoint has no such tensor.
   */
  tensor(name: string): HfTensorRef {
    const ref = this.tensors.get(name);
    if (ref === undefined) {
      throw new RangeError(`${this.dir}: no tensor named ${JSON.stringify(name)}`);
    }
    return ref;
  }

  /** Rows [rowStart, rowStart + rowCount) of an F32/F16/BF16 tensor as f32 (see `readTensorF32`). */
  readF32(name: string, rowStart = 0, rowCount?: number): Float32Array<ArrayBuffer> {
    this.#check();
    const ref = this.tensor(name);
    return readTensorF32(ref.shard.source, ref.info, rowStart, rowCount);
  }

  /** Raw little-endian bytes of rows [rowStart, rowStart + rowCount) (see `readTensorBytes`). */
  readBytes(name: string, rowStart = 0, rowCount?: number): Uint8Array {
    this.#check();
    const ref = this.tensor(name);
    return readTensorBytes(ref.shard.source, ref.info, rowStart, rowCount);
  }

  /** Releases every shard; later reads throw. Closing twice is a no-op. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeAll(this.#handles);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  #check(): void {
    if (this.#closed) throw new TypeError(`${this.dir}: checkpoint is closed`);
  }
}

function closeAll(handles: ShardHandle[]): void {
  let first: unknown;
  for (const h of handles.splice(0)) {
    try {
      h.close();
    } catch (e) {
      first ??= e;
    }
  }
  if (first !== undefined) throw first;
}

/**
 * Whether `name` is a plain file name that stays inside the directory: not
 * empty, no `/`, `\` or NUL, not `.` or `..`, at most 255 bytes.
 */
function isPlainFileName(name: string): boolean {
  return name.length > 0 && new TextEncoder().encode(name).length <= 255 && name !== "." &&
    name !== ".." &&
    !/[/\\\0]/.test(name);
}

/**
 * Opens a Hugging Face checkpoint directory:
 *
 * - reads and validates `config.json` ({@link parseHfConfig});
 * - finds the weights: `model.safetensors` when present (transformers'
 *   preference), else `model.safetensors.index.json`, whose `weight_map`
 *   maps every tensor to a shard. Shard names must be plain file names
 *   ending in `.safetensors` (no `/`, `\`, `..`, absolute paths or NUL) that
 *   exist in the directory (symlinks, as in the HF cache, are followed);
 * - opens every shard (by default with `mapFile`) and parses its header
 *   ({@link parseSafetensors}), reading nothing else;
 * - checks the index against the shards: each indexed tensor is in the
 *   shard the index names, and each shard holds only tensors the index maps
 *   to it;
 * - notes which tokenizer and generation files exist.
 *
 * Every inconsistency is a {@link FormatError} naming the file, the field
 * (e.g. `weight_map["lm_head.weight"]`) and the byte offset. Files opened
 * before a failure are closed again.
 *
 * @example
 * ```ts ignore
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("tests/fixtures/hf/qwen2");
 * console.log(ckpt.shards.length, ckpt.config.tieWordEmbeddings); // 3 true
 * const norm = ckpt.readF32("model.norm.weight");
 * ```
 *
 * @example Without FFI: read the (small) files into memory
 * ```ts
 * import { bytesSource } from "../byte_source.ts";
 * import { openHfCheckpoint } from "./open_hf_checkpoint.ts";
 * using ckpt = openHfCheckpoint("tests/fixtures/hf/llama", {
 *   open: (path) => ({ source: bytesSource(path, Deno.readFileSync(path)), close() {} }),
 * });
 * console.log(ckpt.tensor("lm_head.weight").info.shape); // [320, 64]
 * ```
 */
export function openHfCheckpoint(dir: string, options: OpenHfCheckpointOptions = {}): HfCheckpoint {
  if (typeof dir !== "string" || dir === "") {
    throw new TypeError("openHfCheckpoint: dir must be a non-empty string");
  }
  const open = options.open ?? mapShard;
  const fs = options.fs ?? diskFs;
  const at = (name: string) => joinPath(dir, name);
  const found = (name: string) => fs.isFile(at(name)) ? at(name) : null;

  const configPath = at("config.json");
  if (!fs.isFile(configPath)) {
    throw new FormatError(
      dir,
      "config.json",
      0,
      "not found: not a Hugging Face checkpoint directory",
    );
  }
  const config = parseHfConfig(fs.readFile(configPath, 16 << 20, "config.json"), configPath);

  const indexPath = found(SINGLE) === null ? found(INDEX) : null;
  if (found(SINGLE) === null && indexPath === null) {
    const bin = found("pytorch_model.bin") ?? found("pytorch_model.bin.index.json");
    throw new FormatError(
      dir,
      SINGLE,
      0,
      bin === null
        ? `neither ${SINGLE} nor ${INDEX} found`
        : `only PyTorch pickle weights (${bin}); cflow reads safetensors`,
    );
  }

  const handles: ShardHandle[] = [];
  try {
    const shards: HfShard[] = [];
    const openShard = (file: string): HfShard => {
      const path = at(file);
      const handle = open(path);
      handles.push(handle);
      const shard = Object.freeze({
        file,
        path,
        source: handle.source,
        header: parseSafetensors(handle.source),
      });
      shards.push(shard);
      return shard;
    };
    const tensors = new Map<string, HfTensorRef>();

    if (indexPath === null) {
      const shard = openShard(SINGLE);
      for (const info of shard.header.tensors) {
        tensors.set(info.name, Object.freeze({ name: info.name, shard, info }));
      }
    } else {
      const map = readIndex(indexPath, fs.readFile(indexPath, MAX_INDEX_BYTES, "index"));
      const byFile = new Map<string, HfShard>();
      for (const file of [...new Set([...map.values()].map((e) => e.file))].sort()) {
        if (!fs.isFile(at(file))) {
          const [name, entry] = [...map.entries()].find(([, e]) => e.file === file)!;
          throw new FormatError(
            indexPath,
            jsonPath("weight_map", [name]),
            entry.offset,
            `shard ${JSON.stringify(file)} does not exist in ${dir}`,
          );
        }
        byFile.set(file, openShard(file));
      }
      for (const [name, entry] of map) {
        const shard = byFile.get(entry.file)!;
        const info = shard.header.byName.get(name);
        if (info === undefined) {
          throw new FormatError(
            indexPath,
            jsonPath("weight_map", [name]),
            entry.offset,
            `${entry.file} has no tensor ${JSON.stringify(name)}`,
          );
        }
        tensors.set(name, Object.freeze({ name, shard, info }));
      }
      for (const shard of shards) {
        for (const info of shard.header.tensors) {
          const entry = map.get(info.name);
          if (entry === undefined || entry.file !== shard.file) {
            throw new FormatError(
              indexPath,
              entry === undefined ? "weight_map" : jsonPath("weight_map", [info.name]),
              entry === undefined ? map.offset : entry.offset,
              entry === undefined
                ? `${shard.file} holds ${JSON.stringify(info.name)}, which the index does not list`
                : `${shard.file} also holds ${
                  JSON.stringify(info.name)
                }, which the index maps to ${entry.file}`,
            );
          }
        }
      }
    }

    const files: HfCheckpointFiles = Object.freeze({
      config: configPath,
      index: indexPath,
      tokenizerJson: found("tokenizer.json"),
      tokenizerConfig: found("tokenizer_config.json"),
      tokenizerModel: found("tokenizer.model"),
      specialTokensMap: found("special_tokens_map.json"),
      generationConfig: found("generation_config.json"),
    });
    return new HfCheckpoint(dir, config, files, Object.freeze(shards), tensors, handles);
  } catch (e) {
    try {
      closeAll(handles);
    } catch {
      // The first error is the one worth reporting.
    }
    throw e;
  }
}

/** weight_map entries: tensor name → shard file and the byte offset of that value. */
type IndexMap = Map<string, { file: string; offset: number }> & { offset: number };

function readIndex(path: string, bytes: Uint8Array): IndexMap {
  const root = parseJson(bytes, { file: path, base: 0, root: "" });
  if (root.kind !== "object") {
    throw new FormatError(
      path,
      "(root)",
      root.offset,
      `must be a JSON object, found ${kindName(root)}`,
    );
  }
  const meta = root.entries.get("metadata");
  if (meta !== undefined && meta.kind !== "object" && meta.kind !== "null") {
    throw new FormatError(
      path,
      "metadata",
      meta.offset,
      `must be an object, found ${kindName(meta)}`,
    );
  }
  const wm = root.entries.get("weight_map");
  if (wm === undefined) {
    throw new FormatError(path, "weight_map", root.offset, "is required but missing");
  }
  if (wm.kind !== "object") {
    throw new FormatError(
      path,
      "weight_map",
      wm.offset,
      `must be an object, found ${kindName(wm)}`,
    );
  }
  if (wm.entries.size === 0) {
    throw new FormatError(path, "weight_map", wm.offset, "lists no tensors");
  }
  const map = Object.assign(new Map<string, { file: string; offset: number }>(), {
    offset: wm.offset,
  });
  for (const [name, v] of wm.entries) {
    const field = jsonPath("weight_map", [name]);
    if (v.kind !== "string") {
      throw new FormatError(
        path,
        field,
        v.offset,
        `must be a shard file name, found ${kindName(v)}`,
      );
    }
    if (!isPlainFileName(v.value) || !v.value.endsWith(".safetensors")) {
      throw new FormatError(
        path,
        field,
        v.offset,
        `${
          JSON.stringify(v.value)
        } is not a plain *.safetensors file name inside the checkpoint directory`,
      );
    }
    map.set(name, { file: v.value, offset: v.offset });
  }
  return map;
}
