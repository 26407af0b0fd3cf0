/**
 * Faults around files: the converter killed with SIGKILL at random points,
 * running out of disk space, a source that changes while it is converted,
 * and a model file truncated while it is mapped and in use.
 *
 * The converter runs as `cli/main.ts convert` in a child process with the
 * launcher's scoped permissions, so a kill is a real kill.
 */

import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { KernelError, STATUS } from "../ffi/mod.ts";
import { loadTiledFile } from "../formats/cflow/mod.ts";
import { Transformer } from "../model/mod.ts";
import { Rng } from "./util/rng.ts";
import { tinyGguf } from "./util/tiny_gguf.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const LIB = Deno.env.get("CFLOW_KERNELS") ?? `${ROOT}/kernels-zig/zig-out/lib/libcflow_kernels.so`;
/** A real model the suite fetches and derives first (deno.json test:ts). */
const SOURCE = `${ROOT}/cache/models/smollm2-135m-instruct.Q8_0.gguf`;

/** Deno and its arguments for `cflow convert IN OUT --quant q8_0`, as the launcher runs it. */
function converterArgs(input: string, output: string): string[] {
  const dir = output.slice(0, output.lastIndexOf("/"));
  return [
    Deno.execPath(),
    "run",
    "--no-prompt",
    `--allow-ffi=${LIB}`,
    `--allow-read=${ROOT},${LIB},${input},${dir}`,
    `--allow-write=${dir}`,
    "--allow-env=CFLOW_KERNELS,CFLOW_THREADS,CFLOW_KERNEL_VARIANT,CFLOW_CPU_DISABLE",
    `${ROOT}/cli/main.ts`,
    "convert",
    input,
    output,
    "--quant",
    "q8_0",
  ];
}

function command(argv: string[]): Deno.Command {
  return new Deno.Command(argv[0], {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  });
}

function converter(input: string, output: string): Deno.Command {
  return command(converterArgs(input, output));
}

async function sha256(path: string): Promise<string> {
  const bytes = await Deno.readFile(path);
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

async function namesIn(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir), (e) => e.name)).sort();
}

Deno.test({
  name:
    "SIGKILL at 50 random points: the destination is absent or complete and valid, never partial",
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-kill-" });
    try {
      // The reference: one uninterrupted run, timed.
      const reference = `${dir}/reference.cflow`;
      const t0 = performance.now();
      const ok = await converter(SOURCE, reference).output();
      const fullMs = performance.now() - t0;
      assert.equal(ok.code, 0, new TextDecoder().decode(ok.stderr));
      const want = await sha256(reference);
      loadTiledFile(reference, { verifyChecksums: true }).close();

      const output = `${dir}/out.cflow`;
      const rng = new Rng(0x5161_4b11);
      const trials = 50;
      // On a busy machine a later run can take longer than the timed one, and
      // then no kill in the window lands after the rename: up to 10 more
      // trials, each at twice the previous delay, until one has.
      const extra = 10;
      let absent = 0;
      let complete = 0;
      let tempsLeft = 0;
      for (let i = 0; i < trials + extra; i++) {
        if (i >= trials && complete > 0) break;
        // Stratified over the whole run (startup, reading, writing, fsync,
        // rename) and a little past it.
        const delayMs = i < trials
          ? fullMs * 1.1 * (i + rng.next()) / trials
          : fullMs * 1.1 * 2 ** (i - trials + 1);
        const child = converter(SOURCE, output).spawn();
        const timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch {
            // it had already exited
          }
        }, delayMs);
        const status = await child.output();
        clearTimeout(timer);
        if (await exists(output)) {
          // Whatever got there is the whole, valid file.
          assert.equal(await sha256(output), want, `trial ${i}: ${output} differs`);
          complete++;
          await Deno.remove(output);
        } else {
          assert.notEqual(status.code, 0, `trial ${i}: exited 0 without an output`);
          absent++;
        }
        // Killed while writing: count what it left, then remove it so that
        // gigabytes of dead temporary files do not slow the next trials.
        for (const name of await namesIn(dir)) {
          if (!name.startsWith(".out.cflow.tmp-")) continue;
          tempsLeft++;
          await Deno.remove(`${dir}/${name}`);
        }
      }
      // The kills landed across the run: some before the rename, some after,
      // and some while the temporary file was being written.
      assert.ok(absent > 0 && complete > 0, `${absent} absent, ${complete} complete`);
      assert.ok(tempsLeft > 0, "no kill landed while the temporary file existed");

      // A later conversion removes the temporary file a killed run left, once
      // it is a minute old and unlocked.
      const child = converter(SOURCE, output).spawn();
      let temp: string | undefined;
      for (let waited = 0; temp === undefined && waited < 30_000; waited += 5) {
        await new Promise((r) => setTimeout(r, 5));
        temp = (await namesIn(dir)).find((n) => n.startsWith(".out.cflow.tmp-"));
      }
      child.kill("SIGKILL");
      await child.output();
      assert.ok(temp !== undefined, "the converter never created its temporary file");
      const old = new Date(Date.now() - 120_000);
      await Deno.utime(`${dir}/${temp}`, old, old);
      const again = await converter(SOURCE, output).output();
      assert.equal(again.code, 0, new TextDecoder().decode(again.stderr));
      assert.equal(await sha256(output), want);
      assert.deepEqual(await namesIn(dir), ["out.cflow", "reference.cflow"]);
      console.log(
        `  ${absent + complete} kills over ${
          fullMs.toFixed(0)
        } ms: ${absent} absent, ${complete} complete, ` +
          `${tempsLeft} temporary files left behind (removed by the next run)`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** True when this machine lets us mount a small tmpfs in a private namespace. */
function canMountTmpfs(): boolean {
  try {
    const r = new Deno.Command("unshare", {
      args: ["-rm", "sh", "-c", 'd="$(mktemp -d)" && mount -t tmpfs -o size=64k tmpfs "$d"'],
      stdout: "null",
      stderr: "null",
    }).outputSync();
    return r.success;
  } catch {
    return false;
  }
}

const TMPFS = canMountTmpfs();
if (!TMPFS) {
  console.warn(
    "convert_faults_test: ENOSPC test ignored: `unshare -rm` cannot mount a tmpfs on this machine",
  );
}

Deno.test({
  name: "ENOSPC on a small tmpfs: a clear error, the temporary file removed, nothing left",
  ignore: !TMPFS,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "cflow-enospc-" });
    try {
      const input = `${dir}/tiny.gguf`;
      await Deno.writeFile(input, tinyGguf("Q8_0"));
      const small = `${dir}/small`;
      await Deno.mkdir(small);
      // The tmpfs exists only in the child's mount namespace: list it there.
      const script = 'mount -t tmpfs -o size=16k tmpfs "$0" || exit 90; "$@"; rc=$?; ' +
        'echo "listing:$(ls -A "$0")"; exit $rc';
      const full = command([
        "unshare",
        "-rm",
        "sh",
        "-c",
        script,
        small,
        ...converterArgs(input, `${small}/tiny.cflow`),
      ]);
      const r = await full.output();
      const out = new TextDecoder().decode(r.stdout);
      const err = new TextDecoder().decode(r.stderr);
      assert.equal(r.code, 1, `exit ${r.code}: ${err}`);
      assert.match(err, /^cflow: error: convert: no space left on the device \(ENOSPC\)/m);
      assert.match(err, /the partial output was removed/);
      assert.ok(!/at .*\.ts:\d+/.test(err), `a stack trace instead of a message: ${err}`);
      assert.match(out, /^listing:$/m, `left on the tmpfs: ${out}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

for (const change of ["appended to", "truncated"] as const) {
  Deno.test(`a source ${change} during conversion is detected and the output discarded`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "cflow-changed-" });
    try {
      const input = `${dir}/tiny.gguf`;
      const bytes = tinyGguf("Q8_0");
      await Deno.writeFile(input, bytes);
      const output = `${dir}/tiny.cflow`;
      let changed = false;
      await assert.rejects(
        () =>
          convertFile(input, output, {
            format: "cflow",
            quant: "q8_0",
            rule: "ggml",
            measureError: false,
            progress: (written) => {
              if (changed || written === 0) return;
              changed = true;
              if (change === "appended to") {
                Deno.writeFileSync(input, new Uint8Array(16), { append: true });
              } else {
                Deno.truncateSync(input, bytes.length >> 1);
              }
            },
          }),
        (e: unknown) =>
          e instanceof Error && e.message.startsWith(`convert: ${input} changed while`) &&
          e.message.includes("discarded"),
      );
      assert.ok(changed, "the progress callback never ran");
      assert.deepEqual(await namesIn(dir), ["tiny.gguf"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

for (const packed of [false, true]) {
  const what = packed
    ? "runs on from its packed copy, unaffected"
    : "gives a KernelError, not SIGBUS";
  Deno.test(`a model file truncated while loaded ${what} (packed: ${packed})`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "cflow-truncated-" });
    try {
      const input = `${dir}/tiny.gguf`;
      await Deno.writeFile(input, tinyGguf("Q8_0"));
      const path = `${dir}/tiny.cflow`;
      await convertFile(input, path, {
        format: "cflow",
        quant: "q8_0",
        rule: "ggml",
        measureError: false,
      });
      // What the second token's logits are with the file intact.
      const want = (() => {
        using file = loadTiledFile(path);
        const model = Transformer.fromFile(file, { packed });
        try {
          model.forward(1, 0);
          return model.forward(2, 1).slice();
        } finally {
          model.close();
        }
      })();
      const file = loadTiledFile(path);
      const model = Transformer.fromFile(file, { packed });
      try {
        assert.equal(model.loadStats.packed, packed);
        model.forward(1, 0);
        // Another process truncates the file under the mapping: the tiles
        // read in place would raise SIGBUS.
        await Deno.truncate(path, 4096);
        if (packed) {
          // Everything the plan reads was copied at load.
          assert.deepEqual(model.forward(2, 1), want);
        } else {
          assert.throws(
            () => model.forward(2, 1),
            (e: unknown) => e instanceof KernelError && e.status === STATUS.CHANGED,
          );
        }
      } finally {
        model.close();
        file.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
