import assert from "node:assert/strict";
import { allocAligned, openKernels } from "../ffi/mod.ts";
import { memoryUsage } from "./memory_usage.ts";

/**
 * Whether the kernel library can read /proc/self/smaps_rollup (Linux 4.14+); the test is
 * ignored otherwise. (The library reads it natively: Deno itself refuses /proc/self paths
 * without --allow-all.)
 */
const HAVE_ROLLUP = memoryUsage() !== undefined;
if (!HAVE_ROLLUP) console.log("ignored: the kernel library reads no /proc/self/smaps_rollup here");

Deno.test({
  name: "memory usage: PSS within RSS, split into file and anonymous pages; touching 64 MiB shows",
  ignore: !HAVE_ROLLUP,
}, () => {
  openKernels();
  const before = memoryUsage();
  assert.ok(before !== undefined, "memoryUsage() read smaps_rollup once and then nothing");
  assert.ok(before.rss > 0 && before.pss > 0 && before.pss <= before.rss + 4096);
  assert.ok(before.pssFile + before.pssAnon <= before.pss + 65536);
  using a = allocAligned(64 << 20, 4096);
  for (let o = 0; o < a.size; o += 4096) a.write(o, new Uint8Array([1]));
  const after = memoryUsage()!;
  assert.ok(after.pssAnon - before.pssAnon >= 60 << 20, `${after.pssAnon - before.pssAnon}`);
});
