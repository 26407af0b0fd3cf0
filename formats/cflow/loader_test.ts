import assert from "node:assert/strict";
import { openKernels } from "../../ffi/mod.ts";
import { randomModel } from "../../tests/util/random_model.ts";
import { FormatError } from "../errors.ts";
import { MATRIX } from "./container.ts";
import { loadTiledFile } from "./loader.ts";
import { findEntry } from "./reader.ts";
import { memorySink, writeModel } from "./writer.ts";

openKernels({ threads: 1 });

Deno.test("a loaded file hands out entry and expert bytes that match the file", async () => {
  const model = randomModel({
    hidden: 64,
    layers: 2,
    heads: 2,
    kvHeads: 1,
    headDim: 32,
    ffn: 80,
    vocab: 50,
    experts: 3,
    topK: 1,
    expertFfn: 40,
  });
  const sink = memorySink();
  await writeModel(model, "cflow", sink);
  const bytes = sink.bytes();
  const path = await Deno.makeTempFile({ suffix: ".cflow" });
  try {
    await Deno.writeFile(path, bytes);
    using loaded = loadTiledFile(path, { verifyChecksums: true });
    assert.equal(loaded.zeroCopy, Deno.permissions.querySync({ name: "ffi" }).state === "granted");
    const q = findEntry(loaded.file, 1, MATRIX.Q)!;
    assert.deepEqual(loaded.entryBytes(q), bytes.subarray(q.offset, q.offset + q.length));
    const span = loaded.file.experts.get(1)!.spans[2];
    assert.deepEqual(
      loaded.expertBytes(1, 2),
      bytes.subarray(span.offset, span.offset + span.length),
    );
    assert.throws(() => loaded.expertBytes(1, 3), RangeError);
    assert.throws(() => loaded.bytes(bytes.length - 1, 2), RangeError);
    const bad = bytes.slice();
    bad[90] ^= 1; // inside the section table: its CRC catches it
    await Deno.writeFile(path, bad);
    assert.throws(() => loadTiledFile(path), FormatError);
  } finally {
    await Deno.remove(path);
  }
});
