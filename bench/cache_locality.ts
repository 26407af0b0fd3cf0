/**
 * Cache-locality evidence (the report's claim 2): simulated L1-d read misses
 * of the tiled kernel (`.cflow` 128 x 256 tiles, `tileStripe`) against the
 * row-major kernel (ggml-style rows, `matvecRowsQ*_0`) over the same values,
 * at the report's d = 8192 shapes, printed next to its 6.7-7.3x.
 *
 * Method: `bench/cache_locality/` is a standalone Zig program that compiles
 * the real `kernels-zig/src/kernels.zig` (AVX2 variant, x86-64-v3; valgrind
 * 3.19 cannot decode AVX-512) and runs ONE kernel over ONE matrix per
 * invocation, single-threaded. Each (shape, layout, quant) is run twice under
 * `valgrind --tool=cachegrind --cache-sim=yes` with I1/D1/LL set explicitly
 * to this machine's cache geometry (from `lscpu`, which reads /sys): once as
 * `setup` (build the matrix, the Q8_0 activation and the output, skip the
 * kernel) and once as `run` (the same, plus the kernel). The kernel's counts are run - setup
 * (cachegrind in valgrind 3.19 has no client requests to toggle collection).
 * Cachegrind's caches are deterministic (LRU, write-allocate, no prefetcher),
 * so one pass per invocation gives exact, repeatable counts.
 *
 * For Q4_0 it also measures `rows_f32x`, not a cflow kernel: the same rows
 * against the f32 activation, the kind of naive baseline the report's "32 KB
 * activation at d = 8192" implies, printed in a separate table to test that
 * explanation of the report's ratios.
 *
 * Gates: the program's `verify` mode checks both kernels against an f64
 * reference natively; the tiled and row-major runs must agree on the output
 * checksums; the setup runs must leave the output at zero.
 *
 *   deno task bench:cache [--quant q4_0,q8_0] [--shapes attn-proj,...] [--json]
 *                         [--d1 SIZE,WAYS,LINE] [--i1 ...] [--ll ...]
 *
 * @module
 */

import { parseArgs } from "node:util";

const ROOT = decodeURIComponent(new URL("..", import.meta.url).pathname);
const PROGRAM_DIR = `${ROOT}bench/cache_locality`;
const PROGRAM = `${PROGRAM_DIR}/zig-out/bin/cache_locality`;
const ZIG = `${ROOT}.tools/zig/ziglang/zig`;
const OUT_DIR = `${ROOT}cache/bench-cache-locality`;

/** The report's d = 8192 geometry (arch2_4_8k_4l: dense FFN 32768, 8 experts, expert FFN 4096). */
interface Shape {
  name: string;
  /** Output features (matrix rows). */
  rows: number;
  /** Input features (matrix columns, the activation length). */
  cols: number;
  /** The report's Table 5.2 ratio (row-major / tiled L1-d read misses, Q4), if it has one. */
  paper: number | null;
  what: string;
}

const SHAPES: Shape[] = [
  {
    name: "dense-down",
    rows: 8192,
    cols: 32768,
    paper: 7.29,
    what: "dense FFN down projection, d x 4d",
  },
  {
    name: "attn-proj",
    rows: 8192,
    cols: 8192,
    paper: 6.75,
    what: "attention projection (Q or O), d x d",
  },
  {
    name: "dense-gateup",
    rows: 32768,
    cols: 8192,
    paper: 6.72,
    what: "dense FFN gate (or up) projection, 4d x d",
  },
  {
    name: "expert-proj",
    rows: 8192,
    cols: 8192,
    paper: 6.88,
    what: "one expert's fused gate+up, 2 x 4096 rows x d (expert FFN 4096)",
  },
  {
    name: "expert-down",
    rows: 8192,
    cols: 4096,
    paper: null,
    what: "one expert's down projection, d x 4096 (not in the report's table)",
  },
];

const QUANTS = ["q4_0", "q8_0"] as const;
type Quant = typeof QUANTS[number];
type Layout = "tiled" | "rows" | "rows_f32x";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    quant: { type: "string", default: "q4_0,q8_0" },
    shapes: { type: "string", default: SHAPES.map((s) => s.name).join(",") },
    d1: { type: "string" },
    i1: { type: "string" },
    ll: { type: "string" },
    json: { type: "boolean", default: false },
  },
});

const quants = values.quant.split(",") as Quant[];
if (!quants.every((q) => (QUANTS as readonly string[]).includes(q))) {
  throw new RangeError(`bench:cache: --quant takes ${QUANTS.join(",")}, got "${values.quant}"`);
}
const shapes = values.shapes.split(",").map((name) => {
  const s = SHAPES.find((x) => x.name === name);
  if (!s) throw new RangeError(`bench:cache: unknown shape "${name}"`);
  return s;
});

function run(cmd: string, args: string[], cwd = ROOT): string {
  const out = new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).outputSync();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(
      `bench:cache: ${cmd} ${args.join(" ")} exited with ${out.code}\n` +
        dec.decode(out.stderr).slice(-4000),
    );
  }
  return dec.decode(out.stdout);
}

// ---------------------------------------------------------------------------
// Cache geometry of this machine (what cachegrind is told to simulate).
// ---------------------------------------------------------------------------

interface CacheGeometry {
  sizeBytes: number;
  ways: number;
  lineBytes: number;
}

function parseGeometry(flag: string, text: string): CacheGeometry {
  const [sizeBytes, ways, lineBytes] = text.split(",").map(Number);
  if (![sizeBytes, ways, lineBytes].every((v) => Number.isInteger(v) && v > 0)) {
    throw new RangeError(`bench:cache: --${flag} takes SIZE,WAYS,LINE in bytes, got "${text}"`);
  }
  return { sizeBytes, ways, lineBytes };
}

/** L1d, L1i and the last level as `lscpu` reads them from /sys/devices/system/cpu (Deno itself may not read /sys without -A). */
function machineCaches(): { d1: CacheGeometry; i1: CacheGeometry; ll: CacheGeometry } {
  const text = run("lscpu", [
    "--caches=NAME,ONE-SIZE,WAYS,TYPE,LEVEL,COHERENCY-SIZE",
    "--bytes",
    "--json",
  ]);
  const found = (JSON.parse(text).caches as Record<string, string | number>[]).map((c) => ({
    level: Number(c.level),
    type: String(c.type),
    geometry: {
      sizeBytes: Number(c["one-size"]),
      ways: Number(c.ways),
      lineBytes: Number(c["coherency-size"]),
    },
  }));
  const d1 = found.find((c) => c.level === 1 && c.type === "Data");
  const i1 = found.find((c) => c.level === 1 && c.type === "Instruction");
  const ll = found.filter((c) => c.type !== "Instruction").sort((a, b) => b.level - a.level)[0];
  if (!d1 || !i1 || !ll) {
    throw new Error("bench:cache: lscpu lists no L1d, L1i or last level; pass --d1/--i1/--ll");
  }
  for (const c of [d1, i1, ll]) {
    if (![c.geometry.sizeBytes, c.geometry.ways, c.geometry.lineBytes].every((v) => v > 0)) {
      throw new Error(
        `bench:cache: lscpu gave an incomplete L${c.level} ${c.type}; pass --d1/--i1/--ll`,
      );
    }
  }
  return { d1: d1.geometry, i1: i1.geometry, ll: ll.geometry };
}

const fromSys = values.d1 && values.i1 && values.ll ? null : machineCaches();
const caches = {
  d1: values.d1 ? parseGeometry("d1", values.d1) : fromSys!.d1,
  i1: values.i1 ? parseGeometry("i1", values.i1) : fromSys!.i1,
  ll: values.ll ? parseGeometry("ll", values.ll) : fromSys!.ll,
};
const geometryArg = (g: CacheGeometry) => `${g.sizeBytes},${g.ways},${g.lineBytes}`;
const CG_FLAGS = [
  "--tool=cachegrind",
  "--cache-sim=yes",
  "--branch-sim=no",
  `--I1=${geometryArg(caches.i1)}`,
  `--D1=${geometryArg(caches.d1)}`,
  `--LL=${geometryArg(caches.ll)}`,
];

// ---------------------------------------------------------------------------
// Processes.
// ---------------------------------------------------------------------------

interface ProgramLine {
  mode: string;
  layout: Layout;
  quant: Quant;
  variant: string;
  rows: number;
  cols: number;
  weight_bytes: number;
  activation_bytes: number;
  y_sum: number;
  y_abs_sum: number;
}

/** Cachegrind's totals for the whole program, by event name. */
type Counts = Record<string, number>;

function cachegrind(mode: "setup" | "run", layout: Layout, quant: Quant, s: Shape) {
  const file = `${OUT_DIR}/${s.name}.${quant}.${layout}.${mode}.cgout`;
  const stdout = run("valgrind", [
    ...CG_FLAGS,
    `--cachegrind-out-file=${file}`,
    PROGRAM,
    mode,
    layout,
    quant,
    String(s.rows),
    String(s.cols),
  ]);
  const line: ProgramLine = JSON.parse(stdout.trim().split("\n").at(-1)!);
  const text = Deno.readTextFileSync(file);
  const events = /^events: (.+)$/m.exec(text)?.[1].trim().split(/\s+/);
  const summary = /^summary: (.+)$/m.exec(text)?.[1].trim().split(/\s+/).map(Number);
  if (!events || !summary || events.length !== summary.length) {
    throw new SyntaxError(`bench:cache: cannot parse the events/summary lines of ${file}`);
  }
  const counts: Counts = {};
  events.forEach((e, i) => counts[e] = summary[i]);
  return { line, counts, file, kernelFns: kernelFunctionCounts(text, events) };
}

/**
 * The counts cachegrind attributes to the kernel's functions: the two
 * `noinline` entry points (the kernels.zig code inlined into them is
 * attributed to their symbols) and any kernels.zig function left out of line.
 * A cross-check of the run - setup subtraction.
 */
function kernelFunctionCounts(text: string, events: string[]): Counts {
  const counts: Counts = Object.fromEntries(events.map((e) => [e, 0]));
  let inKernel = false;
  for (const l of text.split("\n")) {
    if (l.startsWith("fn=")) {
      const name = l.slice(3);
      inKernel = name === "main.runTiled" || name === "main.runRows" ||
        name === "main.runRowsF32" ||
        (name.startsWith("kernels.") && !name.startsWith("kernels.quantizeQ8_0"));
    } else if (inKernel && /^\d/.test(l)) {
      const nums = l.split(" ").slice(1).map(Number); // first number is the source line
      nums.forEach((v, i) => counts[events[i]] += v);
    }
  }
  return counts;
}

// ---------------------------------------------------------------------------
// Build, verify, measure.
// ---------------------------------------------------------------------------

const started = performance.now();
const valgrindVersion = run("valgrind", ["--version"]).trim();
const zigVersion = run(ZIG, ["version"]).trim();
run(ZIG, ["build", "-Doptimize=ReleaseFast"], PROGRAM_DIR);
const verify = JSON.parse(run(PROGRAM, ["verify"]).trim());
if (verify.verify !== "ok") {
  throw new Error(`bench:cache: verify failed: ${JSON.stringify(verify)}`);
}
Deno.mkdirSync(OUT_DIR, { recursive: true });

interface Measured {
  /** D1 read misses, Dr data reads, Ir instructions: run - setup. */
  D1mr: number;
  Dr: number;
  Ir: number;
  /** D1 read misses attributed to the kernel's functions (the cross-check). */
  D1mrByFunction: number;
}

function kernelCounts(layout: Layout, quant: Quant, s: Shape) {
  const setup = cachegrind("setup", layout, quant, s);
  const full = cachegrind("run", layout, quant, s);
  if (setup.line.y_abs_sum !== 0) throw new Error(`bench:cache: setup ran the kernel (${s.name})`);
  const diff = (e: string) => full.counts[e] - setup.counts[e];
  const fnDiff = (e: string) => full.kernelFns[e] - setup.kernelFns[e];
  const measured: Measured = {
    D1mr: diff("D1mr"),
    Dr: diff("Dr"),
    Ir: diff("Ir"),
    D1mrByFunction: fnDiff("D1mr"),
  };
  return { measured, line: full.line };
}

interface Row {
  shape: string;
  what: string;
  quant: Quant;
  rows: number;
  cols: number;
  activationBytes: number;
  weightBytesTiled: number;
  weightBytesRows: number;
  tiled: Measured;
  rowMajor: Measured;
  ratio: number;
  /** Q4_0 only: the explanatory f32-activation row-major baseline (not a cflow kernel). */
  f32Baseline: Measured | null;
  f32Ratio: number | null;
  paper: number | null;
}

const results: Row[] = [];
for (const quant of quants) {
  for (const s of shapes) {
    const t = kernelCounts("tiled", quant, s);
    const r = kernelCounts("rows", quant, s);
    const f = quant === "q4_0" ? kernelCounts("rows_f32x", quant, s) : null;
    // Same values, same arithmetic: outputs differ only in f32 summation order.
    const scale = Math.max(t.line.y_abs_sum, r.line.y_abs_sum);
    if (
      !(scale > 0) || Math.abs(t.line.y_abs_sum - r.line.y_abs_sum) > 1e-5 * scale ||
      Math.abs(t.line.y_sum - r.line.y_sum) > 1e-5 * scale
    ) {
      throw new Error(
        `bench:cache: ${s.name} ${quant}: tiled and row-major outputs differ ` +
          `(${t.line.y_sum}/${t.line.y_abs_sum} vs ${r.line.y_sum}/${r.line.y_abs_sum})`,
      );
    }
    results.push({
      shape: s.name,
      what: s.what,
      quant,
      rows: s.rows,
      cols: s.cols,
      activationBytes: t.line.activation_bytes,
      weightBytesTiled: t.line.weight_bytes,
      weightBytesRows: r.line.weight_bytes,
      tiled: t.measured,
      rowMajor: r.measured,
      ratio: r.measured.D1mr / t.measured.D1mr,
      f32Baseline: f ? f.measured : null,
      f32Ratio: f ? f.measured.D1mr / t.measured.D1mr : null,
      paper: quant === "q4_0" ? s.paper : null,
    });
  }
}
const seconds = (performance.now() - started) / 1000;
// How far the per-function attribution is from the subtraction, at worst.
const crossCheck = Math.max(
  ...results.flatMap((r) =>
    [r.tiled, r.rowMajor, ...(r.f32Baseline ? [r.f32Baseline] : [])].map((m) =>
      Math.abs(m.D1mrByFunction - m.D1mr) / m.D1mr
    )
  ),
);

// ---------------------------------------------------------------------------
// Report.
// ---------------------------------------------------------------------------

const meta = {
  valgrind: valgrindVersion,
  zig: zigVersion,
  kernels: `kernels-zig/src/kernels.zig, ${verify.variant} variant, x86-64-v3, one thread`,
  cachegrind: CG_FLAGS.join(" "),
  cachesFrom: fromSys ? "lscpu (/sys/devices/system/cpu)" : "--d1/--i1/--ll",
  activation: "Q8_0 (quantized once per matvec, as the runtime does)",
  method: "kernel counts = cachegrind(run) - cachegrind(setup), same arguments",
  crossCheck,
  seconds,
};

if (values.json) {
  console.log(JSON.stringify({ meta, results }, null, 2));
} else {
  const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
  const { d1, i1, ll } = caches;
  const line = d1.lineBytes;
  const cross = (100 * crossCheck).toFixed(2);
  console.log(
    `cache-locality bench: simulated L1-d read misses, tiled vs row-major (${meta.kernels})\n` +
      `${valgrindVersion}: ${CG_FLAGS.join(" ")}\n` +
      `caches (${meta.cachesFrom}): D1 ${kib(d1.sizeBytes)} ${d1.ways}-way ${line} B lines; ` +
      `I1 ${kib(i1.sizeBytes)} ${i1.ways}-way; LL ${kib(ll.sizeBytes)} ${ll.ways}-way ` +
      `(cachegrind simulates D1 and LL only)\n` +
      `kernel counts = run - setup invocation; activation ${meta.activation}\n`,
  );
  const table = (head: string[], rows: string[][]) => {
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const fmt = (r: string[]) =>
      r.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join("  ");
    console.log(fmt(head));
    console.log("-".repeat(fmt(head).length));
    for (const r of rows) console.log(fmt(r));
  };
  const x = (v: number | null) => v === null ? "-" : `${v.toFixed(2)}x`;
  table(
    [
      "shape",
      "quant",
      "out x in",
      "x/D1",
      "wt lines",
      "D1mr tiled",
      "D1mr rows",
      "Dr tiled",
      "Dr rows",
      "rows/tiled",
      "paper",
    ],
    results.map((r) => [
      r.shape,
      r.quant,
      `${r.rows}x${r.cols}`,
      (r.activationBytes / d1.sizeBytes).toFixed(2),
      String(Math.ceil(r.weightBytesRows / line)),
      String(r.tiled.D1mr),
      String(r.rowMajor.D1mr),
      String(r.tiled.Dr),
      String(r.rowMajor.Dr),
      x(r.ratio),
      x(r.paper),
    ]),
  );
  console.log(
    `\nx/D1: the Q8_0 activation vector over the D1 size. wt lines: row-major weight bytes / ` +
      `${line} (the compulsory misses of one pass).\n` +
      `Cross-check: the D1mr cachegrind attributes to the kernel functions is within ${cross}% ` +
      `of run - setup.\npaper: the report's Table 5.2 (Q4, Xeon E5-2650 PMU, 32 KiB L1-d, its ` +
      `own naive row-major kernel); it has no Q8_0 rows.`,
  );
  const f32 = results.filter((r) => r.f32Baseline !== null);
  if (f32.length > 0) {
    console.log(
      `\nExplanation, not a cflow kernel: the same Q4_0 rows against the f32 activation ` +
        `(4 bytes per input), over the tiled kernel above.\n`,
    );
    table(
      ["shape", "out x in", "x f32/D1", "D1mr rows f32x", "D1mr tiled", "f32x/tiled", "paper"],
      f32.map((r) => [
        r.shape,
        `${r.rows}x${r.cols}`,
        ((r.cols * 4) / d1.sizeBytes).toFixed(2),
        String(r.f32Baseline!.D1mr),
        String(r.tiled.D1mr),
        x(r.f32Ratio),
        x(r.paper),
      ]),
    );
  }
  console.log(
    `\nshapes (out x in; d = 8192, dense FFN 32768, expert FFN 4096):\n` +
      shapes.map((s) => `  ${s.name}: ${s.what}`).join("\n") +
      `\ncachegrind files: ${OUT_DIR}/ (cg_annotate FILE for per-function counts); ` +
      `${seconds.toFixed(0)} s`,
  );
}
