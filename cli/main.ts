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

const USAGE = `cflow ${VERSION}: CPU-first LLM inference

usage: cflow <command> [options]

commands:
  doctor            show the toolchain, CPU features, kernel variant, library and threads
  help              show this text

options:
  --threads N       worker threads (default: one per physical core; env CFLOW_THREADS)
  --json            machine-readable output (doctor)
  -V, --version     print the version
  -h, --help        show this text

environment:
  CFLOW_KERNEL_VARIANT  auto | scalar | avx2 | avx512vnni (force a kernel variant)
  CFLOW_THREADS         worker threads
  CFLOW_CPU_DISABLE     comma-separated CPU features to treat as absent
  CFLOW_KERNELS         path of a kernel library to load instead of the local build

Model commands (generate, chat, convert, inspect, serve) are not implemented yet.`;

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
    error instanceof RangeError || error instanceof Deno.errors.NotCapable
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
export function main(args: string[]): number {
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
      case "generate":
      case "chat":
      case "convert":
      case "inspect":
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
  Deno.exit(main(Deno.args));
}
