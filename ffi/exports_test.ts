/**
 * What the library exports (kernels-zig/exports.map): its `cf_*` ABI, and of the compiler
 * runtime Zig links in only the names glibc defines too (`expf`, `memcpy`, ...), so that the
 * library's calls to them keep binding to the process's glibc (the native softmax depends on
 * glibc's expf: ffi/wasm_backend_test.ts). The compiler_rt helpers (`__addsf3`, `__divti3`,
 * `__atomic_*`, ...) stay local: nothing else in the process can bind to them.
 */
import assert from "node:assert/strict";
import { localLibraryPath } from "./loader.ts";
import { symbols } from "./symbols.ts";

Deno.test("the kernel library exports its cf_* table and no compiler_rt helper", () => {
  Deno.dlopen(localLibraryPath(), symbols).close();
  // (That expf still binds to glibc's is checked by ffi/wasm_backend_test.ts, whose softmax would
  // differ in the last bit otherwise; dlsym here would find glibc's through the library's own
  // dependencies either way.)
  for (const helper of ["__addsf3", "__divti3", "__atomic_load_16", "__truncsfhf2"]) {
    assert.throws(
      () => Deno.dlopen(localLibraryPath(), { [helper]: { parameters: [], result: "void" } }),
      /undefined symbol|symbol not found|Failed to register symbol/i,
      `${helper} is exported`,
    );
  }
});
