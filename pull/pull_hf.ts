/**
 * The Hugging Face hub source: lists a repository through the hub API
 * (`/api/models/ORG/REPO/tree/main?recursive=true`, following `Link:
 * rel="next"` pages), picks the file(s), and downloads each from
 * `/ORG/REPO/resolve/main/PATH` (which redirects LFS files to a CDN) into
 * `<cache>/hf/ORG/REPO/PATH`, checking the size and the sha256 (LFS) or git
 * blob id (small files).
 *
 * @module
 */

import { join } from "node:path";
import { createHash } from "node:crypto";
import { IntegrityError, NotCachedError, PullError, SpecError } from "./errors.ts";
import { validateRelativePath, validateRepo } from "./parse_spec.ts";
import type { HfSpec } from "./parse_spec.ts";
import type { PulledFile, PullOptions, PullResult } from "./types.ts";
import {
  checkUrl,
  clean,
  etag,
  fetchFollow,
  MAX_FILE_BYTES,
  readJson,
  statusError,
} from "./_http.ts";
import { downloadFile } from "./download_file.ts";
import { sha256File, sizeOf, writeFileAtomic } from "./_fs.ts";

/** The default hub. */
export const DEFAULT_ENDPOINT = "https://huggingface.co";
const MAX_PAGES = 100;
const MAX_ENTRIES = 100_000;

/** A file as the hub lists it. */
export interface HubFile {
  /** Path in the repository. */
  path: string;
  /** Size in bytes. */
  size: number;
  /** Git blob id (sha1 of `blob SIZE\0` + content for non-LFS files). */
  oid: string;
  /** sha256 of the content (LFS files only). */
  sha256?: string;
}

interface Manifest {
  repo: string;
  revision: string;
  commit?: string;
  files: HubFile[];
  /** path -> the sha256 or git oid of the verified file on disk */
  have: Record<string, string>;
}

function parseEntry(entry: unknown): HubFile | undefined {
  if (typeof entry !== "object" || entry === null) return undefined;
  const e = entry as Record<string, unknown>;
  if (e.type !== "file" || typeof e.path !== "string" || typeof e.oid !== "string") {
    return undefined;
  }
  if (
    !Number.isSafeInteger(e.size) || (e.size as number) < 0 || (e.size as number) > MAX_FILE_BYTES
  ) return undefined;
  try {
    validateRelativePath(e.path, "file");
  } catch {
    return undefined; // never write under a name that fails the checks
  }
  if (!/^[0-9a-f]{40}$/.test(e.oid)) return undefined;
  const file: HubFile = { path: e.path, size: e.size as number, oid: e.oid };
  const lfs = e.lfs as Record<string, unknown> | undefined;
  if (lfs !== undefined && lfs !== null) {
    if (typeof lfs.oid !== "string" || !/^[0-9a-f]{64}$/.test(lfs.oid)) return undefined;
    if (lfs.size !== undefined && lfs.size !== e.size) return undefined;
    file.sha256 = lfs.oid;
  }
  return file;
}

/**
 * Lists every file of `repo` at `main` through the hub API.
 *
 * @example
 * ```ts ignore
 * import { listRepo } from "./pull_hf.ts";
 * const files = await listRepo("HuggingFaceTB/SmolLM2-135M-Instruct", { cacheDir: "cache" });
 * console.log(files.map((f) => f.path));
 * ```
 */
export async function listRepo(repo: string, options: PullOptions): Promise<HubFile[]> {
  validateRepo(repo);
  const base = endpointOf(options);
  let url: URL | undefined = new URL(
    `${basePath(base)}/api/models/${repo}/tree/main?recursive=true`,
    base,
  );
  const files: HubFile[] = [];
  for (let page = 0; url !== undefined; page++) {
    if (page >= MAX_PAGES) {
      throw new PullError(`pull: hf:${repo}: more than ${MAX_PAGES} listing pages`);
    }
    const { response } = await fetchFollow(url, `hf:${repo}`, {
      headers: { accept: "application/json" },
      token: options.token,
      tokenOrigin: base.origin,
      signal: options.signal,
    });
    if (response.status !== 200) throw await statusError(response, `hf:${repo}`);
    const next = nextLink(response.headers.get("link"), url, base);
    const body = await readJson(response, `hf:${repo}: listing`);
    if (!Array.isArray(body)) {
      throw new PullError(`pull: hf:${repo}: the listing is not a JSON array`);
    }
    for (const entry of body) {
      const f = parseEntry(entry);
      if (f !== undefined) files.push(f);
      if (files.length > MAX_ENTRIES) {
        throw new PullError(`pull: hf:${repo}: more than ${MAX_ENTRIES} files`);
      }
    }
    url = next;
  }
  return files;
}

function nextLink(header: string | null, current: URL, base: URL): URL | undefined {
  if (header === null) return undefined;
  for (const part of header.split(",")) {
    const m = /^\s*<([^>]*)>\s*;\s*rel="?next"?\s*$/.exec(part);
    if (!m) continue;
    const url = new URL(m[1], current);
    if (url.origin !== base.origin) {
      throw new PullError(
        `pull: the listing's next page is on another host (${clean(url.origin, 80)})`,
      );
    }
    return url;
  }
  return undefined;
}

function endpointOf(options: PullOptions): URL {
  let base: URL;
  try {
    base = new URL(options.endpoint ?? DEFAULT_ENDPOINT);
  } catch {
    throw new SpecError(
      `pull: the hub endpoint "${clean(options.endpoint ?? "", 80)}" is not a URL`,
    );
  }
  checkUrl(base, "hub endpoint");
  return base;
}

function basePath(base: URL): string {
  return base.pathname.replace(/\/+$/, "");
}

const base = (p: string) => p.split("/").pop()!;
const isGguf = (f: HubFile) => /\.gguf$/i.test(f.path) && !/mmproj/i.test(base(f.path));
const FOLDER_FILES =
  /^(config\.json|generation_config\.json|tokenizer\.json|tokenizer_config\.json|special_tokens_map\.json|tokenizer\.model|vocab\.json|merges\.txt|chat_template\.jinja|model\.safetensors\.index\.json|.+\.safetensors)$/;

function matchQuant(files: HubFile[], quant: string): HubFile[] {
  const q = `${quant.toLowerCase()}.gguf`;
  return files.filter((f) => {
    const b = base(f.path).toLowerCase();
    if (!b.endsWith(q)) return false;
    const before = b[b.length - q.length - 1];
    return b.length === q.length || before === "-" || before === "." || before === "_";
  });
}

function listing(files: HubFile[]): string {
  const names = files.slice(0, 40).map((f) => `  ${f.path} (${(f.size / 1e6).toFixed(1)} MB)`);
  if (files.length > 40) names.push(`  ... and ${files.length - 40} more`);
  return names.join("\n");
}

/**
 * Picks the files a reference names: `:FILE` exactly; `:QUANT` the one GGUF
 * whose name ends in that quant (case-insensitive); nothing: the only GGUF,
 * else the `Q4_K_M` one, else a safetensors checkpoint's files (a folder).
 * Ambiguity and absence throw {@linkcode SpecError} listing the candidates.
 *
 * @example
 * ```ts
 * import { selectFiles } from "./pull_hf.ts";
 * const files = [
 *   { path: "m-Q4_0.gguf", size: 1, oid: "0".repeat(40) },
 *   { path: "m-Q8_0.gguf", size: 2, oid: "1".repeat(40) },
 * ];
 * console.log(selectFiles(files, { kind: "hf", repo: "a/b", quant: "q8_0" }).files[0].path);
 * // "m-Q8_0.gguf"
 * ```
 */
export function selectFiles(files: HubFile[], spec: HfSpec): { files: HubFile[]; folder: boolean } {
  const ggufs = files.filter(isGguf);
  const name = `hf:${spec.repo}`;
  if (spec.file !== undefined) {
    const f = files.find((f) => f.path === spec.file);
    if (f === undefined) {
      throw new SpecError(
        `pull: ${name} has no file "${spec.file}"; ${
          ggufs.length ? `its GGUF files:\n${listing(ggufs)}` : `its files:\n${listing(files)}`
        }`,
      );
    }
    return { files: [f], folder: false };
  }
  if (spec.quant !== undefined) {
    const m = matchQuant(ggufs, spec.quant);
    if (m.length === 1) return { files: m, folder: false };
    if (m.length === 0) {
      throw new SpecError(
        `pull: ${name} has no GGUF for quant "${spec.quant}"; ${
          ggufs.length ? `its GGUF files:\n${listing(ggufs)}` : "it has no GGUF files"
        }`,
      );
    }
    throw new SpecError(
      `pull: ${name}: quant "${spec.quant}" matches ${m.length} files; name one with hf:${spec.repo}:FILE\n${
        listing(m)
      }`,
    );
  }
  if (ggufs.length === 1) return { files: ggufs, folder: false };
  if (ggufs.length > 1) {
    const m = matchQuant(ggufs, "Q4_K_M");
    if (m.length === 1) return { files: m, folder: false };
    throw new SpecError(
      `pull: ${name} has ${ggufs.length} GGUF files; pick one with hf:${spec.repo}:QUANT or :FILE\n${
        listing(ggufs)
      }`,
    );
  }
  const top = files.filter((f) => !f.path.includes("/") && FOLDER_FILES.test(f.path));
  if (
    top.some((f) => f.path === "config.json") && top.some((f) => f.path.endsWith(".safetensors"))
  ) {
    return { files: top, folder: true };
  }
  throw new SpecError(
    `pull: ${name} has no GGUF file and no safetensors checkpoint; name a file with hf:${spec.repo}:FILE\n${
      listing(files)
    }`,
  );
}

async function readManifest(path: string): Promise<Manifest | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
  try {
    const m = JSON.parse(text) as Manifest;
    const files = Array.isArray(m.files)
      ? m.files.map((f) =>
        parseEntry({ type: "file", ...f, lfs: f.sha256 ? { oid: f.sha256 } : undefined })
      )
      : [];
    if (files.some((f) => f === undefined)) return undefined;
    return {
      ...m,
      files: files as HubFile[],
      have: typeof m.have === "object" && m.have ? m.have : {},
    };
  } catch {
    return undefined; // a damaged manifest is as good as none
  }
}

async function gitBlobSha1(path: string, size: number): Promise<string> {
  const hash = createHash("sha1");
  hash.update(`blob ${size}\0`);
  using file = await Deno.open(path, { read: true });
  const buf = new Uint8Array(1 << 20);
  for (;;) {
    const n = await file.read(buf);
    if (n === null) break;
    hash.update(buf.subarray(0, n));
  }
  return hash.digest("hex");
}

/**
 * Pulls a hub reference into `<cacheDir>/hf/ORG/REPO/`. Offline, it answers
 * from the cache and its recorded listing only.
 *
 * @example
 * ```ts ignore
 * import { pullHf } from "./pull_hf.ts";
 * const r = await pullHf({ kind: "hf", repo: "bartowski/SmolLM2-135M-Instruct-GGUF", quant: "Q4_0" },
 *   "hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0", { cacheDir: "cache/models" });
 * console.log(r.path, r.sha256);
 * ```
 */
export async function pullHf(
  spec: HfSpec,
  text: string,
  options: PullOptions,
): Promise<PullResult> {
  validateRepo(spec.repo);
  const [org, name] = spec.repo.split("/");
  const repoDir = join(options.cacheDir, "hf", org, name);
  const manifestPath = join(options.cacheDir, ".pull", "hf", org, `${name}.json`);
  const old = await readManifest(manifestPath);
  const result = (files: PulledFile[], folder: boolean, cached: boolean): PullResult => ({
    spec: text,
    source: "hf",
    path: folder ? repoDir : files[0].path,
    size: files.reduce((a, f) => a + f.size, 0),
    sha256: folder ? undefined : files[0].sha256,
    files,
    cached,
  });

  if (options.offline) {
    if (old === undefined) {
      throw new NotCachedError(
        `pull: ${text} is not in the cache (${options.cacheDir}); run without --offline (HF_HUB_OFFLINE/CFLOW_OFFLINE) first`,
      );
    }
    const picked = selectFiles(old.files, spec);
    const out: PulledFile[] = [];
    for (const f of picked.files) {
      const dest = join(repoDir, f.path);
      if ((await sizeOf(dest)) !== f.size || old.have[f.path] !== (f.sha256 ?? f.oid)) {
        throw new NotCachedError(
          `pull: ${text}: ${f.path} is not in the cache; run without --offline first`,
        );
      }
      out.push({ path: dest, size: f.size, sha256: f.sha256 });
    }
    return result(out, picked.folder, true);
  }

  const base = endpointOf(options);
  const files = await listRepo(spec.repo, options);
  const picked = selectFiles(files, spec);
  const manifest: Manifest = { repo: spec.repo, revision: "main", files, have: { ...old?.have } };
  // forget what no longer matches the listing
  for (const [p, id] of Object.entries(manifest.have)) {
    const f = files.find((f) => f.path === p);
    if (f === undefined || (f.sha256 ?? f.oid) !== id) delete manifest.have[p];
  }
  const out: PulledFile[] = [];
  let cached = true;
  for (const f of picked.files) {
    const dest = join(repoDir, f.path);
    const id = f.sha256 ?? f.oid;
    const onDisk = await sizeOf(dest);
    if (onDisk === f.size) {
      if (manifest.have[f.path] === id) {
        out.push({ path: dest, size: f.size, sha256: f.sha256 });
        continue;
      }
      const same = f.sha256 !== undefined
        ? (await sha256File(dest)) === f.sha256
        : (await gitBlobSha1(dest, f.size)) === f.oid;
      if (same) {
        manifest.have[f.path] = id;
        out.push({ path: dest, size: f.size, sha256: f.sha256 });
        continue;
      }
    }
    cached = false;
    const url = new URL(
      `${basePath(base)}/${spec.repo}/resolve/main/${
        f.path.split("/").map(encodeURIComponent).join("/")
      }`,
      base,
    );
    const r = await downloadFile(url, dest, {
      partPath: join(options.cacheDir, ".pull", "partial", `${id}.part`),
      size: f.size,
      sha256: f.sha256,
      token: options.token,
      tokenOrigin: base.origin,
      retries: options.retries,
      retryDelayMs: options.retryDelayMs,
      signal: options.signal,
      progress: options.progress &&
        ((done, total) => options.progress!({ file: f.path, done, total })),
      onResponse: (response, at) => {
        if (at.origin !== base.origin) return;
        const linkedSize = response.headers.get("x-linked-size");
        if (linkedSize !== null && linkedSize.trim() !== String(f.size)) {
          throw new IntegrityError(
            `pull: ${text}: ${f.path}: the hub says ${
              clean(linkedSize, 30)
            } bytes, its listing ${f.size}; run again`,
            String(f.size),
            clean(linkedSize, 30),
          );
        }
        const linked = etag(response.headers.get("x-linked-etag"));
        if (
          linked !== undefined && f.sha256 !== undefined && /^[0-9a-f]{64}$/.test(linked) &&
          linked !== f.sha256
        ) {
          throw new IntegrityError(
            `pull: ${text}: ${f.path}: the hub's X-Linked-Etag ${linked} differs from its listing's sha256 ${f.sha256}; run again`,
            f.sha256,
            linked,
          );
        }
        const commit = response.headers.get("x-repo-commit");
        if (commit !== null && /^[0-9a-f]{40}$/.test(commit)) manifest.commit = commit;
      },
      verify: f.sha256 !== undefined ? undefined : async (part) => {
        const got = await gitBlobSha1(part, f.size);
        if (got !== f.oid) {
          throw new IntegrityError(
            `pull: ${text}: ${f.path}: git blob id ${got} does not match the listing's ${f.oid}; the download was deleted`,
            f.oid,
            got,
          );
        }
      },
    });
    manifest.have[f.path] = id;
    await writeFileAtomic(manifestPath, JSON.stringify(manifest, null, 1));
    out.push({ path: r.path, size: r.size, sha256: r.sha256 });
  }
  await writeFileAtomic(manifestPath, JSON.stringify(manifest, null, 1));
  return result(out, picked.folder, cached);
}
