/**
 * CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), the checksum of
 * every `.cflow`/`.vflow` section; the same function as zlib's `crc32`.
 *
 * @module
 */

const TABLE = (() => {
  const t = new Uint32Array(256 * 8);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  // slicing-by-8 tables
  for (let i = 0; i < 256; i++) {
    for (let s = 1; s < 8; s++) {
      t[s * 256 + i] = (t[(s - 1) * 256 + i] >>> 8) ^ t[t[(s - 1) * 256 + i] & 0xff];
    }
  }
  return t;
})();

/**
 * Continues a CRC-32 over `bytes`. Start with `crc = 0`.
 *
 * @example
 * ```ts
 * import { crc32 } from "./crc32.ts";
 * console.log(crc32(new TextEncoder().encode("123456789")).toString(16)); // "cbf43926"
 * ```
 */
export function crc32(bytes: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  let i = 0;
  const n = bytes.length;
  const t = TABLE;
  while (i + 8 <= n) {
    const a =
      (c ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24))) >>> 0;
    c = t[7 * 256 + (a & 0xff)] ^ t[6 * 256 + ((a >>> 8) & 0xff)] ^
      t[5 * 256 + ((a >>> 16) & 0xff)] ^
      t[4 * 256 + (a >>> 24)] ^ t[3 * 256 + bytes[i + 4]] ^ t[2 * 256 + bytes[i + 5]] ^
      t[256 + bytes[i + 6]] ^ t[bytes[i + 7]];
    i += 8;
  }
  while (i < n) c = t[(c ^ bytes[i++]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
