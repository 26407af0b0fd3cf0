/**
 * What the side-by-side benchmarks share: command-line flags, medians, and
 * trials in fresh processes in an order shuffled with a printed seed.
 *
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname;

/** The value of `--name`, or `fallback`. */
export function arg(name: string, fallback: string): string {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < Deno.args.length ? Deno.args[i + 1] : fallback;
}

/** The median of a non-empty list. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Index of the largest logit. */
export function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

/**
 * Runs every cell `reps` times, each round in an order shuffled with a
 * Park-Miller generator seeded by `seed`, each trial a fresh `deno run` of
 * `script --worker ...workerArgs(cell)` whose last stdout line is its JSON
 * result; returns the results by cell key, in round order.
 */
export async function runTrials<C, R>(o: {
  script: string;
  cells: readonly C[];
  reps: number;
  seed: number;
  key: (cell: C) => string;
  workerArgs: (cell: C) => string[];
  report?: (cell: C, result: R, round: number) => void;
}): Promise<Map<string, R[]>> {
  let seed = o.seed;
  const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
  const results = new Map<string, R[]>();
  for (let r = 0; r < o.reps; r++) {
    const order = [...o.cells];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    for (const c of order) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-prompt",
          `--allow-ffi=${ROOT}kernels-zig/zig-out/lib/libcflow_kernels.so`,
          `--allow-read=${ROOT}`,
          "--allow-env",
          o.script,
          "--worker",
          ...o.workerArgs(c),
        ],
        stderr: "inherit",
      }).output();
      if (!out.success) throw new Error(`worker failed: ${o.key(c)}`);
      const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
      const res = JSON.parse(lines[lines.length - 1]) as R;
      results.set(o.key(c), [...(results.get(o.key(c)) ?? []), res]);
      o.report?.(c, res, r);
    }
  }
  return results;
}
