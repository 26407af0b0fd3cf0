/**
 * `./cflow generate`, `chat` and `perplexity` as a user runs them, on the
 * default model (SmolLM2-135M-Instruct, fetched and converted on first use).
 */
import assert from "node:assert/strict";
import { fnv1a64 } from "../runtime/mod.ts";
import { MODELS_DIR, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;

async function cflow(
  args: string[],
  stdin?: Uint8Array,
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
    await w.write(stdin);
    await w.close();
  }
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("generate --json: text, ids, fnv1a64 hash and stats; greedy output is deterministic", async () => {
  const args = [
    "generate",
    "--prompt",
    "The three primary colors are",
    "--max-tokens",
    "16",
    "--temperature",
    "0",
    "--json",
  ];
  const a = await cflow(args);
  assert.equal(a.code, 0, a.stderr);
  const r = JSON.parse(a.stdout);
  assert.equal(typeof r.text, "string");
  assert.ok(r.text.length > 0);
  assert.equal(r.tokens.length, r.stats.generated_tokens);
  assert.equal(r.hash, fnv1a64(r.tokens));
  assert.match(r.hash, /^fnv1a64:[0-9a-f]{16}$/);
  for (
    const k of [
      "prompt_tokens",
      "prefill_tok_s",
      "ttft_ms",
      "decode_tok_s",
      "generated_tokens",
      "peak_rss_mib",
    ]
  ) {
    assert.equal(typeof r.stats[k], "number", k);
  }
  assert.ok(r.stats.peak_rss_mib > 10);
  const b = JSON.parse((await cflow(args)).stdout);
  assert.equal(b.hash, r.hash, "same greedy output twice");
  console.log(`greedy: ${JSON.stringify(r.text)} ${r.hash}`);
  // Which path ran: the variant, and panels (the default on SIMD variants) or tiles.
  assert.match(r.stats.kernel_variant, /^(scalar|avx2|avxvnni|avx512vnni)$/);
  assert.equal(r.stats.weights, r.stats.kernel_variant === "scalar" ? "tiles" : "panels");
  const off = JSON.parse((await cflow([...args, "--packed", "off"])).stdout);
  assert.equal(off.stats.weights, "tiles");
  assert.equal(off.stats.pack_ms, 0);
  const on = JSON.parse((await cflow([...args, "--packed", "on"])).stdout);
  assert.equal(on.stats.weights, "panels");
  assert.equal(on.hash, r.stats.weights === "panels" ? r.hash : on.hash);
  const bad = await cflow([...args, "--packed", "yes"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--packed/);
});

Deno.test("generate streams text to stdout and one stats line to stderr; seeds reproduce", async () => {
  const args = [
    "generate",
    "--prompt",
    "Once upon a time",
    "--max-tokens",
    "12",
    "--seed",
    "7",
    "--temperature",
    "0.9",
  ];
  const a = await cflow(args);
  assert.equal(a.code, 0, a.stderr);
  assert.match(
    a.stderr.trim().split("\n").pop()!,
    /^prompt \d+ tokens, prefill [0-9.]+ tok\/s, ttft \d+ ms, decode [0-9.]+ tok\/s, \d+ tokens .*peak RSS \d+ MiB$/,
  );
  const b = await cflow(args);
  assert.equal(b.stdout, a.stdout, "same seed, same text");
});

Deno.test("the prompt can come from stdin; invalid UTF-8 there is a clear error", async () => {
  const ok = await cflow(
    ["generate", "--max-tokens", "4", "--temperature", "0"],
    new TextEncoder().encode("Hello"),
  );
  assert.equal(ok.code, 0, ok.stderr);
  const bad = await cflow(
    ["generate", "--max-tokens", "4"],
    new Uint8Array([0x48, 0xff, 0xfe, 0x41]),
  );
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /stdin: the input is not valid UTF-8/);
});

Deno.test("a prompt longer than the context is refused, or truncated on request", async () => {
  const long = "word ".repeat(200);
  const r = await cflow(["generate", "--prompt", long, "--ctx", "64", "--max-tokens", "4"]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /more than the context of 64/);
  const t = await cflow([
    "generate",
    "--prompt",
    long,
    "--ctx",
    "64",
    "--max-tokens",
    "4",
    "--truncate",
    "left",
    "--json",
    "--temperature",
    "0",
  ]);
  assert.equal(t.code, 0, t.stderr);
  assert.ok(JSON.parse(t.stdout).prompt_tokens <= 60);
});

Deno.test("chat answers each line of piped input using the model's template", async () => {
  const r = await cflow(
    ["chat", "--max-tokens", "8", "--temperature", "0"],
    new TextEncoder().encode("Hi!\nWhat is 2+2?\n"),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout.trim().split("\n").filter((l) => l.trim() !== "").length >= 2,
    true,
    r.stdout,
  );
});

Deno.test("perplexity reports a finite value over a text file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cflow-ppl-" });
  try {
    const text = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    await Deno.writeTextFile(`${dir}/t.txt`, text);
    const r = await cflow(["perplexity", "--file", `${dir}/t.txt`, "--ctx", "64", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const j = JSON.parse(r.stdout);
    assert.ok(Number.isFinite(j.ppl) && j.ppl >= 1 && j.ppl < 50, `ppl ${j.ppl}`);
    assert.ok(j.chunks >= 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bad options are usage errors", async () => {
  for (
    const args of [["generate", "--prompt", "x", "--top-k", "-1"], [
      "generate",
      "--prompt",
      "x",
      "--temperature",
      "hot",
    ], ["perplexity"]]
  ) {
    const r = await cflow(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
  }
  // A value the sampler refuses is a usage error too, naming the option.
  const r = await cflow(["generate", "--prompt", "x", "--top-p", "2"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--top-p: 2 is not in/);
});

const GEMMA = `${MODELS_DIR}/gemma-3-270m-q4_k_m.gguf`;
const haveGemma = (() => {
  try {
    return Deno.statSync(GEMMA).isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: "Gemma-3-270M (GGUF, SentencePiece, sliding window) continues a prompt on topic",
  ignore: !haveGemma,
  async fn() {
    const r = await cflow([
      "generate",
      "--model",
      GEMMA,
      "--prompt",
      "The capital of France is",
      "--max-tokens",
      "24",
      "--temperature",
      "0",
      "--quant",
      "q8_0",
      "--json",
    ]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    console.log(`gemma: ${JSON.stringify(out.text)} ${out.hash}`);
    // A broken forward pass produces noise; a working one stays in English on the subject.
    assert.match(out.text, /France|Paris|capital/);
    const letters = out.text.replace(/[^A-Za-z ]/g, "").length / out.text.length;
    assert.ok(letters > 0.8, `mostly words: ${out.text}`);
  },
});

Deno.test("--chat-template wraps the prompt in the model's template, or in --template's", async () => {
  const own = await cflow([
    "generate",
    "--prompt",
    "Name a color.",
    "--chat-template",
    "--max-tokens",
    "4",
    "--temperature",
    "0",
    "--json",
  ]);
  assert.equal(own.code, 0, own.stderr);
  const dir = await Deno.makeTempDir({ prefix: "cflow-template-" });
  try {
    await Deno.writeTextFile(
      `${dir}/t.jinja`,
      "{% for m in messages %}Q: {{ m.content }}\nA:{% endfor %}",
    );
    const r = await cflow([
      "generate",
      "--prompt",
      "Name a color.",
      "--chat-template",
      "--template",
      `${dir}/t.jinja`,
      "--max-tokens",
      "4",
      "--temperature",
      "0",
      "--json",
    ]);
    assert.equal(r.code, 0, r.stderr);
    // "Q: Name a color.\\nA:" is fewer tokens than SmolLM2's ChatML rendering with its system turn.
    assert.ok(JSON.parse(r.stdout).prompt_tokens < JSON.parse(own.stdout).prompt_tokens);
    await Deno.writeTextFile(`${dir}/bad.jinja`, "{{ raise_exception('no') }}");
    const bad = await cflow([
      "generate",
      "--prompt",
      "x",
      "--chat-template",
      "--template",
      `${dir}/bad.jinja`,
    ]);
    assert.equal(bad.code, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("chat leaves out the earliest messages when the conversation outgrows the context", async () => {
  const lines = Array.from({ length: 6 }, (_, i) => `Tell me a fact about the number ${i + 1}.`);
  const r = await cflow(
    ["chat", "--ctx", "128", "--max-tokens", "24", "--temperature", "0"],
    new TextEncoder().encode(lines.join("\n") + "\n"),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /earliest messages? no longer fit the context of 128 tokens/);
  // Every line got an answer.
  assert.ok(r.stdout.trim().split("\n").filter((l) => l.trim() !== "").length >= 6, r.stdout);
  // A message that cannot fit even alone is refused, and the chat goes on.
  const big = await cflow(
    ["chat", "--ctx", "64", "--max-tokens", "8", "--temperature", "0"],
    new TextEncoder().encode(`${"word ".repeat(80)}\nHi!\n`),
  );
  assert.equal(big.code, 0, big.stderr);
  assert.match(big.stderr, /does not fit the context of 64 tokens/);
  assert.ok(big.stdout.trim().length > 0, "the second line is answered");
});

Deno.test("chat: /clear starts the conversation over, /bye ends it", async () => {
  const chat = async (input: string) => {
    const r = await cflow(
      ["chat", "--max-tokens", "6", "--temperature", "0"],
      new TextEncoder().encode(input),
    );
    assert.equal(r.code, 0, r.stderr);
    return r;
  };
  const hi = await chat("Hi!\n");
  const sum = await chat("What is 2+2?\n");
  // After /clear the second question is answered as if it came first.
  const cleared = await chat("Hi!\n/clear\nWhat is 2+2?\n");
  assert.equal(cleared.stdout, hi.stdout + sum.stdout);
  assert.match(cleared.stderr, /conversation cleared/);
  // Nothing after /bye is read.
  assert.equal((await chat("Hi!\n/bye\nWhat is 2+2?\n")).stdout, hi.stdout);
  assert.equal((await chat("Hi!\n  /exit \nWhat is 2+2?\n")).stdout, hi.stdout);
});

Deno.test("a reader that closes stdout early (| head) ends generate quietly with 141", async () => {
  const child = new Deno.Command(`${ROOT}cflow`, {
    args: ["generate", "--prompt", "Once upon a time", "--max-tokens", "200", "--temperature", "0"],
    env: {
      CFLOW_KERNELS: "",
      CFLOW_THREADS: "",
      CFLOW_KERNEL_VARIANT: "",
      CFLOW_CPU_DISABLE: "",
      ...TEST_CACHE_ENV,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Read the first bytes of text, then go away as `head -c 30` does.
  const reader = child.stdout.getReader();
  let got = 0;
  while (got < 30) {
    const r = await reader.read();
    if (r.done) break;
    got += r.value.length;
  }
  await reader.cancel();
  const status = await child.status;
  const stderr = new TextDecoder().decode(
    await new Response(child.stderr).arrayBuffer(),
  );
  assert.ok(got >= 30, `only ${got} bytes before the end`);
  assert.equal(status.code, 141, stderr);
  assert.doesNotMatch(stderr, /BrokenPipe|Uncaught/);
  assert.ok(!stderr.includes("\x1b["), "no colour codes");
});

Deno.test("llama.cpp's short flags, negative values and bad values as usage errors", async () => {
  const long = await cflow([
    "generate",
    "--prompt",
    "The sky is",
    "--max-tokens",
    "6",
    "--seed",
    "7",
    "--ctx",
    "128",
    "--threads",
    "1",
  ]);
  assert.equal(long.code, 0, long.stderr);
  const short = await cflow([
    "generate",
    "-p",
    "The sky is",
    "-n",
    "6",
    "-s",
    "7",
    "-c",
    "128",
    "-t",
    "1",
  ]);
  assert.equal(short.code, 0, short.stderr);
  assert.equal(short.stdout, long.stdout);
  for (
    const [args, message] of [
      [["--temperature", "-1"], /^cflow: --temperature: -1 is negative\n/],
      [["--temperature=-1"], /^cflow: --temperature: -1 is negative\n/],
      [["--top-p", "2"], /^cflow: --top-p: 2 is not in \(0, 1\]\n/],
      [["--repeat-penalty", "-1e2"], /^cflow: --repeat-penalty: -100 is not > 0\n/],
      [["-n", "-3"], /^cflow: --max-tokens: "-3" is not an integer/],
      [["-t", "0"], /^cflow: --threads: "0" is not a thread count/],
      [["-s", "-5"], /^cflow: --seed: "-5" is not an integer/],
    ] as const
  ) {
    const r = await cflow(["generate", "-p", "hi", ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(" "));
  }
});

Deno.test("defaults: generate until end of text or a full context; the context is the trained length", async () => {
  // No --max-tokens: the answer ends at end of text or where the context is full.
  const r = await cflow([
    "generate",
    "-p",
    "Once upon a time",
    "--temperature",
    "0",
    "-c",
    "48",
    "--json",
  ]);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  assert.ok(["eog", "context"].includes(j.stats.stop_reason), j.stats.stop_reason);
  assert.equal(j.stats.context_length, 48);
  if (j.stats.stop_reason === "context") {
    // Every position holds a prompt or generated token; the last token sampled needs none.
    assert.equal(j.stats.prompt_tokens + j.stats.generated_tokens, 48 + 1);
  }
  // No --ctx: SmolLM2's trained 8,192 (its KV cache, 188 MiB, is far below a quarter of any
  // memory this runs on; the cut, with its note, is tests/context_default_test.ts).
  const d = await cflow(["generate", "-p", "Hi", "-n", "1", "--json"]);
  assert.equal(d.code, 0, d.stderr);
  assert.equal(JSON.parse(d.stdout).stats.context_length, 8192);
  assert.doesNotMatch(d.stderr, /context \d+ tokens of the/);
});

Deno.test("generate --lookup-ngram / --draft-model: the plain tokens, and what was drafted in --json", async () => {
  const base = [
    "generate",
    "--prompt",
    "One two three, one two three, one two",
    "--max-tokens",
    "20",
    "--temperature",
    "0",
    "--json",
  ];
  const plain = JSON.parse((await cflow(base)).stdout);
  assert.equal(plain.stats.speculation, undefined);
  for (
    const extra of [["--lookup-ngram", "3"], [
      "--draft-model",
      "smollm2",
      "--draft-max",
      "4",
      "--draft-min-p",
      "0",
    ]]
  ) {
    const r = await cflow([...base, ...extra]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.tokens, plain.tokens, extra.join(" "));
    assert.equal(out.hash, plain.hash);
    const s = out.stats.speculation;
    assert.equal(s.kind, extra[0] === "--lookup-ngram" ? "lookup" : "draft-model");
    assert.ok(s.accepted > 0 && s.accepted <= s.drafted, JSON.stringify(s));
    assert.equal(s.acceptance_rate, s.accepted / s.drafted);
  }
  // Mistakes are usage errors, before any model loads.
  for (
    const [args, message] of [
      [["--draft-max", "4"], /--draft-max and --draft-min-p need --draft-model or --lookup-ngram/],
      [["--lookup-ngram", "2", "--draft-model", "smollm2"], /choose one way to draft/],
      [["--lookup-ngram", "0"], /--lookup-ngram: "0" is not an integer from 1 to 16/],
      [
        ["--lookup-ngram", "2", "--draft-max", "33"],
        /--draft-max: "33" is not an integer from 1 to 32/,
      ],
      [["--lookup-ngram", "2", "--draft-min-p", "0.5"], /--draft-min-p needs --draft-model/],
    ] as const
  ) {
    const r = await cflow([...base, ...args]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
  }
});

Deno.test({
  name: "generate --draft-model refuses a draft of another vocabulary",
  ignore: !haveGemma,
  async fn() {
    const r = await cflow([
      "generate",
      "--prompt",
      "Hi",
      "--max-tokens",
      "4",
      "--draft-model",
      GEMMA,
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /draft model .*gemma.*: its vocabulary is not the target's \(262144 tokens, the target has 49152\)/,
    );
  },
});
