import { join } from "node:path";
import { assertEquals, assertRejects } from "./_test_util.ts";
import { bytes, FakeHub, gitOid, sha256 } from "./_test_hub.ts";
import {
  HttpError,
  IntegrityError,
  NotCachedError,
  pullModel,
  type PullOptions,
  SpecError,
} from "./mod.ts";

const Q4 = bytes(300_000, 7);
const Q8 = bytes(500_000, 8);
const CONFIG = new TextEncoder().encode('{"model_type":"llama"}\n');

async function setup(): Promise<{ hub: FakeHub; cache: string; opts: PullOptions }> {
  const hub = new FakeHub();
  hub.repos.set("org/model-GGUF", [
    { path: "README.md", data: new TextEncoder().encode("# readme\n"), lfs: false },
    { path: "config.json", data: CONFIG, lfs: false },
    { path: "model-Q4_0.gguf", data: Q4, lfs: true },
    { path: "sub/model-Q8_0.gguf", data: Q8, lfs: true },
  ]);
  const cache = await Deno.makeTempDir({ prefix: "cflow-pull-" });
  return { hub, cache, opts: { cacheDir: cache, endpoint: hub.url, retryDelayMs: 10 } };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function partials(cache: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(join(cache, ".pull", "partial"))) out.push(e.name);
  } catch { /* none */ }
  return out;
}

Deno.test("pull hf: a quant is downloaded from the CDN, checked, and cached; the token stays on the hub", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.pageSize = 2; // the listing comes in pages linked by `Link: rel="next"`
  const r = await pullModel("hf:org/model-GGUF:q4_0", { ...opts, token: "hf_secret" });
  assertEquals(r.path, join(cache, "hf/org/model-GGUF/model-Q4_0.gguf"));
  assertEquals([r.size, r.sha256, r.cached], [Q4.length, sha256(Q4), false]);
  assertEquals(await Deno.readFile(r.path), Q4);
  assertEquals(hub.by("hub").filter((s) => s.path.startsWith("/api/")).length, 2);
  for (const s of hub.by("hub")) assertEquals(s.headers.get("authorization"), "Bearer hf_secret");
  assertEquals(hub.by("cdn").length, 1);
  assertEquals(hub.by("cdn")[0].headers.get("authorization"), null);
  assertEquals(await partials(cache), []);

  // again: nothing is downloaded
  const again = await pullModel("hf:org/model-GGUF:Q4_0", opts);
  assertEquals([again.cached, again.sha256], [true, sha256(Q4)]);
  assertEquals(hub.by("cdn").length, 1);

  // a small (non-LFS) file, checked through its git blob id
  const c = await pullModel("hf:org/model-GGUF:config.json", opts);
  assertEquals(await Deno.readFile(c.path), CONFIG);
  assertEquals(c.sha256, sha256(CONFIG));
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: an interrupted download resumes with Range and completes", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.faults = { dropAfter: 120_000 };
  const e = await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q8_0", { ...opts, retries: 0 }),
    HttpError,
    "run again to resume",
  );
  assertEquals(e.status, 0);
  const dest = join(cache, "hf/org/model-GGUF/sub/model-Q8_0.gguf");
  assertEquals(await exists(dest), false);
  const part = join(cache, ".pull", "partial", `${sha256(Q8)}.part`);
  const kept = (await Deno.stat(part)).size;
  assertEquals(kept > 0 && kept < Q8.length, true);

  const r = await pullModel("hf:org/model-GGUF:Q8_0", { ...opts, retries: 0 });
  const last = hub.by("cdn").at(-1)!;
  assertEquals(last.headers.get("range"), `bytes=${kept}-`);
  assertEquals([r.sha256, r.size], [sha256(Q8), Q8.length]);
  assertEquals(await Deno.readFile(dest), Q8);
  assertEquals(await partials(cache), []);

  // within one call: two drops, retried and resumed automatically
  await Deno.remove(dest);
  await Deno.remove(join(cache, ".pull"), { recursive: true });
  hub.faults = { dropAfter: 100_000, dropTimes: 2 };
  const before = hub.by("cdn").length;
  const r2 = await pullModel("hf:org/model-GGUF:Q8_0", opts);
  assertEquals(r2.sha256, sha256(Q8));
  const ranges = hub.by("cdn").slice(before).map((s) => s.headers.get("range"));
  assertEquals(ranges, [null, "bytes=100000-", "bytes=200000-"]);
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: a server that ignores Range (200) restarts the download", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.faults = { dropAfter: 50_000 };
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q4_0", { ...opts, retries: 0 }),
    HttpError,
  );
  hub.faults = { ignoreRange: true };
  const r = await pullModel("hf:org/model-GGUF:Q4_0", { ...opts, retries: 0 });
  assertEquals(hub.by("cdn").at(-1)!.headers.get("range"), "bytes=50000-");
  assertEquals(r.sha256, sha256(Q4));
  assertEquals(await Deno.readFile(r.path), Q4);
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: a corrupted body is rejected and nothing is left behind", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.faults = { corrupt: true };
  const e = await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q4_0", opts),
    IntegrityError,
    "sha256",
  );
  assertEquals(e.expected, sha256(Q4));
  assertEquals(await exists(join(cache, "hf/org/model-GGUF/model-Q4_0.gguf")), false);
  assertEquals(await partials(cache), []);
  // a corrupted small file fails its git blob id the same way
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:config.json", opts),
    IntegrityError,
    "git blob id",
  );
  assertEquals(await exists(join(cache, "hf/org/model-GGUF/config.json")), false);
  // and a clean retry succeeds
  hub.faults = {};
  assertEquals((await pullModel("hf:org/model-GGUF:Q4_0", opts)).sha256, sha256(Q4));
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: offline mode answers from the cache only", async () => {
  const { hub, cache, opts } = await setup();
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q4_0", { ...opts, offline: true }),
    NotCachedError,
  );
  await pullModel("hf:org/model-GGUF:Q4_0", opts);
  const seen = hub.seen.length;
  await hub.close();
  const r = await pullModel("hf:org/model-GGUF:Q4_0", { ...opts, offline: true });
  assertEquals([r.cached, r.sha256, r.path], [
    true,
    sha256(Q4),
    join(cache, "hf/org/model-GGUF/model-Q4_0.gguf"),
  ]);
  // listed but never downloaded
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q8_0", { ...opts, offline: true }),
    NotCachedError,
    "not in the cache",
  );
  // online with the hub gone: a clear transport error
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q4_0", { ...opts, retries: 0 }),
    HttpError,
  );
  assertEquals(hub.seen.length, seen);
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: gated repositories, missing repositories and redirects", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.gated.set("org/model-GGUF", "hf_good");
  await assertRejects(() => pullModel("hf:org/model-GGUF:Q4_0", opts), HttpError, "GatedRepo");
  assertEquals(
    (await pullModel("hf:org/model-GGUF:Q4_0", { ...opts, token: "hf_good" })).sha256,
    sha256(Q4),
  );
  hub.gated.clear();
  await assertRejects(() => pullModel("hf:org/nope", opts), HttpError, "RepoNotFound");
  // redirects: only https (or loopback http), at most 5
  hub.redirectTo = "http://example.com/x";
  await assertRejects(() => pullModel("hf:org/model-GGUF:Q8_0", opts), HttpError, "only https");
  hub.redirectTo = `${hub.url}/org/model-GGUF/resolve/main/sub/model-Q8_0.gguf`;
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:Q8_0", opts),
    HttpError,
    "more than 5 redirects",
  );
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull hf: selection by quant, file, default; ambiguity and bad names refused", async () => {
  const { hub, cache, opts } = await setup();
  await using _ = hub;
  hub.repos.set("org/two", [
    { path: "a-Q4_0.gguf", data: bytes(10, 1), lfs: true },
    { path: "b.Q4_0.gguf", data: bytes(11, 2), lfs: true },
    { path: "b-Q4_K_M.gguf", data: bytes(12, 3), lfs: true },
    { path: "mmproj-Q4_K_M.gguf", data: bytes(13, 4), lfs: true },
  ]);
  hub.extraEntries = [
    {
      type: "file",
      oid: gitOid(bytes(5)),
      size: 5,
      path: "../evil-Q5_0.gguf",
      lfs: { oid: sha256(bytes(5)), size: 5 },
    },
    {
      type: "file",
      oid: gitOid(bytes(5)),
      size: 5,
      path: "/abs-Q5_0.gguf",
      lfs: { oid: sha256(bytes(5)), size: 5 },
    },
    { type: "directory", oid: gitOid(bytes(5)), size: 0, path: "sub" },
  ];
  await assertRejects(() => pullModel("hf:org/two:Q4_0", opts), SpecError, "matches 2 files");
  await assertRejects(() => pullModel("hf:org/two:Q6_K", opts), SpecError, "no GGUF for quant");
  // hostile names in a listing are never selected or written
  await assertRejects(() => pullModel("hf:org/two:Q5_0", opts), SpecError, "no GGUF for quant");
  // no selector: the only Q4_K_M (mmproj files are skipped)
  assertEquals((await pullModel("hf:org/two", opts)).path, join(cache, "hf/org/two/b-Q4_K_M.gguf"));
  // no selector, several GGUFs, no Q4_K_M: refused with the list
  await assertRejects(() => pullModel("hf:org/model-GGUF", opts), SpecError, "model-Q4_0.gguf");
  await assertRejects(
    () => pullModel("hf:org/model-GGUF:missing.gguf", opts),
    SpecError,
    "has no file",
  );

  for (
    const bad of [
      "hf:../x",
      "hf:org",
      "hf:a/b/c",
      "hf:org/re po",
      "hf:org/..",
      "hf:-org/x",
      "hf:org/model-GGUF:../../etc/passwd",
      "hf:org/model-GGUF:/etc/passwd",
      "hf:org/model-GGUF:a//b.gguf",
      "hf:org/model-GGUF:a\\b.gguf",
      "hf:org/model-GGUF:Q4 0",
      "ollama:llama3",
      "pypi:pkg:member",
      "pypi:pkg==1.0:../x",
      "pypi:pkg==1.0:/x",
      "pypi:pkg==1.0:x#sha256=zz",
    ]
  ) {
    await assertRejects(() => pullModel(bad, opts), SpecError);
  }
  await assertRejects(
    () => pullModel("hf:org/x", { ...opts, endpoint: "http://example.com" }),
    HttpError,
    "only https",
  );
  assertEquals(hub.by("cdn").length, 1);
  await Deno.remove(cache, { recursive: true });
});
