/**
 * The calls of a Transformer that run many rows through its plan and want
 * something of every row (`prefillAll`, `step`, `hiddenStates`): the plan
 * runs up to its output section, and a head of their own, made on first
 * use, runs over the rows: the output head (each row's logits) or the
 * output norm alone (hidden states). Internal to model/.
 *
 * @module
 */

import type { AlignedBuffer, Plan } from "../ffi/mod.ts";
import type { ModelConfig } from "./config.ts";
import type { ExpertCounters } from "./_expert_counters.ts";
import type { ForwardHead } from "./forward_plan.ts";
import type { HiddenStatesOptions, StepRow } from "./options.ts";
import { OutputRows } from "./output_rows.ts";
import type { Sequences } from "./_sequences.ts";
import type { StepBatch } from "./step_rows.ts";

/** What the row calls run on: the model's plan, workspace and per-request state. */
export interface BatchRowParts {
  config: ModelConfig;
  /** Largest batch of one plan run. */
  batch: number;
  plan: Plan;
  memory: AlignedBuffer;
  /** The plan's head: its operations, the output norm's offset and the final hidden rows. */
  head: ForwardHead;
  sequences: Sequences;
  counters: ExpertCounters;
  /** Copies the plan's last-row logits out of the workspace (and reads the counters). */
  lastLogits: () => Float32Array;
}

/**
 * Runs rows of one or many sequences through a model's plan, then a batch
 * head over the rows whose output is wanted. The callers have checked
 * nothing but what their own arguments say; the rows are checked here
 * (step_rows.ts).
 *
 * @example
 * ```ts ignore
 * const rows = new BatchRows(parts);
 * rows.step([{ token: 42, sequence: 0, position: 12, logits: true }], (l, r) => use(l, r));
 * ```
 */
export class BatchRows {
  readonly #m: BatchRowParts;
  /** The first operation of the plan's output section (last row's logits only). */
  readonly #output: number;
  #logits: OutputRows | undefined;
  #hidden: OutputRows | undefined;

  /** Finds the plan's output section; allocates nothing. */
  constructor(parts: BatchRowParts) {
    this.#m = parts;
    const output = parts.plan.sections.find((x) => x.name === "output");
    if (output === undefined) throw new Error("model: the plan has no output section");
    this.#output = output.first;
  }

  /** The output norm's weights, read back from the workspace. */
  #norm(): Float32Array {
    const m = this.#m;
    return new Float32Array(m.memory.read(m.head.norm, m.config.hidden * 4).buffer);
  }

  /** The output head over every row of a batch (each row's logits), made on first use. */
  #logitRows(): OutputRows {
    const m = this.#m;
    this.#logits ??= new OutputRows({
      ops: m.head.ops,
      norm: this.#norm(),
      hidden: m.config.hidden,
      vocab: m.config.vocab,
      batch: m.batch,
      inputStride: m.head.input.stride,
    });
    return this.#logits;
  }

  /**
   * The head's first operation (forward_plan.ts) over every row, and no
   * more: the rows' "logits" are their normed hidden states.
   */
  #hiddenRows(): OutputRows {
    const m = this.#m;
    const { hidden, eps } = m.config;
    this.#hidden ??= new OutputRows({
      ops: (b, input, norm, out) =>
        b.rmsNorm(input, norm, out.logits, hidden, eps, { lastOnly: false }),
      norm: this.#norm(),
      hidden,
      vocab: hidden,
      batch: m.batch,
      inputStride: m.head.input.stride,
    });
    return this.#hidden;
  }

  /**
   * `Transformer.prefillAll` once its tokens and positions (sequence 0)
   * are checked: the plan up to its head for each batch, then the head
   * over the rows from index `from` on.
   */
  prefillAll(
    ids: Uint32Array,
    pos: number,
    onLogits: (logits: Float32Array, index: number) => void,
    from: number,
  ): void {
    const m = this.#m;
    const rows = this.#logitRows();
    for (let i = 0; i < ids.length; i += m.batch) {
      const n = Math.min(ids.length - i, m.batch);
      m.plan.runOps(ids.subarray(i, i + n), pos + i, 0, this.#output);
      if (i + n > from) {
        rows.run(m.memory, m.head.input, Math.max(0, from - i), n, (l, r) => onLogits(l, i + r));
      }
    }
    m.counters.read();
  }

  /** `Transformer.step`. */
  step(rows: readonly StepRow[], onLogits: (logits: Float32Array, row: number) => void): void {
    const { batches, span } = this.#stepPlan(rows);
    for (const b of batches) {
      const last = lastOnly(rows, b.first, b.ids.length);
      this.#m.plan.runRows(b.ids, b.bases, b.positions, 0, last ? 0xffffffff : this.#output);
      this.#stepHead(rows, b.first, b.ids.length, onLogits, last);
    }
    this.#stepDone(span);
  }

  /** `Transformer.stepAsync`. */
  async stepAsync(
    rows: readonly StepRow[],
    onLogits: (logits: Float32Array, row: number) => void,
  ): Promise<void> {
    const { batches, span } = this.#stepPlan(rows);
    for (const b of batches) {
      const last = lastOnly(rows, b.first, b.ids.length);
      await this.#m.plan.runRowsAsync(
        b.ids,
        b.bases,
        b.positions,
        0,
        last ? 0xffffffff : this.#output,
      );
      this.#stepHead(rows, b.first, b.ids.length, onLogits, last);
    }
    this.#stepDone(span);
  }

  /** Checks the rows of a step and cuts them into batches; makes the head before any runs. */
  #stepPlan(rows: readonly StepRow[]): {
    batches: StepBatch[];
    span: Map<number, { first: number; next: number }>;
  } {
    const plan = this.#m.sequences.plan(rows);
    this.#logitRows();
    return plan;
  }

  /** The head over each run of consecutive rows of a batch that want logits. */
  #stepHead(
    rows: readonly StepRow[],
    first: number,
    n: number,
    onLogits: (logits: Float32Array, row: number) => void,
    lastOnly: boolean,
  ): void {
    const m = this.#m;
    if (lastOnly) {
      onLogits(m.lastLogits(), first + n - 1);
      return;
    }
    const head = this.#logitRows();
    for (let r = 0; r < n;) {
      if (!rows[first + r].logits) {
        r++;
        continue;
      }
      let end = r + 1;
      while (end < n && rows[first + end].logits) end++;
      head.run(m.memory, m.head.input, r, end, (l, k) => onLogits(l, first + k));
      r = end;
    }
  }

  #stepDone(span: Map<number, { first: number; next: number }>): void {
    this.#m.sequences.heldSpan(span);
    this.#m.counters.read();
  }

  /** `Transformer.hiddenStatesAsync`. */
  async hiddenAsync(
    tokens: readonly number[],
    onRow: (hidden: Float32Array, index: number) => void,
    options: HiddenStatesOptions,
  ): Promise<void> {
    const m = this.#m;
    const { batches, sequence } = this.#hiddenPlan(tokens, options);
    const rows = this.#hiddenRows();
    for (const b of batches) {
      options.signal?.throwIfAborted();
      await m.plan.runRowsAsync(b.ids, b.bases, b.positions, 0, this.#output);
      m.sequences.held(sequence, b.positions[b.positions.length - 1] + 1);
      rows.run(m.memory, m.head.input, 0, b.ids.length, (h, r) => onRow(h, b.first + r));
    }
    m.counters.read();
  }

  /** `Transformer.hiddenStates`. */
  hidden(tokens: readonly number[], options: HiddenStatesOptions): Float32Array[] {
    const m = this.#m;
    const { batches, sequence } = this.#hiddenPlan(tokens, options);
    const rows = this.#hiddenRows();
    const out: Float32Array[] = [];
    for (const b of batches) {
      m.plan.runRows(b.ids, b.bases, b.positions, 0, this.#output);
      m.sequences.held(sequence, b.positions[b.positions.length - 1] + 1);
      rows.run(m.memory, m.head.input, 0, b.ids.length, (h) => out.push(h.slice()));
    }
    m.counters.read();
    return out;
  }

  /** The batches of a hidden-state call, checked as a step's rows are. */
  #hiddenPlan(
    tokens: readonly number[],
    options: HiddenStatesOptions,
  ): { batches: StepBatch[]; sequence: number } {
    if (!Array.isArray(tokens) || tokens.length === 0) {
      throw new RangeError("model: hidden states need at least one token");
    }
    const sequence = options.sequence ?? 0;
    const position = options.position ?? 0;
    const { batches } = this.#m.sequences.plan(
      tokens.map((token, i) => ({ token, sequence, position: position + i, logits: false })),
    );
    return { batches, sequence };
  }

  /** Frees both heads' workspaces and plans, where they were made. */
  close(): void {
    this.#logits?.close();
    this.#logits = undefined;
    this.#hidden?.close();
    this.#hidden = undefined;
  }
}

/**
 * Whether only the last row of a batch wants logits (one decoding
 * sequence, or a prompt chunk): then the plan's own head computes them, as
 * in a one-token forward, with no copy of the hidden rows into the batch head.
 */
function lastOnly(rows: readonly StepRow[], first: number, n: number): boolean {
  for (let r = 0; r < n - 1; r++) if (rows[first + r].logits) return false;
  return rows[first + n - 1].logits;
}
