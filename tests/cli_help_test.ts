/**
 * `cflow help`, `cflow <command> --help`, misplaced options, exit codes,
 * NO_COLOR, progress bars on a terminal and shell completions, as a user
 * runs them: real `./cflow` processes, a real pseudo-terminal (`script`)
 * and a real bash.
 */
import assert from "node:assert/strict";
import { commandOptions, COMMANDS, OPTIONS } from "../cli/commands.ts";
import { EXIT, EXIT_CODES_HELP } from "../cli/exit_codes.ts";
import { MODELS_DIR, SMOLLM2_GGUF, TEST_CACHE_ENV } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const CFLOW = `${ROOT}cflow`;
const CLEAN = {
  CFLOW_KERNELS: "",
  CFLOW_THREADS: "",
  CFLOW_KERNEL_VARIANT: "",
  CFLOW_CPU_DISABLE: "",
  ...TEST_CACHE_ENV,
};

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cflow(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const out = await new Deno.Command(CFLOW, {
    args,
    env: { ...CLEAN, ...env },
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function have(tool: string): Promise<boolean> {
  const r = await new Deno.Command("bash", { args: ["-c", `command -v ${tool}`] }).output();
  return r.code === 0;
}

/** Runs `./cflow ARGS` with stdout and stderr on a pseudo-terminal (util-linux `script`). */
async function onTerminal(args: string, env: Record<string, string> = {}): Promise<Run> {
  const out = await new Deno.Command("script", {
    args: ["-qec", `${CFLOW} ${args}`, "/dev/null"],
    env: { ...CLEAN, ...env },
    stdin: "null",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

const haveScript = await have("script");
const ESC = "\x1b[";
const SMOLLM2 = SMOLLM2_GGUF;
const RANDOM_1B = `${MODELS_DIR}/random-llama-3.2-1b-geometry-s1.Q4_0.gguf`;
const exists = (p: string) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
};

Deno.test("cflow help: the overview lists every command, the exit codes and completions", async () => {
  const help = await cflow(["help"]);
  assert.equal(help.code, EXIT.OK, help.stderr);
  for (const c of COMMANDS) assert.match(help.stdout, new RegExp(`^  ${c.name}\\b`, "m"), c.name);
  for (const [n, what] of EXIT_CODES_HELP) {
    assert.ok(help.stdout.includes(`${n}`) && help.stdout.includes(what));
  }
  assert.match(help.stdout, /cflow completions bash/);
  assert.match(help.stdout, /NO_COLOR/);
  assert.ok(!help.stdout.includes(ESC), "no color when piped");
  for (const same of [["--help"], ["-h"], []]) {
    assert.equal((await cflow(same)).stdout, help.stdout, same.join(" "));
  }
});

Deno.test("cflow <command> --help: usage, that command's options only, examples", async () => {
  for (const c of COMMANDS) {
    const r = await cflow([c.name, "--help"]);
    assert.equal(r.code, EXIT.OK, `${c.name}: ${r.stderr}`);
    assert.ok(r.stdout.startsWith(`usage: cflow ${c.name}`), r.stdout);
    const [optionsPart, examplesPart] = r.stdout.split("\nexamples:\n");
    const listed = [...optionsPart.matchAll(/^ {2}(?:-\w, )?--([\w-]+)/gm)].map((m) => m[1]);
    assert.deepEqual(listed, commandOptions(c).map((o) => o.name), c.name);
    const examples = examplesPart.split("\n").filter((l) => l.startsWith(`  `));
    assert.ok(examples.length >= 2, `${c.name}: ${examples.length} examples`);
    for (const e of examples) assert.ok(e.includes(`cflow ${c.name}`), e);
    // `cflow help X` says the same
    assert.equal((await cflow(["help", c.name])).stdout, r.stdout, c.name);
  }
  const gen = (await cflow(["generate", "--help"])).stdout;
  assert.match(gen, /--temperature T/);
  assert.ok(!gen.includes("--report-error"), "convert's options are not generate's");
  const doctor = (await cflow(["doctor", "-h"])).stdout;
  assert.ok(!doctor.includes("--model"), doctor);
});

Deno.test("every example in the help uses options of its own command", () => {
  for (const c of COMMANDS) {
    const names = new Set(commandOptions(c).map((o) => o.name));
    for (const e of c.examples) {
      for (const m of e.split("#")[0].matchAll(/(?:^|\s)--([\w-]+)/g)) {
        assert.ok(names.has(m[1]), `${c.name}: '${e}' uses --${m[1]}`);
      }
    }
  }
});

Deno.test("unknown and misplaced options name the command and point at its --help", async () => {
  const misplaced = await cflow(["doctor", "--prompt", "hi"]);
  assert.equal(misplaced.code, EXIT.USAGE);
  assert.match(
    misplaced.stderr,
    /'--prompt' does not apply to 'doctor' \(it is an option of generate\)/,
  );
  assert.match(misplaced.stderr, /cflow doctor --help/);
  const serve = await cflow(["serve", "--temperature", "0"]);
  assert.equal(serve.code, EXIT.USAGE);
  assert.match(
    serve.stderr,
    /'--temperature' does not apply to 'serve' \(it is an option of generate, chat\)/,
  );
  const unknown = await cflow(["inspect", "x.cflow", "--nope"]);
  assert.equal(unknown.code, EXIT.USAGE);
  assert.match(unknown.stderr, /unknown option '--nope' for 'inspect'; run 'cflow inspect --help'/);
  const bare = await cflow(["--model", "m.gguf"]);
  assert.equal(bare.code, EXIT.USAGE);
  assert.match(bare.stderr, /'--model' needs a command/);
  const missing = await cflow(["generate", "--max-tokens"]);
  assert.equal(missing.code, EXIT.USAGE);
  assert.match(missing.stderr, /cflow generate --help/);
  const helpUnknown = await cflow(["help", "frobnicate"]);
  assert.equal(helpUnknown.code, EXIT.USAGE);
  assert.match(helpUnknown.stderr, /unknown command 'frobnicate'/);
  // --help wins over the rest of the line
  const helpWins = await cflow(["doctor", "--prompt", "x", "--help"]);
  assert.equal(helpWins.code, EXIT.OK);
  assert.ok(helpWins.stdout.startsWith("usage: cflow doctor"));
});

Deno.test({
  name: "NO_COLOR (any non-empty value) and non-terminal output turn color off",
  ignore: !haveScript,
  async fn() {
    const colored = await onTerminal("help", { NO_COLOR: "" });
    assert.equal(colored.code, 0);
    assert.ok(
      colored.stdout.includes(`${ESC}1musage:`),
      JSON.stringify(colored.stdout.slice(0, 200)),
    );
    const plain = await onTerminal("help", { NO_COLOR: "1" });
    assert.ok(plain.stdout.includes("usage:"));
    assert.ok(!plain.stdout.includes(ESC), "NO_COLOR=1");
    const err = await onTerminal("inspect /nonexistent/model.gguf", { NO_COLOR: "" });
    assert.equal(err.code, EXIT.ERROR);
    assert.ok(err.stdout.includes(`${ESC}31merror:`), err.stdout);
    const errPlain = await onTerminal("inspect /nonexistent/model.gguf", { NO_COLOR: "yes" });
    assert.ok(errPlain.stdout.includes("cflow: error:") && !errPlain.stdout.includes(ESC));
    const piped = await cflow(["inspect", "/nonexistent/model.gguf"], { NO_COLOR: "" });
    assert.ok(piped.stderr.includes("cflow: error:") && !piped.stderr.includes(ESC));
  },
});

Deno.test({
  name: "progress bars: converting into the cache on a terminal, none when piped",
  ignore: !haveScript || !exists(SMOLLM2),
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "cflow-progress-" });
    try {
      const args = `generate --model ${SMOLLM2} --prompt hi --max-tokens 2 --temperature 0`;
      const tty = await onTerminal(args, { CFLOW_CACHE: cache });
      assert.equal(tty.code, 0, tty.stdout);
      assert.match(tty.stdout, /\rconverting \[#{30}\] 100% \d+\.\d\/\d+\.\d MB/);
      const again = await cflow(args.split(" "), { CFLOW_CACHE: cache });
      assert.equal(again.code, 0, again.stderr);
      assert.doesNotMatch(again.stderr, /\[[#.]+\]|\r/, "no bars when piped");
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});

if (!exists(RANDOM_1B)) {
  console.warn(
    "cli_help_test: the packing progress bar test is ignored: it needs the 1B benchmark model " +
      "(./dev task bench:vs-llama makes it; SmolLM2 packs too fast for a bar)",
  );
}

Deno.test({
  name: "progress bar: packing a 1B model at load, on a terminal",
  ignore: !haveScript || !exists(RANDOM_1B),
  async fn() {
    const doctor = JSON.parse((await cflow(["doctor", "--json"])).stdout);
    const args = `generate --model ${RANDOM_1B} --prompt hi --max-tokens 1 --temperature 0`;
    const tty = await onTerminal(args);
    assert.equal(tty.code, 0, tty.stdout);
    if (doctor.kernels.panels.default) { // weights are packed at load on the SIMD variants
      assert.match(tty.stdout, /\rloading \[#{30}\] 100% /);
    }
    const piped = await cflow(args.split(" "));
    assert.equal(piped.code, 0, piped.stderr);
    assert.doesNotMatch(piped.stderr, /loading \[/);
  },
});

Deno.test({
  name: "generate exits 130 on Ctrl-C, after printing the text and the stats",
  ignore: !exists(SMOLLM2),
  async fn() {
    const child = new Deno.Command(CFLOW, {
      args: ["generate", "--prompt", "Once upon a time", "--max-tokens", "4000", "--ctx", "4096"],
      env: CLEAN,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = child.stdout.getReader();
    let text = "";
    while (text.length < 20) {
      const r = await reader.read();
      if (r.done) break;
      text += new TextDecoder().decode(r.value);
    }
    child.kill("SIGINT");
    while (!(await reader.read()).done);
    const stderr = new TextDecoder().decode(
      (await new Response(child.stderr).arrayBuffer()) as ArrayBuffer,
    );
    const status = await child.status;
    assert.equal(status.code, EXIT.INTERRUPTED, stderr);
    assert.match(stderr, /tokens \(aborted\)/);
  },
});

/** Runs the bash completion function for the words of a command line (the last is completed). */
async function bashComplete(script: string, cases: string[][]): Promise<string[][]> {
  const file = await Deno.makeTempFile({ suffix: ".bash" });
  try {
    await Deno.writeTextFile(file, script);
    const lines = cases.map((words) =>
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${
        words.length - 1
      }; COMPREPLY=(); _cflow; echo "\${COMPREPLY[*]}"`
    );
    const out = await new Deno.Command("bash", {
      args: ["-c", `source '${file}'\ncomplete -p cflow\n${lines.join("\n")}`],
      cwd: ROOT,
    }).output();
    const stdout = new TextDecoder().decode(out.stdout).trimEnd().split("\n");
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.equal(stdout[0], "complete -F _cflow cflow");
    return stdout.slice(1).map((l) => l === "" ? [] : l.split(" "));
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("cflow completions bash: a real bash completes commands, options and values", async () => {
  const r = await cflow(["completions", "bash"]);
  assert.equal(r.code, 0, r.stderr);
  const got = await bashComplete(r.stdout, [
    ["cflow", ""],
    ["cflow", "ge"],
    ["cflow", "generate", "--t"],
    ["cflow", "generate", "--quant", ""],
    ["cflow", "generate", "--kv-cache", "=", "f3"],
    ["cflow", "doctor", "--"],
    ["cflow", "convert", "--format", ""],
    ["cflow", "help", "co"],
    ["cflow", "completions", ""],
    ["cflow", "pull", "s"],
    ["cflow", "generate", "--model", "qwen"],
    ["cflow", "inspect", "cache/models/smollm2-135m-instruct.Q4_1"],
    ["cflow", "--"],
  ]);
  assert.deepEqual(got, [
    COMMANDS.map((c) => c.name),
    ["generate"],
    ["--threads", "--temperature", "--top-k", "--top-p", "--truncate", "--template"],
    ["auto", "q4_0", "q8_0", "f32", "q4_k_m", "q5_k_m", "q6_k"],
    ["f32"],
    ["--threads", "--json", "--help", "--version"],
    ["cflow", "vflow"],
    ["convert", "completions"],
    ["bash", "zsh", "fish"],
    ["smollm2"],
    ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"],
    ["cache/models/smollm2-135m-instruct.Q4_1.gguf"],
    ["--help", "--version"],
  ]);
});

Deno.test("cflow completions zsh and fish: every command and option; checked by the shell if installed", async () => {
  for (const shell of ["zsh", "fish"]) {
    const r = await cflow(["completions", shell]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.length > 1000, shell);
    for (const c of COMMANDS) assert.ok(r.stdout.includes(c.name), `${shell}: ${c.name}`);
    for (const o of Object.values(OPTIONS)) {
      const mention = shell === "zsh" ? `--${o.name}` : `-l ${o.name}`;
      assert.ok(r.stdout.includes(mention), `${shell}: ${o.name}`);
    }
    if (await have(shell)) {
      const file = await Deno.makeTempFile();
      await Deno.writeTextFile(file, r.stdout);
      const check = await new Deno.Command(shell, {
        args: shell === "zsh" ? ["-n", file] : ["--no-execute", file],
      }).output();
      await Deno.remove(file);
      assert.equal(check.code, 0, new TextDecoder().decode(check.stderr));
    }
  }
  const bad = await cflow(["completions", "tcsh"]);
  assert.equal(bad.code, EXIT.USAGE);
  assert.match(bad.stderr, /completions takes one shell: bash, zsh, fish/);
});

Deno.test("README lists every command and the exit codes", async () => {
  const readme = await Deno.readTextFile(`${ROOT}README.md`);
  for (const c of COMMANDS) assert.ok(readme.includes(`./cflow ${c.name}`), c.name);
  for (const [n] of EXIT_CODES_HELP) assert.match(readme, new RegExp(`\\| ${n} +\\|`), `exit ${n}`);
});
