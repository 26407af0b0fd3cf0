/**
 * Child process of tests/pack_evict_test.ts: packs one large one-matrix Q8_0
 * run at 1 thread with `evictSource`, and prints the process's peak RSS just
 * before and just after, as JSON. A fresh process, so that the peak is this
 * packing's and nothing else's.
 *
 * @module
 */

import { openKernels } from "../../ffi/kernels.ts";
import { allocAligned } from "../../ffi/memory.ts";
import { packedBytes, packRun, RUN_KIND, type WeightRun } from "../../ffi/plan.ts";

const k = openKernels({ threads: 1 });
const cols = 2048;
const stripes = 300;
const rows = 128 * stripes;
// A stripe is 128 rows cut into tiles of 256 columns: a 16-byte header and 8 Q8_0 blocks per row.
const stripeBytes = (cols / 256) * (16 + 128 * 8 * 34);
const length = stripes * stripeBytes;
using src = allocAligned(length, 4096);
// Every source page resident, as a mapped file's are once read.
const chunk = new Uint8Array(1 << 20).fill(0x11);
for (let o = 0; o < length; o += chunk.length) {
  src.write(o, chunk.subarray(0, Math.min(chunk.length, length - o)));
}
const run: WeightRun = {
  kind: RUN_KIND.TILES_Q8_0,
  region: src,
  offset: 0,
  length,
  cols,
  rows: [rows],
};
const size = packedBytes("q8_0", cols, [rows]);
using dst = allocAligned(size, 64);
const before = k.peakRss();
packRun(run, dst, 0, { evictSource: true });
const after = k.peakRss();
console.log(JSON.stringify({ before, after, length, size, backend: k.backend }));
