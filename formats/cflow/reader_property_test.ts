// Property test (fast-check, fixed seed): edits of small valid .cflow and
// .vflow files (dense, tied and MoE), with the header and section-table
// checksums recomputed after the edit most of the time so that the edits
// reach the deeper checks, either read into a file whose sections and
// blocks lie inside it and whose every entry (and every expert) can be
// untiled or read back, or throw a FormatError naming t.cflow, a field and an
// offset inside the file. Shared with `deno task fuzz`.

import assert from "node:assert/strict";
import { assertTarget, tiledTarget } from "../../tests/fuzz/properties.ts";
import { randomModelBytes } from "../../tests/util/tiled_file.ts";
import { bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { vflowHeaderCrc } from "./container.ts";
import { readTiledFile } from "./reader.ts";
import { matrixTileBytes, TILE_COLS, TILE_ROWS, TILE_TYPE, tileBytes } from "./tile.ts";

Deno.test("readTiledFile: any mutated file reads back entirely or gives a FormatError", async () => {
  await assertTarget(tiledTarget, 500);
});

/** A small dense .vflow file (Q4_0, 2 layers). */
function smallVflow(): Promise<Uint8Array> {
  return randomModelBytes({
    hidden: 40,
    layers: 2,
    heads: 2,
    kvHeads: 1,
    headDim: 20,
    ffn: 70,
    vocab: 130,
    seed: 1,
  }, "vflow");
}

// Found by the property: matrixTileBytes looped over every tile of the shape an entry
// declares, so a u32 row count of 3312428706 in a block entry took ~28 s (2^32 x 2^32:
// ~10^11 iterations) before the size check refused it. It is a closed form now.
Deno.test("readTiledFile refuses a huge entry shape at once (no loop over its tiles)", async () => {
  const bytes = await smallVflow();
  new DataView(bytes.buffer).setUint32(410, 3312428706, true);
  const t0 = performance.now();
  assert.throws(() => readTiledFile(bytesSource("t.vflow", bytes)), FormatError);
  assert.ok(performance.now() - t0 < 1000, `${performance.now() - t0} ms`);
  for (const type of [TILE_TYPE.F32, TILE_TYPE.Q4_0, TILE_TYPE.Q8_0]) {
    for (const rows of [0, 1, 127, 128, 129, 300]) {
      for (const cols of [0, 1, 31, 255, 256, 257, 513]) {
        let loop = 0;
        for (let r = 0; r < rows; r += TILE_ROWS) {
          for (let c = 0; c < cols; c += TILE_COLS) {
            loop += tileBytes(type, Math.min(TILE_ROWS, rows - r), Math.min(TILE_COLS, cols - c));
          }
        }
        assert.equal(matrixTileBytes(type, rows, cols), loop, `${type} ${rows}x${cols}`);
      }
    }
  }
  assert.ok(matrixTileBytes(TILE_TYPE.Q4_0, 2 ** 32 - 1, 2 ** 32 - 1) > 2 ** 60);
});

// Found by the property: a .vflow section_table_offset past the end of the file was read
// (for the section count) before it was checked, so the FormatError named the offset it
// pointed at, past the end, instead of the header field.
Deno.test("readTiledFile reports a .vflow section table offset past the end at the header field", async () => {
  const bytes = await smallVflow();
  const v = new DataView(bytes.buffer);
  v.setBigUint64(56, BigInt(bytes.length + 640), true);
  v.setUint32(52, vflowHeaderCrc(bytes.subarray(0, 64)), true);
  assert.throws(() => readTiledFile(bytesSource("t.vflow", bytes)), (e: unknown) => {
    assert.ok(e instanceof FormatError, String(e));
    assert.equal(e.field, "section_table_offset");
    assert.equal(e.offset, 56);
    return true;
  });
});
