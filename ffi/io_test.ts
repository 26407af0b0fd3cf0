import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { createStage, openDirect } from "./io.ts";
import { openKernels } from "./open_kernels.ts";
import { STATUS } from "./symbols.ts";

/** Direct reads are native only: the WebAssembly kernels answer UNSUPPORTED. */
const WASM = openKernels().backend === "wasm";

/**
 * A disk-backed folder for test files: the repository's cache/ (ignored by
 * git), since /tmp may be tmpfs where O_DIRECT is not used.
 */
function diskTempDir(prefix: string): string {
  const cache = decodeURIComponent(new URL("../cache/", import.meta.url).pathname);
  Deno.mkdirSync(cache, { recursive: true });
  return Deno.makeTempDirSync({ dir: cache, prefix });
}

function randomBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function withFile(data: Uint8Array, body: (path: string, dir: string) => void, dir?: string): void {
  const folder = dir ?? diskTempDir("cflow-io-");
  const tempDir = dir === undefined
    ? folder
    : Deno.makeTempDirSync({ dir: folder, prefix: "cflow-io-" });
  try {
    const path = `${tempDir}/experts.bin`;
    Deno.writeFileSync(path, data);
    body(path, tempDir);
  } finally {
    Deno.removeSync(tempDir, { recursive: true });
  }
}

const status = (s: number) => (e: unknown) => e instanceof KernelError && e.status === s;

Deno.test({
  name: "direct reads at unaligned offsets and lengths give the file's bytes exactly",
  ignore: WASM,
}, () => {
  const data = randomBytes(3 * 1024 * 1024 + 777, 1);
  withFile(data, (path) => {
    using file = openDirect(path);
    assert.equal(file.size, data.length);
    console.log(`disk: direct=${file.direct} alignment=${file.alignment}`);
    if (file.direct) {
      assert.ok(file.alignment >= 512 && (file.alignment & (file.alignment - 1)) === 0);
    }
    using stage = createStage(file, 1 << 20, 4);
    assert.ok(stage.slotBytes >= 1 << 20 && stage.slotBytes % file.alignment === 0);
    const ranges: [number, number][] = [
      [0, 1],
      [1, 511],
      [513, 4095],
      [4095, 2],
      [12345, 1_000_000],
      [data.length - 1, 1],
      [data.length - 100_001, 100_001],
      [2 * 1024 * 1024 + 3, (1 << 20) - 4096],
    ];
    let expert = 0;
    for (const [offset, length] of ranges) {
      const { slot, hit } = stage.fetch(0, expert++, offset, length);
      assert.equal(hit, false);
      stage.wait(slot);
      assert.deepEqual(stage.read(slot), data.subarray(offset, offset + length));
      assert.deepEqual(
        stage.read(slot, length - 1, 1),
        data.subarray(offset + length - 1, offset + length),
      );
      const into = new Uint8Array(length + 10);
      assert.deepEqual(stage.read(slot, 0, length, into), data.subarray(offset, offset + length));
      stage.release(slot);
    }
    const stats = stage.stats();
    assert.equal(stats.misses, ranges.length);
    assert.equal(stats.hits, 0);
    const asked = ranges.reduce((sum, [, n]) => sum + n, 0);
    assert.ok(stats.bytesRead >= asked, `${stats.bytesRead} bytes read for ${asked} asked`);
  });
});

Deno.test({ name: "the stage caches experts least recently used first out", ignore: WASM }, () => {
  const data = randomBytes(1 << 20, 2);
  withFile(data, (path) => {
    using file = openDirect(path);
    using stage = createStage(file, 100_000, 3);
    const at = (e: number): [number, number] => [e * 100_003 + 7, 90_000 + e];
    const get = (e: number) => {
      const [off, len] = at(e);
      const r = stage.fetch(1, e, off, len);
      stage.wait(r.slot);
      assert.deepEqual(stage.read(r.slot), data.subarray(off, off + len), `expert ${e}`);
      stage.release(r.slot);
      return r;
    };
    const a = get(0);
    const b = get(1);
    get(2);
    assert.equal(get(0).hit, true); // 0 is now the most recently used; 1 the least
    assert.equal(get(0).slot, a.slot);
    const d = get(3);
    assert.equal(d.hit, false);
    assert.equal(d.slot, b.slot, "expert 1's slot is reused");
    assert.equal(get(2).hit, true);
    assert.equal(get(0).hit, true);
    const again = get(1); // evicted: read again (into 3's slot, the least recent now)
    assert.equal(again.hit, false);
    assert.equal(again.slot, d.slot);
    assert.deepEqual(stage.stats().hits, 4);
    assert.deepEqual(stage.stats().misses, 5);
    stage.resetStats();
    assert.deepEqual(stage.stats(), { hits: 0, misses: 0, bytesRead: 0, stallNs: 0 });
  });
});

Deno.test({ name: "every slot pinned: a fetch fails with LIMIT, not a hang", ignore: WASM }, () => {
  const data = randomBytes(256 * 1024, 3);
  withFile(data, (path) => {
    using file = openDirect(path);
    using stage = createStage(file, 16384, 2);
    const x = stage.fetch(0, 0, 0, 8000);
    const y = stage.fetch(0, 1, 10_000, 8000);
    assert.throws(() => stage.fetch(0, 2, 20_000, 8000), status(STATUS.LIMIT));
    // A hit still works while everything is pinned.
    const x2 = stage.fetch(0, 0, 0, 8000);
    assert.equal(x2.slot, x.slot);
    assert.equal(x2.hit, true);
    stage.wait(x.slot);
    stage.release(x.slot);
    assert.throws(() => stage.fetch(0, 2, 20_000, 8000), status(STATUS.LIMIT), "still pinned once");
    stage.release(x.slot);
    const z = stage.fetch(0, 2, 20_000, 8000);
    assert.equal(z.slot, x.slot);
    stage.wait(z.slot);
    assert.deepEqual(stage.read(z.slot, 0, 8000), data.subarray(20_000, 28_000));
    stage.wait(y.slot);
    // The same key with another range is a caller error.
    assert.throws(() => stage.fetch(0, 1, 10_001, 8000), status(STATUS.INVALID_ARG));
    // Closing releases what this object still holds.
  });
});

Deno.test({ name: "arguments are checked before crossing", ignore: WASM }, () => {
  withFile(randomBytes(10_000, 4), (path) => {
    using file = openDirect(path);
    assert.throws(() => createStage(file, 0, 1), RangeError);
    assert.throws(() => createStage(file, 4096, 0), RangeError);
    assert.throws(() => createStage(file, 4096, 1.5), RangeError);
    assert.throws(() => createStage(file, 2 ** 60, 1), RangeError);
    using stage = createStage(file, 4096, 2);
    assert.throws(() => stage.fetch(-1, 0, 0, 1), RangeError);
    assert.throws(() => stage.fetch(0, 2 ** 32, 0, 1), RangeError);
    assert.throws(() => stage.fetch(0, 0, 0.5, 1), RangeError);
    assert.throws(() => stage.fetch(0, 0, 0, 0), RangeError);
    assert.throws(() => stage.fetch(0, 0, 9_999, 2), RangeError);
    assert.throws(() => stage.fetch(0, 0, 0, stage.slotBytes + 1), RangeError);
    // Within the slot but not with the alignment slack.
    if (file.alignment > 1) assert.throws(() => stage.fetch(0, 0, 1, stage.slotBytes), RangeError);
    assert.throws(() => stage.wait(0), RangeError, "not held");
    assert.throws(() => stage.release(2), RangeError);
    const { slot } = stage.fetch(0, 0, 100, 50);
    stage.wait(slot);
    assert.throws(() => stage.read(slot, 40, 11), RangeError);
    assert.throws(() => stage.read(slot, 0, 50, new Uint8Array(49)), RangeError);
    assert.throws(() => openDirect(""), TypeError);
    assert.throws(() => openDirect("a\0b"), RangeError);
    assert.throws(
      () => openDirect("/nonexistent/cflow/x"),
      (e: unknown) => e instanceof KernelError && e.errno === 2,
    );
  });
});

/** Whether this machine has a /dev/shm tmpfs folder (tests that need one are ignored otherwise). */
const HAVE_SHM = (() => {
  try {
    return Deno.statSync("/dev/shm").isDirectory;
  } catch {
    return false;
  }
})();
if (!HAVE_SHM) {
  console.log(
    "ignored where noted: /dev/shm cannot be read (absent, or Deno refuses /dev paths without --allow-all, as under the suite's scoped flags)",
  );
}

Deno.test({
  name: "a tmpfs file is read through the page cache, same bytes",
  ignore: WASM || !HAVE_SHM,
}, () => {
  const data = randomBytes(200_000, 5);
  withFile(data, (path) => {
    const warnings: string[] = [];
    using file = openDirect(path, { warn: (m) => warnings.push(m) });
    console.log(`/dev/shm: direct=${file.direct} alignment=${file.alignment} (${file.reason})`);
    assert.equal(file.direct, false);
    assert.equal(file.alignment, 1);
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0],
      /^cflow: O_DIRECT is not available for .*experts\.bin \(.+\); reading through the page cache$/,
    );
    using stage = createStage(file, 50_000, 2);
    const { slot } = stage.fetch(0, 0, 12_345, 49_999);
    stage.wait(slot);
    assert.deepEqual(stage.read(slot), data.subarray(12_345, 12_345 + 49_999));
    assert.equal(stage.stats().bytesRead, 49_999, "buffered reads read exactly the range");
    stage.release(slot);
  }, "/dev/shm");
});

Deno.test({
  name: "a file truncated after open fails the read clearly; the slot is reusable",
  ignore: WASM,
}, () => {
  const data = randomBytes(1 << 20, 6);
  withFile(data, (path) => {
    using file = openDirect(path);
    using stage = createStage(file, 300_000, 1);
    const first = stage.fetch(2, 3, 0, 100_000);
    stage.wait(first.slot);
    stage.release(first.slot);
    Deno.truncateSync(path, 4096);
    const { slot } = stage.fetch(2, 4, 500_000, 200_000);
    assert.throws(
      () => stage.wait(slot),
      (e: unknown) =>
        e instanceof KernelError && (e.status === STATUS.CHANGED || e.status === STATUS.RANGE) &&
        e.message.includes(path) && e.message.includes("expert 4"),
    );
    stage.release(slot);
    // Not cached after the failure: the same key is read again, into the same slot.
    const again = stage.fetch(2, 4, 500_000, 200_000);
    assert.equal(again.hit, false);
    assert.equal(again.slot, slot);
    assert.throws(() => stage.wait(again.slot), status(STATUS.CHANGED));
    stage.release(again.slot);
    // The file object still knows its size at open; a fresh open sees the new one.
    stage.close();
    file.close();
    using fresh = openDirect(path);
    assert.equal(fresh.size, 4096);
  });
});

Deno.test({ name: "many reads in flight at once; closing waits for them", ignore: WASM }, () => {
  const data = randomBytes(8 << 20, 7);
  withFile(data, (path) => {
    using file = openDirect(path);
    // The file cannot close under a stage.
    const stage = createStage(file, 600_000, 48);
    assert.throws(() => file.close(), status(STATUS.BUSY));
    const spans: [number, number][] = [];
    const slots: number[] = [];
    for (let e = 0; e < 48; e++) {
      const off = (e * 170_003 + 11) % (data.length - 600_000);
      const len = 400_000 + e * 997;
      spans.push([off, len]);
      slots.push(stage.fetch(0, e, off, len).slot);
    }
    assert.equal(new Set(slots).size, 48);
    // Waited for in reverse order: later reads may finish first.
    for (let e = 47; e >= 0; e--) {
      const [off, len] = spans[e];
      stage.wait(slots[e]);
      assert.deepEqual(stage.read(slots[e]), data.subarray(off, off + len), `expert ${e}`);
      stage.release(slots[e]);
    }
    // Destroying a stage with reads in flight (some still pinned) waits for them.
    for (let e = 0; e < 48; e++) stage.fetch(1, e, e * 100_000, 500_000);
    stage.close();
    assert.equal(stage.closed, true);
    assert.throws(() => stage.fetch(0, 0, 0, 1), status(STATUS.HANDLE));
    stage.close(); // twice is a no-op
    file.close();
    assert.equal(file.closed, true);
  });
});

Deno.test(
  { name: "reads survive cf_shutdown: the readers restart on demand", ignore: WASM },
  () => {
    const data = randomBytes(2 << 20, 8);
    withFile(data, (path) => {
      using file = openDirect(path);
      using stage = createStage(file, 1 << 20, 4);
      const k = openKernels();
      for (let round = 0; round < 3; round++) {
        const { slot } = stage.fetch(round, 0, round * 65_537, 900_000);
        k.shutdown(); // stops the kernel pool, and the readers once their queue is empty
        stage.wait(slot);
        assert.deepEqual(stage.read(slot), data.subarray(round * 65_537, round * 65_537 + 900_000));
        stage.release(slot);
        k.configure();
      }
    });
  },
);
