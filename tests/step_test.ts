/**
 * `Transformer.step`: several sequences in one batch over one copy of the
 * weights. Every row's logits must equal, bit for bit, what the sequence
 * gives alone token by token through `forward`, whatever else shares the
 * batch: sequences joining mid-run with prompt chunks, decoding side by
 * side, one of them leaving, a rollback that runs positions again, and
 * more rows than one batch. On SmolLM2 (panels and tiles), the random-init
 * families, mixture-of-experts models (in place and with the disk tier) and
 * the pipeline-native schedules.
 *
 * @module
 */
import assert from "node:assert/strict";
import { convertFile } from "../convert/mod.ts";
import { openKernels } from "../ffi/mod.ts";
import { type StepRow, Transformer, type TransformerOptions } from "../model/mod.ts";
import { convertFixture } from "./util/fixture_model.ts";
import { isFile, sameBits } from "./util/test_models.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const GGUF = `${ROOT}cache/models/smollm2-135m-instruct.Q8_0.gguf`;

/** Deterministic pseudo-text of sequence `s`. */
function text(s: number, n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + s * 104729 + 13) % (vocab - 1)));
}

/**
 * Runs a schedule of steps (each a list of [sequence, first position, count,
 * logits of the last row only]) on `model` and checks every row that asks
 * for logits against `want[sequence][position]`.
 */
function runSchedule(
  model: Transformer,
  texts: number[][],
  want: Float32Array[][],
  steps: [number, number, number][][],
  label: string,
): number {
  let checked = 0;
  for (const [k, spec] of steps.entries()) {
    const rows: StepRow[] = [];
    for (const [sequence, first, count] of spec) {
      for (let p = first; p < first + count; p++) {
        // Every row of a prompt chunk asks for logits here, so all of them are checked.
        rows.push({ token: texts[sequence][p], sequence, position: p, logits: true });
      }
    }
    model.step(rows, (logits, i) => {
      const r = rows[i];
      sameBits(logits, want[r.sequence][r.position], `${label} step ${k} row ${i}`);
      checked++;
    });
  }
  return checked;
}

/** Three sequences: joins with prompt chunks, decode side by side, a leaver, a rollback. */
const SCHEDULE: [number, number, number][][] = [
  [[0, 0, 5]], // sequence 0's prompt
  [[0, 5, 1], [1, 0, 3]], // 0 decodes, 1 joins with a 3-token prompt
  [[1, 3, 1], [0, 6, 1], [2, 0, 4]], // 2 joins; rows of different sequences interleave
  [[0, 7, 1], [1, 4, 1], [2, 4, 1]],
  [[2, 5, 1], [1, 5, 1]], // 0 has left; the others go on
  [[1, 3, 3]], // 1 rolls back to position 3 and runs it again
  [[2, 6, 1], [1, 6, 1], [0, 8, 1]], // 0 comes back where it stopped
];

/** Positions each sequence reaches in SCHEDULE. */
const LENGTHS = [9, 7, 7];

Deno.test("step: batched rows of several sequences give each sequence's own logits", async (t) => {
  const models: [string, TransformerOptions[]][] = [
    ["hf_logits/llama_gqa_untied", [{}, { packed: false }]],
    ["hf_logits/qwen2", [{}]],
    ["hf_logits/gemma3", [{}]],
    ["hf_logits/mixtral", [{}, { expertTier: "disk", expertFetch: "staged" }]],
    ["hf_logits/qwen2moe", [{}, { expertTier: "disk" }]],
    ["pipeline_native/arch1_decoupled_streams", [{}]],
    ["pipeline_native/arch3_pipeline_registers", [{}]],
    ["pipeline_native/arch4_async_experts", [{}, { expertTier: "disk", expertFetch: "staged" }]],
    ["pipeline_native/arch5_fixed_point", [{}]],
  ];
  openKernels({ threads: 2 });
  // The disk tier's direct reads need a disk-backed file system: the cache, not /tmp.
  await Deno.mkdir(`${ROOT}cache`, { recursive: true });
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "step-" });
  try {
    for (const [name, configs] of models) {
      const path = await convertFixture(name, dir);
      for (const options of configs) {
        const label = `${name} ${JSON.stringify(options)}`;
        await t.step(label, () => {
          using single = Transformer.load(path, { contextLength: 16, ...options });
          const vocab = single.config.vocab;
          const texts = LENGTHS.map((n, s) => text(s, n, vocab));
          const want = texts.map((tokens) =>
            tokens.map((tok, p) => single.forward(tok, p).slice())
          );
          // Batches of 4 rows: the 3-row prompt steps and the rollback fit, the 5-row one splits.
          using batched = Transformer.load(path, {
            contextLength: 16,
            batch: 4,
            sequences: 3,
            ...options,
          });
          const checked = runSchedule(batched, texts, want, SCHEDULE, label);
          assert.equal(checked, SCHEDULE.flat().reduce((a, [, , n]) => a + n, 0));
        });
      }
    }
  } finally {
    openKernels({ threads: 1 });
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "step on SmolLM2 (Q4_0 and Q8_0, panels and tiles): eight sequences decode as each alone",
  ignore: !isFile(GGUF),
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "cflow-step-" });
    try {
      openKernels({ threads: 2 });
      for (const quant of ["q4_0", "q8_0"] as const) {
        const path = `${dir}/smollm2.${quant}.cflow`;
        await convertFile(GGUF, path, {
          format: "cflow",
          quant,
          rule: "ggml",
          measureError: false,
        });
        for (const packed of [true, false]) {
          const label = `${quant} ${packed ? "panels" : "tiles"}`;
          await t.step(label, () => {
            using single = Transformer.load(path, { packed, contextLength: 64 });
            const vocab = single.config.vocab;
            // Prompts of 1 to 15 tokens, then 6 decoded tokens each.
            const texts = Array.from({ length: 8 }, (_, s) => text(s, 2 * s + 1 + 6, vocab));
            const want = texts.map((tokens) =>
              tokens.map((tok, p) => single.forward(tok, p).slice())
            );
            using batched = Transformer.load(path, { packed, contextLength: 64, sequences: 8 });
            // One step: every prompt at once (64 rows; only the last of each asks for logits).
            const prompts: StepRow[] = texts.flatMap((tokens, s) =>
              tokens.slice(0, 2 * s + 1).map((token, p) => ({
                token,
                sequence: s,
                position: p,
                logits: p === 2 * s,
              }))
            );
            const seen: number[] = [];
            batched.step(prompts, (logits, i) => {
              const r = prompts[i];
              sameBits(logits, want[r.sequence][r.position], `${label} prompt row ${i}`);
              seen.push(r.sequence);
            });
            assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7]);
            // Then six decode steps of eight rows each, in a different order each time.
            for (let d = 0; d < 6; d++) {
              const rows: StepRow[] = texts.map((tokens, s) => ({
                token: tokens[2 * s + 1 + d],
                sequence: s,
                position: 2 * s + 1 + d,
                logits: true,
              }));
              if (d % 2 === 1) rows.reverse();
              batched.step(rows, (logits, i) => {
                const r = rows[i];
                sameBits(logits, want[r.sequence][r.position], `${label} decode ${d} row ${i}`);
              });
            }
          });
        }
      }
    } finally {
      openKernels({ threads: 1 });
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("step refuses rows that would read what a sequence does not hold", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "step-refuse-" });
  try {
    const path = await convertFixture("hf_logits/llama_gqa_untied", dir);
    using model = Transformer.load(path, { contextLength: 8, sequences: 2, batch: 4 });
    const row = (sequence: number, position: number): StepRow => ({
      token: 1,
      sequence,
      position,
      logits: false,
    });
    const none = () => {};
    assert.throws(() => model.step([], none), /at least one row/);
    assert.throws(() => model.step([row(2, 0)], none), /sequence 2 is not in \[0, 2\)/);
    assert.throws(() => model.step([row(0, 8)], none), /outside the context of 8/);
    assert.throws(
      () => model.step([row(1, 1)], none),
      /holds 0 positions; position 1 would leave a gap/,
    );
    assert.throws(() => model.step([row(0, 0), row(0, 2)], none), /expected 1/);
    assert.throws(() => model.step([{ ...row(0, 0), token: -1 }], none), RangeError);
    model.step([row(0, 0), row(0, 1), row(1, 0)], none);
    model.step([row(0, 2), row(1, 1)], none); // each goes on where it stopped
    model.step([row(0, 1)], none); // a rollback is allowed
    // forward and prefill are sequence 0: what they run counts as held.
    model.prefill([1, 2, 3, 4, 5], 0);
    model.step([row(0, 5)], none);
    // What they refuse does not: a bad token leaves positions 6 and 7 unheld.
    assert.throws(() => model.prefill([1, -1], 6), /token -1 is not in/);
    assert.throws(() => model.prefillAll([1, 1e9], 6, none), /token 1000000000 is not in/);
    assert.throws(() => model.trace([1, 0.5], 6), /token 0.5 is not in/);
    assert.throws(() => model.step([row(0, 7)], none), /holds 6 positions; position 7/);
    assert.throws(
      () => Transformer.load(path, { decodeThreads: "two" as "pool" }),
      /decodeThreads two is not "auto", "pool" or "single"/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("step: a batch whose last row alone wants logits runs the plan's own head, bit for bit", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "step-last-" });
  try {
    const path = await convertFixture("hf_logits/qwen2", dir);
    using single = Transformer.load(path, { contextLength: 16 });
    const vocab = single.config.vocab;
    const tokens = text(5, 9, vocab);
    const want = tokens.map((tok, p) => single.forward(tok, p).slice());
    using model = Transformer.load(path, { contextLength: 16, sequences: 2, batch: 4 });
    const got: [number, Float32Array][] = [];
    const keep = (l: Float32Array, i: number) => got.push([i, l.slice()]);
    // A 6-row prompt of sequence 1 (batches of 4 + 2), only its last row asks; then single rows.
    const prompt: StepRow[] = tokens.slice(0, 6).map((token, p) => ({
      token,
      sequence: 1,
      position: p,
      logits: p === 5,
    }));
    model.step(prompt, keep);
    for (let p = 6; p < 9; p++) {
      model.step([{ token: tokens[p], sequence: 1, position: p, logits: true }], keep);
    }
    assert.deepEqual(got.map(([i]) => i), [5, 0, 0, 0]);
    got.forEach(([, l], k) => sameBits(l, want[k === 0 ? 5 : 5 + k], `row ${k}`));
    // The async form gives the same.
    const again: Float32Array[] = [];
    await model.stepAsync(
      [{ token: tokens[8], sequence: 1, position: 8, logits: true }],
      (l) => again.push(l.slice()),
    );
    sameBits(again[0], want[8], "stepAsync");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Transformer.loadAsync packs with event-loop turns between runs and gives load's logits", async () => {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}cache`, prefix: "step-async-" });
  try {
    const path = await convertFixture("hf_logits/llama_gqa_untied", dir);
    using sync = Transformer.load(path, { contextLength: 8, packed: true });
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    const pending = Transformer.loadAsync(path, { contextLength: 8, packed: true });
    using model = await pending;
    clearInterval(timer);
    assert.ok(model.loadStats.packed, "packed");
    assert.ok(turns >= 1, `the event loop turned ${turns} times while it packed`);
    for (const [p, tok] of [3, 1, 4, 1, 5].entries()) {
      sameBits(model.forward(tok, p).slice(), sync.forward(tok, p), `position ${p}`);
    }
    await assert.rejects(
      () => Transformer.loadAsync(path, { contextLength: 8, kvCache: "q8_0" }),
      /multiple of 32/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
