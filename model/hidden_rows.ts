/**
 * The final hidden state of every row of a batch: the model's output norm
 * over the rows the forward plan leaves before its output section, for
 * callers that want the vector the LM head reads rather than logits
 * (embeddings, `Transformer.hiddenStatesAsync`).
 *
 * Like `OutputRows` (output_rows.ts) it is a second small plan on a workspace of its
 * own, made on first use: the final hidden rows of a batch are copied into
 * it and normed there by the same RMSNorm operation, with the same weights
 * and epsilon, as the model's head: each row is what the output projection
 * would read for it. No vocabulary-sized work is done.
 *
 * @module
 */

import { type AlignedBuffer, allocAligned, type Buf, type Plan, PlanBuilder } from "../ffi/mod.ts";

/**
 * What {@link HiddenRows} is built from.
 *
 * @example
 * ```ts
 * import type { HiddenRowsOptions } from "./hidden_rows.ts";
 * const o: HiddenRowsOptions = {
 *   norm: new Float32Array(576).fill(1),
 *   eps: 1e-5,
 *   hidden: 576,
 *   batch: 64,
 *   inputStride: 2304,
 * };
 * ```
 */
export interface HiddenRowsOptions {
  /** The output norm's weights (`hidden` values, as the model's workspace holds them). */
  norm: Float32Array;
  /** The model's RMSNorm epsilon. */
  eps: number;
  /** Hidden size. */
  hidden: number;
  /** Most rows per run: the model's batch. */
  batch: number;
  /** Bytes between the rows of the model's final hidden buffer. */
  inputStride: number;
}

/**
 * The output norm over all rows of a batch, on its own workspace.
 *
 * @example
 * ```ts ignore
 * import { HiddenRows } from "./hidden_rows.ts";
 * using rows = new HiddenRows({ norm, eps: 1e-5, hidden: 576, batch: 64, inputStride: 2304 });
 * // After a batch of 10 tokens has run the model's plan up to its output section:
 * rows.run(workspace, finalHidden, 10, (hidden, row) => console.log(row, hidden[0]));
 * ```
 */
export class HiddenRows {
  /** Bytes of the workspace (input rows, normed rows, the norm's weights). */
  readonly workspaceBytes: number;
  readonly #workspace: AlignedBuffer;
  readonly #plan: Plan;
  readonly #input: Buf;
  readonly #out: Buf;
  readonly #batch: number;
  readonly #rows: Uint8Array;
  readonly #floats: Float32Array;
  readonly #row: Uint8Array;
  readonly #ids: Uint32Array;

  /** Allocates the workspace and builds the plan. */
  constructor(o: HiddenRowsOptions) {
    if (!Number.isSafeInteger(o.hidden) || o.hidden < 1 || o.norm.length !== o.hidden) {
      throw new RangeError(`hidden rows: ${o.norm.length} norm weights for hidden ${o.hidden}`);
    }
    if (o.inputStride < o.hidden * 4 || o.inputStride % 64 !== 0) {
      throw new RangeError(`hidden rows: input stride ${o.inputStride} for hidden ${o.hidden}`);
    }
    let size = 0;
    const rows = (rowBytes: number, n: number): Buf => {
      const stride = Math.ceil(rowBytes / 64) * 64;
      const offset = size;
      size += stride * n;
      return { offset, stride };
    };
    this.#input = rows(o.inputStride, o.batch);
    this.#out = rows(o.hidden * 4, o.batch);
    const norm = rows(o.hidden * 4, 1).offset;
    this.#batch = o.batch;
    this.workspaceBytes = size;
    this.#workspace = allocAligned(size, 4096);
    try {
      this.#workspace.write(norm, new Uint8Array(o.norm.buffer, o.norm.byteOffset, o.hidden * 4));
      const b = new PlanBuilder();
      b.section("output norm");
      // The head's first operation (forward_plan.ts), over every row.
      b.rmsNorm(this.#input, norm, this.#out, o.hidden, o.eps, { lastOnly: false });
      // No embedding and no KV cache: the plan's positions are only counted.
      this.#plan = b.build(this.#workspace, o.batch, o.batch);
    } catch (error) {
      this.#workspace.close();
      throw error;
    }
    this.#rows = new Uint8Array(this.#input.stride * o.batch);
    this.#floats = new Float32Array(o.hidden);
    this.#row = new Uint8Array(this.#floats.buffer);
    this.#ids = new Uint32Array(o.batch);
  }

  /**
   * Copies rows [0, n) of the final hidden buffer `input` of workspace `src`
   * (its stride must be the `inputStride` given), norms them, and calls
   * `each` with each row's normed hidden state in order, in one buffer that
   * the next row overwrites.
   */
  run(
    src: AlignedBuffer,
    input: Buf,
    n: number,
    each: (hidden: Float32Array, row: number) => void,
  ): void {
    if (input.stride !== this.#input.stride) {
      throw new RangeError(`hidden rows: input stride ${input.stride}, not ${this.#input.stride}`);
    }
    if (!Number.isSafeInteger(n) || n < 1 || n > this.#batch) {
      throw new RangeError(`hidden rows: ${n} rows are not within a batch of ${this.#batch}`);
    }
    const bytes = this.#rows.subarray(0, n * input.stride);
    src.read(input.offset, bytes.length, bytes);
    this.#workspace.write(this.#input.offset, bytes);
    this.#plan.run(this.#ids.subarray(0, n), 0);
    for (let r = 0; r < n; r++) {
      this.#workspace.read(this.#out.offset + r * this.#out.stride, this.#row.length, this.#row);
      each(this.#floats, r);
    }
  }

  /** Frees the plan and the workspace. */
  close(): void {
    this.#plan.close();
    this.#workspace.close();
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
