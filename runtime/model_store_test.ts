import assert from "node:assert/strict";
import { basename } from "node:path";
import { SMOLLM2_GGUF, smollm2Present } from "../tests/util/test_models.ts";
import { resolveModel } from "./model_store.ts";

Deno.test({
  name: "resolveModel names a conversion for the path as named, and keys it by the real file",
  ignore: !smollm2Present,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-store-" });
    try {
      // The Hugging Face cache's layout: snapshots/<rev>/<name>.gguf -> ../../blobs/<hash>.
      await Deno.mkdir(`${dir}/blobs`);
      await Deno.mkdir(`${dir}/snapshots/rev`, { recursive: true });
      await Deno.symlink(SMOLLM2_GGUF, `${dir}/blobs/5f1c0ffee`);
      await Deno.symlink("../../blobs/5f1c0ffee", `${dir}/snapshots/rev/smol-linked.gguf`);
      const cache = `${dir}/converted`;
      let converted = 0;
      const onConvert = () => converted++;
      const viaLink = await resolveModel(`${dir}/snapshots/rev/smol-linked.gguf`, {
        cache,
        onConvert,
      });
      assert.match(basename(viaLink), /^smol-linked-[0-9a-f]+\.auto\.cflow$/);
      // Named again through a relative path with "." segments: the same conversion, not another.
      const again = await resolveModel(`${dir}/snapshots/./rev/smol-linked.gguf`, {
        cache,
        onConvert,
      });
      assert.equal(again, viaLink);
      assert.equal(converted, 1);
      // A path with ".." is named for the real file.
      const up = await resolveModel(`${dir}/snapshots/rev/../rev/smol-linked.gguf`, {
        cache,
        onConvert,
      });
      assert.equal(basename(up).split("-")[0], basename(SMOLLM2_GGUF).split("-")[0]);
      assert.equal(converted, 2);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
