/**
 * Color on the terminal, and only there: off when `NO_COLOR` is set to a
 * non-empty value (https://no-color.org) or when the stream is not a
 * terminal.
 *
 * @module
 */

function noColorEnv(): boolean {
  try {
    return (Deno.env.get("NO_COLOR") ?? "") !== "";
  } catch {
    return Deno.noColor; // NO_COLOR not readable: Deno's own reading of it
  }
}

/**
 * Whether to color what goes to `stream`.
 *
 * @example
 * ```ts ignore
 * import { colorEnabled } from "./color.ts";
 * console.log(colorEnabled("stdout"));
 * ```
 */
export function colorEnabled(stream: "stdout" | "stderr"): boolean {
  if (noColorEnv()) return false;
  return stream === "stdout" ? Deno.stdout.isTerminal() : Deno.stderr.isTerminal();
}

const CODES = { bold: [1, 22], red: [31, 39], yellow: [33, 39], dim: [2, 22] } as const;

/** A style {@linkcode paint} applies. */
export type Style = keyof typeof CODES;

/**
 * `text` in `style` when color is enabled for `stream`, else `text` as is.
 *
 * @example
 * ```ts ignore
 * import { paint } from "./color.ts";
 * console.error(`${paint("error:", "red", "stderr")} no such file`);
 * ```
 */
export function paint(text: string, style: Style, stream: "stdout" | "stderr"): string {
  if (!colorEnabled(stream)) return text;
  const [on, off] = CODES[style];
  return `\x1b[${on}m${text}\x1b[${off}m`;
}

/**
 * `cflow: error: MESSAGE`, with "error:" in red on a color terminal.
 *
 * @example
 * ```ts ignore
 * import { errorLine } from "./color.ts";
 * console.error(errorLine("no such file"));
 * ```
 */
export function errorLine(message: string): string {
  return `cflow: ${paint("error:", "red", "stderr")} ${message}`;
}
