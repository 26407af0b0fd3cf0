/**
 * The run tests/pack_evict_test.ts packs: one Q8_0 matrix of 300 stripes of
 * 128 rows by 2048 columns (tiles of 256 columns: a 16-byte header and 8
 * blocks of 34 bytes per row), every byte `fill`.
 *
 * @module
 */

const cols = 2048;
const stripes = 300;
const stripeBytes = (cols / 256) * (16 + 128 * 8 * 34);

/** Geometry and contents of the packed source. */
export const PACK_EVICT_SOURCE = {
  cols,
  rows: 128 * stripes,
  length: stripes * stripeBytes,
  fill: 0x11,
} as const;
