/**
 * `./cflow generate` and `chat` with `--json-schema FILE` and `--grammar FILE` as a user runs
 * them, on the default model (SmolLM2-135M-Instruct): outputs that validate, and usage errors
 * (exit 2) naming a refused keyword or a grammar's mistake.
 */
import assert from "node:assert/strict";
import { Ajv } from "ajv";
import { TEST_CACHE_ENV } from "../tests/util/test_models.ts";
import { GrammarMatcher } from "../grammar/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname;

async function cflow(
  args: string[],
  stdin?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(`${ROOT}cflow`, {
    args,
    env: {
      CFLOW_KERNELS: "",
      CFLOW_THREADS: "",
      CFLOW_KERNEL_VARIANT: "",
      CFLOW_CPU_DISABLE: "",
      ...TEST_CACHE_ENV,
    },
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function tempFile(text: string, suffix: string): Promise<string> {
  const path = await Deno.makeTempFile({ suffix });
  await Deno.writeTextFile(path, text);
  return path;
}

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 10 },
    age: { type: "integer", minimum: 0, maximum: 99 },
  },
  required: ["name", "age"],
};

Deno.test("generate --json-schema: the output validates (ajv) and ends when complete", async () => {
  const file = await tempFile(JSON.stringify(SCHEMA), ".json");
  try {
    for (const seed of ["1", "2"]) {
      const r = await cflow([
        "generate",
        "--chat-template",
        "--prompt",
        "A person as JSON",
        "--json-schema",
        file,
        "--seed",
        seed,
        "--max-tokens",
        "80",
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.equal(out.stats.stop_reason, "grammar", out.text);
      const validate = new Ajv().compile(SCHEMA);
      assert.ok(validate(JSON.parse(out.text)), out.text);
    }
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("generate and chat --grammar: only strings the grammar accepts", async () => {
  const gbnf = 'root ::= "yes" | "no" | "maybe " [0-9]{1,2} "%"\n';
  const file = await tempFile(gbnf, ".gbnf");
  try {
    const r = await cflow([
      "generate",
      "--prompt",
      "Will it rain?",
      "--grammar",
      file,
      "--temperature",
      "0.8",
      "--seed",
      "3",
      "--json",
    ]);
    assert.equal(r.code, 0, r.stderr);
    const text = JSON.parse(r.stdout).text;
    assert.match(text, /^(yes|no|maybe [0-9]{1,2}%)$/);
    const m = GrammarMatcher.fromGbnf(gbnf);
    assert.ok(m.advance(new TextEncoder().encode(text)) && m.isAccepting());
    const c = await cflow(["chat", "--grammar", file, "--seed", "4"], "Will it rain?\n");
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stdout, /(yes|no|maybe [0-9]{1,2}%)/);
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("--json-schema / --grammar mistakes are usage errors naming them", async () => {
  const bad = await tempFile(JSON.stringify({ type: "object", minProperties: 1 }), ".json");
  const notJson = await tempFile("{", ".json");
  const badGrammar = await tempFile('root ::= "a" item\n', ".gbnf");
  try {
    const cases: [string[], RegExp][] = [
      [["--json-schema", bad], /unsupported keyword 'minProperties' at \//],
      [["--json-schema", notJson], /not JSON/],
      [["--grammar", badGrammar], /line 1, column 14: undefined rule 'item'/],
      [["--grammar", badGrammar, "--json-schema", bad], /not both/],
    ];
    for (const [extra, re] of cases) {
      const r = await cflow(["generate", "--prompt", "x", ...extra]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, re);
    }
  } finally {
    for (const f of [bad, notJson, badGrammar]) await Deno.remove(f);
  }
});
