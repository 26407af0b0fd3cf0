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
import { formatInspect, inspectPath } from "../inspect/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { runConvert } from "./convert.ts";

const USAGE = `cflow ${VERSION}: CPU-first LLM inference

usage: cflow <command> [options]

commands:
  doctor            show the toolchain, CPU features, kernel variant, library and threads
  convert IN OUT    convert a GGUF file or Hugging Face directory to .cflow or .vflow
  inspect FILE      describe a .cflow, .vflow, GGUF, safetensors file or HF directory
  help              show this text

options:
  --threads N       worker threads (default: one per physical core; env CFLOW_THREADS)
  --json            machine-readable output (doctor, inspect, convert)
  --format F        convert: cflow | vflow (default: from OUT's extension, else cflow)
  --quant Q         convert: q4_0 | q8_0 | f32 (default q4_0)
  --q4-rule R       convert: ggml | paper Q4 rounding (default ggml; docs/FORMAT.md)
  --report-error    convert: print RMS and max-abs error of every requantized matrix
  --force           convert: replace an existing OUT
  -V, --version     print the version
  -h, --help        show this text

environment:
  CFLOW_KERNEL_VARIANT  auto | scalar | avx2 | avx512vnni (force a kernel variant)
  CFLOW_THREADS         worker threads
  CFLOW_CPU_DISABLE     comma-separated CPU features to treat as absent
  CFLOW_KERNELS         path of a kernel library to load instead of the local build

Model commands (generate, chat, serve, analyze) are not implemented yet.`;

/** A command-line mistake: printed with the usage hint, exit status 2. */
class UsageError extends Error {
  override name = "UsageError";
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
    error instanceof Deno.errors.AlreadyExists || error instanceof Deno.errors.PermissionDenied ||
    error instanceof TypeError || (error instanceof Error && error.message.startsWith("convert:"))
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
