/**
 * Loopback servers for the pull tests: a fake Hugging Face hub (the real
 * hub's URL shapes: `/api/models/ORG/REPO/tree/main?recursive=true` with
 * `Link: rel="next"` pages, `/ORG/REPO/resolve/main/PATH` answering 302 to a
 * CDN with `X-Linked-Size`, `X-Linked-Etag`, `X-Repo-Commit` for LFS files
 * and 200 with the body and the git blob id as ETag for small files), a
 * "CDN" on another port (another origin), and a fake PyPI JSON API. All
 * serve generated content on 127.0.0.1, with switches to drop connections
 * midway, ignore `Range`, or corrupt the bytes.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** A file in a fake repository. */
export interface FakeFile {
  /** Path in the repository. */
  path: string;
  /** Content. */
  data: Uint8Array;
  /** Served through the CDN (LFS) or directly. */
  lfs: boolean;
}

/** One request seen by a fake server. */
export interface Seen {
  /** Which server. */
  server: "hub" | "cdn" | "pypi";
  /** Method. */
  method: string;
  /** Path and query. */
  path: string;
  /** Request headers. */
  headers: Headers;
}

/** Deterministic pseudo-random bytes. */
export function bytes(n: number, seed = 1): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** sha256 hex. */
export function sha256(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** git blob id. */
export function gitOid(data: Uint8Array): string {
  return createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
}

/** Switches for the next responses that carry file bytes. */
export interface Faults {
  /** Send only this many bytes, then drop the connection (for `dropTimes` responses). */
  dropAfter?: number;
  /** How many responses to drop (default 1). */
  dropTimes?: number;
  /** Answer 200 with the whole body even to a `Range` request. */
  ignoreRange?: boolean;
  /** Flip one byte of the body (same length). */
  corrupt?: boolean;
}

/** Serves `data` honoring `Range: bytes=N-` unless told otherwise. */
function serveBytes(req: Request, data: Uint8Array, faults: Faults, headers: Headers): Response {
  let body = data;
  if (faults.corrupt) {
    body = data.slice();
    body[body.length >> 1] ^= 0xff;
  }
  let status = 200;
  const range = req.headers.get("range");
  let start = 0;
  if (range && !faults.ignoreRange) {
    const m = /^bytes=(\d+)-$/.exec(range);
    if (!m) return new Response(null, { status: 416 });
    start = Number(m[1]);
    if (start >= body.length) {
      return new Response(null, {
        status: 416,
        headers: { "content-range": `bytes */${body.length}` },
      });
    }
    status = 206;
    headers.set("content-range", `bytes ${start}-${body.length - 1}/${body.length}`);
  }
  const slice = body.subarray(start);
  headers.set("content-length", String(slice.length));
  headers.set("accept-ranges", "bytes");
  if (req.method === "HEAD") return new Response(null, { status, headers });
  if (faults.dropAfter !== undefined && (faults.dropTimes ?? 1) > 0) {
    faults.dropTimes = (faults.dropTimes ?? 1) - 1;
    const cut = Math.min(faults.dropAfter, slice.length - 1);
    if (faults.dropTimes === 0) delete faults.dropAfter;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(slice.slice(0, cut));
        setTimeout(() => c.error(new Error("test: connection dropped on purpose")), 20);
      },
    });
    return new Response(stream, { status, headers });
  }
  return new Response(slice.slice(), { status, headers });
}

/** A fake hub plus its CDN. */
export class FakeHub implements AsyncDisposable {
  /** Repositories: "ORG/REPO" -> files. */
  repos = new Map<string, FakeFile[]>();
  /** Repositories that answer 401 GatedRepo without `Authorization: Bearer <token>`. */
  gated = new Map<string, string>();
  /** Every request, in order. */
  seen: Seen[] = [];
  /** Faults applied by the CDN (and by the hub for small files). */
  faults: Faults = {};
  /** Listing page size (pagination through `Link`). */
  pageSize = 1000;
  /** Extra listing entries (e.g. hostile names). */
  extraEntries: unknown[] = [];
  /** When set, resolve answers redirect to this absolute URL instead. */
  redirectTo?: string;
  /** The commit id served in X-Repo-Commit. */
  readonly commit = "0123456789abcdef0123456789abcdef01234567";
  #hub: Deno.HttpServer<Deno.NetAddr>;
  #cdn: Deno.HttpServer<Deno.NetAddr>;

  constructor() {
    const quiet = {
      hostname: "127.0.0.1",
      port: 0,
      onListen() {},
      onError: () => new Response(null, { status: 500 }),
    };
    this.#cdn = Deno.serve(quiet, (req) => this.#cdnHandler(req));
    this.#hub = Deno.serve(quiet, (req) => this.#hubHandler(req));
  }

  /** The hub's base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#hub.addr.port}`;
  }

  /** The CDN's base URL (another origin: another port). */
  get cdnUrl(): string {
    return `http://127.0.0.1:${this.#cdn.addr.port}`;
  }

  /** Requests seen by one server. */
  by(server: Seen["server"]): Seen[] {
    return this.seen.filter((s) => s.server === server);
  }

  #cdnHandler(req: Request): Response {
    const u = new URL(req.url);
    this.seen.push({
      server: "cdn",
      method: req.method,
      path: u.pathname + u.search,
      headers: req.headers,
    });
    const sha = u.pathname.split("/").pop();
    for (const files of this.repos.values()) {
      const f = files.find((f) => f.lfs && sha256(f.data) === sha);
      if (f) {
        return serveBytes(
          req,
          f.data,
          this.faults,
          new Headers({ etag: `"cdn-${sha!.slice(0, 8)}"` }),
        );
      }
    }
    return new Response("no such object", { status: 404 });
  }

  #hubHandler(req: Request): Response {
    const u = new URL(req.url);
    this.seen.push({
      server: "hub",
      method: req.method,
      path: u.pathname + u.search,
      headers: req.headers,
    });
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/main$/.exec(u.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/.exec(u.pathname);
    const repo = api?.[1] ?? resolve?.[1];
    const files = repo === undefined ? undefined : this.repos.get(repo);
    if (files === undefined || repo === undefined) {
      return new Response(JSON.stringify({ error: "Repository not found" }), {
        status: 401,
        headers: { "x-error-code": "RepoNotFound", "x-error-message": "Repository not found" },
      });
    }
    const token = this.gated.get(repo);
    if (token !== undefined && req.headers.get("authorization") !== `Bearer ${token}`) {
      return new Response(null, {
        status: 401,
        headers: {
          "x-error-code": "GatedRepo",
          "x-error-message": "Access to this model is restricted.",
        },
      });
    }
    if (api) {
      const entries = [
        ...files.map((f) => ({
          type: "file",
          oid: gitOid(f.lfs ? new TextEncoder().encode(`pointer ${sha256(f.data)}`) : f.data),
          size: f.data.length,
          path: f.path,
          ...(f.lfs ? { lfs: { oid: sha256(f.data), size: f.data.length, pointerSize: 134 } } : {}),
        })),
        ...this.extraEntries,
      ];
      const start = Number(u.searchParams.get("cursor") ?? "0");
      const page = entries.slice(start, start + this.pageSize);
      const headers = new Headers({ "content-type": "application/json" });
      if (start + this.pageSize < entries.length) {
        headers.set(
          "link",
          `<${this.url}${u.pathname}?recursive=true&cursor=${start + this.pageSize}>; rel="next"`,
        );
      }
      return new Response(JSON.stringify(page), { headers });
    }
    const path = decodeURIComponent(resolve![2]);
    const f = files.find((f) => f.path === path);
    if (f === undefined) {
      return new Response("Entry not found", {
        status: 404,
        headers: { "x-error-code": "EntryNotFound" },
      });
    }
    if (this.redirectTo !== undefined) {
      return new Response(null, { status: 302, headers: { location: this.redirectTo } });
    }
    if (f.lfs) {
      const sha = sha256(f.data);
      return new Response(null, {
        status: 302,
        headers: {
          location: `${this.cdnUrl}/repos/ab/cd/${sha}?X-Amz-Signature=test&Expires=9999999999`,
          "x-linked-size": String(f.data.length),
          "x-linked-etag": `"${sha}"`,
          "x-repo-commit": this.commit,
          etag: `"${gitOid(f.data)}"`,
        },
      });
    }
    return serveBytes(
      req,
      f.data,
      this.faults,
      new Headers({ etag: `"${gitOid(f.data)}"`, "x-repo-commit": this.commit }),
    );
  }

  /** Stops both servers. */
  async close(): Promise<void> {
    await Promise.all([this.#hub.shutdown(), this.#cdn.shutdown()]);
  }

  /** Stops both servers (`await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** A fake PyPI: `/pypi/PKG/VER/json` and `/packages/FILE`. */
export class FakePypi implements AsyncDisposable {
  /** "pkg==ver" -> wheel file name and bytes. */
  wheels = new Map<string, { filename: string; data: Uint8Array; advertisedSha?: string }>();
  /** Every request. */
  seen: Seen[] = [];
  /** Faults for wheel downloads. */
  faults: Faults = {};
  /** Answer 404 on `/pypi/PKG/VER/json` (as some proxies do); `/pypi/PKG/json` still works. */
  noVersionRoute = false;
  #server: Deno.HttpServer<Deno.NetAddr>;

  constructor() {
    const quiet = {
      hostname: "127.0.0.1",
      port: 0,
      onListen() {},
      onError: () => new Response(null, { status: 500 }),
    };
    this.#server = Deno.serve(quiet, (req) => this.#handler(req));
  }

  /** Base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  #handler(req: Request): Response {
    const u = new URL(req.url);
    this.seen.push({ server: "pypi", method: req.method, path: u.pathname, headers: req.headers });
    const files = (name: string, ver: string) => {
      const w = this.wheels.get(`${name}==${ver}`);
      if (!w) return undefined;
      return [
        {
          packagetype: "sdist",
          filename: `${name}-${ver}.tar.gz`,
          url: `${this.url}/nope`,
          digests: { sha256: "0".repeat(64) },
          size: 10,
        },
        {
          packagetype: "bdist_wheel",
          filename: w.filename,
          url: `${this.url}/packages/${w.filename}`,
          digests: { sha256: w.advertisedSha ?? sha256(w.data) },
          size: w.data.length,
        },
      ];
    };
    const json = /^\/pypi\/([^/]+)\/([^/]+)\/json$/.exec(u.pathname);
    if (json) {
      const urls = this.noVersionRoute ? undefined : files(json[1], json[2]);
      if (!urls) return new Response(null, { status: 404 });
      return Response.json({ info: { name: json[1], version: json[2] }, urls });
    }
    const project = /^\/pypi\/([^/]+)\/json$/.exec(u.pathname);
    if (project) {
      const releases: Record<string, unknown> = {};
      for (const key of this.wheels.keys()) {
        const [name, ver] = key.split("==");
        if (name === project[1]) releases[ver] = files(name, ver);
      }
      if (Object.keys(releases).length === 0) return new Response(null, { status: 404 });
      return Response.json({ info: { name: project[1] }, releases, urls: [] });
    }
    const pkg = /^\/packages\/(.+)$/.exec(u.pathname);
    const w = pkg ? [...this.wheels.values()].find((w) => w.filename === pkg[1]) : undefined;
    if (!w) return new Response("not found", { status: 404 });
    return serveBytes(req, w.data, this.faults, new Headers());
  }

  /** Stops the server. */
  async close(): Promise<void> {
    await this.#server.shutdown();
  }

  /** Stops the server (`await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
