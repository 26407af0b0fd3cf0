import assert from "node:assert/strict";
import { bytesSource } from "../byte_source.ts";
import { FormatError } from "../errors.ts";
import { writeSafetensors } from "../safetensors/write_safetensors.ts";
import {
  type CheckpointFs,
  diskFs,
  inMemoryCheckpoint,
  openHfCheckpoint,
  type ShardHandle,
  type ShardOpener,
} from "./open_hf_checkpoint.ts";

const CONFIG = JSON.stringify({
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  hidden_size: 8,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  intermediate_size: 16,
  vocab_size: 4,
});

function f32(n: number, start: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => start + i);
}

const EMBED = {
  name: "model.embed_tokens.weight",
  dtype: "F32",
  shape: [4, 8],
  data: f32(32, 0),
} as const;
const NORM = { name: "model.norm.weight", dtype: "BF16", shape: [8], data: f32(8, 100) } as const;
const HEAD = { name: "lm_head.weight", dtype: "F16", shape: [4, 8], data: f32(32, 200) } as const;

function index(map: Record<string, unknown>, extra = ""): string {
  return `{"metadata": {"total_size": 1}, "weight_map": ${JSON.stringify(map)}${extra}}`;
}

/** A two-shard checkpoint under `m/`. */
function sharded(
  overrides: Record<string, Uint8Array | string> = {},
): Record<string, Uint8Array | string> {
  return {
    "m/config.json": CONFIG,
    "m/model.safetensors.index.json": index({
      [EMBED.name]: "model-00001-of-00002.safetensors",
      [NORM.name]: "model-00002-of-00002.safetensors",
      [HEAD.name]: "model-00002-of-00002.safetensors",
    }),
    "m/model-00001-of-00002.safetensors": writeSafetensors([EMBED]),
    "m/model-00002-of-00002.safetensors": writeSafetensors([HEAD, NORM]),
    ...overrides,
  };
}

/** Asserts a FormatError naming `file` and `field` (exact or pattern), optionally matching `detail`. */
function refuses(
  files: Record<string, Uint8Array | string>,
  file: string,
  field: string | RegExp,
  detail?: RegExp,
  offset?: number,
): void {
  assert.throws(() => openHfCheckpoint("m", inMemoryCheckpoint(files)), (e: unknown) => {
    assert.ok(e instanceof FormatError, `not a FormatError: ${e}`);
    assert.equal(e.file, file, e.message);
    if (typeof field === "string") assert.equal(e.field, field, e.message);
    else assert.match(e.field, field, e.message);
    if (detail) assert.match(e.message, detail);
    if (offset !== undefined) assert.equal(e.offset, offset, e.message);
    return true;
  });
}

Deno.test("openHfCheckpoint merges the tensor tables of a sharded checkpoint", () => {
  const files = sharded({ "m/tokenizer.json": "{}", "m/tokenizer_config.json": "{}" });
  using ckpt = openHfCheckpoint("m", inMemoryCheckpoint(files));
  assert.equal(ckpt.config.family, "llama");
  assert.equal(ckpt.files.index, "m/model.safetensors.index.json");
  assert.equal(ckpt.files.config, "m/config.json");
  assert.equal(ckpt.files.tokenizerJson, "m/tokenizer.json");
  assert.equal(ckpt.files.tokenizerConfig, "m/tokenizer_config.json");
  assert.equal(ckpt.files.tokenizerModel, null);
  assert.equal(ckpt.files.generationConfig, null);
  assert.deepEqual(ckpt.shards.map((s) => s.file), [
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
  ]);
  assert.deepEqual([...ckpt.tensors.keys()], [EMBED.name, NORM.name, HEAD.name]);
  assert.equal(ckpt.tensor(NORM.name).shard, ckpt.shards[1]);
  assert.deepEqual(ckpt.tensor(HEAD.name).info.shape, [4, 8]);
  assert.deepEqual(ckpt.readF32(EMBED.name), EMBED.data);
  assert.deepEqual(ckpt.readF32(EMBED.name, 1, 2), EMBED.data.slice(8, 24));
  assert.deepEqual(ckpt.readF32(NORM.name), NORM.data);
  assert.deepEqual(ckpt.readF32(HEAD.name, 3), HEAD.data.slice(24));
  assert.equal(ckpt.readBytes(NORM.name).length, 16);
  assert.throws(() => ckpt.tensor("nope"), RangeError);
});

Deno.test("openHfCheckpoint reads a single model.safetensors, preferred over an index", () => {
  const files = {
    "m/config.json": CONFIG,
    "m/model.safetensors": writeSafetensors([EMBED, NORM]),
    "m/model.safetensors.index.json": "not even JSON",
    "m/generation_config.json": "{}",
    "m/tokenizer.model": "",
    "m/special_tokens_map.json": "{}",
  };
  using ckpt = openHfCheckpoint("m", inMemoryCheckpoint(files));
  assert.equal(ckpt.files.index, null);
  assert.equal(ckpt.files.generationConfig, "m/generation_config.json");
  assert.equal(ckpt.files.tokenizerModel, "m/tokenizer.model");
  assert.equal(ckpt.files.specialTokensMap, "m/special_tokens_map.json");
  assert.equal(ckpt.files.tokenizerJson, null);
  assert.deepEqual(ckpt.shards.map((s) => s.file), ["model.safetensors"]);
  assert.deepEqual([...ckpt.tensors.keys()], [EMBED.name, NORM.name]);
});

Deno.test("openHfCheckpoint refuses directories without config or weights", () => {
  refuses({}, "m", "config.json", /not found/);
  refuses({ "m/config.json": CONFIG }, "m", "model.safetensors", /neither model.safetensors nor/);
  refuses(
    { "m/config.json": CONFIG, "m/pytorch_model.bin": "" },
    "m",
    "model.safetensors",
    /PyTorch pickle/,
  );
  refuses(
    { "m/config.json": '{"model_type": "bert"}', "m/model.safetensors": writeSafetensors([]) },
    "m/config.json",
    "model_type",
  );
});

Deno.test("openHfCheckpoint refuses malformed indexes", () => {
  const I = "m/model.safetensors.index.json";
  const S = "model-00001-of-00002.safetensors";
  refuses(sharded({ [I]: "[]" }), I, "(root)", /JSON object/);
  refuses(sharded({ [I]: "{" }), I, "(root)");
  refuses(sharded({ [I]: '{"metadata": 1, "weight_map": {}}' }), I, "metadata", /object/, 13);
  refuses(sharded({ [I]: '{"metadata": {}}' }), I, "weight_map", /required/);
  refuses(sharded({ [I]: '{"weight_map": []}' }), I, "weight_map", /object/, 15);
  refuses(sharded({ [I]: '{"weight_map": {}}' }), I, "weight_map", /no tensors/);
  refuses(
    sharded({ [I]: index({ [EMBED.name]: 3 }) }),
    I,
    `weight_map["${EMBED.name}"]`,
    /found a number/,
  );
  const dup = `{"weight_map": {"a": "${S}", "a": "${S}"}}`;
  refuses(sharded({ [I]: dup }), I, "weight_map.a", /duplicate key/, dup.lastIndexOf('"a"'));
});

Deno.test("openHfCheckpoint refuses shard names that leave the directory", () => {
  const I = "m/model.safetensors.index.json";
  const bad = [
    "../model.safetensors",
    "/etc/model.safetensors",
    "sub/model.safetensors",
    "sub\\model.safetensors",
    "..",
    ".",
    "",
    "model.bin",
    "config.json",
    "a\u0000.safetensors",
    "x".repeat(250) + ".safetensors",
  ];
  for (const name of bad) {
    refuses(
      sharded({ [I]: index({ [EMBED.name]: name }) }),
      I,
      `weight_map["${EMBED.name}"]`,
      /not a plain \*\.safetensors file name/,
      index({ [EMBED.name]: name }).indexOf(JSON.stringify(name)),
    );
  }
});

Deno.test("openHfCheckpoint checks the index against the shards", () => {
  const I = "m/model.safetensors.index.json";
  const S1 = "model-00001-of-00002.safetensors";
  const S2 = "model-00002-of-00002.safetensors";
  const { ["m/" + S2]: _dropped, ...missing } = sharded();
  refuses(
    missing,
    I,
    /^weight_map\[/,
    /shard "model-00002-of-00002.safetensors" does not exist in m/,
  );
  // The index maps a tensor to a shard that does not hold it.
  refuses(
    sharded({ [I]: index({ [EMBED.name]: S1, [NORM.name]: S1, [HEAD.name]: S2 }) }),
    I,
    `weight_map["${NORM.name}"]`,
    /model-00001-of-00002.safetensors has no tensor "model.norm.weight"/,
  );
  // A shard holds a tensor that the index does not list.
  refuses(
    sharded({ [I]: index({ [EMBED.name]: S1, [HEAD.name]: S2 }) }),
    I,
    "weight_map",
    /model-00002-of-00002.safetensors holds "model.norm.weight", which the index does not list/,
  );
  // A shard also holds a tensor that the index maps to another shard.
  refuses(
    sharded({ ["m/" + S1]: writeSafetensors([EMBED, NORM]) }),
    I,
    `weight_map["${NORM.name}"]`,
    /model-00001-of-00002.safetensors also holds "model.norm.weight", which the index maps to model-00002/,
  );
  // A corrupt shard is reported by the safetensors parser, naming the shard.
  const corrupt = writeSafetensors([HEAD, NORM]).slice(0, 40);
  refuses(sharded({ ["m/" + S2]: corrupt }), "m/" + S2, "header_length", /past the end/);
});

Deno.test("openHfCheckpoint closes what it opened when it fails, and once when closed", () => {
  const opened: string[] = [];
  const closed: string[] = [];
  const base = inMemoryCheckpoint(sharded({
    "m/model-00002-of-00002.safetensors": writeSafetensors([HEAD]),
  }));
  const open: ShardOpener = (path) => {
    opened.push(path);
    const h = base.open(path);
    return { source: h.source, close: () => closed.push(path) };
  };
  assert.throws(() => openHfCheckpoint("m", { fs: base.fs, open }), FormatError);
  assert.deepEqual(closed.sort(), opened.sort());
  assert.equal(opened.length, 2);

  opened.length = closed.length = 0;
  const good = inMemoryCheckpoint(sharded());
  const ckpt = openHfCheckpoint("m", {
    fs: good.fs,
    open: (path): ShardHandle => {
      opened.push(path);
      return { source: good.open(path).source, close: () => closed.push(path) };
    },
  });
  assert.equal(closed.length, 0);
  assert.equal(ckpt.closed, false);
  ckpt.close();
  ckpt.close();
  assert.equal(ckpt.closed, true);
  assert.deepEqual(closed.sort(), opened.sort());
  assert.throws(() => ckpt.readF32(EMBED.name), TypeError);
  assert.throws(() => ckpt.readBytes(EMBED.name), TypeError);
});

Deno.test("inMemoryCheckpoint enforces size limits and reports missing files", () => {
  const { fs, open } = inMemoryCheckpoint({ "a/b.json": "12345" });
  assert.equal(fs.isFile("a/b.json"), true);
  assert.equal(fs.isFile("a/c.json"), false);
  assert.deepEqual(fs.readFile("a/b.json", 5, "f"), new TextEncoder().encode("12345"));
  assert.throws(() => fs.readFile("a/b.json", 4, "f"), FormatError);
  assert.throws(() => fs.readFile("a/c.json", 4, "f"), Deno.errors.NotFound);
  assert.throws(() => open("a/c.json"), Deno.errors.NotFound);
  assert.equal(open("a/b.json").source.size, 5);
});

Deno.test("openHfCheckpoint refuses an index over the size limit without reading it", () => {
  let read = false;
  const base = inMemoryCheckpoint(sharded());
  const fs: CheckpointFs = {
    isFile: base.fs.isFile,
    readFile(path, limit, field) {
      if (path.endsWith(".index.json")) {
        read = true;
        assert.equal(limit, 64 << 20);
        throw new FormatError(path, field, 0, "too big");
      }
      return base.fs.readFile(path, limit, field);
    },
  };
  assert.throws(() => openHfCheckpoint("m", { fs, open: base.open }), /too big/);
  assert.ok(read);
});

const canWrite = Deno.permissions.querySync({ name: "write" }).state === "granted" &&
  Deno.permissions.querySync({ name: "read" }).state === "granted";

Deno.test({
  name:
    "openHfCheckpoint on disk follows symlinked shards (as in the HF cache) and refuses a directory shard",
  ignore: !canWrite,
  fn() {
    const root = Deno.makeTempDirSync({ prefix: "cflow-hf-" });
    try {
      const dir = `${root}/snapshot`;
      Deno.mkdirSync(dir);
      Deno.mkdirSync(`${root}/blobs`);
      for (const [path, data] of Object.entries(sharded())) {
        const name = path.slice(2);
        const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
        Deno.writeFileSync(`${root}/blobs/${name}`, bytes);
        Deno.symlinkSync(`../blobs/${name}`, `${dir}/${name}`);
      }
      const inMemoryOpen: ShardOpener = (path) => ({
        source: bytesSource(path, Deno.readFileSync(path)),
        close() {},
      });
      using ckpt = openHfCheckpoint(`${dir}/`, { open: inMemoryOpen });
      assert.equal(ckpt.files.config, `${dir}/config.json`);
      assert.deepEqual(ckpt.readF32(HEAD.name, 0, 1), HEAD.data.slice(0, 8));
      assert.equal(diskFs.isFile(`${dir}/missing`), false);
      assert.equal(diskFs.isFile(`${dir}/config.json/x`), false);

      Deno.removeSync(`${dir}/model-00001-of-00002.safetensors`);
      Deno.mkdirSync(`${dir}/model-00001-of-00002.safetensors`);
      assert.throws(
        () => openHfCheckpoint(dir, { open: inMemoryOpen }),
        (e) => e instanceof FormatError && /does not exist/.test(e.message),
      );
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
});
