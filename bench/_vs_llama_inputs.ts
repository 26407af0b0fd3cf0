/**
 * bench/vs_llama.ts's input files, read and hashed: the `--agree-text` file (bounded reads, UTF-8,
 * its size and sha256) and the sha256 of each model's GGUF.
 *
 * @module
 */

/** The most `--agree-text` reads: ~250,000 tokens, far more than any run needs. */
export const AGREE_TEXT_MAX_BYTES = 1 << 20;

/**
 * `--agree-text`'s file: UTF-8, at most {@link AGREE_TEXT_MAX_BYTES}, read with bounded reads
 * (the bench may read only inside the checkout, which the error says), with its size and
 * sha256 for the results.
 *
 * @example
 * ```ts ignore
 * import { readAgreeText } from "./vs_llama.ts";
 * const t = await readAgreeText("cache/agree/apache-2.0.txt");
 * console.log(t.bytes, t.sha256, t.text.length);
 * ```
 */
export async function readAgreeText(
  path: string,
): Promise<{ path: string; text: string; bytes: number; sha256: string }> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path);
  } catch (e) {
    // NotCapable: Deno's refusal of a path outside --allow-read (PermissionDenied is the OS's).
    if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
      throw new Error(
        `--agree-text ${path}: the bench may read only inside the checkout; copy the file under ` +
          `cache/ (git-ignored)`,
      );
    }
    throw new Error(`--agree-text ${path}: ${(e as Error).message}`);
  }
  try {
    const buf = new Uint8Array(AGREE_TEXT_MAX_BYTES + 1);
    let n = 0;
    while (n < buf.length) {
      const got = await file.read(buf.subarray(n));
      if (got === null) break;
      n += got;
    }
    if (n > AGREE_TEXT_MAX_BYTES) {
      throw new RangeError(`--agree-text ${path}: larger than ${AGREE_TEXT_MAX_BYTES} bytes`);
    }
    if (n === 0) throw new RangeError(`--agree-text ${path}: empty`);
    const bytes = buf.subarray(0, n);
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new RangeError(`--agree-text ${path}: not UTF-8`);
    }
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const sha256 = [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
    return { path, text, bytes: n, sha256 };
  } finally {
    file.close();
  }
}

export async function sha256File(path: string): Promise<{ sha256: string; bytes: Uint8Array }> {
  const bytes = await Deno.readFile(path);
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return { sha256: [...d].map((b) => b.toString(16).padStart(2, "0")).join(""), bytes };
}
