/**
 * cflow run as a package from a registry (`deno run jsr:@cflow/run ...`), end to end: a loopback
 * server serves this checkout the way JSR serves the published package (the import map's bare
 * specifiers rewritten, `dist/` and `ffi/dist.ts` as `deno task publish:prepare` makes them), and
 * `deno run http://127.0.0.1:PORT/mod.ts generate ...` runs in a fresh process:
 *
 * - with only --allow-import and read access to the model: the WebAssembly build, imported as a
 *   module, and the greedy hash of the native scalar variant;
 * - with network, cache and FFI permissions: the native library fetched, checked against its
 *   pinned SHA-256, cached 0700, and the native default variant's hash;
 * - with a tampered library on the server: refused, nothing cached, the WebAssembly build.
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { BUILDS, distManifest, renderDistModule } from "../scripts/prepare-publish.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const GGUF = `${ROOT}/cache/models/smollm2-135m-instruct.Q4_1.gguf`;
const present = (() => {
  try {
    return Deno.statSync(GGUF).isFile && Deno.statSync(BUILDS.wasm).isFile;
  } catch {
    return false;
  }
})();

const IMPORTS: Record<string, string> = JSON.parse(Deno.readTextFileSync(`${ROOT}/deno.json`))
  .imports;

/** Serves the checkout as the published package; `tamper` corrupts the native library. */
async function servePackage(state: { tamper: boolean; requests: string[] }) {
  const manifest = await distManifest();
  const distModule = renderDistModule(await Deno.readTextFile(`${ROOT}/ffi/dist.ts`), manifest);
  const byName = new Map([
    [manifest.native!.file, BUILDS.native],
    [manifest.wasm!.file, BUILDS.wasm],
  ]);
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = decodeURIComponent(new URL(req.url).pathname);
    state.requests.push(path);
    if (path.includes("..") || path.includes("\0")) {
      return new Response("bad path", { status: 400 });
    }
    if (path === "/ffi/dist.ts") {
      return new Response(distModule, { headers: { "content-type": "application/typescript" } });
    }
    if (path.startsWith("/dist/")) {
      const file = byName.get(path.slice("/dist/".length));
      if (file === undefined) return new Response("not found", { status: 404 });
      const bytes = await Deno.readFile(file);
      if (state.tamper && file === BUILDS.native) bytes[bytes.length >> 1] ^= 0xff;
      return new Response(bytes, {
        headers: {
          "content-type": file.endsWith(".wasm") ? "application/wasm" : "application/octet-stream",
        },
      });
    }
    if (!path.endsWith(".ts")) return new Response("not found", { status: 404 });
    let text: string;
    try {
      text = await Deno.readTextFile(`${ROOT}${path}`);
    } catch {
      return new Response("not found", { status: 404 });
    }
    // What publishing does to bare specifiers of the import map.
    for (const [bare, target] of Object.entries(IMPORTS)) {
      text = text.replaceAll(`from "${bare}"`, `from "${target}"`);
    }
    return new Response(text, { headers: { "content-type": "application/typescript" } });
  });
}

/** Runs `cmd` with only the environment it needs (the Deno cache is found through HOME). */
async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const keep: Record<string, string> = { NO_COLOR: "1" };
  for (const k of ["HOME", "PATH", "DENO_DIR"]) {
    const v = Deno.env.get(k);
    if (v !== undefined) keep[k] = v;
  }
  const out = await new Deno.Command(cmd, {
    args,
    stdout: "piped",
    stderr: "piped",
    env: { ...keep, ...env },
    clearEnv: true,
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test({
  name: "as a registry package: WebAssembly without FFI, the pinned native library with it",
  ignore: !present,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-remote-" });
    const state = { tamper: false, requests: [] as string[] };
    const server = await servePackage(state);
    try {
      const model = `${dir}/smollm2.cflow`;
      await convertFile(GGUF, model, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      const gen = ["generate", "--model", model, "--prompt", "The three primary colors are"];
      gen.push("--max-tokens", "12", "--temperature", "0", "--json");
      const hashOf = (r: { code: number; stdout: string; stderr: string }) => {
        assert.equal(r.code, 0, r.stderr);
        return JSON.parse(r.stdout).hash as string;
      };
      // References from the checkout, through the launcher.
      const scalar = hashOf(await run(`${ROOT}/cflow`, gen, { CFLOW_KERNEL_VARIANT: "scalar" }));
      const nativeHash = hashOf(await run(`${ROOT}/cflow`, gen));

      // Where the two references differ (the best variant is not scalar), each hash below also
      // says which kernels ran.
      console.log(`  native scalar ${scalar}, native default ${nativeHash}`);
      const host = `127.0.0.1:${server.addr.port}`;
      const main = `http://${host}/mod.ts`;
      const base = ["run", "--no-prompt", `--allow-import=${host}`];

      // 1. Sandboxed: no FFI, no network, no writes.
      const deno = Deno.execPath();
      const wasm = await run(deno, [...base, `--allow-read=${model}`, main, ...gen]);
      assert.equal(hashOf(wasm), scalar, "the WebAssembly build computes what native scalar does");
      assert.match(wasm.stderr, /running the WebAssembly build/);
      assert.ok(state.requests.includes("/dist/cflow_kernels.wasm"));

      // 2. Permitted: fetched, checked, cached 0700, loaded.
      const cache = `${dir}/cache`;
      const perms = [
        `--allow-net=${host}`,
        "--allow-env=CFLOW_CACHE",
        `--allow-read=${model},${cache}`,
        `--allow-write=${cache}`,
        `--allow-ffi=${cache}`,
      ];
      const nat = await run(deno, [...base, ...perms, main, ...gen], { CFLOW_CACHE: cache });
      assert.equal(hashOf(nat), nativeHash, nat.stderr);
      assert.doesNotMatch(nat.stderr, /WebAssembly/);
      const sha = (await distManifest()).native!.sha256;
      const cached = `${cache}/kernels/${sha}/libcflow_kernels.so`;
      assert.equal((await Deno.stat(cached)).size, (await Deno.stat(BUILDS.native)).size);
      for (const d of [`${cache}/kernels`, `${cache}/kernels/${sha}`]) {
        assert.equal((await Deno.stat(d)).mode! & 0o777, 0o700, d);
      }

      // 3. A tampered library is refused before it is written or loaded.
      state.tamper = true;
      const cache2 = `${dir}/cache2`;
      const perms2 = perms.map((p) => p.replaceAll(cache, cache2));
      const bad = await run(deno, [...base, ...perms2, main, ...gen], { CFLOW_CACHE: cache2 });
      assert.equal(hashOf(bad), scalar, bad.stderr);
      assert.match(bad.stderr, /does not match its pinned SHA-256/);
      assert.match(bad.stderr, /running the WebAssembly build/);
      const kept = await Deno.stat(`${cache2}/kernels/${sha}/libcflow_kernels.so`).catch(() =>
        null
      );
      assert.equal(kept, null, "a library that failed its check is not cached");
    } finally {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
