/**
 * The reader's checks: each failure is a {@link FormatError} naming the
 * file, the field and the byte offset. Internal to the `.cflow`/`.vflow`
 * reader.
 *
 * @module
 */

import type { ByteSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { CFLOW_VERSION_MIN } from "./container.ts";
import { maxTileType } from "./tile.ts";

/** Checks of one file: `fail` throws a FormatError naming the file, the field and the offset. */
export class Checker {
  /** The highest tile type the file's version allows (set once the version is read). */
  maxTileType: number = maxTileType(CFLOW_VERSION_MIN);
  constructor(readonly src: ByteSource) {}
  fail(field: string, offset: number, detail: string): never {
    throw new FormatError(this.src.name, field, offset, detail);
  }
  check(ok: boolean, field: string, offset: number, detail: string): void {
    if (!ok) this.fail(field, offset, detail);
  }
  range(value: number, lo: number, hi: number, field: string, offset: number): void {
    if (!(value >= lo && value <= hi)) this.fail(field, offset, `${value} is outside ${lo}..${hi}`);
  }
}

/** Checks that [from, to) holds only zero bytes (padding). */
export function checkZeros(c: Checker, from: number, to: number, field: string): void {
  if (to <= from) return;
  const gap = c.src.read(from, to - from, field);
  const i = gap.findIndex((b) => b !== 0);
  c.check(i < 0, field, from + Math.max(i, 0), "padding bytes must be zero");
}
