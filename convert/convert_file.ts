/**
 * `cflow convert`: a checkpoint (GGUF file, Hugging Face directory, or a
 * `.cflow`/`.vflow` file to re-lay out or re-quantize) to a `.cflow` or
 * `.vflow` file, crash-safe. The output is written to a
 * temporary file in the destination folder, fsynced, renamed over the
 * destination and the folder fsynced; on any error the temporary file is
 * removed. A source that changes while it is converted is an error.
 *
 * @module
 */

import { KernelError, STATUS } from "../ffi/mod.ts";
import { type Progress, type Sink, writeModel } from "../formats/cflow/writer.ts";
import { buildModelWeights, type BuildOptions, type MatrixReport } from "./build_weights.ts";
import { openGgufSource } from "./gguf_source.ts";
import { openHfSource } from "./hf_source.ts";
import type { ModelSource } from "./model_source.ts";
import { openTiledSource } from "./tiled_source.ts";
import { bytesSource } from "../formats/byte_source.ts";
import { sniffTiled } from "../formats/cflow/reader.ts";

/**
 * Options of {@link convertFile}.
 *
 * @example
 * ```ts
 * import type { ConvertOptions } from "./convert_file.ts";
 * const o: ConvertOptions = { format: "cflow", quant: "q4_0", rule: "ggml", measureError: false };
 * ```
 */
export interface ConvertOptions extends BuildOptions {
  /** Output format. */
  format: "cflow" | "vflow";
  /** Replace an existing destination. */
  force?: boolean;
  /** Called with bytes written and the total. */
  progress?: Progress;
}

/**
 * What a conversion did.
 *
 * @example
 * ```ts
 * import type { ConvertResult } from "./convert_file.ts";
 * function show(r: ConvertResult): string {
 *   return `${r.bytes} bytes`;
 * }
 * ```
 */
export interface ConvertResult {
  /** Path written. */
  output: string;
  /** Size in bytes. */
  bytes: number;
  /** Where the weights came from. */
  source: { format: string; architecture: string };
  /** What happened to each matrix. */
  matrices: MatrixReport[];
}

/** True when the file at `path` starts with the `.cflow` or `.vflow` magic. */
function isTiled(path: string): boolean {
  if (/\.[cv]flow$/i.test(path)) return true;
  let file: Deno.FsFile | undefined;
  try {
    file = Deno.openSync(path, { read: true });
    const magic = new Uint8Array(8);
    const n = file.readSync(magic) ?? 0;
    return sniffTiled(bytesSource(path, magic.subarray(0, n))) !== undefined;
  } catch {
    return false; // not readable as one: the GGUF reader says why
  } finally {
    file?.close();
  }
}

/**
 * Opens a checkpoint: a directory is a Hugging Face checkpoint, a file with
 * the `.cflow` or `.vflow` magic (or name) is a tiled file, any other file
 * must be GGUF.
 *
 * @example
 * ```ts ignore
 * import { openSource } from "./convert_file.ts";
 * const s = openSource("model.gguf");
 * ```
 */
export function openSource(path: string): ModelSource {
  const info = Deno.statSync(path);
  if (info.isDirectory) return openHfSource(path);
  if (isTiled(path)) return openTiledSource(path);
  return openGgufSource(path);
}

/**
 * The output file as a sink: appends gather in a 64 KiB buffer written with
 * blocking writes. The writer hands over one tile stripe at a time (a few
 * KiB); an awaited asynchronous write per stripe cost a thread-pool round
 * trip each, and the conversion of a 0.5 GB GGUF spent most of its time
 * idle between them (docs/FORMAT.md, "Conversion time"). Not larger: with
 * 4 MiB writes the page cache held the file in large folios, and a model
 * loaded from it right after conversion mapped megabytes back in wherever
 * it read a few bytes past its evicted weights (44 MB more file PSS on
 * SmolLM2, tests/residency_test.ts).
 */
function fileSink(file: Deno.FsFile): Sink & { flush(): void } {
  const buffer = new Uint8Array(64 << 10);
  let fill = 0;
  let position = 0;
  const writeAll = (bytes: Uint8Array) => {
    let done = 0;
    while (done < bytes.length) done += file.writeSync(bytes.subarray(done));
  };
  const flush = () => {
    if (fill > 0) writeAll(buffer.subarray(0, fill));
    fill = 0;
  };
  return {
    write(bytes: Uint8Array): Promise<void> {
      if (fill + bytes.length > buffer.length) flush();
      if (bytes.length >= buffer.length) writeAll(bytes);
      else {
        buffer.set(bytes, fill);
        fill += bytes.length;
      }
      position += bytes.length;
      return Promise.resolve();
    },
    writeAt(offset: number, bytes: Uint8Array): Promise<void> {
      flush();
      file.seekSync(offset, Deno.SeekMode.Start);
      writeAll(bytes);
      file.seekSync(position, Deno.SeekMode.Start);
      return Promise.resolve();
    },
    flush,
  };
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

async function fingerprint(path: string): Promise<string> {
  const s = await Deno.stat(path);
  if (s.isDirectory) {
    const parts: string[] = [];
    for await (const e of Deno.readDir(path)) {
      if (!e.isFile) continue;
      const f = await Deno.stat(`${path}/${e.name}`);
      parts.push(`${e.name}:${f.size}:${f.mtime?.getTime()}`);
    }
    return parts.sort().join("|");
  }
  return `${s.size}:${s.mtime?.getTime()}:${s.ino}`;
}

/** True when `a` and `b` name the same file (or the same path). */
async function samePath(a: string, b: string): Promise<boolean> {
  try {
    if ((await Deno.realPath(a)) === (await Deno.realPath(b))) return true;
    const [x, y] = await Promise.all([Deno.stat(a), Deno.stat(b)]);
    return x.dev === y.dev && x.ino !== null && x.ino === y.ino;
  } catch {
    return false; // the output does not exist yet
  }
}

/** Errors of the output file system that the user must act on. */
const FS_FAULTS: Record<string, string> = {
  ENOSPC: "no space left on the device",
  EDQUOT: "disk quota exceeded",
  EFBIG: "file too large for the file system",
  EIO: "input/output error",
  EROFS: "read-only file system",
};

/** A fresh temporary file name for `output`, in its folder. */
function tempName(output: string): string {
  return `${dirname(output)}/.${basename(output)}.tmp-${Deno.pid}-${
    crypto.randomUUID().slice(0, 8)
  }`;
}

/**
 * Removes temporary files a killed conversion of `output` left behind. A
 * live conversion holds an exclusive lock on its temporary file and keeps
 * writing it, so only an unlocked file untouched for a minute is removed.
 */
async function removeStaleTemps(output: string): Promise<void> {
  const dir = dirname(output);
  const prefix = `.${basename(output)}.tmp-`;
  const shape = /^\d+-[0-9a-f]{8}$/;
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch {
    return; // the folder is checked again when the output is created
  }
  for (const e of entries) {
    if (!e.isFile || !e.name.startsWith(prefix) || !shape.test(e.name.slice(prefix.length))) {
      continue;
    }
    const path = `${dir}/${e.name}`;
    let file: Deno.FsFile | undefined;
    try {
      file = await Deno.open(path, { read: true, write: true });
      const st = await file.stat();
      if (Date.now() - (st.mtime?.getTime() ?? Date.now()) < 60_000) continue;
      if (!(await file.tryLock(true))) continue;
      await Deno.remove(path);
    } catch {
      // gone already, or not ours to remove
    } finally {
      file?.close();
    }
  }
}

/**
 * Converts `input` to `output`.
 *
 * @example
 * ```ts ignore
 * import { convertFile } from "./convert_file.ts";
 * const r = await convertFile("smollm2.gguf", "smollm2.cflow", {
 *   format: "cflow", quant: "q4_0", rule: "ggml", measureError: false,
 * });
 * console.log(r.bytes);
 * ```
 */
export async function convertFile(
  input: string,
  output: string,
  options: ConvertOptions,
): Promise<ConvertResult> {
  if (await samePath(input, output)) {
    throw new Deno.errors.AlreadyExists(
      `convert: the output ${output} is the input; write to another file`,
    );
  }
  let exists = false;
  try {
    const st = await Deno.stat(output);
    exists = true;
    if (st.isDirectory) throw new Deno.errors.AlreadyExists(`convert: ${output} is a directory`);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  if (exists && !options.force) {
    throw new Deno.errors.AlreadyExists(`convert: ${output} exists (pass --force to replace it)`);
  }
  await removeStaleTemps(output);
  const before = await fingerprint(input);
  const source = openSource(input);
  const tmp = tempName(output);
  let file: Deno.FsFile | undefined;
  try {
    const matrices: MatrixReport[] = [];
    const model = buildModelWeights(source, options, matrices);
    file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o644 });
    // Held until the process ends: tells a later conversion that this
    // temporary file is not stale.
    await file.lock(true);
    const sink = fileSink(file);
    const plan = await writeModel(model, options.format, sink, options.progress);
    sink.flush();
    await file.syncData();
    file.close();
    file = undefined;
    if ((await fingerprint(input)) !== before) {
      throw new Error(
        `convert: ${input} changed while it was being converted; the output was discarded`,
      );
    }
    await Deno.rename(tmp, output);
    try {
      const dir = await Deno.open(dirname(output), { read: true });
      try {
        await dir.sync();
      } finally {
        dir.close();
      }
    } catch {
      // Some file systems cannot fsync a directory; the rename itself is atomic.
    }
    return {
      output,
      bytes: plan.size,
      source: { format: source.format, architecture: source.hyper.architecture },
      matrices,
    };
  } catch (error) {
    try {
      file?.close();
    } catch {
      // already closed
    }
    try {
      await Deno.remove(tmp);
    } catch {
      // never created
    }
    if (error instanceof KernelError && error.status === STATUS.CHANGED) {
      throw new Error(
        `convert: ${input} changed while it was being converted (truncated or rewritten); ` +
          `the output was discarded`,
        { cause: error },
      );
    }
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === "string" && code in FS_FAULTS) {
      throw new Error(
        `convert: ${FS_FAULTS[code]} (${code}) while writing ${output}; ` +
          `the partial output was removed and ${output} was not changed`,
        { cause: error },
      );
    }
    throw error;
  } finally {
    source.close();
  }
}
