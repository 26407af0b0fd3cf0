/**
 * Derives test models from the fetched ones (`scripts/fetch-models.sh`), deterministically.
 *
 *   smollm2-q8_0   cache/models/smollm2-135m-instruct.Q8_0.gguf from the Q4_1 GGUF: every
 *                  tensor that is not F32 (the Q4_1 matrices; the embeddings, already Q8_0, are
 *                  put through the same round trip) is dequantized to f32 and requantized to
 *                  Q8_0 with ggml's reference rounding; F32 tensors are copied. Metadata is
 *                  copied in order, except `general.file_type`, which becomes 7
 *                  (LLAMA_FTYPE_MOSTLY_Q8_0) so llama.cpp describes the file truthfully.
 *   smollm2-q4_0   cache/models/smollm2-135m-instruct.Q4_0.gguf, the same from the same source
 *                  with Q4_0 (ggml's `quantize_row_q4_0_ref`) and `general.file_type` 2
 *                  (LLAMA_FTYPE_MOSTLY_Q4_0). Every matrix is Q4_0, the tied embeddings too
 *                  (llama-quantize would make them Q6_K; `--pure` keeps them Q4_0), so cflow's
 *                  conversion re-tiles every matrix losslessly and both engines run the same
 *                  weights (bench/vs_llama.ts).
 *
 * `cache/models/` is the checkout's link to `models/` of the user-level model cache, which
 * `scripts/fetch-models.sh` makes, so a derived model is made once for every checkout.
 *
 * The output is written to a temporary file in the same folder, fsynced, checked against the
 * sha256 pinned below, then renamed into place; a mismatch removes it and fails. When the output
 * already exists with the pinned hash nothing is done. Prints the path of each model.
 *
 * Usage: ./dev run --allow-read --allow-write --allow-ffi --allow-env \
 *          scripts/derive-models.ts [smollm2-q8_0 smollm2-q4_0 ...]  (default: all)
 *
 * @module
 */

import { mapFile } from "../ffi/mod.ts";
import { mappedSource } from "../formats/byte_source.ts";
import {
  type GgufValue,
  type GgufWriteTensor,
  parseGguf,
  readTensorBytes,
  writeGguf,
} from "../formats/gguf/mod.ts";
import { dequantizeRow, ggmlTypeByName, quantizeRow } from "../formats/ggml/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const CACHE = `${ROOT}/cache/models`;

interface Derivation {
  /** Source file name in cache/models/ (fetched by scripts/fetch-models.sh). */
  source: string;
  /** Model name fetch-models.sh takes to fetch the source. */
  fetch: string;
  /** Output file name in cache/models/. */
  output: string;
  /** sha256 of the output. */
  sha256: string;
  /** Builds the output bytes from the mapped source. */
  build(path: string): Uint8Array;
}

/** LLAMA_FTYPE_MOSTLY_Q8_0 in llama.h. */
const FTYPE_MOSTLY_Q8_0 = 7;
/** LLAMA_FTYPE_MOSTLY_Q4_0 in llama.h. */
const FTYPE_MOSTLY_Q4_0 = 2;

/**
 * Every tensor that is not F32 to `typeName` (Q8_0 or Q4_0) through f32; F32 kept; metadata
 * copied in order with `general.file_type` set to `fileType`.
 */
function requantize(path: string, typeName: "Q8_0" | "Q4_0", fileType: number): Uint8Array {
  using file = mapFile(path);
  const src = mappedSource(file);
  const gguf = parseGguf(src);
  const target = ggmlTypeByName(typeName)!;
  const metadata: [string, GgufValue][] = [];
  for (const [key, value] of gguf.metadata) {
    if (key === "general.file_type") {
      if (value.type !== "u32") throw new Error(`derive: ${path}: general.file_type is not a u32`);
      metadata.push([key, { type: "u32", value: fileType }]);
    } else {
      metadata.push([key, value]);
    }
  }
  const tensors: GgufWriteTensor[] = gguf.tensors.map((t) => {
    const bytes = readTensorBytes(src, t);
    if (t.type.name === "F32") return { name: t.name, dims: t.dims, type: t.type, data: bytes };
    if (t.dims[0] % 32 !== 0) {
      throw new Error(`derive: ${t.name}: row length ${t.dims[0]} is not a multiple of 32`);
    }
    const values = dequantizeRow(t.type, bytes, t.elements);
    return { name: t.name, dims: t.dims, type: target, data: quantizeRow(target, values) };
  });
  return writeGguf({ version: gguf.version, metadata, tensors });
}

const DERIVATIONS: Record<string, Derivation> = {
  "smollm2-q8_0": {
    source: "smollm2-135m-instruct.Q4_1.gguf",
    fetch: "smollm2",
    output: "smollm2-135m-instruct.Q8_0.gguf",
    sha256: "0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387",
    build: (path) => requantize(path, "Q8_0", FTYPE_MOSTLY_Q8_0),
  },
  "smollm2-q4_0": {
    source: "smollm2-135m-instruct.Q4_1.gguf",
    fetch: "smollm2",
    output: "smollm2-135m-instruct.Q4_0.gguf",
    sha256: "dc51cbdc90dfb5c74a00a173bbc5ff4609f0df10a2a535040d484246c347da16",
    build: (path) => requantize(path, "Q4_0", FTYPE_MOSTLY_Q4_0),
  },
};

async function sha256(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function fileSha256(path: string): Promise<string | undefined> {
  try {
    return await sha256(await Deno.readFile(path));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

async function derive(name: string): Promise<string> {
  const d = DERIVATIONS[name];
  if (d === undefined) {
    throw new Error(
      `derive: unknown model '${name}' (known: ${Object.keys(DERIVATIONS).join(", ")})`,
    );
  }
  const out = `${CACHE}/${d.output}`;
  if ((await fileSha256(out)) === d.sha256) return out;
  const input = `${CACHE}/${d.source}`;
  try {
    await Deno.stat(input);
  } catch {
    throw new Error(`derive: ${input} is absent; run: bash scripts/fetch-models.sh ${d.fetch}`);
  }
  const t0 = performance.now();
  const bytes = d.build(input);
  const got = await sha256(bytes);
  const tmp = `${out}.tmp-${Deno.pid}`;
  try {
    {
      using file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o644 });
      let at = 0;
      while (at < bytes.length) at += await file.write(bytes.subarray(at));
      await file.sync();
    }
    // Re-read what reached the disk, so the pinned hash vouches for the file, not the buffer.
    const written = await fileSha256(tmp);
    if (got !== d.sha256 || written !== d.sha256) {
      throw new Error(
        `derive: ${d.output}: sha256 ${written ?? got} does not match the pinned ${d.sha256}`,
      );
    }
    await Deno.rename(tmp, out);
  } catch (error) {
    await Deno.remove(tmp).catch(() => {});
    throw error;
  }
  console.error(
    `derive: wrote ${d.output} (${bytes.length} bytes) in ${
      ((performance.now() - t0) / 1000).toFixed(1)
    } s`,
  );
  return out;
}

if (import.meta.main) {
  const names = Deno.args.length > 0 ? Deno.args : Object.keys(DERIVATIONS);
  try {
    for (const name of names) console.log(await derive(name));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}
