/**
 * Tokenizers for real models, byte-exact with the references:
 *
 * - {@link tokenizerFromGgufMetadata}: from GGUF `tokenizer.ggml.*` metadata
 *   (as a `.cflow` file keeps it), giving the ids llama.cpp gives: byte-level
 *   BPE (`gpt2`, with llama.cpp's pre-tokenizers) and SentencePiece-style
 *   BPE (`llama`, as Gemma uses).
 * - {@link tokenizerFromHfJson}: from a Hugging Face `tokenizer.json` (and
 *   optionally `tokenizer_config.json`), giving the ids `tokenizers` gives:
 *   BPE with byte-level or byte-fallback vocabularies, the common
 *   normalizers, pre-tokenizers, decoders and post-processors, added tokens.
 * - {@link StreamDecoder}: text from ids as they are generated, never
 *   splitting a UTF-8 character.
 *
 * Malformed tokenizer data is a `FormatError` (`formats/errors.ts`) naming
 * the key or JSON path (its byte offset is 0: the input is an object or a
 * parsed string, not a file); bad arguments are `TypeError`s and
 * out-of-range ids `RangeError`s.
 *
 * ```ts
 * import { StreamDecoder, tokenizerFromGgufMetadata } from "./mod.ts";
 *
 * // A `.cflow` file's metadata.tokenizer, or a GGUF's tokenizer keys.
 * const tok = tokenizerFromGgufMetadata({
 *   "tokenizer.ggml.model": "gpt2",
 *   "tokenizer.ggml.pre": "smollm",
 *   "tokenizer.ggml.tokens": ["<|im_end|>", "h", "i", "Ġ", "hi", "Ġhi"],
 *   "tokenizer.ggml.token_type": [3, 1, 1, 1, 1, 1],
 *   "tokenizer.ggml.merges": ["h i", "Ġ hi"],
 *   "tokenizer.ggml.eos_token_id": 0,
 * });
 * const ids = tok.encode("hi hi<|im_end|>", { parseSpecial: true });
 * console.log(ids); // [4, 5, 0]
 * const stream = new StreamDecoder(tok, { skipSpecial: true });
 * let text = "";
 * for (const id of ids) if (!tok.isEog(id)) text += stream.push(id);
 * console.log(text + stream.flush()); // "hi hi"
 * ```
 *
 * @module
 */

export type { DecodeOptions, EncodeOptions, Tokenizer } from "./tokenizer.ts";
export { LITERAL_BASE, MAX_LITERALS } from "./tokenizer.ts";
export { SpecialLiterals } from "./special_literals.ts";
export { tokenizerFromGgufMetadata } from "./tokenizer_from_gguf_metadata.ts";
export type { GgufTokenizerOptions } from "./tokenizer_from_gguf_metadata.ts";
export { tokenizerFromHfJson } from "./tokenizer_from_hf_json.ts";
export type { HfTokenizerOptions } from "./tokenizer_from_hf_json.ts";
export { StreamDecoder } from "./stream_decoder.ts";
