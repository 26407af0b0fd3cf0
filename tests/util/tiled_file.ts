/**
 * Small `.cflow`/`.vflow` files for the format tests and the fuzz targets: a random model written
 * to bytes, and the checksums recomputed after an edit so that the edit reaches the structural
 * checks instead of stopping at a CRC.
 *
 * @module
 */

import { headerCrc, vflowHeaderCrc } from "../../formats/cflow/container.ts";
import { crc32 } from "../../formats/cflow/crc32.ts";
import { memorySink, writeModel } from "../../formats/cflow/writer.ts";
import { randomModel, type RandomModelOptions } from "./random_model.ts";

/**
 * The bytes of {@link randomModel}(`o`) written as `format`.
 *
 * @example
 * ```ts ignore
 * import { randomModelBytes } from "./tiled_file.ts";
 * const bytes = await randomModelBytes({ hidden: 8, layers: 1, heads: 1, kvHeads: 1, headDim: 8, ffn: 8, vocab: 4 }, "cflow");
 * ```
 */
export async function randomModelBytes(
  o: RandomModelOptions,
  format: "cflow" | "vflow",
): Promise<Uint8Array> {
  const sink = memorySink();
  await writeModel(randomModel(o), format, sink);
  return sink.bytes();
}

/**
 * Recomputes the CRCs of an edited file in place: every section's (when `sections`), the
 * section table's and the header's. Fields that no longer point inside the file are left alone.
 *
 * @example
 * ```ts ignore
 * import { resealTiled } from "./tiled_file.ts";
 * bytes[12] = 0; // hidden = 0
 * resealTiled(bytes, true);
 * ```
 */
export function resealTiled(b: Uint8Array, sections: boolean): void {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const isV = b[0] === 0x56; // "VFLOW"
  const headerBytes = isV ? 64 : 88;
  if (b.length < headerBytes) return;
  const table = Number(v.getBigUint64(isV ? 56 : 80, true));
  if (Number.isSafeInteger(table) && table + 8 <= b.length) {
    const count = v.getUint32(table, true);
    const end = table + 8 + count * 32;
    if (end <= b.length) {
      if (sections) {
        for (let d = table + 8; d < end; d += 32) {
          const off = Number(v.getBigUint64(d + 8, true));
          const len = Number(v.getBigUint64(d + 16, true));
          if (off + len <= b.length) v.setUint32(d + 24, crc32(b.subarray(off, off + len)), true);
        }
      }
      v.setUint32(table + 4, crc32(b.subarray(table + 8, end)), true);
    }
  }
  if (isV) v.setUint32(52, vflowHeaderCrc(b.subarray(0, 64)), true);
  else v.setUint32(76, headerCrc(b.subarray(0, 88)), true);
}
