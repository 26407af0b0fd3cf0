import assert from "node:assert/strict";
import { describeConversion } from "./describe_conversion.ts";
import { runReadProbe } from "../tests/util/read_probe.ts";

const CFLOW_FILE = new URL("../models/builtin/arch2_4_combined.cflow", import.meta.url).pathname;

Deno.test("describeConversion: a .cflow named through a link is read with read access to the link alone", async () => {
  // Deno checks FsFile.stat against where a link leads (as the Hugging Face cache's snapshots/
  // -> blobs/), so a size from fstat fails there with NotCapable; a seek does not.
  const dir = await Deno.makeTempDir({ prefix: "cflow-models-link-" });
  try {
    const named = `${dir}/m.auto.cflow`;
    await Deno.symlink(CFLOW_FILE, named);
    const expected = await describeConversion(named);
    assert.equal(expected.quant, "q4_0");
    const module = new URL("./describe_conversion.ts", import.meta.url).href;
    const out = await runReadProbe(
      `import { describeConversion } from ${JSON.stringify(module)};\n` +
        `console.log(JSON.stringify(await describeConversion(${JSON.stringify(named)})));\n`,
      [named],
      dir,
    );
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(JSON.parse(out.stdout), expected);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
