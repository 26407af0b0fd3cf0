import assert from "node:assert/strict";
import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import { allocAligned, mapFile } from "./memory.ts";
import { STATUS } from "./symbols.ts";

/** The WebAssembly kernels (CFLOW_KERNELS=wasm, or no FFI) copy files instead of mapping them. */
const WASM = openKernels().backend === "wasm";

Deno.test("a mapped file shows its bytes without copying, takes hints, and closes", () => {
  const dir = Deno.makeTempDirSync({ prefix: "cflow-map-" });
  try {
    const path = `${dir}/data.bin`;
    const data = new Uint8Array(3 * 4096 + 123);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
    Deno.writeFileSync(path, data);
    const file = mapFile(path);
    assert.equal(file.size, data.length);
    assert.deepEqual(file.bytes, data);
    file.advise("willneed");
    file.advise("sequential", 100, 5000);
    file.advise("dontneed", 4096, 4096);
    assert.deepEqual(file.bytes, data, "dropped pages are read again from the file");
    assert.deepEqual(file.read(4000, 200), data.subarray(4000, 4200));
    assert.deepEqual(file.read(0, data.length), data);
    assert.equal(file.read(data.length, 0).length, 0);
    assert.throws(() => file.read(data.length - 1, 2), RangeError);
    assert.throws(() => file.read(0, 10, new Uint8Array(9)), RangeError);
    assert.throws(() => file.advise("willneed", 0, data.length + 1), RangeError);
    assert.throws(() => file.advise("willneed", -1, 1), RangeError);
    // deno-lint-ignore no-explicit-any
    assert.throws(() => file.advise("free" as any), RangeError);
    const view = file.bytes;
    file.close();
    assert.equal(file.closed, true);
    // Wasm views are views of linear memory: they cannot be detached one by one.
    if (!WASM) assert.equal(view.length, 0, "views are detached after close");
    assert.equal(file.bytes.length, 0);
    file.close(); // closing twice is a no-op
    assert.throws(
      () => file.advise("willneed"),
      (e: unknown) => e instanceof KernelError && e.status === STATUS.HANDLE,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name: "a mapped file truncated or rewritten by someone else is refused, not read",
  ignore: WASM, // a private copy: nothing can change behind it (wasm_backend_test.ts)
}, () => {
  const dir = Deno.makeTempDirSync({ prefix: "cflow-map-changed-" });
  try {
    const path = `${dir}/model.bin`;
    const data = new Uint8Array(5 * 4096).fill(7);
    Deno.writeFileSync(path, data);
    using file = mapFile(path);
    assert.deepEqual(file.read(4 * 4096, 16), data.subarray(0, 16));
    // Without the check, reading the last page of a truncated mapping raises
    // SIGBUS and kills the process.
    Deno.truncateSync(path, 4096);
    const changed = (e: unknown) =>
      e instanceof KernelError && e.status === STATUS.CHANGED && e.message.includes(path);
    assert.throws(() => file.read(4 * 4096, 16), changed);
    assert.throws(() => file.read(0, 16), changed, "any read, not only past the new end");
    Deno.writeFileSync(path, data); // same size again, new contents and mtime
    assert.throws(() => file.read(0, 16), changed);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("an empty file maps to an empty view", () => {
  const path = Deno.makeTempFileSync({ prefix: "cflow-empty-" });
  try {
    using file = mapFile(path);
    assert.equal(file.size, 0);
    assert.equal(file.bytes.length, 0);
  } finally {
    Deno.removeSync(path);
  }
});

Deno.test("mapping errors name the path and the errno", () => {
  const missing = `${Deno.makeTempDirSync()}/missing.gguf`;
  assert.throws(
    () => mapFile(missing),
    (e: unknown) =>
      e instanceof KernelError && e.errno === 2 && e.message.includes(missing) &&
      e.message.includes("ENOENT"),
  );
  const dir = Deno.makeTempDirSync();
  assert.throws(
    () => mapFile(dir),
    (e: unknown) => e instanceof KernelError && e.errno === 22,
  );
  assert.throws(() => mapFile(""), TypeError);
  assert.throws(() => mapFile("a\0b"), RangeError);
});

Deno.test("aligned allocations are zeroed, writable and released", () => {
  for (const alignment of [1, 64, 4096, 1 << 21]) {
    using buf = allocAligned(10_000, alignment);
    assert.equal(buf.size, 10_000);
    assert.equal(buf.alignment, alignment);
    assert.ok(buf.bytes.every((b) => b === 0));
    buf.bytes.fill(0xab);
    buf.advise("dontneed");
    assert.equal(buf.bytes[9_999], 0, "dontneed on anonymous memory reads back zeros");
  }
  assert.throws(() => allocAligned(0), RangeError);
  assert.throws(() => allocAligned(100, 3), RangeError);
  assert.throws(
    () => allocAligned(100, 1 << 22),
    (e: unknown) => e instanceof KernelError && e.status === STATUS.ALIGNMENT,
  );
});

Deno.test({
  name: "under an FFI grant scoped to the library, reads work and views are refused clearly",
  ignore: WASM, // about the native library's FFI grant
}, async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-scoped-" });
  try {
    const path = `${dir}/d.bin`;
    await Deno.writeFile(path, new Uint8Array([1, 2, 3, 4, 5]));
    const script = `${dir}/probe.ts`;
    const memory = new URL("./memory.ts", import.meta.url).href;
    const kernels = new URL("./open_kernels.ts", import.meta.url).href;
    await Deno.writeFile(
      script,
      new TextEncoder().encode(`
        import { mapFile } from "${memory}";
        import { openKernels } from "${kernels}";
        const k = openKernels({ threads: 1 });
        const f = mapFile(${JSON.stringify(path)});
        console.log(JSON.stringify(Array.from(f.read(1, 3))));
        try { f.bytes; console.log("view"); } catch (e) { console.log((e as Error).name); }
        f.close();
      `),
    );
    const lib = k().libraryPath;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--no-prompt",
        `--allow-ffi=${lib}`,
        `--allow-read=${dir},${lib},${new URL("..", import.meta.url).pathname}`,
        script,
      ],
      env: { CFLOW_KERNELS: "" },
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim().split("\n");
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.deepEqual(text, ["[2,3,4]", "NotCapable"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function k() {
  return openKernels();
}
