import { join } from "node:path";
import { assertEquals } from "../pull/_test_util.ts";
import { bytes, FakeHub, sha256 } from "../pull/_test_hub.ts";

const CFLOW = new URL("../cflow", import.meta.url).pathname;

async function cflow(args: string[], env: Record<string, string>) {
  const out = await new Deno.Command(CFLOW, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test("./cflow pull: scoped launcher against a loopback hub (HF_ENDPOINT), --json, --offline", async () => {
  await using hub = new FakeHub();
  const model = bytes(70_000, 3);
  hub.repos.set("org/m", [
    { path: "m-Q4_0.gguf", data: model, lfs: false }, // served by the hub itself
    { path: "m-Q8_0.gguf", data: bytes(1000, 4), lfs: true }, // redirected to the CDN's port
  ]);
  const cache = await Deno.makeTempDir({ prefix: "cflow-pull-cli-" });
  const env = { CFLOW_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: "hf_cli" };
  try {
    const ok = await cflow(["pull", "hf:org/m:Q4_0", "--json"], env);
    assertEquals(ok.code, 0, ok.stderr);
    const r = JSON.parse(ok.stdout);
    assertEquals([r.path, r.size, r.sha256], [
      join(cache, "models/hf/org/m/m-Q4_0.gguf"),
      model.length,
      sha256(model),
    ]);
    assertEquals(
      hub.by("hub").every((s) => s.headers.get("authorization") === "Bearer hf_cli"),
      true,
    );

    // the launcher grants the hub's host:port, not the CDN's other port
    const denied = await cflow(["pull", "hf:org/m:Q8_0"], env);
    assertEquals(denied.code, 1);
    assertEquals(denied.stderr.includes("not among the hosts"), true, denied.stderr);

    const off = await cflow(["pull", "hf:org/m:Q4_0", "--offline"], {
      ...env,
      HF_ENDPOINT: "https://huggingface.co",
    });
    assertEquals([off.code, off.stdout.trim()], [0, join(cache, "models/hf/org/m/m-Q4_0.gguf")]);
    const miss = await cflow(["pull", "hf:org/other"], { ...env, HF_HUB_OFFLINE: "1" });
    assertEquals(miss.code, 1);
    assertEquals(miss.stderr.includes("not in the cache"), true, miss.stderr);
    const bad = await cflow(["pull", "hf:../etc"], env);
    assertEquals(bad.code, 2);
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});
