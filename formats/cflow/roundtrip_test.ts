import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { ENTRY_KIND, MATRIX, VOCAB_LAYER } from "./container.ts";
import { findEntry, readF32Entry, readTiledFile, untile } from "./reader.ts";
import { TILE_TYPE, tileBytes } from "./tile.ts";
import { memorySink, writeModel } from "./writer.ts";
import { randomModel, type StoredMatrix } from "../../tests/util/random_model.ts";
import type { ModelWeights, WeightItem } from "./model_weights.ts";

async function write(model: ModelWeights, format: "cflow" | "vflow"): Promise<Uint8Array> {
  const sink = memorySink();
  await writeModel(model, format, sink);
  return sink.bytes();
}

function stored(item: WeightItem): Uint8Array {
  return (item.matrix as StoredMatrix).bytes;
}

function checkRoundTrip(model: ModelWeights, bytes: Uint8Array, name: string): void {
  const src = bytesSource(name, bytes);
  const file = readTiledFile(src, { verifyChecksums: true });
  assert.equal(file.geometry.layers, model.layers.length);
  model.layers.forEach((lw, l) => {
    for (const item of [...lw.attention, ...lw.ffn]) {
      const e = findEntry(file, l, item.matrixId);
      assert.ok(e !== undefined, `${name}: layer ${l} matrix ${item.matrixId} missing`);
      if (item.matrix !== undefined) {
        assert.deepEqual(
          untile(src, file, e),
          stored(item),
          `${name}: layer ${l} matrix ${item.matrixId}`,
        );
      } else assert.deepEqual(readF32Entry(src, e), item.f32!());
    }
    if (lw.moe !== undefined) {
      const router = findEntry(file, l, MATRIX.ROUTER)!;
      assert.deepEqual(readF32Entry(src, router), lw.moe.router.f32!());
      const bank = file.experts.get(l)!;
      lw.moe.experts.forEach((ex, x) => {
        assert.deepEqual(untile(src, file, bank.gate, x), stored(ex.gate), `expert ${x} gate`);
        assert.deepEqual(untile(src, file, bank.up, x), stored(ex.up), `expert ${x} up`);
        assert.deepEqual(untile(src, file, bank.down, x), stored(ex.down), `expert ${x} down`);
      });
    }
  });
  for (const item of model.vocab) {
    const e = findEntry(file, VOCAB_LAYER, item.matrixId)!;
    if (item.matrix !== undefined) assert.deepEqual(untile(src, file, e), stored(item));
    else assert.deepEqual(readF32Entry(src, e), item.f32!());
  }
}

const SHAPES = [
  { hidden: 40, layers: 2, heads: 2, kvHeads: 1, headDim: 20, ffn: 70, vocab: 130 },
  { hidden: 300, layers: 3, heads: 5, kvHeads: 5, headDim: 60, ffn: 259, vocab: 257 },
  { hidden: 1, layers: 1, heads: 1, kvHeads: 1, headDim: 1, ffn: 1, vocab: 1 },
  { hidden: 513, layers: 1, heads: 3, kvHeads: 1, headDim: 171, ffn: 129, vocab: 129 },
];

for (const type of [TILE_TYPE.Q4_0, TILE_TYPE.Q8_0, TILE_TYPE.F32]) {
  for (const format of ["cflow", "vflow"] as const) {
    Deno.test(`${format} type ${type}: tile then untile returns every matrix exactly (odd shapes)`, async () => {
      for (const [i, shape] of SHAPES.entries()) {
        const model = randomModel({ ...shape, type, seed: i + 1, tied: i % 2 === 1 });
        checkRoundTrip(model, await write(model, format), `${format}-${i}`);
      }
    });
  }
}

for (const format of ["cflow", "vflow"] as const) {
  Deno.test(`${format}: MoE layers with delays keep every expert addressable`, async () => {
    const model = randomModel({
      hidden: 64,
      layers: 4,
      heads: 2,
      kvHeads: 1,
      headDim: 32,
      ffn: 96,
      vocab: 100,
      experts: 4,
      topK: 2,
      expertFfn: 48,
      denseDelay: 1,
      expertDelay: 2,
    });
    const bytes = await write(model, format);
    checkRoundTrip(model, bytes, format);
    const file = readTiledFile(bytesSource("moe", bytes));
    assert.equal(file.experts.size, 4);
    if (format === "cflow") {
      // DelayedMoESource: layer 3's dense FFN sits in section 2, its experts in section 1.
      const downOf3 = file.blocks.findIndex((b) =>
        b.entries.some((e) => e.layerId === 3 && e.matrixId === MATRIX.DOWN)
      );
      assert.equal(file.blocks[downOf3].layer, 2);
      const tableOf3 = file.blocks.findIndex((b) =>
        b.entries.some((e) => e.layerId === 3 && e.kind === ENTRY_KIND.EXPERT_TABLE)
      );
      assert.equal(file.blocks[tableOf3].layer, 1);
    }
  });
}

Deno.test("a full Q4_0 tile is 18,448 bytes", () => {
  assert.equal(tileBytes(TILE_TYPE.Q4_0, 128, 256), 18448);
  assert.equal(tileBytes(TILE_TYPE.Q8_0, 128, 256), 34832);
  assert.equal(tileBytes(TILE_TYPE.F32, 128, 256), 131088);
});

Deno.test("truncation at every byte of a small file is a FormatError", async () => {
  const model = randomModel({
    hidden: 8,
    layers: 1,
    heads: 1,
    kvHeads: 1,
    headDim: 8,
    ffn: 8,
    vocab: 4,
    seed: 3,
  });
  for (const format of ["cflow", "vflow"] as const) {
    const bytes = await write(model, format);
    for (let n = 0; n < bytes.length; n++) {
      assert.throws(
        () => readTiledFile(bytesSource(`t${n}`, bytes.subarray(0, n))),
        FormatError,
        `${format} prefix ${n}`,
      );
    }
  }
});

Deno.test("single-byte corruption anywhere is caught (checksums on)", async () => {
  const model = randomModel({
    hidden: 8,
    layers: 1,
    heads: 1,
    kvHeads: 1,
    headDim: 8,
    ffn: 8,
    vocab: 4,
    seed: 4,
  });
  for (const format of ["cflow", "vflow"] as const) {
    const bytes = await write(model, format);
    for (let i = 0; i < bytes.length; i++) {
      const bad = bytes.slice();
      bad[i] ^= 0x5a;
      try {
        readTiledFile(bytesSource("c", bad), { verifyChecksums: true });
        // Only bytes that no checksum or check covers may pass: padding between sections.
        assert.fail(`${format}: flipping byte ${i} went unnoticed`);
      } catch (e) {
        if (!(e instanceof FormatError)) throw e;
      }
    }
  }
});
