import assert from "node:assert/strict";
import { allocAligned, openKernels } from "../ffi/mod.ts";
import { memoryUsage } from "./memory_usage.ts";

/** Whether the kernel reports smaps_rollup (Linux 4.14+); the test is ignored otherwise. */
const HAVE_ROLLUP = (() => {
  try {
    return Deno.statSync("/proc/self/smaps_rollup").isFile;
  } catch {
    return false;
  }
})();
if (!HAVE_ROLLUP) console.log("ignored: no /proc/self/smaps_rollup on this machine");

Deno.test({
  name: "memory usage: PSS within RSS, split into file and anonymous pages; touching 64 MiB shows",
  ignore: !HAVE_ROLLUP,
}, () => {
  openKernels();
  const before = memoryUsage();
  assert.ok(before !== undefined, "smaps_rollup exists but memoryUsage() read nothing");
  assert.ok(before.rss > 0 && before.pss > 0 && before.pss <= before.rss + 4096);
  assert.ok(before.pssFile + before.pssAnon <= before.pss + 65536);
  using a = allocAligned(64 << 20, 4096);
  for (let o = 0; o < a.size; o += 4096) a.write(o, new Uint8Array([1]));
  const after = memoryUsage()!;
  assert.ok(after.pssAnon - before.pssAnon >= 60 << 20, `${after.pssAnon - before.pssAnon}`);
});
