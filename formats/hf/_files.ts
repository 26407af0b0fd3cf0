/**
 * Small file helpers for checkpoint directories (no @std/path).
 *
 * @module
 */

import { FormatError } from "../errors.ts";

/** `dir` + "/" + `name`, without doubling a trailing slash. */
export function joinPath(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** Whether `path` is a regular file (following symlinks, as the HF cache uses them). */
export function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return false;
    throw e;
  }
}

/**
 * Reads a whole small file (a JSON side file), refusing files over `limit`
 * bytes with a FormatError naming `field`.
 */
export function readBoundedFile(path: string, limit: number, field: string): Uint8Array {
  const info = Deno.statSync(path);
  if (!info.isFile) throw new FormatError(path, field, 0, "is not a regular file");
  if (info.size > limit) {
    throw new FormatError(
      path,
      field,
      0,
      `is ${info.size} bytes, more than the ${limit}-byte limit`,
    );
  }
  const bytes = Deno.readFileSync(path);
  if (bytes.length > limit) {
    throw new FormatError(
      path,
      field,
      0,
      `is ${bytes.length} bytes, more than the ${limit}-byte limit`,
    );
  }
  return bytes;
}
