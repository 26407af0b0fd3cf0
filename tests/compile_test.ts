/**
 * The single executable (`deno task compile`): built with the kernel library embedded, it runs
 * `--version`, `doctor` and a greedy generation whose token hash equals `./cflow generate`'s.
 *
 * `deno compile` needs a `denort` runtime that cannot be downloaded here and that no registry
 * carries; the test runs when `DENORT_BIN` names one and is ignored otherwise, saying why. Without
 * it, the script's refusal is tested.
 */
import assert from "node:assert/strict";
import { SMOLLM2_GGUF } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const GGUF = SMOLLM2_GGUF;

function env(name: string): string | undefined {
  return Deno.permissions.querySync({ name: "env", variable: name }).state === "granted"
    ? Deno.env.get(name)
    : undefined;
}

const DENORT = env("DENORT_BIN");
if (DENORT === undefined) {
  console.warn(
    "compile_test: the executable test is ignored: DENORT_BIN is not set (deno compile needs a " +
      "denort 2.9.6 runtime, which cannot be downloaded here)",
  );
}

async function run(cmd: string, args: string[], extraEnv: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, {
    args,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...extraEnv },
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("compile: without DENORT_BIN the script refuses clearly (exit 3) and writes nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-compile-" });
  try {
    const r = await new Deno.Command("bash", {
      args: [`${ROOT}/scripts/compile.sh`, `${dir}/cflow-bin`],
      env: { DENORT_BIN: "" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(r.code, 3);
    assert.match(new TextDecoder().decode(r.stderr), /set DENORT_BIN to a denort/);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "compile: the executable runs doctor and generates what ./cflow generates",
  ignore: DENORT === undefined,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-compile-" });
    try {
      const bin = `${dir}/cflow-bin`;
      const built = await run("bash", [`${ROOT}/scripts/compile.sh`, bin], { DENORT_BIN: DENORT! });
      assert.equal(built.code, 0, built.stderr);
      const home = `${dir}/home`;
      await Deno.mkdir(home);
      // The cache comes from HOME alone here (neither variable of the caller's environment).
      const userCache = { HOME: home, CFLOW_CACHE: "", XDG_CACHE_HOME: "" };
      const version = await run(bin, ["--version"], userCache);
      assert.equal(version.code, 0, version.stderr);
      assert.match(version.stdout, /^cflow \d+\.\d+\.\d+/);
      const doctor = await run(bin, ["doctor", "--json"], userCache);
      assert.equal(doctor.code, 0, doctor.stderr);
      assert.ok(typeof JSON.parse(doctor.stdout).kernels.variant === "string", doctor.stdout);
      assert.equal(JSON.parse(doctor.stdout).cache.dir, `${home}/.cache/cflow`);
      // The same greedy generation through the executable and through the launcher.
      const args = ["--prompt", "The three primary colors are", "--max-tokens", "16"];
      const gen = ["generate", "--model", GGUF, ...args, "--temperature", "0", "--json"];
      const a = await run(bin, gen, userCache);
      assert.equal(a.code, 0, a.stderr);
      // converted once into the user-level cache under HOME
      const converted = [...Deno.readDirSync(`${home}/.cache/cflow/converted`)];
      assert.equal(converted.filter((e) => e.name.endsWith(".cflow")).length, 1);
      const b = await run(`${ROOT}/cflow`, gen, { CFLOW_CACHE: `${dir}/cache2` });
      assert.equal(b.code, 0, b.stderr);
      assert.equal(JSON.parse(a.stdout).hash, JSON.parse(b.stdout).hash);
      // No model given and none pulled: a hint, not a crash.
      const none = await run(bin, ["generate", ...args], userCache);
      assert.equal(none.code, 2, none.stderr);
      assert.match(none.stderr, /cflow pull smollm2/);
      assert.ok(none.stderr.includes(`${home}/.cache/cflow/models/`), none.stderr);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
