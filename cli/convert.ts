/**
 * `cflow convert`: runs a conversion with a progress bar on a terminal and
 * prints what happened.
 *
 * @module
 */

import { convertFile, type ConvertOptions } from "../convert/mod.ts";

/** A progress bar on stderr when it is a terminal; nothing otherwise. */
function progressBar(): ((written: number, total: number) => void) | undefined {
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

/**
 * Converts and prints a summary (or JSON).
 *
 * @example
 * ```ts ignore
 * import { runConvert } from "./convert.ts";
 * await runConvert("m.gguf", "m.cflow", { format: "cflow", quant: "q4_0", rule: "ggml", measureError: false }, false);
 * ```
 */
export async function runConvert(
  input: string,
  output: string,
  options: Omit<ConvertOptions, "progress">,
  json: boolean,
): Promise<number> {
  const start = performance.now();
  const result = await convertFile(input, output, { ...options, progress: progressBar() });
  const secs = (performance.now() - start) / 1000;
  if (json) {
    console.log(JSON.stringify({ ...result, seconds: secs }, null, 2));
    return 0;
  }
  const lossless = result.matrices.filter((m) => m.lossless).length;
  console.log(
    `${result.output}: ${result.bytes} bytes, ${options.format} ${options.quant} from ${result.source.format} ` +
      `(${result.source.architecture}) in ${
        secs.toFixed(1)
      } s; ${result.matrices.length} matrices, ` +
      `${lossless} re-tiled losslessly, ${result.matrices.length - lossless} requantized`,
  );
  if (options.measureError) {
    console.log("matrix                                   from  to    rms          max_abs");
    for (const m of result.matrices) {
      console.log(
        `${m.name.padEnd(40)} ${m.from.padEnd(5)} ${m.to.padEnd(5)} ${
          (m.rms ?? 0).toExponential(3).padEnd(12)
        } ${(m.maxAbs ?? 0).toExponential(3)}`,
      );
    }
  }
  return 0;
}
