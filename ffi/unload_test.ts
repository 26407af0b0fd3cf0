/**
 * Closing the library while its worker pool is alive (Deno closes a library when the program
 * that opened it ends, as between test modules) must not crash: the library stops and joins its
 * workers when it is unloaded. Before that, a worker still spinning jumped into unmapped memory
 * and the process died of SIGSEGV. Run in a child process, so a crash fails this test only.
 */
import assert from "node:assert/strict";
import { localLibraryPath } from "./loader.ts";

Deno.test("opening, using the pool and closing the library 20 times does not crash", async () => {
  const lib = localLibraryPath();
  const symbolsUrl = new URL("./symbols.ts", import.meta.url).href;
  const script = `
    import { symbols } from ${JSON.stringify(symbolsUrl)};
    const buf = new Uint8Array(1 << 22).fill(7);
    for (let i = 0; i < 20; i++) {
      const lib = Deno.dlopen(${JSON.stringify(lib)}, symbols);
      if (lib.symbols.cf_init(0, 2, 0n) <= 0) throw new Error("cf_init failed");
      // A job on the pool, then close at once, while the workers still spin.
      const rc = lib.symbols.cf_stream_read(buf, BigInt(buf.length), new BigUint64Array(1));
      if (rc !== 0) throw new Error("cf_stream_read: " + rc);
      lib.close();
      await new Promise((r) => setTimeout(r, 2));
    }
    console.log("survived");
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.signal, null, `the child died of ${out.signal}: ${stderr}`);
  assert.equal(out.code, 0, stderr);
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "survived");
});
