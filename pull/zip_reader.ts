/**
 * A small, bounded zip reader for Python wheels: it reads the central
 * directory (zip64 included), and extracts one member at a time, stored or
 * deflated (through `DecompressionStream("deflate-raw")`), checking its size
 * and CRC-32 as it streams. Encrypted, multi-disk and other compression
 * methods are refused with a {@linkcode ZipError}.
 *
 * @module
 */

import { crc32 } from "../formats/cflow/crc32.ts";
import { ZipError } from "./errors.ts";

/** One member of a zip archive, as its central directory describes it. */
export interface ZipEntry {
  /** The member's path inside the archive (`/`-separated). */
  name: string;
  /** 0 = stored, 8 = deflate. */
  method: number;
  /** CRC-32 of the uncompressed bytes. */
  crc32: number;
  /** Bytes stored in the archive. */
  compressedSize: number;
  /** Bytes after extraction. */
  size: number;
  /** Offset of the member's local header. */
  localOffset: number;
  /** General-purpose flags (bit 0: encrypted). */
  flags: number;
}

const EOCD_SIG = 0x06054b50;
const EOCD64_LOCATOR_SIG = 0x07064b50;
const EOCD64_SIG = 0x06064b50;
const CDH_SIG = 0x02014b50;
const LFH_SIG = 0x04034b50;
/** Largest central directory read into memory. */
const MAX_CENTRAL_DIRECTORY = 64 << 20;
/** Most members accepted. */
const MAX_ENTRIES = 200_000;
const CHUNK = 1 << 20;

async function readAt(file: Deno.FsFile, offset: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  await file.seek(offset, Deno.SeekMode.Start);
  let got = 0;
  while (got < length) {
    const n = await file.read(out.subarray(got));
    if (n === null) {
      throw new ZipError(`zip: unexpected end of file at offset ${offset + got}`, offset + got);
    }
    got += n;
  }
  return out;
}

function u64(view: DataView, at: number, where: number): number {
  const v = view.getBigUint64(at, true);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ZipError(`zip: 64-bit field too large at offset ${where + at}`, where + at);
  }
  return Number(v);
}

/**
 * Reads members of a zip file.
 *
 * @example
 * ```ts ignore
 * import { ZipReader } from "./zip_reader.ts";
 * using zip = await ZipReader.open("pkg-1.0-py3-none-any.whl");
 * for (const e of zip.entries) console.log(e.name, e.size);
 * const parts: Uint8Array[] = [];
 * await zip.extract("pkg/data.bin", (chunk) => { parts.push(chunk.slice()); });
 * ```
 */
export class ZipReader implements Disposable {
  /** Every member, in central-directory order. */
  readonly entries: readonly ZipEntry[];
  #file: Deno.FsFile;
  #size: number;
  #cdOffset: number;

  private constructor(file: Deno.FsFile, size: number, cdOffset: number, entries: ZipEntry[]) {
    this.#file = file;
    this.#size = size;
    this.#cdOffset = cdOffset;
    this.entries = entries;
  }

  /**
   * Opens `path` and reads its central directory. Throws {@linkcode ZipError}
   * on anything malformed.
   *
   * @example
   * ```ts ignore
   * import { ZipReader } from "./zip_reader.ts";
   * using zip = await ZipReader.open("a.zip");
   * console.log(zip.entries.length);
   * ```
   */
  static async open(path: string): Promise<ZipReader> {
    const file = await Deno.open(path, { read: true });
    try {
      // The size from a seek, not fstat: Deno checks fstat against where a link leads, which
      // may be outside what the process may read (every read below seeks to its own offset).
      const size = await file.seek(0, Deno.SeekMode.End);
      const { cdOffset, entries } = await readCentralDirectory(file, size);
      return new ZipReader(file, size, cdOffset, entries);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /**
   * The member named `name`, or undefined.
   *
   * @example
   * ```ts ignore
   * import { ZipReader } from "./zip_reader.ts";
   * using zip = await ZipReader.open("a.zip");
   * console.log(zip.find("a.txt")?.size);
   * ```
   */
  find(name: string): ZipEntry | undefined {
    return this.entries.find((e) => e.name === name);
  }

  /**
   * Streams the uncompressed bytes of member `name` to `sink` (chunks are
   * reused after `sink` returns), checking the size and CRC-32; returns the
   * number of bytes. Throws {@linkcode ZipError} when the member is missing
   * or its data is corrupt; `sink` may then have seen some of the bytes.
   *
   * @example
   * ```ts ignore
   * import { ZipReader } from "./zip_reader.ts";
   * using zip = await ZipReader.open("a.zip");
   * const n = await zip.extract("a.txt", (c) => console.log(c.length));
   * ```
   */
  async extract(
    name: string,
    sink: (chunk: Uint8Array) => void | Promise<void>,
  ): Promise<number> {
    const entry = this.find(name);
    if (entry === undefined) throw new ZipError(`zip: no member named "${name}"`);
    const at = entry.localOffset;
    if (at + 30 > this.#cdOffset) {
      throw new ZipError(`zip: "${name}": local header at ${at} is past the data area`, at);
    }
    const head = await readAt(this.#file, at, 30);
    const hv = new DataView(head.buffer);
    if (hv.getUint32(0, true) !== LFH_SIG) {
      throw new ZipError(`zip: "${name}": bad local header signature at offset ${at}`, at);
    }
    if (hv.getUint16(8, true) !== entry.method) {
      throw new ZipError(
        `zip: "${name}": local header and central directory disagree on the method`,
        at,
      );
    }
    const dataStart = at + 30 + hv.getUint16(26, true) + hv.getUint16(28, true);
    const dataEnd = dataStart + entry.compressedSize;
    if (dataEnd > this.#cdOffset) {
      throw new ZipError(
        `zip: "${name}": data ends at ${dataEnd}, past the central directory at ${this.#cdOffset}`,
        dataStart,
      );
    }
    let crc = 0;
    let out = 0;
    const take = async (chunk: Uint8Array) => {
      out += chunk.length;
      if (out > entry.size) {
        throw new ZipError(`zip: "${name}": more than the declared ${entry.size} bytes`, dataStart);
      }
      crc = crc32(chunk, crc);
      await sink(chunk);
    };
    const source = this.#chunks(dataStart, dataEnd);
    if (entry.method === 0) {
      for await (const chunk of source) await take(chunk);
    } else {
      const ds = new DecompressionStream("deflate-raw");
      const writer = ds.writable.getWriter();
      const pump = (async () => {
        try {
          for await (const chunk of source) await writer.write(chunk.slice());
          await writer.close();
        } catch (error) {
          await writer.abort(error).catch(() => {});
        }
      })();
      try {
        for await (const chunk of ds.readable) await take(chunk);
      } catch (error) {
        await ds.readable.cancel().catch(() => {});
        await pump;
        if (error instanceof ZipError) throw error;
        throw new ZipError(
          `zip: "${name}": corrupt deflate data (${(error as Error).message})`,
          dataStart,
          {
            cause: error,
          },
        );
      }
      await pump;
    }
    if (out !== entry.size) {
      throw new ZipError(`zip: "${name}": ${out} bytes, not the declared ${entry.size}`, dataStart);
    }
    if (crc !== entry.crc32) {
      throw new ZipError(
        `zip: "${name}": CRC-32 ${hex(crc)} does not match the declared ${hex(entry.crc32)}`,
        dataStart,
      );
    }
    return out;
  }

  async *#chunks(start: number, end: number): AsyncGenerator<Uint8Array> {
    if (end > this.#size) throw new ZipError(`zip: data past the end of the file`, start);
    const buf = new Uint8Array(CHUNK);
    let at = start;
    await this.#file.seek(start, Deno.SeekMode.Start);
    while (at < end) {
      const n = await this.#file.read(buf.subarray(0, Math.min(CHUNK, end - at)));
      if (n === null) throw new ZipError(`zip: unexpected end of file at offset ${at}`, at);
      at += n;
      yield buf.subarray(0, n);
    }
  }

  /** Closes the file. */
  close(): void {
    this.#file.close();
  }

  /** Closes the file (`using`). */
  [Symbol.dispose](): void {
    this.close();
  }
}

function hex(n: number): string {
  return n.toString(16).padStart(8, "0");
}

async function readCentralDirectory(
  file: Deno.FsFile,
  size: number,
): Promise<{ cdOffset: number; entries: ZipEntry[] }> {
  if (size < 22) throw new ZipError(`zip: ${size} bytes is too short for a zip file`, 0);
  const tailLen = Math.min(size, 22 + 0xffff);
  const tailStart = size - tailLen;
  const tail = await readAt(file, tailStart, tailLen);
  const tv = new DataView(tail.buffer);
  let eocd = -1;
  for (let i = tailLen - 22; i >= 0; i--) {
    if (tv.getUint32(i, true) === EOCD_SIG && i + 22 + tv.getUint16(i + 20, true) <= tailLen) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new ZipError(`zip: no end-of-central-directory record (truncated?)`, size);
  const eocdAt = tailStart + eocd;
  let disk = tv.getUint16(eocd + 4, true);
  let cdDisk = tv.getUint16(eocd + 6, true);
  let count = tv.getUint16(eocd + 10, true);
  let countDisk = tv.getUint16(eocd + 8, true);
  let cdSize = tv.getUint32(eocd + 12, true);
  let cdOffset = tv.getUint32(eocd + 16, true);
  let cdLimit = eocdAt;
  if (
    count === 0xffff || countDisk === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff
  ) {
    const locAt = eocdAt - 20;
    if (locAt < 0) throw new ZipError(`zip: zip64 locator missing`, eocdAt);
    const loc = await readAt(file, locAt, 20);
    const lv = new DataView(loc.buffer);
    if (lv.getUint32(0, true) !== EOCD64_LOCATOR_SIG) {
      throw new ZipError(`zip: zip64 locator missing`, locAt);
    }
    const e64At = u64(lv, 8, locAt);
    if (e64At + 56 > locAt) {
      throw new ZipError(`zip: zip64 record offset ${e64At} out of range`, locAt);
    }
    const e64 = await readAt(file, e64At, 56);
    const ev = new DataView(e64.buffer);
    if (ev.getUint32(0, true) !== EOCD64_SIG) {
      throw new ZipError(`zip: bad zip64 end-of-central-directory signature`, e64At);
    }
    disk = ev.getUint32(16, true);
    cdDisk = ev.getUint32(20, true);
    countDisk = u64(ev, 24, e64At);
    count = u64(ev, 32, e64At);
    cdSize = u64(ev, 40, e64At);
    cdOffset = u64(ev, 48, e64At);
    cdLimit = e64At;
  }
  if (disk !== 0 || cdDisk !== 0 || countDisk !== count) {
    throw new ZipError(`zip: multi-disk archives are not supported`, eocdAt);
  }
  if (count > MAX_ENTRIES) {
    throw new ZipError(`zip: ${count} members is more than ${MAX_ENTRIES}`, eocdAt);
  }
  if (cdSize > MAX_CENTRAL_DIRECTORY) {
    throw new ZipError(`zip: central directory of ${cdSize} bytes is too large`, eocdAt);
  }
  if (cdOffset + cdSize > cdLimit) {
    throw new ZipError(
      `zip: central directory (${cdOffset} + ${cdSize}) overlaps its end record at ${cdLimit}`,
      eocdAt,
    );
  }
  const cd = await readAt(file, cdOffset, cdSize);
  const v = new DataView(cd.buffer);
  const dec = new TextDecoder("utf-8", { fatal: true });
  const entries: ZipEntry[] = [];
  let p = 0;
  for (let i = 0; i < count; i++) {
    const where = cdOffset + p;
    if (p + 46 > cdSize) {
      throw new ZipError(`zip: central directory truncated at entry ${i}`, where);
    }
    if (v.getUint32(p, true) !== CDH_SIG) {
      throw new ZipError(`zip: bad central directory signature at offset ${where}`, where);
    }
    const flags = v.getUint16(p + 8, true);
    const method = v.getUint16(p + 10, true);
    const crc = v.getUint32(p + 16, true);
    let csize = v.getUint32(p + 20, true);
    let usize = v.getUint32(p + 24, true);
    const nameLen = v.getUint16(p + 28, true);
    const extraLen = v.getUint16(p + 30, true);
    const commentLen = v.getUint16(p + 32, true);
    let entryDisk = v.getUint16(p + 34, true);
    let local = v.getUint32(p + 42, true);
    const end = p + 46 + nameLen + extraLen + commentLen;
    if (end > cdSize) {
      throw new ZipError(`zip: central directory entry ${i} runs past its end`, where);
    }
    let name: string;
    try {
      name = dec.decode(cd.subarray(p + 46, p + 46 + nameLen));
    } catch {
      throw new ZipError(`zip: member name at offset ${where + 46} is not UTF-8`, where + 46);
    }
    // zip64 extended information: present fields follow the 0xffffffff markers in order
    let x = p + 46 + nameLen;
    const xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      const id = v.getUint16(x, true);
      const len = v.getUint16(x + 2, true);
      if (x + 4 + len > xEnd) {
        throw new ZipError(`zip: extra field runs past its entry`, cdOffset + x);
      }
      if (id === 0x0001) {
        let q = x + 4;
        const need = (ok: boolean) => {
          if (!ok) return false;
          if (q + 8 > x + 4 + len) throw new ZipError(`zip: short zip64 extra field`, cdOffset + x);
          return true;
        };
        if (need(usize === 0xffffffff)) (usize = u64(v, q, cdOffset), q += 8);
        if (need(csize === 0xffffffff)) (csize = u64(v, q, cdOffset), q += 8);
        if (need(local === 0xffffffff)) (local = u64(v, q, cdOffset), q += 8);
        if (entryDisk === 0xffff && q + 4 <= x + 4 + len) entryDisk = v.getUint32(q, true);
      }
      x += 4 + len;
    }
    if (flags & 1) throw new ZipError(`zip: "${name}" is encrypted`, where);
    if (method !== 0 && method !== 8) {
      throw new ZipError(`zip: "${name}": compression method ${method} is not supported`, where);
    }
    if (method === 0 && csize !== usize) {
      throw new ZipError(`zip: "${name}": stored member with ${csize} != ${usize} bytes`, where);
    }
    if (entryDisk !== 0) throw new ZipError(`zip: multi-disk archives are not supported`, where);
    if (local + 30 + csize > cdOffset) {
      throw new ZipError(
        `zip: "${name}": data (${local} + ${csize}) overlaps the central directory`,
        where,
      );
    }
    entries.push({
      name,
      method,
      crc32: crc,
      compressedSize: csize,
      size: usize,
      localOffset: local,
      flags,
    });
    p = end;
  }
  return { cdOffset, entries };
}
