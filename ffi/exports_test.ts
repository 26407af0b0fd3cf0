/**
 * The library exports its `cf_*` ABI and nothing else (kernels-zig/exports.map): the compiler
 * runtime helpers Zig links in (`__addsf3`, `__atomic_*`, `memcpy` variants, ...) stay local, so
 * they can neither interpose on nor be bound by another object in the process.
 */
import assert from "node:assert/strict";
import { localLibraryPath } from "./loader.ts";
import { symbols } from "./symbols.ts";

Deno.test("the kernel library exports every cf_* symbol of the table, and no compiler_rt helper", () => {
  const lib = Deno.dlopen(localLibraryPath(), symbols);
  lib.close();
  for (const helper of ["__addsf3", "__divti3", "__atomic_load_16", "__truncsfhf2"]) {
    assert.throws(
      () => Deno.dlopen(localLibraryPath(), { [helper]: { parameters: [], result: "void" } }),
      /undefined symbol|symbol not found|Failed to register symbol/i,
      `${helper} is exported`,
    );
  }
});
