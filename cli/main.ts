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
import { findOllamaModel, isOllamaReference } from "../runtime/ollama_store.ts";
import { openKernels, prepareKernels } from "../ffi/mod.ts";
import { runConvert } from "./convert.ts";
import {
  readStdinText,
  runGenerate,
  runPerplexity,
  type SpeculationArgs,
  UsageError,
} from "./generate.ts";
import { runChat } from "./chat.ts";
import { constraintArg } from "./constraint_arg.ts";
import { runServe } from "./serve.ts";
import { runPull } from "./pull.ts";
import { runAnalyze } from "./analyze.ts";
import { runList } from "./models.ts";
import { runRm } from "./remove_model.ts";
import {
  commandOptions,
  COMMANDS,
  commandsWith,
  findCommand,
  GLOBAL_OPTIONS,
  OPTIONS,
  parseArgsOptions,
  SHELLS,
} from "./commands.ts";
import { commandHelp, overviewHelp } from "./help.ts";
import { completionScript, type Shell } from "./completions.ts";
import { EXIT } from "./exit_codes.ts";
import { Sampler } from "../sampling/mod.ts";
import { KV_CACHE_TYPES } from "../model/mod.ts";
import { errorLine } from "./color.ts";
import { defaultModel } from "./paths.ts";
import { CacheDirError } from "../runtime/cache_paths.ts";

/**
 * The default model; the launcher fetches it first, a single executable
 * asks for `cflow pull smollm2` when it is missing.
 */
function defaultModelOrHint(): string {
  const path = defaultModel();
  if (Deno.build.standalone) {
    try {
      Deno.statSync(path);
    } catch {
      throw new UsageError(`no --model given and ${path} is missing: run 'cflow pull smollm2'`);
    }
  }
  return path;
}

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

/** The command-line option of each sampler setting. */
const SAMPLING_FLAGS: Record<string, string> = {
  temperature: "--temperature",
  topK: "--top-k",
  topP: "--top-p",
  minP: "--min-p",
  repetitionPenalty: "--repeat-penalty",
  presencePenalty: "--presence-penalty",
  frequencyPenalty: "--frequency-penalty",
  seed: "--seed",
};

/**
 * Sampler settings the sampler would refuse, refused here as usage errors
 * (exit 2) naming the option, before a model loads.
 */
function checkSampling(sampling: Record<string, number>): void {
  try {
    new Sampler(1, sampling);
  } catch (error) {
    const m = error instanceof RangeError ? /^Sampler: (\w+) (.*)$/.exec(error.message) : null;
    if (m === null) throw error;
    throw new UsageError(`${SAMPLING_FLAGS[m[1]] ?? m[1]}: ${m[2]}`);
  }
}

function choice<T extends string>(text: string, what: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(text)) {
    throw new UsageError(`${what} must be one of ${allowed.join(", ")}, not "${text}"`);
  }
  return text as T;
}

/**
 * A file system error in words a user of any Unix tool knows (`no such file:
 * PATH`), instead of the operating system's and Deno's phrasing (`No such file
 * or directory (os error 2): stat 'PATH'`, a permission message naming
 * Deno's flags); undefined for other errors.
 */
function fileErrorMessage(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const os = /^(.*?) \(os error \d+\)(?:: \w+ '(.*)')?$/.exec(error.message);
  if (error instanceof Deno.errors.NotFound && os?.[2] !== undefined) {
    return `no such file or folder: ${os[2]}`;
  }
  if (error instanceof Deno.errors.IsADirectory && os?.[2] !== undefined) {
    return `${os[2]} is a folder, not a file`;
  }
  const perm = /^Requires (read|write) access to "(.*)"/.exec(error.message);
  if (error instanceof Deno.errors.NotCapable && perm !== null) {
    return `cannot ${perm[1]} ${perm[2]}: cflow ${perm[1]}s only its checkout, its cache ` +
      `(CFLOW_CACHE, else $XDG_CACHE_HOME/cflow, else ~/.cache/cflow) ` +
      `and the files and folders named on its command line`;
  }
  return undefined;
}

function fail(error: unknown, command: string | undefined): number {
  // The reader of stdout went away (`| head`): stop quietly, as a Unix tool
  // that SIGPIPE ends; there is nobody to tell.
  if (error instanceof Deno.errors.BrokenPipe) return EXIT.CLOSED_PIPE;
  if (error instanceof CacheDirError) {
    // A relative CFLOW_CACHE, XDG_CACHE_HOME or HOME: a mistake in the environment, like a
    // bad option value.
    console.error(`cflow: ${error.message.replace(/^model store: /, "")}`);
    return EXIT.USAGE;
  }
  if (error instanceof UsageError) {
    const hint = error.message.includes("run 'cflow")
      ? ""
      : command && command !== "help" && findCommand(command)
      ? `\nrun 'cflow ${command} --help' for its options and examples`
      : "\nrun 'cflow help' for usage";
    console.error(`cflow: ${error.message}${hint}`);
    return EXIT.USAGE;
  }
  const fileError = fileErrorMessage(error);
  if (fileError !== undefined) {
    console.error(errorLine(fileError));
    return EXIT.ERROR;
  }
  if (
    error instanceof KernelLoadError || error instanceof KernelError ||
    error instanceof RangeError || error instanceof Deno.errors.NotCapable ||
    error instanceof FormatError || error instanceof Deno.errors.NotFound ||
    error instanceof Deno.errors.AlreadyExists || error instanceof Deno.errors.AddrInUse ||
    error instanceof Deno.errors.AddrNotAvailable ||
    error instanceof Deno.errors.PermissionDenied ||
    error instanceof TypeError || error instanceof ChatTemplateError ||
    error instanceof NoChatTemplateError ||
    (error instanceof Error &&
      /^(convert|model|generate|stdin|perplexity|model store|serve):/.test(error.message))
  ) {
    console.error(errorLine(error.message));
    return EXIT.ERROR;
  }
  throw error;
}

/**
 * `--temperature -1` and `-s -5` as `--temperature=-1` and `--seed=-5`: a
 * value that starts with a dash and a digit (a negative or scientific
 * number) after an option that takes a value is that option's value, as
 * llama.cpp reads it (node's parser would take it for an option).
 */
function joinNegativeValues(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--") {
      out.push(...args.slice(i));
      break;
    }
    const spec = a.startsWith("--")
      ? OPTIONS[a.slice(2)]
      : /^-[A-Za-z]$/.test(a)
      ? Object.values(OPTIONS).find((o) => o.short === a.slice(1))
      : undefined;
    const next = args[i + 1];
    if (spec?.type === "string" && next !== undefined && /^-\.?[0-9]/.test(next)) {
      out.push(`--${spec.name}=${next}`);
      i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

/** What the command line asks for, checked against the command's own options. */
interface Parsed {
  command: string | undefined;
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
}

/** Every option of every command (to find the command, and to name misplaced options). */
const ALL_OPTIONS = parseArgsOptions(Object.values(OPTIONS));

/**
 * Parses `args` in two passes: a lenient one over every option finds the
 * command, then a strict one with that command's options only.
 */
function parse(rawArgs: string[]): Parsed {
  const args = joinNegativeValues(rawArgs);
  const loose = parseArgs({
    args,
    allowPositionals: true,
    strict: false,
    tokens: true,
    options: ALL_OPTIONS,
  });
  const command = loose.positionals[0];
  const spec = command === undefined ? undefined : findCommand(command);
  if (command !== undefined && spec === undefined) {
    throw new UsageError(
      `unknown command '${command}' (commands: ${COMMANDS.map((c) => c.name).join(", ")})`,
    );
  }
  // --help and --version win over everything else on the line
  if (loose.values.help === true || loose.values.version === true) {
    return { command, values: loose.values, positionals: loose.positionals };
  }
  const specs = spec ? commandOptions(spec) : GLOBAL_OPTIONS.map((n) => OPTIONS[n]);
  const allowed = new Set(specs.map((o) => o.name));
  for (const t of loose.tokens ?? []) {
    if (t.kind !== "option") continue;
    const known = OPTIONS[t.name] ??
      Object.values(OPTIONS).find((o) => o.short === t.name && t.rawName === `-${t.name}`);
    if (known !== undefined && allowed.has(known.name)) continue;
    const where = command === undefined ? "" : ` for '${command}'`;
    const help = command === undefined || spec === undefined
      ? "cflow help"
      : `cflow ${command} --help`;
    if (known === undefined) {
      throw new UsageError(
        `unknown option '${t.rawName}'${where}; run '${help}' for its options`,
      );
    }
    const owners = commandsWith(known.name);
    throw new UsageError(
      command === undefined
        ? `'${t.rawName}' needs a command (it is an option of ${owners.join(", ")}); run '${help}'`
        : `'${t.rawName}' does not apply to '${command}' (it is an option of ${
          owners.join(", ")
        }); run '${help}' for its options`,
    );
  }
  try {
    const strict = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: parseArgsOptions(specs),
    });
    return { command, values: strict.values, positionals: strict.positionals };
  } catch (error) {
    const help = spec && spec.name !== "help" ? `cflow ${spec.name} --help` : "cflow help";
    throw new UsageError(`${(error as Error).message}\nrun '${help}' for usage`);
  }
}

/** A string option's value. */
function str(p: Parsed, name: string): string | undefined {
  const v = p.values[name];
  return typeof v === "string" ? v : undefined;
}

/** --draft-model, --draft-max, --draft-min-p and --lookup-ngram, checked before a model loads. */
function speculationArgs(p: Parsed): SpeculationArgs | undefined {
  const draftModel = str(p, "draft-model");
  const lookup = str(p, "lookup-ngram");
  const max = str(p, "draft-max");
  const minP = str(p, "draft-min-p");
  if (draftModel !== undefined && lookup !== undefined) {
    throw new UsageError("--draft-model and --lookup-ngram: choose one way to draft");
  }
  if (draftModel === undefined && lookup === undefined) {
    if (max !== undefined || minP !== undefined) {
      throw new UsageError("--draft-max and --draft-min-p need --draft-model or --lookup-ngram");
    }
    return undefined;
  }
  if (minP !== undefined && draftModel === undefined) {
    throw new UsageError("--draft-min-p needs --draft-model");
  }
  const p0 = num(minP, "--draft-min-p", 0.75);
  if (!(p0 >= 0 && p0 <= 1)) throw new UsageError(`--draft-min-p: "${minP}" is not in [0, 1]`);
  return {
    draftModel,
    lookupNgram: lookup === undefined ? undefined : int(lookup, "--lookup-ngram", 1, 16),
    draftMax: max === undefined ? 16 : int(max, "--draft-max", 1, 32),
    draftMinP: p0,
  };
}

/** The values of --quant. */
const QUANTS = ["auto", "q4_0", "q8_0", "f32", "q4_k_m", "q5_k_m", "q6_k"] as const;

/** True when `path` names a folder (a Hugging Face checkpoint); false for files and errors. */
function isFolder(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/** A flag's value. */
function flag(p: Parsed, name: string): boolean {
  return p.values[name] === true;
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
  let command: string | undefined;
  try {
    // Run from a registry, the kernels are chosen (and maybe fetched) first.
    await prepareKernels();
    const p = parse(args);
    command = p.command;
    const { positionals } = p;
    if (flag(p, "version")) {
      console.log(`cflow ${VERSION}`);
      return EXIT.OK;
    }
    if (flag(p, "help") || command === undefined || command === "help") {
      // `cflow help X` is `cflow X --help`; `cflow help --help` describes help itself
      const topic = command === "help"
        ? positionals[1] ?? (flag(p, "help") ? "help" : undefined)
        : command;
      if (command === "help" && positionals.length > 2) {
        throw new UsageError("help takes at most one command");
      }
      const spec = topic === undefined ? undefined : findCommand(topic);
      if (topic !== undefined && spec === undefined) {
        throw new UsageError(`unknown command '${topic}'`);
      }
      console.log(spec ? commandHelp(spec) : overviewHelp());
      return EXIT.OK;
    }
    const options: KernelOptions = {};
    const threads = str(p, "threads");
    if (threads !== undefined) {
      try {
        options.threads = parseThreads(threads, "--threads");
      } catch (error) {
        // A bad value on the command line is a usage mistake (exit 2).
        throw error instanceof RangeError ? new UsageError(error.message) : error;
      }
    }
    const json = flag(p, "json");
    switch (command) {
      case "completions": {
        const shell = positionals[1];
        if (positionals.length !== 2 || !(SHELLS as readonly string[]).includes(shell)) {
          throw new UsageError(`completions takes one shell: ${SHELLS.join(", ")}`);
        }
        await Deno.stdout.write(new TextEncoder().encode(completionScript(shell as Shell)));
        return EXIT.OK;
      }
      case "doctor": {
        if (positionals.length > 1) throw new UsageError(`doctor takes no arguments`);
        const report = diagnose(options);
        console.log(json ? JSON.stringify(report, null, 2) : formatReport(report));
        return EXIT.OK;
      }
      case "convert": {
        if (positionals.length !== 3) throw new UsageError("convert takes IN and OUT");
        const [, named, output] = positionals;
        const format = str(p, "format") ?? (output.endsWith(".vflow") ? "vflow" : "cflow");
        if (format !== "cflow" && format !== "vflow") {
          throw new UsageError(`--format must be cflow or vflow, not '${format}'`);
        }
        const quant = choice(
          str(p, "quant") ?? (isFolder(named) ? "q4_0" : "auto"),
          "--quant",
          QUANTS,
        );
        const rule = str(p, "q4-rule") ?? "ggml";
        if (rule !== "ggml" && rule !== "paper") {
          throw new UsageError(`--q4-rule must be ggml or paper, not '${rule}'`);
        }
        const outputQuant = str(p, "output-quant") ?? "auto";
        if (
          outputQuant !== "auto" && outputQuant !== "q4_0" && outputQuant !== "q8_0" &&
          outputQuant !== "f32"
        ) {
          throw new UsageError(
            `--output-quant must be auto, q4_0, q8_0 or f32, not '${outputQuant}'`,
          );
        }
        // A model Ollama pulled converts from its GGUF file in Ollama's store (after the
        // options are checked, so that a usage error is said first).
        const ollama = isOllamaReference(named) ? await findOllamaModel(named) : undefined;
        openKernels(options);
        return await runConvert(ollama?.path ?? named, output, {
          format,
          quant,
          rule,
          outputQuant,
          measureError: flag(p, "report-error"),
          force: flag(p, "force"),
          sourceName: ollama?.reference,
        }, json);
      }
      case "inspect": {
        if (positionals.length !== 2) throw new UsageError("inspect takes one FILE");
        openKernels(options);
        const target = positionals[1];
        const report = inspectPath(
          isOllamaReference(target) ? (await findOllamaModel(target)).path : target,
        );
        console.log(json ? JSON.stringify(report, null, 2) : formatInspect(report));
        return report.checksums_ok === false ? EXIT.ERROR : EXIT.OK;
      }
      case "generate":
      case "chat":
      case "serve":
      case "perplexity": {
        if (positionals.length > 1) {
          throw new UsageError(`${command} takes options only`);
        }
        openKernels(options);
        const template = str(p, "template");
        const ctx = str(p, "ctx");
        const modelArgs = {
          model: str(p, "model") ?? defaultModelOrHint(),
          ctx: ctx === undefined ? undefined : int(ctx, "--ctx", 4, 1 << 20),
          kvCache: choice(str(p, "kv-cache") ?? "f16", "--kv-cache", KV_CACHE_TYPES),
          quant: str(p, "quant") === undefined
            ? undefined
            : choice(str(p, "quant")!, "--quant", QUANTS),
          packed: choice(str(p, "packed") ?? "auto", "--packed", ["auto", "on", "off"] as const),
          evict: choice(
            str(p, "evict") ?? "after-pack",
            "--evict",
            ["never", "after-pack", "phase-boundary"] as const,
          ),
          expertTier: choice(
            str(p, "expert-tier") ?? "mmap",
            "--expert-tier",
            [
              "mmap",
              "disk",
            ] as const,
          ),
          expertFetch: choice(
            str(p, "expert-fetch") ?? "sync",
            "--expert-fetch",
            [
              "sync",
              "staged",
            ] as const,
          ),
          expertCacheMiB: str(p, "expert-cache-mib") === undefined
            ? 0
            : int(str(p, "expert-cache-mib")!, "--expert-cache-mib", 0, 1 << 20),
          json,
          template: template === undefined ? undefined : await Deno.readTextFile(template),
          speculation: speculationArgs(p),
        };
        if (command === "serve") {
          const port = str(p, "port");
          const parallel = str(p, "parallel");
          return await runServe({
            ...modelArgs,
            host: str(p, "host") ?? "127.0.0.1",
            port: port === undefined ? 8080 : int(port, "--port", 0, 65535),
            parallel: parallel === undefined ? 1 : int(parallel, "--parallel", 1, 256),
            apiKey: str(p, "api-key"),
            strict: flag(p, "strict"),
            drainTimeout: str(p, "drain-timeout") === undefined
              ? 30
              : int(str(p, "drain-timeout")!, "--drain-timeout", 0, 86400),
          });
        }
        if (command === "perplexity") {
          const file = str(p, "file");
          if (file === undefined) throw new UsageError("perplexity needs --file");
          return await runPerplexity({ ...modelArgs, file });
        }
        const topK = str(p, "top-k");
        const seed = str(p, "seed");
        const sampling = {
          temperature: num(str(p, "temperature"), "--temperature", 0.8),
          topK: topK === undefined ? 40 : int(topK, "--top-k", 0, 1 << 24),
          topP: num(str(p, "top-p"), "--top-p", 0.95),
          minP: num(str(p, "min-p"), "--min-p", 0.05),
          repetitionPenalty: num(str(p, "repeat-penalty"), "--repeat-penalty", 1),
          presencePenalty: num(str(p, "presence-penalty"), "--presence-penalty", 0),
          frequencyPenalty: num(str(p, "frequency-penalty"), "--frequency-penalty", 0),
          seed: seed === undefined
            ? crypto.getRandomValues(new Uint32Array(1))[0]
            : int(seed, "--seed", 0, 0xffffffff),
        };
        checkSampling(sampling);
        const constraint = await constraintArg(str(p, "json-schema"), str(p, "grammar"));
        const max = str(p, "max-tokens");
        // Default: until end of text or the context is full, as llama.cpp and Ollama.
        const maxTokens = max === undefined ? undefined : int(max, "--max-tokens", 0, 1 << 20);
        if (command === "chat") {
          return await runChat({
            ...modelArgs,
            maxTokens,
            sampling,
            system: str(p, "system"),
            constraint,
          });
        }
        let prompt = str(p, "prompt");
        if (prompt === undefined) {
          if (Deno.stdin.isTerminal()) {
            throw new UsageError("give --prompt, or pipe the prompt on stdin");
          }
          prompt = await readStdinText();
        }
        const stop = p.values.stop;
        return await runGenerate({
          ...modelArgs,
          prompt,
          maxTokens,
          sampling,
          stop: Array.isArray(stop) ? stop.map(String) : [],
          truncate: choice(str(p, "truncate") ?? "error", "--truncate", ["error", "left"] as const),
          chatTemplate: flag(p, "chat-template"),
          constraint,
        });
      }
      case "pull":
        return await runPull(positionals.slice(1), { json, offline: flag(p, "offline") });
      case "list":
        return await runList(positionals.slice(1), { json });
      case "rm":
        return await runRm(positionals.slice(1), { json });
      case "analyze": {
        const files = positionals.slice(1);
        if (files.length > 0) openKernels(options);
        return await runAnalyze(files, {
          arch: str(p, "arch"),
          hidden: str(p, "hidden"),
          layers: str(p, "layers"),
          ffn: str(p, "ffn"),
          experts: str(p, "experts"),
          topK: str(p, "top-k"),
          expertFfn: str(p, "expert-ffn"),
          heads: str(p, "heads"),
          kvHeads: str(p, "kv-heads"),
          headDim: str(p, "head-dim"),
          quant: str(p, "quant"),
        }, json);
      }
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (error) {
    return fail(error, command);
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
