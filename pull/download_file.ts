/**
 * Downloads one URL to a file with resume (HTTP `Range`), automatic retries,
 * bounded size, sha256 check and an atomic rename into place.
 *
 * @module
 */

import { dirname } from "node:path";
import { HttpError, IntegrityError } from "./errors.ts";
import { clean, fetchFollow, intHeader, MAX_FILE_BYTES, statusError } from "./_http.ts";
import { commitFile, removeQuiet, sha256File, sizeOf } from "./_fs.ts";

/** Options of {@linkcode downloadFile}. */
export interface DownloadOptions {
  /** Where the bytes collect until they are checked; kept between runs to resume. */
  partPath: string;
  /** The exact size the file must have, when known. */
  size?: number;
  /** The sha256 (lowercase hex) the file must have, when known. */
  sha256?: string;
  /** Bearer token, sent to `tokenOrigin` only (never to a redirect target elsewhere). */
  token?: string;
  /** The origin allowed to see `token`. */
  tokenOrigin?: string;
  /** Connection failures retried, each resuming where the last stopped (default 3). */
  retries?: number;
  /** Milliseconds before the first retry, doubled each time (default 500). */
  retryDelayMs?: number;
  /** Called as bytes arrive: bytes on disk so far and the total (0 when unknown). */
  progress?: (done: number, total: number) => void;
  /** Called with every response (redirects included), e.g. to check hub headers. */
  onResponse?: (response: Response, url: URL) => void;
  /** Cancels the download; the partial file is kept. */
  signal?: AbortSignal;
  /** An extra check of the complete partial file before it is renamed (throw {@linkcode IntegrityError}). */
  verify?: (partPath: string) => Promise<void>;
}

/** What {@linkcode downloadFile} produced. */
export interface DownloadResult {
  /** The final path. */
  path: string;
  /** Its size in bytes. */
  size: number;
  /** Its sha256 in lowercase hex. */
  sha256: string;
  /** Bytes received over the network in this call. */
  received: number;
  /** Whether a partial file from an earlier run was resumed. */
  resumed: boolean;
}

class Interrupted extends Error {}

/**
 * Downloads `url` into `dest`. Bytes go to `options.partPath` first; an
 * existing partial file is resumed with `Range: bytes=N-` (a server that
 * answers 200 instead of 206 restarts it from zero). When all bytes are
 * there, the size and sha256 are checked: a mismatch deletes the partial
 * file and throws {@linkcode IntegrityError}; otherwise it is fsynced and
 * renamed over `dest`. A dropped connection is retried `retries` times,
 * then throws {@linkcode HttpError} with the partial file kept for the
 * next run.
 *
 * @example
 * ```ts ignore
 * import { downloadFile } from "./download_file.ts";
 * const r = await downloadFile(new URL("https://example.org/m.gguf"), "cache/m.gguf", {
 *   partPath: "cache/.partial/m.gguf.part",
 *   size: 1234,
 *   sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
 * });
 * console.log(r.path, r.sha256);
 * ```
 */
export async function downloadFile(
  url: URL,
  dest: string,
  options: DownloadOptions,
): Promise<DownloadResult> {
  const what = url.pathname.split("/").pop() || url.host;
  const expectedSize = options.size;
  if (
    expectedSize !== undefined &&
    (!Number.isSafeInteger(expectedSize) || expectedSize < 0 || expectedSize > MAX_FILE_BYTES)
  ) {
    throw new HttpError(`pull: ${what}: size ${expectedSize} out of range`, 0);
  }
  const sha = options.sha256?.toLowerCase();
  if (sha !== undefined && !/^[0-9a-f]{64}$/.test(sha)) {
    throw new HttpError(`pull: ${what}: "${clean(sha, 80)}" is not a sha256`, 0);
  }
  const part = options.partPath;
  await Deno.mkdir(dirname(part), { recursive: true });
  const retries = options.retries ?? 3;
  let delay = options.retryDelayMs ?? 500;
  let received = 0;
  let resumed = false;
  let total = expectedSize;
  for (let attempt = 0;; attempt++) {
    let offset = (await sizeOf(part)) ?? 0;
    if (expectedSize !== undefined && offset > expectedSize) {
      await removeQuiet(part);
      offset = 0;
    }
    if (expectedSize !== undefined && offset === expectedSize) break;
    try {
      const r = await fetchOnce(url, what, part, offset, options, total);
      received += r.received;
      resumed ||= r.resumed;
      total = r.total;
      break;
    } catch (error) {
      if (!(error instanceof Interrupted)) throw error;
      received += (error.cause as number) ?? 0;
      if (attempt >= retries || options.signal?.aborted) {
        const have = (await sizeOf(part)) ?? 0;
        throw new HttpError(
          `pull: ${what}: the connection dropped (${error.message}); ${have} bytes are kept in ${part}, run again to resume`,
          0,
        );
      }
      await new Promise((r) => setTimeout(r, delay));
      delay *= 2;
    }
  }
  const size = (await sizeOf(part)) ?? 0;
  if (expectedSize !== undefined && size !== expectedSize) {
    await removeQuiet(part);
    throw new IntegrityError(
      `pull: ${what}: got ${size} bytes, expected ${expectedSize}; the download was deleted`,
      String(expectedSize),
      String(size),
    );
  }
  const got = await sha256File(part);
  if (sha !== undefined && got !== sha) {
    await removeQuiet(part);
    throw new IntegrityError(
      `pull: ${what}: sha256 ${got} does not match the expected ${sha}; the corrupted download was deleted`,
      sha,
      got,
    );
  }
  if (options.verify !== undefined) {
    try {
      await options.verify(part);
    } catch (error) {
      await removeQuiet(part);
      throw error;
    }
  }
  await commitFile(part, dest);
  return { path: dest, size, sha256: got, received, resumed };
}

async function fetchOnce(
  url: URL,
  what: string,
  part: string,
  offset: number,
  options: DownloadOptions,
  knownTotal: number | undefined,
): Promise<{ received: number; resumed: boolean; total: number }> {
  const headers: Record<string, string> = { "accept-encoding": "identity" };
  if (offset > 0) headers.range = `bytes=${offset}-`;
  let response: Response;
  try {
    ({ response } = await fetchFollow(url, what, {
      headers,
      token: options.token,
      tokenOrigin: options.tokenOrigin,
      onResponse: options.onResponse,
      signal: options.signal,
    }));
  } catch (error) {
    // a refused connection or reset before any headers: worth a retry
    if (
      error instanceof HttpError && error.status === 0 &&
      !/refused|not among|more than|credentials/.test(error.message)
    ) {
      throw new Interrupted(error.message, { cause: 0 });
    }
    throw error;
  }
  let start: number;
  let total: number | undefined;
  if (response.status === 206 && offset > 0) {
    const range = response.headers.get("content-range") ?? "";
    const m = /^bytes (\d{1,16})-(\d{1,16})\/(\d{1,16}|\*)$/.exec(range.trim());
    if (!m || Number(m[1]) !== offset) {
      await response.body?.cancel();
      throw new HttpError(
        `pull: ${what}: bad Content-Range "${clean(range, 80)}" for bytes=${offset}-`,
        206,
      );
    }
    start = offset;
    total = m[3] === "*" ? undefined : Number(m[3]);
    if (total !== undefined && Number(m[2]) + 1 !== total) {
      await response.body?.cancel();
      throw new HttpError(
        `pull: ${what}: partial answer "${clean(range, 80)}" does not run to the end`,
        206,
      );
    }
  } else if (response.status === 200) {
    start = 0; // a server that ignores Range: start again
    const length = intHeader(response, "content-length", what);
    total = length;
  } else if (response.status === 416 && offset > 0) {
    // the partial file does not fit what the server has: start again
    await response.body?.cancel();
    await removeQuiet(part);
    throw new Interrupted("the server refused the range", { cause: 0 });
  } else {
    throw await statusError(response, what);
  }
  if (knownTotal !== undefined && total !== undefined && total !== knownTotal) {
    await response.body?.cancel();
    throw new IntegrityError(
      `pull: ${what}: the server has ${total} bytes, expected ${knownTotal}`,
      String(knownTotal),
      String(total),
    );
  }
  const limit = knownTotal ?? total ?? MAX_FILE_BYTES;
  if (limit > MAX_FILE_BYTES) {
    await response.body?.cancel();
    throw new HttpError(
      `pull: ${what}: ${limit} bytes is more than the 1 TiB limit`,
      response.status,
    );
  }
  const file = await Deno.open(
    part,
    start === 0 ? { write: true, create: true, truncate: true } : { write: true, append: true },
  );
  let written = start;
  let received = 0;
  try {
    options.progress?.(written, limit === MAX_FILE_BYTES ? 0 : limit);
    try {
      for await (const chunk of response.body ?? []) {
        if (written + chunk.length > limit) {
          await file.truncate(0);
          throw new IntegrityError(
            `pull: ${what}: the server sent more than ${limit} bytes; the download was deleted`,
            String(limit),
            `>${limit}`,
          );
        }
        let at = 0;
        while (at < chunk.length) at += await file.write(chunk.subarray(at));
        written += chunk.length;
        received += chunk.length;
        options.progress?.(written, limit === MAX_FILE_BYTES ? 0 : limit);
      }
    } catch (error) {
      if (error instanceof IntegrityError) throw error;
      throw new Interrupted((error as Error).message, { cause: received });
    }
  } catch (error) {
    file.close();
    if (error instanceof IntegrityError) await removeQuiet(part);
    throw error;
  }
  file.close();
  if (written < limit && limit !== MAX_FILE_BYTES) {
    throw new Interrupted(`the body ended after ${written} of ${limit} bytes`, { cause: received });
  }
  return { received, resumed: start > 0, total: written };
}
