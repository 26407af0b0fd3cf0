/**
 * The table of every `cflow` command-line option: its name, alias, type,
 * placeholder, help line and the values shells complete. `commands.ts`
 * picks each command's options from it (and re-exports it), so `main.ts`,
 * `help.ts` and `completions.ts` all read the same entries.
 *
 * @example
 * ```ts
 * import { OPTIONS } from "./options.ts";
 * console.log(OPTIONS["threads"].short); // "t"
 * ```
 *
 * @module
 */

/** One command-line option. */
export interface OptionSpec {
  /** Long name, without the dashes. */
  name: string;
  /** One-letter alias, without the dash. */
  short?: string;
  /** "string" takes a value, "boolean" is a flag. */
  type: "string" | "boolean";
  /** May be given several times (collected into an array). */
  multiple?: boolean;
  /** The value's placeholder in help (string options). */
  arg?: string;
  /** One line of help (commands may override it). */
  help: string;
  /** The only values it accepts (completed by the shells). */
  values?: readonly string[];
  /** Its value is a path: shells complete file names. */
  path?: boolean;
}

/** Every option, once. */
export const OPTIONS: Readonly<Record<string, OptionSpec>> = Object.fromEntries(
  ([
    {
      name: "threads",
      short: "t",
      type: "string",
      arg: "N",
      help: "worker threads (default: one per physical core; env CFLOW_THREADS)",
    },
    { name: "json", type: "boolean", help: "machine-readable output on stdout" },
    {
      name: "model",
      short: "m",
      type: "string",
      arg: "M",
      path: true,
      help:
        ".cflow, .vflow, GGUF file, HF folder, pull alias, hf:REF, or ollama:NAME[:TAG] (a model Ollama pulled) (default: SmolLM2-135M-Instruct)",
    },
    {
      name: "quant",
      type: "string",
      arg: "Q",
      values: ["auto", "q4_0", "q8_0", "f32", "q4_k_m", "q5_k_m", "q6_k"],
      help:
        "type of the cached conversion of a GGUF/HF model: auto (default for GGUF: every tensor kept in its own type) | q4_0 (default for HF folders) | q8_0 | f32 | q4_k_m | q5_k_m | q6_k (llama.cpp's K-quant file types and rules)",
    },
    {
      name: "ctx",
      short: "c",
      type: "string",
      arg: "N",
      help:
        "context length (default: the model's trained length, cut to what a quarter of the available memory holds, with a note)",
    },
    {
      name: "kv-cache",
      type: "string",
      arg: "T",
      values: ["f16", "f32", "q8_0"],
      help:
        "KV cache element type: f16 (default) | f32 | q8_0 (Q8_0 blocks, about half of f16's memory; head dimension a multiple of 32)",
    },
    {
      name: "draft-model",
      type: "string",
      arg: "M",
      path: true,
      help:
        "speculative decoding with a smaller model of the same vocabulary (same forms as --model): same tokens, fewer target steps",
    },
    {
      name: "draft-max",
      type: "string",
      arg: "N",
      help:
        "speculation: most drafted tokens checked per step, 1-32 (default 16; the length adapts below it)",
    },
    {
      name: "draft-min-p",
      type: "string",
      arg: "P",
      help: "draft model: stop drafting at a token it gives less than P (default 0.75)",
    },
    {
      name: "lookup-ngram",
      type: "string",
      arg: "N",
      help:
        "speculative decoding by prompt lookup: propose what followed the last N-gram's earlier occurrence (1-16; 3 is a good start)",
    },
    {
      name: "expert-tier",
      type: "string",
      arg: "T",
      values: ["mmap", "disk"],
      help:
        "MoE expert tiles: mmap (default, in place) | disk (direct reads of the selected experts)",
    },
    {
      name: "expert-fetch",
      type: "string",
      arg: "M",
      values: ["sync", "staged"],
      help: "disk tier: sync (default) | staged (reads overlap the expert_delay window)",
    },
    {
      name: "expert-cache-mib",
      type: "string",
      arg: "N",
      help: "disk tier: MiB of LRU expert cache beyond the reads in flight (default 0)",
    },
    {
      name: "packed",
      type: "string",
      arg: "MODE",
      values: ["auto", "on", "off"],
      help:
        "repack weights into SIMD panels at load: auto (default: on for every SIMD variant) | on | off",
    },
    {
      name: "evict",
      type: "string",
      arg: "MODE",
      values: ["never", "after-pack", "phase-boundary"],
      help: "drop packed weights' file pages: never | after-pack (default) | phase-boundary",
    },
    {
      name: "template",
      type: "string",
      arg: "FILE",
      path: true,
      help: "a Jinja chat template to use instead of the model's own",
    },
    {
      name: "prompt",
      short: "p",
      type: "string",
      arg: "P",
      help: "the prompt (default: read stdin)",
    },
    {
      name: "chat-template",
      type: "boolean",
      help: "wrap the prompt in the model's chat template",
    },
    {
      name: "max-tokens",
      short: "n",
      type: "string",
      arg: "N",
      help: "tokens to generate (default: until end of text or the context is full)",
    },
    { name: "temperature", type: "string", arg: "T", help: "0 = greedy (default 0.8)" },
    { name: "top-k", type: "string", arg: "K", help: "top-k sampling (default 40, 0 = off)" },
    { name: "top-p", type: "string", arg: "P", help: "top-p sampling (default 0.95)" },
    { name: "min-p", type: "string", arg: "P", help: "min-p sampling (default 0.05)" },
    {
      name: "seed",
      short: "s",
      type: "string",
      arg: "S",
      help: "sampling seed (default: random)",
    },
    { name: "repeat-penalty", type: "string", arg: "R", help: "repetition penalty (default 1)" },
    { name: "presence-penalty", type: "string", arg: "P", help: "presence penalty (default 0)" },
    { name: "frequency-penalty", type: "string", arg: "P", help: "frequency penalty (default 0)" },
    {
      name: "stop",
      type: "string",
      arg: "S",
      multiple: true,
      help: "a stop string (repeatable)",
    },
    {
      name: "truncate",
      type: "string",
      arg: "MODE",
      values: ["error", "left"],
      help: "error (default) | left: keep the end of a prompt that does not fit",
    },
    { name: "system", type: "string", arg: "S", help: "a system message" },
    {
      name: "json-schema",
      type: "string",
      arg: "FILE",
      path: true,
      help: "hold the output to JSON valid under this JSON Schema (unsupported keywords refused)",
    },
    {
      name: "grammar",
      type: "string",
      arg: "FILE",
      path: true,
      help: "hold the output to this GBNF grammar (llama.cpp's format; its root rule)",
    },
    { name: "file", type: "string", arg: "F", path: true, help: "the text file to score" },
    { name: "host", type: "string", arg: "H", help: "address to bind (default 127.0.0.1)" },
    { name: "port", type: "string", arg: "P", help: "port (default 8080; 0 picks a free one)" },
    {
      name: "parallel",
      type: "string",
      arg: "N",
      help: "generations at once over one copy of the weights (default 1); more requests queue",
    },
    {
      name: "api-key",
      type: "string",
      arg: "K",
      help: 'require "Authorization: Bearer K" (except on /health)',
    },
    {
      name: "strict",
      type: "boolean",
      help: "refuse unknown request fields (400) and bodies not typed application/json (415)",
    },
    {
      name: "drain-timeout",
      type: "string",
      arg: "S",
      help:
        "on SIGTERM/SIGINT, seconds running generations may take to finish (default 30); new ones get 503",
    },
    {
      name: "format",
      type: "string",
      arg: "F",
      values: ["cflow", "vflow"],
      help: "cflow | vflow (default: from OUT's extension, else cflow)",
    },
    {
      name: "q4-rule",
      type: "string",
      arg: "R",
      values: ["ggml", "paper"],
      help: "Q4 rounding rule: ggml (default) | paper (docs/FORMAT.md)",
    },
    {
      name: "output-quant",
      type: "string",
      arg: "Q",
      values: ["auto", "q4_0", "q8_0", "f32"],
      help:
        "type of the output matrix (the tied embedding): auto (default: q8_0 in a q4_0 file unless the source has it as Q4_0, as llama.cpp does) | q4_0 | q8_0 | f32",
    },
    {
      name: "report-error",
      type: "boolean",
      help: "print RMS and max-abs error of every requantized matrix",
    },
    {
      name: "arch",
      type: "string",
      arg: "NAME",
      values: [
        "gemma4_parallel",
        "arch1_decoupled_streams",
        "arch2_4_combined",
        "arch2_4_sync",
        "arch3_pipeline_registers",
        "arch4_async_experts",
        "arch5_fixed_point",
      ],
      help: "a pipeline-native architecture (report Table 4.1)",
    },
    { name: "hidden", type: "string", arg: "N", help: "model width d" },
    { name: "layers", type: "string", arg: "N", help: "decoder layers (unique blocks for arch5)" },
    { name: "ffn", type: "string", arg: "N", help: "dense FFN width d_ff (0: none)" },
    { name: "experts", type: "string", arg: "N", help: "experts per layer (default 0)" },
    { name: "expert-ffn", type: "string", arg: "N", help: "one expert's FFN width" },
    { name: "heads", type: "string", arg: "N", help: "query heads" },
    { name: "kv-heads", type: "string", arg: "N", help: "key/value heads (default: heads)" },
    { name: "head-dim", type: "string", arg: "N", help: "head width (default hidden / heads)" },
    { name: "force", type: "boolean", help: "replace an existing OUT" },
    { name: "offline", type: "boolean", help: "use the cache only (also HF_HUB_OFFLINE=1)" },
    { name: "help", short: "h", type: "boolean", help: "show this help" },
    { name: "version", short: "V", type: "boolean", help: "print the version" },
  ] satisfies OptionSpec[]).map((o) => [o.name, o]),
);
