/**
 * Child process of tests/pack_evict_test.ts: packs one large one-matrix Q8_0
 * run at 1 thread with `evictSource`, and prints the process's peak RSS just
 * before and just after, as JSON. A fresh process, so that the peak is this
 * packing's and nothing else's.
 *
 * The source is an anonymous buffer (every page resident), or with an
 * argument the file at that path, mapped with no page of it mapped yet (as
 * model weights are after the load drops the file's pages): then packing
 * faults every page in, and a fault maps its neighbours too (fault-around,
 * large folios).
 *
 * @module
 */

import { openKernels } from "../../ffi/open_kernels.ts";
import { allocAligned, mapFile, type MemoryRegion } from "../../ffi/memory.ts";
import { packedBytes, packRun, RUN_KIND, type WeightRun } from "../../ffi/weight_run.ts";
import { PACK_EVICT_SOURCE } from "./pack_evict_source.ts";

const k = openKernels({ threads: 1 });
const { cols, rows, length } = PACK_EVICT_SOURCE;
const path = Deno.args[0];
let src: MemoryRegion;
if (path === undefined) {
  src = allocAligned(length, 4096);
  const chunk = new Uint8Array(1 << 20).fill(PACK_EVICT_SOURCE.fill);
  for (let o = 0; o < length; o += chunk.length) {
    src.write(o, chunk.subarray(0, Math.min(chunk.length, length - o)));
  }
} else {
  src = mapFile(path);
  if (src.size !== length) throw new RangeError(`${path}: ${src.size} bytes, not ${length}`);
  src.advise("dontneed");
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
src.close();
console.log(JSON.stringify({ before, after, length, size, backend: k.backend }));
