/**
 * A progress bar on stderr, shared by `convert`, `pull` and model loading
 * (conversion into the cache on first use, packing the weights).
 *
 * @module
 */

/** Options of {@linkcode progressBar}. */
export interface ProgressBarOptions {
  /** Printed before the bar ("converting", "packing"). */
  label?: string;
  /** Draw nothing until the work has run this long (ms), so quick work stays quiet. */
  delayMs?: number;
  /** Whether stderr is a terminal (default: asks Deno); the bar exists only then. */
  terminal?: boolean;
  /** Where the bar goes (default: stderr). */
  write?: (bytes: Uint8Array) => void;
}

/**
 * A progress bar on stderr when it is a terminal; undefined otherwise, so
 * that piped or redirected stderr gets no bars. The bar ends its line when
 * `done >= total`.
 *
 * @example
 * ```ts ignore
 * import { progressBar } from "./progress.ts";
 * const bar = progressBar({ label: "converting" });
 * bar?.(50, 100);
 * ```
 */
export function progressBar(
  options: ProgressBarOptions = {},
): ((done: number, total: number) => void) | undefined {
  if (!(options.terminal ?? Deno.stderr.isTerminal())) return undefined;
  const start = performance.now();
  const delay = options.delayMs ?? 0;
  const label = options.label ? `${options.label} ` : "";
  let last = -Infinity;
  let finished = false;
  const enc = new TextEncoder();
  const write = options.write ?? ((b: Uint8Array) => void Deno.stderr.writeSync(b));
  return (done, total) => {
    if (finished) return;
    const now = performance.now();
    const end = done >= total;
    if (now - start < delay) {
      if (end) finished = true; // quick work: never drawn, nothing to end
      return;
    }
    if (now - last < 100 && !end) return;
    last = now;
    const secs = (now - start) / 1000;
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
    const line = `\r${label}[${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${counts} ETA ${eta} `;
    if (end) finished = true;
    write(enc.encode(end ? `${line}\n` : line));
  };
}
