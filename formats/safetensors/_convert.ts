/**
 * Bit-exact conversions between little-endian F16 / BF16 / F32 bytes and
 * f32, done on bit patterns (never through a JS number, so NaN payloads and
 * signed zeros survive).
 *
 * @module
 */

let f16Table: Uint32Array | undefined;

/** f32 bit pattern of an IEEE binary16 bit pattern (exact; payloads kept). */
export function f16BitsToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  if (exp !== 0) return (sign | ((exp + 112) << 23) | (mant << 13)) >>> 0;
  if (mant === 0) return sign >>> 0;
  // Subnormal: mant * 2^-24, a normal f32. Shift the leading 1 up to bit 10.
  let shift = 0;
  let m = mant;
  while ((m & 0x400) === 0) {
    m <<= 1;
    shift++;
  }
  return (sign | ((113 - shift) << 23) | ((m & 0x3ff) << 13)) >>> 0;
}

function table(): Uint32Array {
  if (f16Table === undefined) {
    f16Table = new Uint32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = f16BitsToF32Bits(h);
  }
  return f16Table;
}

/**
 * Decodes `count` little-endian elements of `dtype` from `bytes` into
 * `out` (whose length must be `count`), writing f32 bit patterns.
 */
export function decodeToF32(
  dtype: "F32" | "F16" | "BF16",
  bytes: Uint8Array,
  out: Float32Array,
): void {
  const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
  const n = out.length;
  if (dtype === "F32") {
    for (let i = 0, j = 0; i < n; i++, j += 4) {
      bits[i] = bytes[j] | (bytes[j + 1] << 8) | (bytes[j + 2] << 16) | (bytes[j + 3] << 24);
    }
  } else if (dtype === "BF16") {
    for (let i = 0, j = 0; i < n; i++, j += 2) bits[i] = (bytes[j] << 16) | (bytes[j + 1] << 24);
  } else {
    const t = table();
    for (let i = 0, j = 0; i < n; i++, j += 2) bits[i] = t[bytes[j] | (bytes[j + 1] << 8)];
  }
}

/**
 * binary16 bit pattern of an f32 bit pattern: round to nearest, ties to even;
 * overflow to ±Infinity; NaN stays NaN (quiet, top payload bits kept).
 */
export function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13);
  if (exp >= 113) {
    if (exp > 142) return sign | 0x7c00;
    let half = ((exp - 112) << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (half & 1) !== 0)) half++;
    return sign | half;
  }
  if (exp < 102) return sign;
  const full = mant | 0x800000;
  const shift = 126 - exp;
  let half = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && (half & 1) !== 0)) half++;
  return sign | half;
}

/**
 * bfloat16 bit pattern of an f32 bit pattern: round to nearest, ties to even
 * (as torch does); NaN stays NaN (quiet).
 */
export function f32BitsToBf16Bits(x: number): number {
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) | 0x40) & 0xffff;
  const lsb = (x >>> 16) & 1;
  return (((x >>> 0) + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** Encodes f32 values as little-endian `dtype` bytes (bit-exact for F32). */
export function encodeFromF32(dtype: "F32" | "F16" | "BF16", values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const n = values.length;
  if (dtype === "F32") {
    const out = new Uint8Array(n * 4);
    for (let i = 0, j = 0; i < n; i++, j += 4) {
      const b = bits[i];
      out[j] = b;
      out[j + 1] = b >>> 8;
      out[j + 2] = b >>> 16;
      out[j + 3] = b >>> 24;
    }
    return out;
  }
  const out = new Uint8Array(n * 2);
  for (let i = 0, j = 0; i < n; i++, j += 2) {
    const h = dtype === "BF16" ? f32BitsToBf16Bits(bits[i]) : f32BitsToF16Bits(bits[i]);
    out[j] = h;
    out[j + 1] = h >>> 8;
  }
  return out;
}
