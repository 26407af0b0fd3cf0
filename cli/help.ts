/**
 * `cflow help` (the overview) and `cflow <command> --help`, built from the
 * command table in `commands.ts`.
 *
 * @module
 */

import { VERSION } from "../version.ts";
import {
  commandOptions,
  COMMANDS,
  type CommandSpec,
  GLOBAL_OPTIONS,
  OPTIONS,
  type OptionSpec,
} from "./commands.ts";
import { paint } from "./color.ts";
import { EXIT_CODES_HELP } from "./exit_codes.ts";

const heading = (text: string) => paint(text, "bold", "stdout");

/** `--name ARG` or `-h, --help`, as help lists an option. */
function optionLabel(o: OptionSpec): string {
  const long = `--${o.name}${o.type === "string" ? ` ${o.arg ?? "V"}` : ""}`;
  return o.short ? `-${o.short}, ${long}` : long;
}

function table(rows: readonly (readonly [string, string])[], indent = 2): string[] {
  const width = Math.max(...rows.map(([l]) => l.length)) + 2;
  return rows.map(([l, r]) =>
    r === "" ? `${" ".repeat(indent)}${l}` : `${" ".repeat(indent)}${l.padEnd(width)}${r}`
  );
}

const ENVIRONMENT: readonly (readonly [string, string])[] = [
  [
    "CFLOW_KERNEL_VARIANT",
    "auto | scalar | avx2 | avxvnni | avx512vnni | neon | neon_dotprod (force a kernel variant)",
  ],
  ["CFLOW_THREADS", "worker threads"],
  ["CFLOW_CPU_DISABLE", "comma-separated CPU features to treat as absent"],
  [
    "CFLOW_PANEL_PREFETCH",
    "auto | on | off: one-token panel kernels prefetch ahead (auto: off on AMD, on elsewhere)",
  ],
  ["CFLOW_KERNELS", "path of a kernel library to load instead of the local build"],
  [
    "CFLOW_CACHE",
    "cache folder, absolute (default $XDG_CACHE_HOME/cflow, else ~/.cache/cflow): models/, converted/",
  ],
  ["XDG_CACHE_HOME", "absolute; the cache is $XDG_CACHE_HOME/cflow when CFLOW_CACHE is unset"],
  ["HF_TOKEN, HF_ENDPOINT", "pull: hub token (sent to the hub host only) and hub URL"],
  ["HF_HUB_OFFLINE", "pull: 1 = the cache only (also CFLOW_OFFLINE)"],
  [
    "OLLAMA_MODELS",
    "--model ollama:NAME: Ollama's models folder (default ~/.ollama/models, then the service's)",
  ],
  ["NO_COLOR", "any non-empty value turns color off (it is off when not a terminal)"],
];

/**
 * The overview: commands, global options, environment, exit codes.
 *
 * @example
 * ```ts ignore
 * import { overviewHelp } from "./help.ts";
 * console.log(overviewHelp());
 * ```
 */
export function overviewHelp(): string {
  const cmd = COMMANDS.map((c) => [`${c.name}${c.args ? ` ${c.args}` : ""}`, c.summary] as const);
  const globals = GLOBAL_OPTIONS.map((n) => [optionLabel(OPTIONS[n]), OPTIONS[n].help] as const);
  return [
    `cflow ${VERSION}: CPU-first LLM inference`,
    "",
    `${heading("usage:")} cflow <command> [options]`,
    "",
    heading("commands:"),
    ...table(cmd),
    "",
    heading("options:"),
    ...table(globals),
    "",
    "Run 'cflow <command> --help' (or 'cflow help <command>') for a command's options and examples.",
    "",
    heading("environment:"),
    ...table(ENVIRONMENT),
    "",
    heading("exit codes:"),
    ...table(EXIT_CODES_HELP.map(([n, what]) => [String(n), what] as const)),
    "",
    heading("shell completions:"),
    '  eval "$(cflow completions bash)"   (or zsh, fish: see cflow completions --help)',
  ].join("\n");
}

/**
 * One command's help: usage, description, its options only, examples.
 *
 * @example
 * ```ts ignore
 * import { commandHelp } from "./help.ts";
 * import { findCommand } from "./commands.ts";
 * console.log(commandHelp(findCommand("generate")!));
 * ```
 */
export function commandHelp(c: CommandSpec): string {
  const opts = commandOptions(c).map((o) => {
    const listed = o.values?.every((v) => o.help.includes(v)) ?? true;
    const values = listed ? "" : ` (${o.values!.join(" | ")})`;
    return [optionLabel(o), `${o.help}${values}`] as const;
  });
  return [
    `${heading("usage:")} cflow ${c.name}${c.args ? ` ${c.args}` : ""} [options]`,
    "",
    c.description,
    "",
    heading("options:"),
    ...table(opts),
    "",
    heading("examples:"),
    ...c.examples.map((e) => `  ${e}`),
    "",
    "Run 'cflow help' for all commands, the environment and exit codes.",
  ].join("\n");
}
