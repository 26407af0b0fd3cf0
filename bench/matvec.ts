/**
 * Matvec micro-benchmark: Q4_0 and Q8_0 matvec over a ~64 MB weight matrix
 * (larger than the L3 cache, so it streams from DRAM) at 1 and 2 threads,
 * each reported as GB/s of weights read and as a share of a streaming-read
 * loop over the same buffer, measured by the same library in the same run.
 *
 * Protocol: one warmup per configuration, then `--reps` repetitions with the
 * order of configurations shuffled each round; every repetition runs a
 * configuration for at least `--min-ms` and reports bytes / time. Printed:
 * median with min and max. A correctness gate runs first: matvec output is
 * bit-identical across thread counts and matches the TypeScript reference
 * on a sample of rows.
 *
 *   deno task bench:matvec [--reps 7] [--min-ms 250] [--json]
 *
 * @module
 */

import { parseArgs } from "node:util";
import { openKernels } from "../ffi/mod.ts";
import { f32ToF16Bits, matvecQ4_0, matvecQ8_0 } from "../reference/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    reps: { type: "string", default: "7" },
    "min-ms": { type: "string", default: "250" },
    "matrix-mib": { type: "string", default: "64" },
    threads: { type: "string", default: "1,2" },
    json: { type: "boolean", default: false },
  },
});
const REPS = Number(values.reps);
const MIN_MS = Number(values["min-ms"]);
const MATRIX_BYTES = Number(values["matrix-mib"]) * 1024 * 1024;
const THREADS = values.threads.split(",").map(Number);
if (!(REPS >= 1 && MIN_MS > 0 && MATRIX_BYTES > 0 && THREADS.every((t) => t >= 1))) {
  throw new RangeError("bench: bad --reps, --min-ms, --matrix-mib or --threads");
}

const COLS = 4096;
const NB = COLS / 32;

/** Fills `blocks` quantized blocks of `blockBytes` with random quants and a sane f16 scale. */
function randomBlocks(count: number, blockBytes: number): Uint8Array {
  const out = new Uint8Array(count * blockBytes);
  for (let off = 0; off < out.length; off += 65536) {
    crypto.getRandomValues(out.subarray(off, Math.min(out.length, off + 65536)));
  }
  for (let b = 0; b < count; b++) {
    const d = f32ToF16Bits(0.001 + (b % 97) * 1e-5);
    out[b * blockBytes] = d & 0xff;
    out[b * blockBytes + 1] = d >> 8;
  }
  return out;
}

const k = openKernels({ threads: 1 });
const rowsQ4 = Math.floor(MATRIX_BYTES / (NB * 18));
const rowsQ8 = Math.floor(MATRIX_BYTES / (NB * 34));
const wQ4 = randomBlocks(rowsQ4 * NB, 18);
const wQ8 = randomBlocks(rowsQ8 * NB, 34);
const xf = new Float32Array(COLS).map(() => Math.random() * 2 - 1);
const x = k.quantizeQ8_0(xf);
const yQ4 = new Float32Array(rowsQ4);
const yQ8 = new Float32Array(rowsQ8);

// Correctness gate: identical across thread counts, close to the reference.
for (
  const [type, w, rows, y] of [["q4_0", wQ4, rowsQ4, yQ4], ["q8_0", wQ8, rowsQ8, yQ8]] as const
) {
  k.configure({ threads: 1 });
  const one = Float32Array.from(k.matvec(type, w, rows, COLS, x, y));
  for (const t of THREADS) {
    k.configure({ threads: t });
    const many = k.matvec(type, w, rows, COLS, x, y);
    if (!many.every((v, i) => Object.is(v, one[i]))) {
      throw new Error(`gate: ${type} matvec differs between 1 and ${t} threads`);
    }
  }
  const sampleRows = 64;
  const rowBytes = NB * (type === "q4_0" ? 18 : 34);
  const sample = w.subarray(0, sampleRows * rowBytes);
  const ref = type === "q4_0"
    ? matvecQ4_0(sample, sampleRows, COLS, x)
    : matvecQ8_0(sample, sampleRows, COLS, x);
  for (let r = 0; r < sampleRows; r++) {
    if (Math.abs(ref[r] - one[r]) > 1e-3 * Math.max(1, Math.abs(ref[r]))) {
      throw new Error(`gate: ${type} row ${r}: ${one[r]} vs reference ${ref[r]}`);
    }
  }
}

type Kind = "stream" | "q4_0" | "q8_0";
interface Config {
  kind: Kind;
  threads: number;
}
const configs: Config[] = [];
for (const threads of THREADS) {
  for (const kind of ["stream", "q4_0", "q8_0"] as const) configs.push({ kind, threads });
}

function bytesOf(kind: Kind): number {
  return kind === "q4_0" ? wQ4.length : kind === "q8_0" ? wQ8.length : wQ8.length;
}

let sink = 0n;
function runOnce(kind: Kind): void {
  if (kind === "q4_0") k.matvec("q4_0", wQ4, rowsQ4, COLS, x, yQ4);
  else if (kind === "q8_0") k.matvec("q8_0", wQ8, rowsQ8, COLS, x, yQ8);
  else sink ^= k.streamRead(wQ8);
}

/** GB/s of one repetition: repeat for at least MIN_MS. */
function measure(c: Config): number {
  k.configure({ threads: c.threads });
  runOnce(c.kind);
  let iters = 0;
  const start = performance.now();
  let now = start;
  while (now - start < MIN_MS) {
    runOnce(c.kind);
    iters++;
    now = performance.now();
  }
  return (bytesOf(c.kind) * iters) / ((now - start) / 1000) / 1e9;
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

const samples = new Map<string, number[]>();
const key = (c: Config) => `${c.kind}@${c.threads}`;
for (const c of configs) measure(c); // warmup
for (let rep = 0; rep < REPS; rep++) {
  for (const c of shuffle([...configs])) {
    const list = samples.get(key(c)) ?? [];
    list.push(measure(c));
    samples.set(key(c), list);
  }
}

function stats(v: number[]) {
  const s = [...v].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], max: s[s.length - 1] };
}

const rows = configs.map((c) => {
  const st = stats(samples.get(key(c))!);
  const stream = stats(samples.get(key({ kind: "stream", threads: c.threads }))!).median;
  return {
    kernel: c.kind,
    threads: c.threads,
    bytes: bytesOf(c.kind),
    ...st,
    ofStream: st.median / stream,
  };
});

const meta = {
  cpu: k.cpuModel,
  variant: k.variant,
  library: k.buildInfo,
  deno: Deno.version.deno,
  cols: COLS,
  rows: { q4_0: rowsQ4, q8_0: rowsQ8 },
  reps: REPS,
  minMs: MIN_MS,
  sink: String(sink & 1n),
};
if (values.json) {
  console.log(JSON.stringify({ meta, results: rows }, null, 2));
} else {
  console.log(
    `matvec benchmark: ${meta.cpu}, ${meta.variant} kernels, ${meta.library}\n` +
      `Q4_0 ${rowsQ4}x${COLS} (${(wQ4.length / 1e6).toFixed(1)} MB), ` +
      `Q8_0 ${rowsQ8}x${COLS} (${(wQ8.length / 1e6).toFixed(1)} MB); ` +
      `${REPS} reps of >= ${MIN_MS} ms, shuffled; median [min, max]\n`,
  );
  console.log("kernel   threads   GB/s median [min, max]      share of stream read");
  for (const r of rows) {
    const name = r.kernel === "stream" ? "stream" : `${r.kernel} mv`;
    console.log(
      `${name.padEnd(9)}${String(r.threads).padStart(7)}   ` +
        `${r.median.toFixed(2).padStart(6)} [${r.min.toFixed(2)}, ${r.max.toFixed(2)}]`.padEnd(28) +
        `${(100 * r.ofStream).toFixed(1).padStart(6)}%`,
    );
  }
}
k.shutdown();
