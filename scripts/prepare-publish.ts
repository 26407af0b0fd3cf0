/**
 * Before `deno publish`: copies the built kernels (native library and
 * WebAssembly build) into `dist/` and pins them, by size and SHA-256, in
 * `ffi/dist.ts`, which a package loaded from the registry reads
 * (`ffi/remote_kernels.ts`). Build first (`deno task build:kernels`); run
 * through `deno task publish:prepare`. Undo with `git checkout ffi/dist.ts`.
 *
 * @module
 */

import type { DistFile, DistManifest } from "../ffi/dist.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** The built files and their names under `dist/`. */
export const BUILDS = {
  native: `${ROOT}/kernels-zig/zig-out/lib/libcflow_kernels.so`,
  wasm: `${ROOT}/kernels-zig/zig-out/wasm/cflow_kernels.wasm`,
} as const;

async function describe(path: string): Promise<DistFile> {
  const bytes = await Deno.readFile(path);
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return {
    file: path.slice(path.lastIndexOf("/") + 1),
    size: bytes.length,
    sha256: Array.from(d, (b) => b.toString(16).padStart(2, "0")).join(""),
  };
}

/** The manifest of the current builds. */
export async function distManifest(): Promise<DistManifest> {
  return { native: await describe(BUILDS.native), wasm: await describe(BUILDS.wasm) };
}

/** `ffi/dist.ts` pinning `manifest`: the committed file with its last line replaced. */
export function renderDistModule(committed: string, manifest: DistManifest): string {
  const line = "export const DIST: DistManifest = {};";
  if (!committed.includes(line)) throw new Error(`ffi/dist.ts: no line "${line}" to replace`);
  return committed.replace(
    line,
    `export const DIST: DistManifest = ${JSON.stringify(manifest, null, 2)};`,
  );
}

if (import.meta.main) {
  const manifest = await distManifest();
  await Deno.mkdir(`${ROOT}/dist`, { recursive: true });
  for (const [kind, path] of Object.entries(BUILDS)) {
    await Deno.copyFile(path, `${ROOT}/dist/${manifest[kind as keyof DistManifest]!.file}`);
  }
  const committed = await Deno.readTextFile(`${ROOT}/ffi/dist.ts`);
  await Deno.writeTextFile(`${ROOT}/ffi/dist.ts`, renderDistModule(committed, manifest));
  console.log(JSON.stringify(manifest));
}
