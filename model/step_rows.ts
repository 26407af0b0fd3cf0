/**
 * The rows of a batched step (`Transformer.step`), checked and cut
 * into batches: each row a token of one sequence at its position, a
 * sequence's rows at consecutive positions that reach back to what its KV
 * cache holds. Pure: it knows positions, not tensors.
 *
 * @module
 */

import type { StepRow } from "./options.ts";

/** One batch of a step: its first row, and per row the token, KV base and position. */
export interface StepBatch {
  first: number;
  ids: Uint32Array;
  bases: Uint32Array;
  positions: Uint32Array;
}

/**
 * Checks `rows` against the shape of the cache and what each sequence holds
 * (`filled[s]` leading positions), and cuts them into batches of at most
 * `batch` rows. `span` gives, per sequence in the step, its first position
 * and the one after its last. Throws a RangeError naming the row.
 *
 * @example
 * ```ts
 * import { planStepRows } from "./step_rows.ts";
 * const { batches } = planStepRows(
 *   [{ token: 5, sequence: 1, position: 0, logits: true }],
 *   { sequences: 2, context: 16, batch: 4, vocab: 100, filled: [0, 0] },
 * );
 * console.log(batches[0].bases[0]); // 16: sequence 1's cache starts at 1 x 16
 * ```
 */
export function planStepRows(
  rows: readonly StepRow[],
  shape: {
    sequences: number;
    context: number;
    batch: number;
    vocab: number;
    filled: readonly number[];
  },
): { batches: StepBatch[]; span: Map<number, { first: number; next: number }> } {
  if (rows.length === 0) throw new RangeError("model: step needs at least one row");
  const ctx = shape.context;
  // Per sequence: its rows' positions must be consecutive and reach back to what it holds.
  const span = new Map<number, { first: number; next: number }>();
  for (const [i, r] of rows.entries()) {
    if (!Number.isSafeInteger(r.token) || r.token < 0 || r.token >= shape.vocab) {
      throw new RangeError(`model: token ${r.token} is not in [0, ${shape.vocab})`);
    }
    if (!Number.isSafeInteger(r.sequence) || r.sequence < 0 || r.sequence >= shape.sequences) {
      throw new RangeError(
        `model: row ${i}: sequence ${r.sequence} is not in [0, ${shape.sequences})`,
      );
    }
    if (!Number.isSafeInteger(r.position) || r.position < 0 || r.position >= ctx) {
      throw new RangeError(
        `model: row ${i}: position ${r.position} is outside the context of ${ctx}`,
      );
    }
    const seen = span.get(r.sequence);
    if (seen === undefined) {
      const held = shape.filled[r.sequence];
      if (r.position > held) {
        throw new RangeError(
          `model: row ${i}: sequence ${r.sequence} holds ${held} positions; ` +
            `position ${r.position} would leave a gap`,
        );
      }
      span.set(r.sequence, { first: r.position, next: r.position + 1 });
    } else if (r.position !== seen.next) {
      throw new RangeError(
        `model: row ${i}: sequence ${r.sequence} at position ${r.position}, expected ${seen.next}`,
      );
    } else seen.next++;
  }
  const batches: StepBatch[] = [];
  for (let i = 0; i < rows.length; i += shape.batch) {
    const n = Math.min(rows.length - i, shape.batch);
    const ids = new Uint32Array(n);
    const bases = new Uint32Array(n);
    const positions = new Uint32Array(n);
    for (let r = 0; r < n; r++) {
      const row = rows[i + r];
      ids[r] = row.token;
      // Sequence s keeps its keys and values at cache indices [s * ctx, (s + 1) * ctx).
      bases[r] = row.sequence * ctx;
      positions[r] = row.position;
    }
    batches.push({ first: i, ids, bases, positions });
  }
  return { batches, span };
}
