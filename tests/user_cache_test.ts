/**
 * The user-level cache as `./cflow` and `scripts/fetch-models.sh` use it: `CFLOW_CACHE`, else
 * `$XDG_CACHE_HOME/cflow`, else `~/.cache/cflow`, each refused when relative; pull aliases as
 * `--model`; and the one-time move of a checkout's old `cache/models/` into the cache
 * (`scripts/cache-dir.sh`). Every process here gets a temporary HOME or cache, never the real one.
 *
 * @module
 */
import assert from "node:assert/strict";
import { localLibraryPath } from "../ffi/mod.ts";
import { SMOLLM2_GGUF, smollm2Present } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const CFLOW = `${ROOT}/cflow`;

/** Deno's own cache, which also follows HOME and XDG_CACHE_HOME: kept, so nothing is refetched. */
const DENO_DIR: string = JSON.parse(
  new TextDecoder().decode(
    (await new Deno.Command(Deno.execPath(), { args: ["info", "--json"], stdout: "piped" })
      .output()).stdout,
  ),
).denoDir;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `./cflow ARGS` with none of the caller's cache variables, and `vars` over them. */
async function cflow(args: string[], vars: Record<string, string>, cwd = ROOT): Promise<Run> {
  const out = await new Deno.Command(CFLOW, {
    args,
    cwd,
    env: {
      // The built library, so that the launcher never rebuilds under a temporary HOME.
      CFLOW_KERNELS: localLibraryPath(),
      CFLOW_THREADS: "",
      CFLOW_KERNEL_VARIANT: "",
      CFLOW_CPU_DISABLE: "",
      NO_COLOR: "1",
      DENO_DIR,
      CFLOW_CACHE: "",
      XDG_CACHE_HOME: "",
      ...vars,
    },
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

async function names(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
}

async function withDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cflow-user-cache-" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a relative CFLOW_CACHE, XDG_CACHE_HOME or HOME is refused (exit 2), naming it", async () => {
  await withDir(async (dir) => {
    const gen = ["generate", "--model", `${dir}/m.cflow`, "--prompt", "hi"];
    const rel = await cflow(gen, { CFLOW_CACHE: "rel/c", HOME: dir }, dir);
    assert.equal(rel.code, 2, rel.stderr);
    assert.match(
      rel.stderr,
      /CFLOW_CACHE must be an absolute path \(starting with '\/'\), not "rel\/c"/,
    );
    const xdg = await cflow(
      ["pull", "smollm2", "--offline"],
      { XDG_CACHE_HOME: "c", HOME: dir },
      dir,
    );
    assert.equal(xdg.code, 2, xdg.stderr);
    assert.match(xdg.stderr, /XDG_CACHE_HOME must be an absolute path .*not "c"/);
    const home = await cflow(["analyze", `${dir}/m.gguf`], { HOME: "home" }, dir);
    assert.equal(home.code, 2, home.stderr);
    assert.match(home.stderr, /HOME must be an absolute path/);
    const comma = await cflow(gen, { CFLOW_CACHE: `${dir}/a,b` }, dir);
    assert.equal(comma.code, 2, comma.stderr);
    assert.match(comma.stderr, /must not contain a comma/);
    // Nothing was made, neither relative to the working folder nor anywhere else in it.
    assert.deepEqual(await names(dir), []);
    // doctor reports the problem instead of failing.
    const doctor = await cflow(["doctor", "--json"], { CFLOW_CACHE: "rel/c" }, dir);
    assert.equal(doctor.code, 0, doctor.stderr);
    const r = JSON.parse(doctor.stdout);
    assert.equal(r.cache.dir, null);
    assert.match(r.cache.error, /CFLOW_CACHE must be an absolute path/);
  });
});

Deno.test("the cache is $XDG_CACHE_HOME/cflow, else ~/.cache/cflow: doctor names it, pull and --model look there", async () => {
  await withDir(async (dir) => {
    const home = `${dir}/home`;
    await Deno.mkdir(home);
    const doctor = await cflow(["doctor", "--json"], { HOME: home });
    assert.equal(doctor.code, 0, doctor.stderr);
    assert.equal(JSON.parse(doctor.stdout).cache.dir, `${home}/.cache/cflow`);
    assert.match(
      (await cflow(["doctor"], { HOME: home })).stdout,
      /^cache +\S+\/home\/\.cache\/cflow$/m,
    );
    assert.ok(!await exists(`${home}/.cache`), "doctor creates nothing");

    const q = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    const miss = await cflow(["pull", "qwen2.5-coder-0.5b", "--offline"], { HOME: home });
    assert.equal(miss.code, 1, miss.stderr);
    assert.ok(
      miss.stderr.includes(`not in the cache (${home}/.cache/cflow/models/${q})`),
      miss.stderr,
    );
    // Made private: the cache and its two folders.
    for (const d of ["", "/models", "/converted"]) {
      assert.equal((await Deno.stat(`${home}/.cache/cflow${d}`)).mode! & 0o777, 0o700, d);
    }

    const xdg = `${dir}/xdg`;
    const viaXdg = await cflow(["pull", "qwen2.5-coder-0.5b", "--offline"], {
      HOME: home,
      XDG_CACHE_HOME: `${xdg}/`,
    });
    assert.equal(viaXdg.code, 1, viaXdg.stderr);
    assert.ok(viaXdg.stderr.includes(`(${xdg}/cflow/models/${q})`), viaXdg.stderr);
    const gen = await cflow(["generate", "--model", "qwen2.5-coder-0.5b", "--prompt", "hi"], {
      HOME: home,
      XDG_CACHE_HOME: xdg,
    });
    assert.equal(gen.code, 1, gen.stderr);
    assert.ok(
      gen.stderr.includes(
        `qwen2.5-coder-0.5b is not in the cache (no ${xdg}/cflow/models/${q}): ` +
          "run 'cflow pull qwen2.5-coder-0.5b' first",
      ),
      gen.stderr,
    );
    // CFLOW_CACHE wins over both.
    const explicit = await cflow(["doctor", "--json"], {
      HOME: home,
      XDG_CACHE_HOME: xdg,
      CFLOW_CACHE: `${dir}/c`,
    });
    assert.equal(JSON.parse(explicit.stdout).cache.dir, `${dir}/c`);
  });
});

Deno.test({
  name: "a pulled alias is a --model: found in models/, converted once into converted/",
  ignore: !smollm2Present,
  async fn() {
    await withDir(async (dir) => {
      const cache = `${dir}/c`;
      await Deno.mkdir(`${cache}/models`, { recursive: true });
      const file = `${cache}/models/smollm2-135m-instruct.Q4_1.gguf`;
      try {
        await Deno.link(SMOLLM2_GGUF, file);
      } catch {
        await Deno.copyFile(SMOLLM2_GGUF, file); // another file system
      }
      const pulled = await cflow(["pull", "smollm2", "--offline", "--json"], {
        CFLOW_CACHE: cache,
      });
      assert.equal(pulled.code, 0, pulled.stderr);
      assert.deepEqual([JSON.parse(pulled.stdout).path, JSON.parse(pulled.stdout).cached], [
        file,
        true,
      ]);
      // analyze converts through the cache as the model commands do; generate then reuses it.
      for (const round of [1, 2]) {
        const r = await cflow(["analyze", "smollm2"], { CFLOW_CACHE: cache });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^ {2}0-29 /m); // SmolLM2's 30 layers
        assert.equal(/converting .* once into/.test(r.stderr), round === 1, r.stderr);
      }
      const gen = ["generate", "--model", "SmolLM2", "-p", "Hi", "-n", "2"];
      const r = await cflow([...gen, "--temperature", "0", "--json"], { CFLOW_CACHE: cache });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).tokens.length, 2);
      assert.doesNotMatch(r.stderr, /converting/);
      const converted = await names(`${cache}/converted`);
      assert.equal(converted.length, 1, converted.join(" "));
      assert.match(converted[0], /^smollm2-135m-instruct\.Q4_1-[0-9a-f]{12}\.auto\.cflow$/);
      assert.deepEqual(await names(`${cache}/models`), [
        "smollm2-135m-instruct.Q4_1.gguf",
      ]);
    });
  },
});

/** Runs `cflow_link_checkout_models ROOT MODELS` of scripts/cache-dir.sh. */
async function link(root: string, models: string): Promise<Run> {
  const out = await new Deno.Command("bash", {
    args: [
      "-c",
      `set -euo pipefail; . "${ROOT}/scripts/cache-dir.sh"; cflow_link_checkout_models "$1" "$2"`,
      "link",
      root,
      models,
    ],
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("an old checkout's cache/models is moved into the user cache once, then linked", async () => {
  await withDir(async (dir) => {
    const root = `${dir}/checkout`;
    const old = `${root}/cache/models`;
    const models = `${dir}/user/cflow/models`;
    await Deno.mkdir(`${old}/hf/org/a`, { recursive: true });
    await Deno.mkdir(`${models}/hf/org/b`, { recursive: true });
    await Deno.writeTextFile(`${old}/only-old.gguf`, "old");
    await Deno.writeTextFile(`${old}/both.gguf`, "same");
    await Deno.writeTextFile(`${models}/both.gguf`, "same");
    await Deno.writeTextFile(`${old}/clash.gguf`, "one");
    await Deno.writeTextFile(`${models}/clash.gguf`, "two");
    await Deno.writeTextFile(`${old}/hf/org/a/x.gguf`, "x");
    await Deno.writeTextFile(`${models}/hf/org/b/y.gguf`, "y");
    await Deno.writeTextFile(`${old}/model.gguf.tmp.42`, "being written");

    // Two models of one name differ: everything else moves, the old folder stays, said why.
    const first = await link(root, models);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /clash\.gguf differs from .*: left where it is/);
    assert.match(first.stderr, /model\.gguf\.tmp\.42 is being written by another run/);
    assert.match(first.stderr, /was not replaced by a link/);
    assert.ok(!(await Deno.lstat(old)).isSymlink);
    assert.deepEqual(await names(old), [
      "clash.gguf",
      "model.gguf.tmp.42",
    ]);
    assert.equal(await Deno.readTextFile(`${models}/only-old.gguf`), "old");
    assert.equal(await Deno.readTextFile(`${models}/both.gguf`), "same");
    assert.equal(await Deno.readTextFile(`${models}/clash.gguf`), "two");
    assert.equal(await Deno.readTextFile(`${models}/hf/org/a/x.gguf`), "x");
    assert.equal(await Deno.readTextFile(`${models}/hf/org/b/y.gguf`), "y");

    // Once the clash is settled and the temporary file is an hour old, the folder becomes a link.
    await Deno.remove(`${old}/clash.gguf`);
    const hourAgo = new Date(Date.now() - 2 * 3600_000);
    await Deno.utime(`${old}/model.gguf.tmp.42`, hourAgo, hourAgo);
    const second = await link(root, models);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stderr, /is now a link to/);
    assert.equal(await Deno.readLink(old), models);
    assert.equal(await Deno.readTextFile(`${old}/only-old.gguf`), "old");
    assert.ok(
      !await exists(`${models}/model.gguf.tmp.42`),
      "a stale temporary file is not carried over",
    );

    // Again: nothing to do, nothing said.
    const third = await link(root, models);
    assert.deepEqual([third.code, third.stderr], [0, ""]);
    // Another cache (CFLOW_CACHE changed): the link follows it.
    const other = `${dir}/other/models`;
    await Deno.mkdir(other, { recursive: true });
    assert.equal((await link(root, other)).code, 0);
    assert.equal(await Deno.readLink(old), other);
    // The checkout's cache/ as the cache itself (CFLOW_CACHE=ROOT/cache, as the tests run):
    // left alone.
    assert.deepEqual(await link(root, old).then((r) => [r.code, r.stderr]), [0, ""]);
    assert.equal(await Deno.readLink(old), other);
    // A fresh clone, without cache/ at all: the link is made.
    const fresh = `${dir}/fresh`;
    assert.equal((await link(fresh, models)).code, 0);
    assert.equal(await Deno.readLink(`${fresh}/cache/models`), models);
  });
});
