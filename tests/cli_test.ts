/**
 * The `./cflow` launcher and CLI as a user runs them: a real process with
 * the launcher's scoped permissions.
 */
import assert from "node:assert/strict";
import { relative } from "node:path";
import denoJson from "../deno.json" with { type: "json" };
import { VERSION } from "../version.ts";
import { SMOLLM2_GGUF, smollm2Present, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const CFLOW = `${ROOT}cflow`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cflow(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const clean: Record<string, string> = {
    CFLOW_KERNELS: "",
    CFLOW_THREADS: "",
    CFLOW_KERNEL_VARIANT: "",
    CFLOW_CPU_DISABLE: "",
    NO_COLOR: "1",
    ...TEST_CACHE_ENV,
  };
  const out = await new Deno.Command(CFLOW, {
    args,
    env: { ...clean, ...env },
    stdin: "null",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function doctor(env: Record<string, string> = {}, args: string[] = []) {
  const r = await cflow(["doctor", "--json", ...args], env);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

Deno.test("--version matches deno.json", async () => {
  assert.equal(VERSION, denoJson.version);
  const r = await cflow(["--version"]);
  assert.equal(r.code, 0);
  assert.equal(r.stdout.trim(), `cflow ${denoJson.version}`);
});

Deno.test("doctor reports the toolchain, the best variant and scoped FFI", async () => {
  const report = await doctor();
  assert.equal(report.deno.version, "2.9.6");
  assert.equal(report.zig.version, "0.14.1");
  assert.match(report.zig.build, /ReleaseFast; x86_64-linux-gnu/);
  const supported: string[] = report.kernels.supported;
  assert.equal(report.kernels.variant, supported[supported.length - 1]);
  if (report.cpu.features.includes("avx512vnni")) {
    assert.equal(report.kernels.variant, "avx512vnni");
  }
  assert.equal(report.kernels.library, `${ROOT}kernels-zig/zig-out/lib/libcflow_kernels.so`);
  assert.equal(report.threads.count, report.cpu.physicalCores);
  assert.equal(report.permissions.ffi, "kernel library only");
  const text = await cflow(["doctor"]);
  assert.equal(text.code, 0);
  assert.match(text.stdout, new RegExp(`kernel\\s+${report.kernels.variant} \\(auto`));
  // Panels are the default on every SIMD variant, and doctor names the kernel.
  assert.equal(report.kernels.panels.default, report.kernels.variant !== "scalar");
  assert.match(
    text.stdout,
    /weights\s+packed into panels at load \(--packed auto; panel kernel: vp/,
  );
  const scalar = await doctor({ CFLOW_KERNEL_VARIANT: "scalar" });
  assert.equal(scalar.kernels.panels.default, false);
});

Deno.test("CFLOW_KERNEL_VARIANT forces each supported variant", async () => {
  const { kernels } = await doctor();
  for (const v of kernels.supported as string[]) {
    const report = await doctor({ CFLOW_KERNEL_VARIANT: v });
    assert.equal(report.kernels.variant, v);
    assert.match(report.kernels.variantSource, /CFLOW_KERNEL_VARIANT/);
  }
});

Deno.test("a variant the CPU cannot run is refused with a clear error", async () => {
  const r = await cflow(["doctor"], {
    CFLOW_KERNEL_VARIANT: "avx512vnni",
    CFLOW_CPU_DISABLE: "avx512vnni",
  });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /kernel variant "avx512vnni" cannot run on this CPU/);
  assert.equal(r.stdout, "");
  const bogus = await cflow(["doctor"], { CFLOW_KERNEL_VARIANT: "sve2" });
  assert.equal(bogus.code, 1);
  assert.match(bogus.stderr, /CFLOW_KERNEL_VARIANT: unknown kernel variant "sve2"/);
  // The other architecture's variants are known names that this library
  // does not hold, so they cannot run here.
  const other = Deno.build.arch === "aarch64" ? "avx2" : "neon_dotprod";
  const foreign = await cflow(["doctor"], { CFLOW_KERNEL_VARIANT: other });
  assert.equal(foreign.code, 1);
  assert.match(foreign.stderr, new RegExp(`kernel variant "${other}" cannot run on this CPU`));
});

Deno.test("threads come from --threads, then CFLOW_THREADS, and are validated", async () => {
  assert.equal((await doctor({ CFLOW_THREADS: "3" })).threads.count, 3);
  assert.equal((await doctor({ CFLOW_THREADS: "3" }, ["--threads", "1"])).threads.count, 1);
  for (const bad of ["0", "abc", "999"]) {
    // A bad value on the command line is a usage error (exit 2).
    const r = await cflow(["doctor", "--threads", bad]);
    assert.equal(r.code, 2, bad);
    assert.match(r.stderr, /--threads: .* is not a thread count/);
  }
  // From the environment it is an error of the setup (exit 1).
  const env = await cflow(["doctor"], { CFLOW_THREADS: "0" });
  assert.equal(env.code, 1, env.stderr);
  assert.match(env.stderr, /CFLOW_THREADS: .* is not a thread count/);
});

Deno.test("usage errors exit 2; unimplemented commands say so", async () => {
  const unknown = await cflow(["frobnicate"]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command 'frobnicate'/);
  const badFlag = await cflow(["doctor", "--nope"]);
  assert.equal(badFlag.code, 2);
  const analyze = await cflow(["analyze"]);
  assert.equal(analyze.code, 2);
  assert.match(analyze.stderr, /analyze needs --arch/);
  const badPort = await cflow(["serve", "--port", "http"]);
  assert.equal(badPort.code, 2, badPort.stderr);
  assert.match(badPort.stderr, /--port/);
  const help = await cflow(["help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /usage: cflow <command>/);
});

Deno.test("a missing CFLOW_KERNELS library is named in the error", async () => {
  const missing = `${await Deno.makeTempDir()}/libnope.so`;
  const r = await cflow(["doctor"], { CFLOW_KERNELS: missing });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /cannot load the cflow kernel library/);
  assert.ok(r.stderr.includes(missing), r.stderr);
});

Deno.test("a missing file or folder is named plainly, before any permission is needed", async () => {
  const missing = `/tmp/cflow-no-such-${crypto.randomUUID()}.gguf`;
  const runs: [string, string[]][] = [
    ["generate", ["generate", "--model", missing, "--prompt", "hi"]],
    ["generate, relative", ["generate", "--model", "no-such-model.gguf", "--prompt", "hi"]],
    ["inspect", ["inspect", missing]],
    ["convert", ["convert", missing, "/tmp/out.cflow"]],
    ["serve", ["serve", "--model", missing, "--port", "0"]],
  ];
  for (const [what, args] of runs) {
    const r = await cflow(args);
    assert.equal(r.code, 1, `${what}: ${r.stderr}`);
    const name = args.includes("no-such-model.gguf") ? "no-such-model.gguf" : missing;
    assert.equal(r.stderr, `cflow: error: no such file or folder: ${name}\n`, what);
  }
  // convert into a folder that does not exist says which folder.
  const dir = `/tmp/cflow-no-such-dir-${crypto.randomUUID()}`;
  const r = await cflow(["convert", `${ROOT}README.md`, `${dir}/out.cflow`]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`^cflow: error: convert: no such folder: ${dir} `));
  assert.doesNotMatch(r.stderr, /allow-|os error/);
});

Deno.test("a model named through a link is read (the Hugging Face cache's snapshots/ -> blobs/)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-link-" });
  try {
    await Deno.mkdir(`${dir}/blobs`);
    await Deno.mkdir(`${dir}/snapshots`);
    await Deno.copyFile(`${ROOT}tests/fixtures/gguf/all_types.gguf`, `${dir}/blobs/0123abcd`);
    await Deno.symlink("../blobs/0123abcd", `${dir}/snapshots/model.gguf`);
    // By its absolute path, and by a relative one (the launcher runs in this process's folder).
    const named = `${dir}/snapshots/model.gguf`;
    for (const name of [named, relative(Deno.cwd(), named)]) {
      const r = await cflow(["inspect", name]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /format {8}gguf v3/);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "ollama:NAME runs the GGUF file Ollama keeps for it, as the same file named by its path",
  ignore: !smollm2Present,
  async fn() {
    // A store laid out as `ollama pull` leaves it: the manifest names the blob by its sha256.
    const store = await Deno.makeTempDir({ prefix: "cflow-ollama-store-" });
    const cache = await Deno.makeTempDir({ prefix: "cflow-ollama-cache-" });
    try {
      const bytes = await Deno.readFile(SMOLLM2_GGUF);
      const hex = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))
        .map((b) => b.toString(16).padStart(2, "0")).join("");
      await Deno.mkdir(`${store}/blobs`);
      await Deno.writeFile(`${store}/blobs/sha256-${hex}`, bytes);
      await Deno.mkdir(`${store}/manifests/registry.ollama.ai/library/smollm2`, {
        recursive: true,
      });
      await Deno.writeTextFile(
        `${store}/manifests/registry.ollama.ai/library/smollm2/135m`,
        JSON.stringify({
          schemaVersion: 2,
          layers: [
            {
              mediaType: "application/vnd.ollama.image.model",
              digest: `sha256:${hex}`,
              size: bytes.length,
            },
            {
              mediaType: "application/vnd.ollama.image.license",
              digest: `sha256:${"0".repeat(64)}`,
              size: 1,
            },
          ],
        }),
      );
      const args = [
        "--prompt",
        "The three primary colors are",
        "-n",
        "12",
        "--temperature",
        "0",
        "--json",
      ];
      // Converted once into the (temporary) cache under the model's name, not its digest.
      const viaOllama = await cflow(["generate", "--model", "ollama:smollm2:135m", ...args], {
        OLLAMA_MODELS: store,
        CFLOW_CACHE: cache,
      });
      assert.equal(viaOllama.code, 0, viaOllama.stderr);
      assert.match(
        viaOllama.stderr,
        /converting .*sha256-[0-9a-f]{64} once into .*\/ollama-smollm2-135m-/,
      );
      // cflow list names the conversion by the Ollama name it came from.
      const list = await cflow(["list", "--json"], { CFLOW_CACHE: cache });
      assert.equal(list.code, 0, list.stderr);
      const conversions = JSON.parse(list.stdout).filter((e: { kind: string }) =>
        e.kind === "conversion"
      );
      assert.equal(conversions.length, 1);
      assert.equal(conversions[0].sourceFile, "ollama:smollm2:135m");
      const direct = await cflow(["generate", "--model", SMOLLM2_GGUF, ...args]);
      assert.equal(direct.code, 0, direct.stderr);
      assert.equal(JSON.parse(viaOllama.stdout).hash, JSON.parse(direct.stdout).hash);
      const inspect = await cflow(["inspect", "ollama:smollm2:135m"], { OLLAMA_MODELS: store });
      assert.equal(inspect.code, 0, inspect.stderr);
      assert.match(inspect.stdout, new RegExp(`sha256-${hex} \\(${bytes.length} bytes\\)`));
      const converted = await cflow(
        ["convert", "ollama:smollm2:135m", `${cache}/out.cflow`, "--quant", "q8_0"],
        { OLLAMA_MODELS: store },
      );
      assert.equal(converted.code, 0, converted.stderr);
      assert.match(converted.stdout, /cflow q8_0 from gguf \(llama\)/);
      // A name Ollama has not pulled: what was looked for, and how to get it.
      const missing = await cflow(["generate", "--model", "ollama:smollm2", "-n", "1"], {
        OLLAMA_MODELS: store,
        CFLOW_CACHE: cache,
      });
      assert.equal(missing.code, 1, missing.stderr);
      assert.equal(
        missing.stderr,
        `cflow: error: model store: ollama:smollm2 is not in Ollama's store (no ${store}/manifests/` +
          `registry.ollama.ai/library/smollm2/latest): run 'ollama pull smollm2' first, or set ` +
          `OLLAMA_MODELS to Ollama's models folder\n`,
      );
    } finally {
      await Deno.remove(store, { recursive: true });
      await Deno.remove(cache, { recursive: true });
    }
  },
});

Deno.test("serve on a port already taken says so, with the address, before loading the model", async () => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  const t0 = performance.now();
  const r = await cflow(["serve", "--port", String(port)]);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(
    r.stderr,
    `cflow: error: serve: 127.0.0.1:${port} is already in use (another server?); choose another --port\n`,
  );
  assert.equal(r.stdout, "");
  // No model was loaded (packing SmolLM2 alone takes longer than the launcher's start).
  assert.ok(performance.now() - t0 < 15_000);
});
