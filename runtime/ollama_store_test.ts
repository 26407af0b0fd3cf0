import assert from "node:assert/strict";
import {
  findOllamaModel,
  isOllamaReference,
  MAX_MANIFEST_BYTES,
  ollamaStoreDirs,
  OllamaStoreError,
  parseOllamaName,
} from "./ollama_store.ts";
import { resolveModel } from "./model_store.ts";

Deno.test("Ollama names: defaults filled in as ollama run reads them", () => {
  assert.ok(isOllamaReference("ollama:x"));
  assert.ok(!isOllamaReference("x.gguf"));
  assert.deepEqual(parseOllamaName("ollama:llama3.2"), {
    host: "registry.ollama.ai",
    namespace: "library",
    model: "llama3.2",
    tag: "latest",
  });
  assert.deepEqual(parseOllamaName("ollama:qwen2.5-coder:1.5b-instruct-q4_K_M"), {
    host: "registry.ollama.ai",
    namespace: "library",
    model: "qwen2.5-coder",
    tag: "1.5b-instruct-q4_K_M",
  });
  assert.deepEqual(parseOllamaName("ada/tiny:v1"), {
    host: "registry.ollama.ai",
    namespace: "ada",
    model: "tiny",
    tag: "v1",
  });
  assert.deepEqual(parseOllamaName("ollama:hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_0"), {
    host: "hf.co",
    namespace: "bartowski",
    model: "SmolLM2-135M-Instruct-GGUF",
    tag: "Q4_0",
  });
});

Deno.test("Ollama names: anything that could leave the store or is not a name is refused", () => {
  for (
    const bad of [
      "ollama:",
      "ollama:../x",
      "ollama:a/../x",
      "ollama:x:..",
      "ollama:..:latest",
      "ollama:x/",
      "ollama:/x",
      "ollama:a//x",
      "ollama:a/b/c/d",
      "ollama:x:",
      "ollama:x:1b+Q4_0",
      "ollama:x@sha256-00",
      "ollama:x y",
      "ollama:x\u0000",
      "ollama:na.me/x",
      "ollama:.hidden",
      `ollama:${"a".repeat(129)}`,
      `ollama:${"a".repeat(600)}`,
    ]
  ) {
    assert.throws(() => parseOllamaName(bad), OllamaStoreError, bad);
  }
});

Deno.test("Ollama's store folders: OLLAMA_MODELS alone, else the user's and the service's", () => {
  assert.deepEqual(ollamaStoreDirs((n) => ({ OLLAMA_MODELS: "/srv/ollama/", HOME: "/h" })[n]), [
    "/srv/ollama",
  ]);
  assert.deepEqual(ollamaStoreDirs((n) => ({ HOME: "/home/ada" })[n]), [
    "/home/ada/.ollama/models",
    "/usr/share/ollama/.ollama/models",
  ]);
  assert.deepEqual(ollamaStoreDirs(() => undefined), ["/usr/share/ollama/.ollama/models"]);
  assert.throws(
    () => ollamaStoreDirs((n) => (n === "OLLAMA_MODELS" ? "models" : undefined)),
    OllamaStoreError,
  );
});

const HEX = "ab".repeat(32);

/** A store under a temporary folder with `blob` as the model layer of library/tiny:1b. */
async function store(
  manifest: unknown,
  blob?: Uint8Array,
  blobName = `sha256-${HEX}`,
): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "cflow-ollama-" });
  await Deno.mkdir(`${dir}/manifests/registry.ollama.ai/library/tiny`, { recursive: true });
  await Deno.mkdir(`${dir}/blobs`);
  const text = typeof manifest === "string" ? manifest : JSON.stringify(manifest);
  await Deno.writeTextFile(`${dir}/manifests/registry.ollama.ai/library/tiny/1b`, text);
  if (blob !== undefined) await Deno.writeFile(`${dir}/blobs/${blobName}`, blob);
  return dir;
}

function manifestOf(layers: unknown[]) {
  return {
    schemaVersion: 2,
    mediaType: "application/vnd.docker.distribution.manifest.v2+json",
    config: {
      mediaType: "application/vnd.docker.container.image.v1+json",
      digest: `sha256:${"0".repeat(64)}`,
      size: 2,
    },
    layers,
  };
}

const MODEL = "application/vnd.ollama.image.model";

Deno.test("findOllamaModel: the model layer's blob, through the manifest", async () => {
  const blob = new Uint8Array([1, 2, 3, 4, 5]);
  const dir = await store(
    manifestOf([
      {
        mediaType: "application/vnd.ollama.image.template",
        digest: `sha256:${"1".repeat(64)}`,
        size: 9,
      },
      { mediaType: MODEL, digest: `sha256:${HEX}`, size: 5 },
      {
        mediaType: "application/vnd.ollama.image.params",
        digest: `sha256:${"2".repeat(64)}`,
        size: 9,
      },
    ]),
    blob,
  );
  try {
    const found = await findOllamaModel("ollama:tiny:1b", [`${dir}/none`, dir]);
    assert.equal(found.path, `${dir}/blobs/sha256-${HEX}`);
    assert.equal(found.manifest, `${dir}/manifests/registry.ollama.ai/library/tiny/1b`);
    assert.equal(found.name, "ollama-tiny-1b");
    assert.equal(found.reference, "ollama:tiny:1b");
    // A long name is cut to what resolveModel takes as a conversion's name.
    const [h, ns, m, t] = ["h".repeat(150), "n".repeat(128), "m".repeat(100), "t".repeat(100)];
    await Deno.mkdir(`${dir}/manifests/${h}/${ns}/${m}`, { recursive: true });
    await Deno.copyFile(
      `${dir}/manifests/registry.ollama.ai/library/tiny/1b`,
      `${dir}/manifests/${h}/${ns}/${m}/${t}`,
    );
    const long = await findOllamaModel(`ollama:${h}/${ns}/${m}:${t}`, [dir]);
    assert.equal(long.path, found.path);
    assert.equal(long.name, `ollama-${h}-${ns}-${m}-${t}`.slice(0, 160));
    assert.equal(long.reference, `ollama:${h}/${ns}/${m}:${t}`);
    // Older Ollama versions named blobs sha256:HEX.
    await Deno.rename(`${dir}/blobs/sha256-${HEX}`, `${dir}/blobs/sha256:${HEX}`);
    assert.equal(
      (await findOllamaModel("ollama:tiny:1b", [dir])).path,
      `${dir}/blobs/sha256:${HEX}`,
    );
    // A name that is not there names every manifest looked for and says how to get it.
    await assert.rejects(
      () => findOllamaModel("ollama:tiny", [dir]),
      (e: Error) =>
        e instanceof OllamaStoreError &&
        e.message.includes(`no ${dir}/manifests/registry.ollama.ai/library/tiny/latest`) &&
        e.message.includes("run 'ollama pull tiny' first"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("findOllamaModel: a malformed manifest or a missing or partial blob is named", async () => {
  const cases: [unknown, Uint8Array | undefined, RegExp][] = [
    ["{not json", undefined, /not UTF-8 JSON/],
    ["[]", undefined, /not a JSON object/],
    [{ layers: {} }, undefined, /"layers" is not a list/],
    [manifestOf([7]), undefined, /layers\[0\] is not an object/],
    [
      manifestOf([{
        mediaType: "application/vnd.ollama.image.template",
        digest: `sha256:${HEX}`,
        size: 1,
      }]),
      undefined,
      /no layer of type/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `sha256:${HEX}`, size: 1 }, {
        mediaType: MODEL,
        digest: `sha256:${HEX}`,
        size: 1,
      }]),
      undefined,
      /2 layers of type/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: "sha256:../../etc/passwd", size: 1 }]),
      undefined,
      /digest is not sha256/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `md5:${HEX}`, size: 1 }]),
      undefined,
      /digest is not sha256/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `sha256:${HEX}`, size: -1 }]),
      undefined,
      /size is not a byte count/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `sha256:${HEX}`, size: 2 ** 60 }]),
      undefined,
      /size is not a byte count/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `sha256:${HEX}`, size: 5 }]),
      undefined,
      /does not exist/,
    ],
    [
      manifestOf([{ mediaType: MODEL, digest: `sha256:${HEX}`, size: 5 }]),
      new Uint8Array(3),
      /has 3 bytes where .* says 5/,
    ],
    [" ".repeat(MAX_MANIFEST_BYTES + 1), undefined, /larger than 1048576 bytes/],
  ];
  for (const [manifest, blob, expected] of cases) {
    const dir = await store(manifest, blob);
    try {
      await assert.rejects(
        () => findOllamaModel("ollama:tiny:1b", [dir]),
        (e: Error) => e instanceof OllamaStoreError && expected.test(e.message),
        String(expected),
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("resolveModel names a conversion as told, and refuses a name that is not a file name", async () => {
  for (const name of ["../x", ".hidden", "a/b", "", "x".repeat(201)]) {
    await assert.rejects(
      () => resolveModel("runtime/ollama_store_test.ts", { name, cache: "/nonexistent" }),
      /conversion name/,
      name,
    );
  }
});
