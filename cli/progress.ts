/**
 * A progress bar on stderr, shared by `convert` and `pull`.
 *
 * @module
 */

/**
 * A progress bar on stderr when it is a terminal; undefined otherwise.
 *
 * @example
 * ```ts ignore
 * import { progressBar } from "./progress.ts";
 * const bar = progressBar();
 * bar?.(50, 100);
 * ```
 */
export function progressBar(): ((written: number, total: number) => void) | undefined {
  if (!Deno.stderr.isTerminal()) return undefined;
  const start = performance.now();
  let last = 0;
  const enc = new TextEncoder();
  return (written, total) => {
    const now = performance.now();
    if (now - last < 100 && written < total) return;
    last = now;
    const secs = (now - start) / 1000;
    const rate = written / Math.max(secs, 1e-3);
    const eta = rate > 0 ? (total - written) / rate : 0;
    const frac = total > 0 ? written / total : 1;
    const width = 30;
    const bar = "#".repeat(Math.round(frac * width)).padEnd(width, ".");
    const line = `\r[${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${
      (written / 1e6).toFixed(1)
    }/${(total / 1e6).toFixed(1)} MB ${(rate / 1e6).toFixed(1)} MB/s ETA ${eta.toFixed(0)}s `;
    Deno.stderr.writeSync(enc.encode(written >= total ? `${line}\n` : line));
  };
}
