/**
 * The long fuzz campaign: every target of tests/fuzz/properties.ts for
 * `--runs N` inputs (default 100 000, or $FUZZ_RUNS) from `--seed S`
 * (default $FUZZ_SEED, else the time),
 * optionally only `--only name[,name]`. Prints a table of counts per target
 * and one JSON line; exits 1 when any property failed, after printing
 * fast-check's report (seed, path and shrunk counterexample) for it.
 *
 *   deno task fuzz --runs 100000 --seed 42
 *
 * @module
 */

import { ALL_TARGETS, type Counts, runTarget } from "./properties.ts";

function arg(name: string): string | undefined {
  const i = Deno.args.indexOf(`--${name}`);
  if (i >= 0) return Deno.args[i + 1];
  const eq = Deno.args.find((a) => a.startsWith(`--${name}=`));
  return eq?.slice(name.length + 3);
}

/** An environment variable, or undefined (also without --allow-env). */
function env(name: string): string | undefined {
  return Deno.permissions.querySync({ name: "env", variable: name }).state === "granted"
    ? Deno.env.get(name)
    : undefined;
}

const runs = Number(arg("runs") ?? env("FUZZ_RUNS") ?? 100_000);
const seed = Number(arg("seed") ?? env("FUZZ_SEED") ?? (Date.now() & 0x7fffffff));
const only = arg("only")?.split(",");
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(seed)) {
  console.error("usage: fuzz.ts [--runs N] [--seed S] [--only target,...]");
  Deno.exit(2);
}
const targets = ALL_TARGETS.filter((t) => only === undefined || only.includes(t.name));
console.log(`fuzz: ${targets.length} targets, ${runs} inputs each, seed ${seed}`);

const t0 = performance.now();
const results: Counts[] = [];
const pad = (s: string | number, n: number) => String(s).padStart(n);
console.log(
  `${"target".padEnd(22)} ${pad("inputs", 8)} ${pad("accepted", 9)} ${pad("rejected", 9)} ${
    pad("failures", 9)
  } ${pad("seconds", 8)} ${pad("slowest ms", 10)}`,
);
for (const t of targets) {
  const c = await runTarget(t, { numRuns: runs, seed });
  results.push(c);
  if (c.skipped) {
    console.log(`${t.name.padEnd(22)} skipped: ${c.skipped}`);
    continue;
  }
  console.log(
    `${t.name.padEnd(22)} ${pad(c.inputs, 8)} ${pad(c.accepted, 9)} ${pad(c.rejected, 9)} ${
      pad(c.failures, 9)
    } ${pad((c.ms / 1000).toFixed(1), 8)} ${pad(c.slowestMs.toFixed(1), 10)}`,
  );
  if (c.report) console.log(`\n${t.name} FAILED (seed ${seed}):\n${c.report}\n`);
}
const failures = results.reduce((a, c) => a + c.failures, 0);
console.log(JSON.stringify({
  seed,
  runs,
  seconds: Number(((performance.now() - t0) / 1000).toFixed(1)),
  failures,
  targets: results.map(({ report: _r, ...c }) => ({ ...c, ms: Math.round(c.ms) })),
}));
if (failures > 0) Deno.exit(1);
