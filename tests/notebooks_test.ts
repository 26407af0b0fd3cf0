/**
 * The notebooks in examples/ executed headless, as a reader would run them: scripts/install-jupyter.sh
 * installs nbconvert (pinned, into .tools/jupyter/) and registers the pinned Deno as the kernel
 * `deno`, then `jupyter nbconvert --to notebook --execute` runs every notebook; any cell error
 * fails the test (nbconvert exits non-zero), and the executed notebooks must hold the outputs each
 * one exists to show. The committed notebooks must be valid nbformat 4 without outputs.
 *
 * Skipped when the default model is absent (`deno task test:ts` fetches it); fails, never skips,
 * when PyPI cannot be reached to install nbconvert.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname;
const EXAMPLES = `${ROOT}examples/`;
const GGUF = `${ROOT}cache/models/smollm2-135m-instruct.Q4_1.gguf`;
const present = (() => {
  try {
    return Deno.statSync(GGUF).isFile;
  } catch {
    return false;
  }
})();

/** Seconds the install may take (a cold pip install of ~40 MB of wheels). */
const INSTALL_TIMEOUT_S = 300;
/** Seconds one notebook may take end to end, and one cell within it. */
const NOTEBOOK_TIMEOUT_S = 180;
const CELL_TIMEOUT_S = 120;

interface Output {
  output_type: string;
  data?: Record<string, string | string[]>;
  text?: string | string[];
  ename?: string;
  evalue?: string;
}
interface Cell {
  cell_type: string;
  id?: string;
  source: string | string[];
  execution_count?: number | null;
  outputs?: Output[];
}
interface Notebook {
  nbformat: number;
  nbformat_minor: number;
  metadata: { kernelspec?: { name: string } };
  cells: Cell[];
}

const joined = (s: string | string[] | undefined): string =>
  Array.isArray(s) ? s.join("") : s ?? "";

const notebooks = [...Deno.readDirSync(EXAMPLES)]
  .filter((e) => e.isFile && e.name.endsWith(".ipynb"))
  .map((e) => e.name)
  .sort();

/**
 * Runs a command from the repository root; past `timeoutS` it is interrupted (SIGINT, so that
 * nbconvert shuts its kernel down instead of leaving it running), then killed 15 s later.
 */
async function run(
  cmd: string,
  args: string[],
  timeoutS: number,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(cmd, {
    args,
    cwd: ROOT,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  let kill: ReturnType<typeof setTimeout> | undefined;
  const interrupt = setTimeout(() => {
    timedOut = true;
    child.kill("SIGINT");
    kill = setTimeout(() => child.kill("SIGKILL"), 15_000);
  }, timeoutS * 1000);
  try {
    const out = await child.output();
    const d = new TextDecoder();
    if (timedOut) {
      throw new Error(
        `${cmd} ${args.join(" ")}: timed out after ${timeoutS} s\n${d.decode(out.stderr)}`,
      );
    }
    return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
  } finally {
    clearTimeout(interrupt);
    clearTimeout(kill);
  }
}

/** Every data bundle a cell displayed, by MIME type, joined. */
function outputsOf(nb: Notebook, id: string): Output[] {
  const cell = nb.cells.find((c) => c.id === id);
  assert.ok(cell, `no cell with id ${id}`);
  return cell.outputs ?? [];
}
function mime(nb: Notebook, id: string, type: string): string[] {
  return outputsOf(nb, id).filter((o) => o.data?.[type] !== undefined).map((o) =>
    joined(o.data![type])
  );
}

/** Permission states every notebook's load cell must report. */
const AFTER_LOAD = {
  read: "granted",
  ffi: "granted",
  write: "prompt",
  env: "prompt",
  net: "prompt",
  run: "prompt",
  sys: "prompt",
};

/** What each executed notebook must show, beyond running without an error. */
const EXPECT: Record<string, (nb: Notebook) => void> = {
  "experts.ipynb": (nb) => {
    const schedule = mime(nb, "load", "text/markdown").join("");
    assert.match(schedule, /\| 0 \| out\[-1\] \| x_mid \| 2 \| - \|/, schedule);
    assert.match(schedule, /\| 5 \| out\[4\] \| x_mid \| flush \| 3 \|/, schedule);
    assert.match(schedule, /experts of passes 4, 5/);
    const svg = mime(nb, "routing", "image/svg+xml").join("");
    const rects = (svg.match(/<rect /g) ?? []).length;
    assert.ok(rects >= 6 * 2 * 10 && rects % 12 === 0, `two experts per layer and token: ${rects}`);
    const bytes = mime(nb, "bytes", "text/markdown").join("");
    assert.match(bytes, /\| 0 \| [\d.]+ \| [\d.]+ \| 4\.0x \|/, bytes);
    assert.match(bytes, /top-2 of 8/);
  },
  "generate.ipynb": (nb) => {
    const streamed = mime(nb, "stream", "text/plain");
    assert.ok(streamed.length >= 1, "the streamed completion is missing");
    const prompt = "The three primary colors are";
    assert.ok(streamed[0].startsWith(prompt), `streamed text: ${streamed[0]}`);
    assert.ok(streamed[0].length > prompt.length + 20, `too little was streamed: ${streamed[0]}`);
    assert.match(mime(nb, "stream", "text/markdown").join(""), /decode tok\/s/);
    const chat = mime(nb, "chat", "text/plain");
    assert.ok(chat[0]?.replace("assistant: ", "").trim().length > 0, "the chat answer is empty");
    assert.match(mime(nb, "abort", "text/markdown").join(""), /`aborted`/);
    const cancel = mime(nb, "cancel", "text/markdown").join("");
    assert.match(cancel, /`aborted` and 0 tokens generated/, cancel);
  },
  "logprobs.ipynb": (nb) => {
    const table = mime(nb, "logprob-table", "text/html").join("");
    assert.match(table, /<table class="cflow-logprobs">/);
    // A header row and one row per generated token (12), each with 5 alternatives.
    assert.equal((table.match(/<tr>/g) ?? []).length, 13, table);
    assert.match(mime(nb, "forced", "text/html").join(""), /perplexity \d/);
  },
  "timing.ipynb": (nb) => {
    assert.match(mime(nb, "load", "text/markdown").join(""), /weights packed into panels/);
    const svg = mime(nb, "decode-latency", "image/svg+xml").join("");
    assert.equal((svg.match(/<rect /g) ?? []).length, 64, "one bar per decoded token");
    assert.match(mime(nb, "decode-latency", "text/markdown").join(""), /median/);
    assert.match(mime(nb, "prefill", "text/markdown").join(""), /\| 256 \|/);
    const layers = mime(nb, "layers", "image/svg+xml").join("");
    assert.equal((layers.match(/<rect /g) ?? []).length, 60, "attention and FFN of 30 layers");
    assert.match(mime(nb, "layers", "text/markdown").join(""), /\| FFN, 30 layers \| \d/);
    const scope = nb.cells.find((c) => c.id === "scope");
    assert.match(joined(scope?.source), /mixture-of-experts/);
  },
};

Deno.test("examples/*.ipynb: committed as valid nbformat 4, without outputs, for the deno kernel", () => {
  assert.deepEqual(notebooks, Object.keys(EXPECT).sort(), "every notebook has its checks here");
  for (const name of notebooks) {
    const nb = JSON.parse(Deno.readTextFileSync(EXAMPLES + name)) as Notebook;
    assert.equal(nb.nbformat, 4, name);
    assert.ok(nb.nbformat_minor >= 5, `${name}: cell ids need nbformat 4.5`);
    assert.equal(nb.metadata.kernelspec?.name, "deno", name);
    assert.equal(nb.cells[0]?.cell_type, "markdown", `${name}: starts with how to run it`);
    const intro = joined(nb.cells[0].source);
    assert.match(intro, /deno jupyter --install/, name);
    assert.match(intro, /nbconvert --to notebook --execute/, name);
    assert.match(intro, /Permissions/, name);
    const ids = new Set<string>();
    for (const cell of nb.cells) {
      assert.ok(cell.id && !ids.has(cell.id), `${name}: cell ids are unique`);
      ids.add(cell.id);
      if (cell.cell_type !== "code") continue;
      assert.deepEqual(cell.outputs, [], `${name}: cell ${cell.id} is committed with outputs`);
      assert.equal(cell.execution_count, null, `${name}: cell ${cell.id} has an execution count`);
    }
  }
});

Deno.test({
  name:
    "examples/*.ipynb: every notebook runs headless (jupyter nbconvert --execute) on the Deno kernel",
  ignore: !present,
  async fn(t) {
    const start = performance.now();
    const install = await run("bash", [`${ROOT}scripts/install-jupyter.sh`], INSTALL_TIMEOUT_S);
    if (install.code !== 0) {
      throw new Error(
        `scripts/install-jupyter.sh failed (exit ${install.code}); the notebooks need nbconvert ` +
          `from PyPI:\n${install.stderr}`,
      );
    }
    const jupyter = install.stdout.trim().split("\n").at(-1)!;
    const installS = (performance.now() - start) / 1000;

    const out = await Deno.makeTempDir({ prefix: "cflow-notebooks-" });
    try {
      const env = { JUPYTER_RUNTIME_DIR: `${out}/runtime` };
      for (const name of notebooks) {
        await t.step(name, async () => {
          const t0 = performance.now();
          const r = await run(
            jupyter,
            [
              "nbconvert",
              "--to",
              "notebook",
              "--execute",
              `--ExecutePreprocessor.timeout=${CELL_TIMEOUT_S}`,
              "--ExecutePreprocessor.kernel_name=deno",
              "--KernelSpecManager.ensure_native_kernel=False",
              "--output-dir",
              out,
              `${EXAMPLES}${name}`,
            ],
            NOTEBOOK_TIMEOUT_S,
            env,
          );
          if (r.code !== 0) {
            throw new Error(`nbconvert --execute ${name} failed (exit ${r.code}):\n${r.stderr}`);
          }
          const nb = JSON.parse(await Deno.readTextFile(`${out}/${name}`)) as Notebook;
          for (const cell of nb.cells.filter((c) => c.cell_type === "code")) {
            assert.ok(cell.execution_count, `${name}: cell ${cell.id} did not run`);
            const err = cell.outputs?.find((o) => o.output_type === "error");
            assert.equal(err, undefined, `${name}: cell ${cell.id}: ${err?.ename} ${err?.evalue}`);
          }
          // After loading, the kernel holds read and ffi only (it starts with everything).
          const perms = mime(nb, "load", "text/markdown").join("");
          for (const [perm, state] of Object.entries(AFTER_LOAD)) {
            assert.ok(perms.includes(`| ${perm} | ${state} |`), `${name}: ${perm} is not ${state}`);
          }
          EXPECT[name](nb);
          console.log(`${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        });
      }
    } finally {
      await Deno.remove(out, { recursive: true });
    }
    console.log(`install-jupyter.sh: ${installS.toFixed(1)} s`);
  },
});
