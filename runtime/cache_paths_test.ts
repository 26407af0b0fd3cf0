import assert from "node:assert/strict";
import { CacheDirError, cacheRoot, convertedDir, modelsDir } from "./cache_paths.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("cache root: CFLOW_CACHE, else $XDG_CACHE_HOME/cflow, else $HOME/.cache/cflow", () => {
  const all = { CFLOW_CACHE: "/srv/c", XDG_CACHE_HOME: "/x", HOME: "/home/ada" };
  assert.equal(cacheRoot(env(all)), "/srv/c");
  assert.equal(cacheRoot(env({ ...all, CFLOW_CACHE: "" })), "/x/cflow");
  assert.equal(cacheRoot(env({ HOME: "/home/ada", XDG_CACHE_HOME: "" })), "/home/ada/.cache/cflow");
  assert.equal(modelsDir(env(all)), "/srv/c/models");
  assert.equal(convertedDir(env({ HOME: "/home/ada" })), "/home/ada/.cache/cflow/converted");
});

Deno.test("cache root: trailing slashes are dropped; the root folder stays itself", () => {
  assert.equal(cacheRoot(env({ CFLOW_CACHE: "/srv/c//" })), "/srv/c");
  assert.equal(cacheRoot(env({ XDG_CACHE_HOME: "/x/" })), "/x/cflow");
  assert.equal(cacheRoot(env({ CFLOW_CACHE: "/" })), "/");
  assert.equal(modelsDir(env({ CFLOW_CACHE: "/" })), "/models");
  assert.equal(cacheRoot(env({ HOME: "/" })), "/.cache/cflow");
});

Deno.test("cache root: a relative variable is refused, naming it, never resolved", () => {
  for (
    const [vars, name] of [
      [{ CFLOW_CACHE: "cache", HOME: "/home/ada" }, "CFLOW_CACHE"],
      [{ CFLOW_CACHE: "./c" }, "CFLOW_CACHE"],
      [{ XDG_CACHE_HOME: "~/.cache", HOME: "/home/ada" }, "XDG_CACHE_HOME"],
      [{ HOME: "home/ada" }, "HOME"],
    ] as const
  ) {
    assert.throws(
      () => cacheRoot(env(vars)),
      (e: unknown) =>
        e instanceof CacheDirError && e.message.includes(`${name} must be an absolute path`) &&
        e.message.includes(`"${Object.values(vars)[0]}"`),
      name,
    );
  }
  // A later variable does not rescue a bad earlier one.
  assert.throws(() => cacheRoot(env({ XDG_CACHE_HOME: "rel", HOME: "/h" })), CacheDirError);
});

Deno.test("cache root: control characters and no variable at all are refused", () => {
  assert.throws(() => cacheRoot(env({ CFLOW_CACHE: "/a\nb" })), /control characters/);
  assert.throws(
    () => cacheRoot(env({})),
    (e: unknown) => e instanceof CacheDirError && /set CFLOW_CACHE/.test(e.message),
  );
});

Deno.test({
  name: "cache root: the process environment, where granted",
  // The default reader needs --allow-env (the test task grants it).
  ignore: Deno.permissions.querySync({ name: "env" }).state !== "granted",
  fn: readsProcessEnvironment,
});

function readsProcessEnvironment() {
  const saved = Deno.env.get("CFLOW_CACHE");
  try {
    Deno.env.set("CFLOW_CACHE", "/tmp/cflow-cache-paths-test");
    assert.equal(cacheRoot(), "/tmp/cflow-cache-paths-test");
    assert.equal(convertedDir(), "/tmp/cflow-cache-paths-test/converted");
  } finally {
    if (saved === undefined) Deno.env.delete("CFLOW_CACHE");
    else Deno.env.set("CFLOW_CACHE", saved);
  }
}
