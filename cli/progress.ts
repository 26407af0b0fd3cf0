/**
 * Progress on stderr, shared by `convert`, `pull` and model loading
 * (conversion into the cache on first use, packing the weights): a bar
 * redrawn in place on a terminal, a few plain lines otherwise.
 *
 * @module
 */

/** Options of {@linkcode progressBar}. */
export interface ProgressBarOptions {
  /** Printed before the bar ("converting", "packing"). */
  label?: string;
  /** Draw nothing until the work has run this long (ms), so quick work stays quiet. */
  delayMs?: number;
  /** Whether stderr is a terminal (default: asks Deno): a bar there, lines otherwise. */
  terminal?: boolean;
  /**
   * Off a terminal: the first line comes once the work has run this long (ms,
   * default 2000), then one at each quarter or every 10 s, whichever is first.
   */
  lineDelayMs?: number;
  /** Where the bar goes (default: stderr). */
  write?: (bytes: Uint8Array) => void;
  /** Milliseconds from a fixed origin (default `performance.now`); tests pass their own. */
  now?: () => number;
}

/** ANSI "erase to the end of the line": a shorter redraw leaves nothing behind. */
const ERASE_TO_END = "\x1b[K";

/**
 * Progress of work measured in bytes, for `done` of `total`. On a terminal
 * it is a bar redrawn in place (each redraw erases what the previous one
 * left to its right, so shrinking figures leave no debris) that ends its
 * line when `done >= total`. Off a terminal (a log file, a pipe, CI) it is
 * a few lines with the percent and the time elapsed, the first after
 * `lineDelayMs`, and a last one when the work ends, so long work shows it
 * is alive without flooding the log. Returns undefined when neither is
 * wanted (`terminal: false` and `lineDelayMs: Infinity`).
 *
 * @example
 * ```ts
 * import { progressBar } from "./progress.ts";
 * const out: string[] = [];
 * let t = 0;
 * const bar = progressBar({
 *   label: "converting",
 *   terminal: false,
 *   now: () => t,
 *   write: (b) => void out.push(new TextDecoder().decode(b)),
 * })!;
 * t = 3000;
 * bar(50e6, 100e6);
 * console.log(out[0]); // "cflow: converting 50% (50.0 of 100.0 MB, 3.0 s)\n"
 * ```
 */
export function progressBar(
  options: ProgressBarOptions = {},
): ((done: number, total: number) => void) | undefined {
  const terminal = options.terminal ?? Deno.stderr.isTerminal();
  const lineDelay = options.lineDelayMs ?? 2000;
  if (!terminal && lineDelay === Infinity) return undefined;
  const now = options.now ?? (() => performance.now());
  const start = now();
  const write = options.write ?? ((b: Uint8Array) => void Deno.stderr.writeSync(b));
  const enc = new TextEncoder();
  return terminal
    ? barOnTerminal(options, start, now, (s) => write(enc.encode(s)))
    : linesOffTerminal(options.label, lineDelay, start, now, (s) => write(enc.encode(s)));
}

function barOnTerminal(
  options: ProgressBarOptions,
  start: number,
  now: () => number,
  write: (s: string) => void,
): (done: number, total: number) => void {
  const delay = options.delayMs ?? 0;
  const label = options.label ? `${options.label} ` : "";
  let last = -Infinity;
  let finished = false;
  return (done, total) => {
    if (finished) return;
    const t = now();
    const end = done >= total;
    if (t - start < delay) {
      if (end) finished = true; // quick work: never drawn, nothing to end
      return;
    }
    if (t - last < 100 && !end) return;
    last = t;
    const secs = (t - start) / 1000;
    const rate = done / Math.max(secs, 1e-3);
    const eta = end
      ? "0s"
      : done > 0 && secs >= 0.5
      ? `${((total - done) / rate).toFixed(0)}s`
      : "?"; // too early for a rate
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    const width = 30;
    const bar = "#".repeat(Math.round(frac * width)).padEnd(width, ".");
    const counts = `${(done / 1e6).toFixed(1)}/${(total / 1e6).toFixed(1)} MB ${
      (rate / 1e6).toFixed(1)
    } MB/s`;
    const line = `\r${label}[${bar}] ${
      (frac * 100).toFixed(0).padStart(3)
    }% ${counts} ETA ${eta}${ERASE_TO_END}`;
    if (end) finished = true;
    write(end ? `${line}\n` : line);
  };
}

function linesOffTerminal(
  label: string | undefined,
  lineDelay: number,
  start: number,
  now: () => number,
  write: (s: string) => void,
): (done: number, total: number) => void {
  const what = label ? `${label} ` : "";
  let printed = false;
  let lastAt = start;
  let lastQuarter = 0;
  let finished = false;
  return (done, total) => {
    if (finished) return;
    const t = now();
    const end = done >= total;
    if (end) finished = true;
    if (t - start < lineDelay) return; // quick work: no lines at all
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    const quarter = Math.floor(frac * 4);
    // The first line once the delay has passed, then a line per quarter or
    // every 10 s, and always the last one if any was printed.
    if (printed && !end && quarter <= lastQuarter && t - lastAt < 10_000) return;
    if (end && !printed) return; // finished right at the delay: nothing to report
    printed = true;
    lastAt = t;
    lastQuarter = quarter;
    const secs = ((t - start) / 1000).toFixed(1);
    write(
      end
        ? `cflow: ${what}done (${(total / 1e6).toFixed(1)} MB, ${secs} s)\n`
        : `cflow: ${what}${(frac * 100).toFixed(0)}% (${(done / 1e6).toFixed(1)} of ${
          (total / 1e6).toFixed(1)
        } MB, ${secs} s)\n`,
    );
  };
}
