/**
 * Runs a few lines of TypeScript in a child Deno granted read access to the named paths only,
 * for tests of what a file reader needs permission for (Deno checks `FsFile.stat` against where
 * a link leads, and refuses paths outside `--allow-read` with `NotCapable`).
 *
 * @module
 */

const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/**
 * The child's exit code and output. `source` is written to `probe.ts` in `dir` (a folder the
 * caller made and removes) and run with `--allow-read` of `read` alone and the checkout's
 * `deno.json` (for its import map).
 *
 * @example
 * ```ts ignore
 * import { runReadProbe } from "./read_probe.ts";
 * const r = await runReadProbe(`console.log(1);`, ["/tmp/x"], "/tmp/probe-dir");
 * console.log(r.code, r.stdout); // 0 "1\n"
 * ```
 */
export async function runReadProbe(
  source: string,
  read: string[],
  dir: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  await Deno.writeTextFile(`${dir}/probe.ts`, source);
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      `--config=${CONFIG}`,
      `--allow-read=${read.join(",")}`,
      `${dir}/probe.ts`,
    ],
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}
