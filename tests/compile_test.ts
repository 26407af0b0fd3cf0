/**
 * The single executable (`deno task compile`): built with the kernel library embedded, it runs
 * `--version`, `doctor` and a greedy generation whose token hash equals `./cflow generate`'s.
 *
 * `deno compile` needs a `denort` runtime that cannot be downloaded here and that no registry
 * carries; the test runs when `DENORT_BIN` names one and is ignored otherwise, saying why. Without
 * it, the script's refusal is tested.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const GGUF = `${ROOT}/cache/models/smollm2-135m-instruct.Q4_1.gguf`;

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
      const version = await run(bin, ["--version"], { HOME: home });
      assert.equal(version.code, 0, version.stderr);
      assert.match(version.stdout, /^cflow \d+\.\d+\.\d+/);
      const doctor = await run(bin, ["doctor", "--json"], { HOME: home });
      assert.equal(doctor.code, 0, doctor.stderr);
      assert.ok(typeof JSON.parse(doctor.stdout).kernels.variant === "string", doctor.stdout);
      // The same greedy generation through the executable and through the launcher.
      const args = ["--prompt", "The three primary colors are", "--max-tokens", "16"];
      const gen = ["generate", "--model", GGUF, ...args, "--temperature", "0", "--json"];
      const a = await run(bin, gen, { HOME: home, CFLOW_CACHE: `${dir}/cache` });
      assert.equal(a.code, 0, a.stderr);
      const b = await run(`${ROOT}/cflow`, gen, { CFLOW_CACHE: `${dir}/cache2` });
      assert.equal(b.code, 0, b.stderr);
      assert.equal(JSON.parse(a.stdout).hash, JSON.parse(b.stdout).hash);
      // No model given and none pulled: a hint, not a crash.
      const none = await run(bin, ["generate", ...args], { HOME: home });
      assert.equal(none.code, 2, none.stderr);
      assert.match(none.stderr, /cflow pull smollm2/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
