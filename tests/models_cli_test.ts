/**
 * `cflow list`, `cflow rm` and `--model hf:...` against a temporary CFLOW_CACHE (never the
 * real one): names, sizes, quant and tile types; removal with conversions; hostile names,
 * links out of the cache and conversions being written are refused or left alone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { localLibraryPath } from "../ffi/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

async function cflow(args: string[], cache: string) {
  const out = await new Deno.Command(`${ROOT}/cflow`, {
    args,
    env: { CFLOW_KERNELS: localLibraryPath(), CFLOW_CACHE: cache, NO_COLOR: "1" },
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function withCache(body: (cache: string, outside: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "cflow-models-cli-" });
  try {
    await Deno.mkdir(`${dir}/cache/models/hf/org/repo`, { recursive: true });
    await Deno.mkdir(`${dir}/cache/models/.pull/hf/org`, { recursive: true });
    await Deno.mkdir(`${dir}/cache/converted`, { recursive: true });
    await Deno.mkdir(`${dir}/outside`);
    await body(`${dir}/cache`, `${dir}/outside`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const SHA = "ab".repeat(32);

async function fill(cache: string, outside: string) {
  const m = `${cache}/models`;
  await Deno.writeFile(`${m}/smollm2-135m-instruct.Q4_1.gguf`, new Uint8Array(1000));
  await Deno.writeFile(`${m}/mine.gguf`, new Uint8Array(300));
  await Deno.writeFile(`${m}/hf/org/repo/repo-Q4_0.gguf`, new Uint8Array(2000));
  await Deno.writeTextFile(
    `${m}/.pull/hf/org/repo.json`,
    JSON.stringify({
      repo: "org/repo",
      revision: "main",
      files: [{ path: "repo-Q4_0.gguf", size: 2000, oid: "0".repeat(40), sha256: SHA }],
      have: { "repo-Q4_0.gguf": SHA },
    }),
  );
  await Deno.writeFile(`${outside}/precious.gguf`, new Uint8Array(50));
  await Deno.symlink(`${outside}/precious.gguf`, `${m}/link.gguf`);
  await Deno.symlink(outside, `${m}/hf/evil`); // a folder link: never followed
  const c = `${cache}/converted`;
  // A real .cflow (its header, metadata and directories are read) and an unreadable one.
  await Deno.copyFile(`${ROOT}/models/builtin/arch2_4_combined.cflow`, `${c}/arch.auto.cflow`);
  await Deno.writeFile(`${c}/mine-0123456789ab.q4_0.cflow`, new Uint8Array(70));
  await Deno.writeFile(`${c}/repo-Q4_0-0123456789ab.auto.cflow`, new Uint8Array(80));
  await Deno.writeFile(`${c}/.mine-0123456789ab.auto.cflow.tmp-1-x`, new Uint8Array(5));
}

Deno.test("cflow list: models with names, sizes, sha256 and source; conversions with their model, quant and tile types", async () => {
  await withCache(async (cache, outside) => {
    await fill(cache, outside);
    const r = await cflow(["list", "--json"], cache);
    assert.equal(r.code, 0, r.stderr);
    const items = JSON.parse(r.stdout) as Record<string, unknown>[];
    const byName = new Map(items.map((i) => [i.name, i]));
    assert.equal(byName.get("smollm2")?.source, "alias");
    assert.equal(byName.get("smollm2")?.size, 1000);
    assert.match(String(byName.get("smollm2")?.sha256), /^b179c952/);
    assert.equal(byName.get("hf:org/repo:repo-Q4_0.gguf")?.sha256, SHA);
    assert.equal(byName.get("mine.gguf")?.source, "file");
    assert.equal(byName.get("link.gguf")?.size, 50);
    assert.ok(![...byName.keys()].some((n) => String(n).includes("evil")), r.stdout);
    const arch = byName.get("arch.auto.cflow")!;
    assert.equal(arch.kind, "conversion");
    assert.equal(arch.error, null);
    assert.ok((arch.tileTypes as string[]).length > 0, JSON.stringify(arch));
    assert.equal(byName.get("mine-0123456789ab.q4_0.cflow")?.model, "mine.gguf");
    assert.equal(byName.get("mine-0123456789ab.q4_0.cflow")?.quant, "q4_0");
    assert.equal(
      byName.get("repo-Q4_0-0123456789ab.auto.cflow")?.model,
      "hf:org/repo:repo-Q4_0.gguf",
    );
    assert.ok(!byName.has(".mine-0123456789ab.auto.cflow.tmp-1-x"));
    const human = await cflow(["list"], cache);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^NAME +SIZE +SOURCE +SHA256$/m);
    assert.match(human.stdout, /^smollm2 +1.0 KB +alias +b179c9523d0e$/m);
    assert.match(
      human.stdout,
      /^mine-0123456789ab\.q4_0\.cflow +mine\.gguf +q4_0 +unreadable +70 B$/m,
    );
  });
});

Deno.test("--model hf:... finds the pulled file without the network, or says to pull it", async () => {
  await withCache(async (cache, outside) => {
    await fill(cache, outside);
    const hit = await cflow(["generate", "--model", "hf:org/repo:Q4_0", "--prompt", "x"], cache);
    // The file is zeros, so it fails as a model, but only after it was found in the cache.
    assert.equal(hit.code, 1, hit.stderr);
    assert.match(hit.stderr, /repo-Q4_0\.gguf/);
    assert.doesNotMatch(hit.stderr, /cflow pull/);
    const miss = await cflow(["generate", "--model", "hf:org/repo:Q8_0", "--prompt", "x"], cache);
    assert.equal(miss.code, 1, miss.stderr);
    assert.match(miss.stderr, /run 'cflow pull hf:org\/repo:Q8_0' first/);
  });
});

Deno.test("cflow rm: removes a model and its conversions only; hostile names, unknown names and links out of the cache", async () => {
  await withCache(async (cache, outside) => {
    await fill(cache, outside);
    const c = `${cache}/converted`;
    for (
      const bad of ["../outside/precious.gguf", "/etc/passwd", "..", ".pull", "a/b.gguf", "x\u0001"]
    ) {
      const r = await cflow(["rm", bad], cache);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
      assert.match(r.stderr, /not a model name/);
    }
    const unknown = await cflow(["rm", "nothing.gguf"], cache);
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(unknown.stderr, /no model "nothing\.gguf" in the cache.*cflow list/);
    const evil = await cflow(["rm", "hf:evil/precious.gguf"], cache);
    assert.equal(evil.code, 1, evil.stderr);
    assert.ok(await exists(`${outside}/precious.gguf`));

    const r = await cflow(["rm", "mine.gguf", "--json"], cache);
    assert.equal(r.code, 0, r.stderr);
    const removed = JSON.parse(r.stdout).removed as { kind: string; name: string; size: number }[];
    assert.deepEqual(removed.map((x) => [x.kind, x.name, x.size]), [
      ["model", "mine.gguf", 300],
      ["conversion", "mine-0123456789ab.q4_0.cflow", 70],
    ]);
    assert.ok(!await exists(`${cache}/models/mine.gguf`));
    assert.ok(await exists(`${c}/.mine-0123456789ab.auto.cflow.tmp-1-x`), "a temp file stays");
    assert.ok(await exists(`${c}/arch.auto.cflow`));

    const hf = await cflow(["rm", "hf:org/repo:Q4_0"], cache);
    assert.equal(hf.code, 0, hf.stderr);
    assert.match(hf.stdout, /removed model hf:org\/repo:repo-Q4_0\.gguf \(2.0 KB\)/);
    assert.ok(!await exists(`${c}/repo-Q4_0-0123456789ab.auto.cflow`));

    const link = await cflow(["rm", "link.gguf"], cache);
    assert.equal(link.code, 0, link.stderr);
    assert.ok(!await exists(`${cache}/models/link.gguf`));
    assert.ok(await exists(`${outside}/precious.gguf`), "the link's target is never removed");
  });
});
