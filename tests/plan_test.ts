/**
 * The plan-driven forward pass on a trained model (SmolLM2-135M-Instruct as Q8_0 and as
 * Q4_0), holding the properties the runtime relies on:
 *
 * - a prompt run in batches (`prefill`) gives bit for bit the logits of the same tokens run
 *   one at a time (`forward`): every token gets the same arithmetic whatever the batch;
 * - results are bit-identical for 1 and 2 threads;
 * - the 16-row packed panels and the tiles as stored agree (same integer products; only the
 *   f32 summation order differs), and greedy decoding is deterministic for each.
 *
 * Skipped when the Q8_0 GGUF is absent (`./dev task test:ts` derives it).
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { Transformer } from "../model/transformer.ts";
import { fnv1a64 } from "../runtime/mod.ts";
import { isFile, sameBits } from "./util/test_models.ts";

const GGUF = new URL("../cache/models/smollm2-135m-instruct.Q8_0.gguf", import.meta.url).pathname;
const present = isFile(GGUF);

/** Deterministic pseudo-text token ids (the tokens need not form words). */
const PROMPT = Array.from({ length: 150 }, (_, i) => 1 + ((i * 7919 + 13) % 49000));

function argmax(v: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

function greedy(model: Transformer, prompt: number[], n: number): number[] {
  let logits = model.prefill(prompt, 0);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const id = argmax(logits);
    out.push(id);
    logits = model.forward(id, prompt.length + i);
  }
  return out;
}

/** SmolLM2 converted losslessly (Q8_0) or to Q4_0 into `dir`; returns the path. */
async function convertSmollm2(dir: string, quant: "q8_0" | "q4_0"): Promise<string> {
  const path = `${dir}/smollm2.${quant}.cflow`;
  await convertFile(GGUF, path, { format: "cflow", quant, rule: "ggml", measureError: false });
  return path;
}

Deno.test({
  name: "plans on SmolLM2: batches, threads and layouts",
  ignore: !present,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "cflow-plan-" });
    try {
      for (const quant of ["q8_0", "q4_0"] as const) {
        const path = await convertSmollm2(dir, quant);
        for (const packed of [true, false]) {
          const label = `${quant} ${packed ? "panels" : "tiles"}`;
          await t.step(
            `${label}: prefill in batches equals token-by-token forward, bit for bit`,
            () => {
              openKernels({ threads: 2 });
              using batched = Transformer.load(path, { packed, contextLength: 256, batch: 64 });
              using single = Transformer.load(path, { packed, contextLength: 256 });
              const got = batched.prefill(PROMPT, 0).slice();
              let want: Float32Array = new Float32Array(0);
              PROMPT.forEach((tok, pos) => want = single.forward(tok, pos));
              sameBits(got, want, label);
              // And the caches they left behind continue identically.
              sameBits(
                batched.forward(42, PROMPT.length).slice(),
                single.forward(42, PROMPT.length),
                label,
              );
            },
          );
          await t.step(
            `${label}: prefill off the event loop equals prefill, and stops when aborted`,
            async () => {
              openKernels({ threads: 2 });
              using a = Transformer.load(path, { packed, contextLength: 256, batch: 16 });
              using b = Transformer.load(path, { packed, contextLength: 256, batch: 16 });
              const want = a.prefill(PROMPT, 0).slice();
              sameBits((await b.prefillAsync(PROMPT, 0)).slice(), want, label);
              // Already aborted: refused before any work, with the signal's reason.
              const stop = new AbortController();
              stop.abort(new Error("stop here"));
              await assert.rejects(() => b.prefillAsync(PROMPT, 0, stop.signal), /stop here/);
              // Aborted during the first batch: the rest never runs; the flag does not
              // outlive the run, so the same prompt then gives the same logits.
              const mid = new AbortController();
              const run = b.prefillAsync(PROMPT, 0, mid.signal);
              mid.abort();
              await assert.rejects(() => run, (e: unknown) => (e as Error).name === "AbortError");
              sameBits((await b.prefillAsync(PROMPT, 0)).slice(), want, label);
              sameBits(b.forward(42, PROMPT.length).slice(), a.forward(42, PROMPT.length), label);
            },
          );
          await t.step(`${label}: profiling section by section gives forward's logits`, () => {
            openKernels({ threads: 2 });
            using a = Transformer.load(path, { packed, contextLength: 256 });
            using b = Transformer.load(path, { packed, contextLength: 256 });
            a.prefill(PROMPT.slice(0, 20), 0);
            b.prefill(PROMPT.slice(0, 20), 0);
            const want = a.forward(42, 20).slice();
            const { sections, logits } = b.profile(42, 20);
            sameBits(logits.slice(), want, label);
            const layers = a.config.layers;
            assert.equal(sections.length, 2 + 2 * layers);
            assert.equal(sections[0].name, "embedding");
            assert.equal(sections[1].name, "layer 0 attention");
            assert.equal(sections[2 * layers].name, `layer ${layers - 1} ffn`);
            assert.equal(sections.at(-1)!.name, "output");
            assert.ok(sections.every((x) => x.ms >= 0 && Number.isFinite(x.ms)));
            // And the next token continues identically.
            sameBits(b.forward(7, 21).slice(), a.forward(7, 21), label);
          });
          await t.step(`${label}: 1 and 2 threads give identical logits`, () => {
            openKernels({ threads: 1 });
            using model = Transformer.load(path, { packed, contextLength: 256 });
            assert.equal(model.loadStats.decodeThreads, 1);
            const one = model.prefill(PROMPT.slice(0, 40), 0).slice();
            const next = model.forward(7, 40).slice();
            openKernels({ threads: 2 });
            for (const decodeThreads of ["single", "pool"] as const) {
              using again = Transformer.load(path, { packed, contextLength: 256, decodeThreads });
              assert.equal(again.loadStats.decodeThreads, decodeThreads === "single" ? 1 : 2);
              sameBits(again.prefill(PROMPT.slice(0, 40), 0), one, label);
              sameBits(again.forward(7, 40), next, `${label} decode on ${decodeThreads}`);
            }
            using auto = Transformer.load(path, {
              packed,
              contextLength: 256,
              decodeThreads: "auto",
            });
            const tuning = auto.loadStats.decodeTuning!;
            assert.ok(tuning.singleMs > 0 && tuning.poolMs > 0);
            assert.equal(auto.loadStats.decodeThreads, tuning.singleMs < tuning.poolMs ? 1 : 2);
          });
        }
        await t.step(`${quant}: panels and tiles agree; greedy output is deterministic`, () => {
          openKernels({ threads: 2 });
          using panels = Transformer.load(path, { packed: true, contextLength: 256 });
          using tiles = Transformer.load(path, { packed: false, contextLength: 256 });
          assert.ok(panels.loadStats.packed && !tiles.loadStats.packed);
          // Summation order moves logits by hundredths, and Q8_0 activation rounding amplifies
          // that (see tests/llamacpp_agreement_test.ts): top-1 may flip only where the
          // tiles' own margin is small.
          let agree = 0;
          let decided = 0;
          let maxDelta = 0;
          PROMPT.slice(0, 64).forEach((tok, pos) => {
            const a = panels.forward(tok, pos);
            const b = tiles.forward(tok, pos);
            const top = argmax(b);
            let second = -Infinity;
            for (let i = 0; i < b.length; i++) if (i !== top) second = Math.max(second, b[i]);
            if (b[top] - second >= 0.5) {
              decided++;
              assert.equal(argmax(a), top, `position ${pos}: margin ${b[top] - second}`);
            }
            if (argmax(a) === top) agree++;
            for (let i = 0; i < a.length; i++) maxDelta = Math.max(maxDelta, Math.abs(a[i] - b[i]));
          });
          console.log(
            `${quant}: panels vs tiles top-1 ${agree}/64 (${decided} decided), max |delta logit| ${maxDelta}`,
          );
          assert.ok(agree >= 54, `top-1 agreement ${agree}/64`);
          assert.ok(maxDelta < 2.5, `max |delta logit| ${maxDelta}`);
          const prompt = [1, 504, 3120, 5248, 314, 253];
          using fresh = Transformer.load(path, { packed: true, contextLength: 256 });
          const a = fnv1a64(greedy(fresh, prompt, 24));
          using fresh2 = Transformer.load(path, { packed: true, contextLength: 256 });
          assert.equal(fnv1a64(greedy(fresh2, prompt, 24)), a);
        });
      }
    } finally {
      openKernels({ threads: 1 });
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "panels on every SIMD variant: batches and threads bit-identical, avx2 equals avxvnni",
  ignore: !present,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "cflow-plan-variants-" });
    const k = openKernels({ threads: 1 });
    const supported = k.supportedVariants();
    const simd = (["avx2", "avxvnni", "avx512vnni"] as const).filter((v) => supported.includes(v));
    const missing = (["avx2", "avxvnni", "avx512vnni"] as const).filter((v) => !simd.includes(v));
    if (missing.length > 0) {
      console.log(`panel kernels not run (this CPU lacks them): ${missing.join(", ")}`);
    }
    try {
      for (const quant of ["q8_0", "q4_0"] as const) {
        const path = await convertSmollm2(dir, quant);
        const byVariant = new Map<string, Float32Array>();
        for (const variant of simd) {
          await t.step(`${quant} ${variant}: batched prefill = forward, 1 = 2 threads`, () => {
            openKernels({ variant, threads: 2 });
            using batched = Transformer.load(path, { contextLength: 256, batch: 64 });
            assert.ok(batched.loadStats.packed, `${variant}: panels are the default`);
            assert.equal(batched.kernelVariant, variant);
            const got = batched.prefill(PROMPT, 0).slice();
            openKernels({ variant, threads: 1 });
            using single = Transformer.load(path, { contextLength: 256 });
            let want: Float32Array = new Float32Array(0);
            PROMPT.forEach((tok, pos) => want = single.forward(tok, pos));
            sameBits(got, want, `${quant} ${variant}`);
            byVariant.set(variant, got);
          });
        }
        // The maddubs and the 256-bit vpdpbusd panels compute the same integers, and every
        // float operation of the two variants is the same 8-lane code.
        if (byVariant.has("avx2") && byVariant.has("avxvnni")) {
          sameBits(byVariant.get("avxvnni")!, byVariant.get("avx2")!, `${quant} avxvnni vs avx2`);
        }
      }
    } finally {
      openKernels({ variant: "auto", threads: 1 });
      await Deno.remove(dir, { recursive: true });
    }
  },
});
