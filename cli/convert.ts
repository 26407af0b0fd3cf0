/**
 * `cflow convert`: runs a conversion with a progress bar on a terminal and
 * prints what happened.
 *
 * @module
 */

import { convertFile, type ConvertOptions } from "../convert/mod.ts";
import { progressBar } from "./progress.ts";
import { EXIT } from "./exit_codes.ts";

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
  // The output's folder must exist: say so before any work.
  const slash = output.lastIndexOf("/");
  const folder = slash < 0 ? "." : slash === 0 ? "/" : output.slice(0, slash);
  try {
    if (!(await Deno.stat(folder)).isDirectory) {
      throw new Error(`convert: ${folder} (the folder of ${output}) is not a folder`);
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error(`convert: no such folder: ${folder} (for ${output})`);
    }
    throw error;
  }
  const start = performance.now();
  const result = await convertFile(input, output, {
    ...options,
    progress: progressBar({ label: "converting" }),
  });
  const secs = (performance.now() - start) / 1000;
  if (json) {
    console.log(JSON.stringify({ ...result, seconds: secs }, null, 2));
    return EXIT.OK;
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
  return EXIT.OK;
}
