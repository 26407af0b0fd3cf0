/**
 * Opening a converted model for generation: the file is mapped and validated once, and both
 * the tokenizer it carries and the forward pass come from that one load.
 *
 * @module
 */

import { openKernels } from "../ffi/mod.ts";
import { type LoadedTiledFile, loadTiledFile, type TiledFile } from "../formats/cflow/mod.ts";
import { Transformer, type TransformerOptions } from "../model/mod.ts";
import {
  type Tokenizer,
  tokenizerFromGgufMetadata,
  tokenizerFromHfJson,
} from "../tokenizer/mod.ts";

/**
 * A model and its tokenizer.
 *
 * @example
 * ```ts ignore
 * import { openModel } from "./open_model.ts";
 * const { model, tokenizer } = openModel("smollm2.cflow");
 * ```
 */
export interface OpenedModel {
  /** The forward pass (owns the mapped file; close it when done). */
  model: Transformer;
  /** The tokenizer the file carries. */
  tokenizer: Tokenizer;
  /**
   * The file's validated header, metadata and section table (what describes the model). Its
   * metadata no longer holds what only the tokenizer was built from (see
   * {@link releaseTokenizerData}): `tokenizer` holds that.
   */
  file: TiledFile;
}

/**
 * The tokenizer a model file carries ({@link buildTokenizer}), then drops what it was built
 * from out of the metadata the model keeps ({@link releaseTokenizerData}) and collects it
 * before the weights are packed: Gemma 3's 262,144 token strings had stayed in the heap through
 * the packing, its load's peak RSS 9 MB above what it held once loaded (pp512's peak, which
 * the load had set, fell from 345.7-352.1 to 344.1-345.6 MB).
 */
function tokenizerOf(file: LoadedTiledFile, path: string): Tokenizer {
  const tokenizer = buildTokenizer(file, path);
  releaseTokenizerData(file.file.metadata);
  collectGarbage();
  return tokenizer;
}

/** A major garbage collection where V8 exposes one (`--expose-gc`); nothing otherwise. */
function collectGarbage(): void {
  const gc = (globalThis as { gc?: unknown }).gc;
  if (typeof gc === "function") gc();
}

/**
 * Builds the tokenizer from GGUF tokenizer metadata, or an HF tokenizer.json embedded by the
 * converter (files converted before it embedded them name the checkpoint's files instead).
 */
function buildTokenizer(file: LoadedTiledFile, path: string): Tokenizer {
  const meta = file.file.metadata;
  if (typeof meta.tokenizer === "object" && meta.tokenizer !== null) {
    return tokenizerFromGgufMetadata(meta.tokenizer as Record<string, unknown>);
  }
  if (typeof meta.tokenizer_json === "string") {
    const config = meta.tokenizer_config_json;
    return tokenizerFromHfJson(
      meta.tokenizer_json,
      typeof config === "string" ? config : undefined,
    );
  }
  const files = meta.tokenizer_files as Record<string, string | null> | undefined;
  if (files?.tokenizerJson) {
    const json = Deno.readTextFileSync(files.tokenizerJson);
    const config = files.tokenizerConfig ? Deno.readTextFileSync(files.tokenizerConfig) : undefined;
    return tokenizerFromHfJson(json, config);
  }
  throw new RangeError(`${path}: the model carries no tokenizer`);
}

/**
 * Drops from a model file's metadata what only its tokenizer was built from: the arrays of
 * GGUF tokenizer metadata (tokens, scores, token types, merges) and an embedded
 * tokenizer.json. The model keeps its file, and with it this metadata, for as long as it is
 * open; the arrays are 2.4 MiB of heap on SmolLM2's 49,152 tokens, several times that on
 * Qwen's 151,936. The scalar keys stay.
 */
function releaseTokenizerData(meta: Record<string, unknown>): void {
  const t = meta.tokenizer;
  if (typeof t === "object" && t !== null) {
    const fields = t as Record<string, unknown>;
    for (const key of Object.keys(fields)) {
      if (Array.isArray(fields[key])) delete fields[key];
    }
  }
  delete meta.tokenizer_json;
}

/**
 * Maps and validates a `.cflow`/`.vflow` file once, and returns its forward pass and its
 * tokenizer; refuses a tokenizer with more tokens than the model has rows.
 *
 * @example
 * ```ts ignore
 * import { openModel } from "./open_model.ts";
 * const { model, tokenizer } = openModel("smollm2.cflow", { contextLength: 2048 });
 * model.close();
 * ```
 */
export function openModel(path: string, options: TransformerOptions = {}): OpenedModel {
  const file = loadTiledFile(path, { verifyChecksums: options.verifyChecksums ?? false });
  let model: Transformer | undefined;
  try {
    const tokenizer = tokenizerOf(file, path);
    model = Transformer.fromFile(file, options);
    return checked(path, model, tokenizer, file.file);
  } catch (error) {
    if (model !== undefined) model.close();
    else file.close();
    throw error;
  }
}

/**
 * The model and tokenizer, unless the tokenizer has more tokens than the model has rows. The
 * load is over: what it freed goes back to the OS. A major garbage collection first, where V8
 * exposes one (`./cflow`, the compiled executable and the bench's workers run with
 * `--expose-gc`): what the load left is garbage by now (the file's metadata arrays, 262,144
 * token strings for Gemma 3, went before the packing: {@link tokenizerOf}), and the heap pages
 * it filled stay resident until a major collection, which a short run may never reach (Gemma
 * 3's peak RSS over a 512-token prompt fell by 7-12 MB; the collection takes ~7 ms). Then
 * glibc's arenas (SmolLM2's peak fell by 1-2 MB, the free pages glibc had kept).
 */
function checked(
  path: string,
  model: Transformer,
  tokenizer: Tokenizer,
  file: TiledFile,
): OpenedModel {
  if (tokenizer.vocabSize > model.config.vocab) {
    throw new RangeError(
      `${path}: the tokenizer has ${tokenizer.vocabSize} tokens, the model ${model.config.vocab}`,
    );
  }
  collectGarbage();
  openKernels().trimHeap();
  return { model, tokenizer, file };
}

/**
 * {@link openModel} without blocking the event loop for long: the weights are
 * packed with a macrotask turn between runs (`Transformer.fromFileAsync`),
 * so a server can answer `/health` ("loading") meanwhile. The same model.
 *
 * @example
 * ```ts ignore
 * import { openModelAsync } from "./open_model.ts";
 * const { model, tokenizer } = await openModelAsync("smollm2.cflow");
 * model.close();
 * ```
 */
export async function openModelAsync(
  path: string,
  options: TransformerOptions = {},
): Promise<OpenedModel> {
  const file = loadTiledFile(path, { verifyChecksums: options.verifyChecksums ?? false });
  let model: Transformer | undefined;
  try {
    const tokenizer = tokenizerOf(file, path);
    model = await Transformer.fromFileAsync(file, options);
    return checked(path, model, tokenizer, file.file);
  } catch (error) {
    if (model !== undefined) model.close();
    else file.close();
    throw error;
  }
}
