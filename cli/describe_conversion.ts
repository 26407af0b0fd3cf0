/**
 * What a `.cflow` conversion in the cache holds, for `cflow list`: its source file, `--quant` and
 * tile types, read from its header, metadata and block directories through a byte source that
 * reads only the ranges asked for (no tile data is read).
 *
 * @module
 */

import { ENTRY_KIND, readTiledFile, TILE_TYPE } from "../formats/cflow/mod.ts";
import type { ByteSource } from "../formats/byte_source.ts";
import { FormatError } from "../formats/errors.ts";

const TILE_NAMES = new Map<number, string>(
  Object.entries(TILE_TYPE).map(([k, v]) => [v as number, k.toLowerCase()]),
);

/**
 * A source over an open file that reads only the ranges asked for.
 *
 * @example
 * ```ts ignore
 * import { fileByteSource } from "./describe_conversion.ts";
 * using file = await Deno.open("model.cflow");
 * const src = fileByteSource("model.cflow", file, await file.seek(0, Deno.SeekMode.End));
 * console.log(src.read(0, 8).length); // 8
 * ```
 */
export function fileByteSource(name: string, file: Deno.FsFile, size: number): ByteSource {
  return {
    name,
    size,
    read(offset: number, length: number, field = "data"): Uint8Array {
      if (
        !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 ||
        length < 0 || offset > size || length > size - offset
      ) {
        throw new FormatError(
          name,
          field,
          Math.max(0, offset | 0),
          `needs ${length} bytes at ${offset} but the file ends at byte ${size} (truncated?)`,
        );
      }
      const out = new Uint8Array(length);
      file.seekSync(offset, Deno.SeekMode.Start);
      for (let got = 0; got < length;) {
        const n = file.readSync(out.subarray(got));
        if (n === null) throw new FormatError(name, field, offset + got, "the file ended early");
        got += n;
      }
      return out;
    },
  };
}

/**
 * The `source.file`, `quant` and tile types of a `.cflow` file, from its header, metadata
 * and block directories (no tile data is read).
 *
 * @example
 * ```ts ignore
 * import { describeConversion } from "./describe_conversion.ts";
 * console.log(await describeConversion("/c/converted/m-0123456789ab.auto.cflow"));
 * // { sourceFile: "m.gguf", quant: "auto", tileTypes: ["f32", "q4_0", "q8_0"] }
 * ```
 */
export async function describeConversion(
  path: string,
): Promise<{ sourceFile: string | null; quant: string | null; tileTypes: string[] }> {
  using file = await Deno.open(path, { read: true });
  // The size from a seek, not fstat: Deno checks fstat against where a link leads, which may be
  // outside what the process may read (every read of the source seeks to its own offset).
  const size = await file.seek(0, Deno.SeekMode.End);
  const tiled = readTiledFile(fileByteSource(path, file, size));
  const types = new Set<number>();
  for (const block of tiled.blocks) {
    for (const e of block.entries) {
      if (e.kind === ENTRY_KIND.TILES || e.kind === ENTRY_KIND.EXPERT_TILES) types.add(e.tileType);
    }
  }
  for (const bank of tiled.experts.values()) {
    for (const e of [bank.gate, bank.up, bank.down]) types.add(e.tileType);
  }
  const source = tiled.metadata.source as Record<string, unknown> | undefined;
  return {
    sourceFile: typeof source?.file === "string" ? source.file : null,
    quant: typeof tiled.metadata.quant === "string" ? tiled.metadata.quant : null,
    tileTypes: [...types].map((t) => TILE_NAMES.get(t) ?? `type${t}`).sort(),
  };
}
