/**
 * Built-in models: the pipeline-native family trained here (training/,
 * docs/ARCHITECTURES.md), shipped as `.cflow` files in `models/builtin/`
 * and addressed as `builtin:NAME`, offline, with no download.
 *
 * @module
 */

/**
 * The names `builtin:NAME` accepts: the architectures of the report's
 * Table 4.1 and the Gemma-4-style parallel layer, each trained with one recipe.
 *
 * @example
 * ```ts
 * import { BUILTIN_MODELS } from "./builtin.ts";
 * console.log(BUILTIN_MODELS.includes("arch2_4_combined")); // true
 * ```
 */
export const BUILTIN_MODELS: readonly string[] = [
  "gemma4_parallel",
  "arch1_decoupled_streams",
  "arch2_4_combined",
  "arch2_4_sync",
  "arch3_pipeline_registers",
  "arch4_async_experts",
  "arch5_fixed_point",
];

/** Where the files are, next to this module in a checkout or a compiled executable. */
const DIR = new URL("../models/builtin/", import.meta.url);

/**
 * The path of `builtin:NAME`'s `.cflow` file. In a checkout that is the
 * committed file itself; in a compiled executable, whose embedded files the
 * kernel library cannot map, a copy made once under `cache` (written to a
 * temporary name and renamed). Throws a RangeError for an unknown name.
 *
 * @example
 * ```ts ignore
 * import { resolveBuiltin } from "./builtin.ts";
 * const path = await resolveBuiltin("builtin:arch2_4_combined", "/tmp/cache");
 * ```
 */
export async function resolveBuiltin(spec: string, cache: () => string): Promise<string> {
  const name = spec.slice("builtin:".length);
  if (!BUILTIN_MODELS.includes(name)) {
    throw new RangeError(
      `${spec}: no such built-in model (built-in: ${BUILTIN_MODELS.join(", ")})`,
    );
  }
  const path = new URL(`${name}.cflow`, DIR).pathname;
  let size: number;
  try {
    size = (await Deno.stat(path)).size;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new RangeError(`${spec}: ${path} is missing from this installation`);
    }
    throw error;
  }
  if (!Deno.build.standalone) return path;
  const dir = `${cache()}/builtin`;
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const target = `${dir}/${name}-${size}.cflow`;
  try {
    if ((await Deno.stat(target)).size === size) return target;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const tmp = `${target}.tmp-${Deno.pid}`;
  await Deno.writeFile(tmp, await Deno.readFile(path), { mode: 0o600 });
  await Deno.rename(tmp, target);
  return target;
}
