/**
 * The output head over every row of a prompt batch, for callers that need
 * each position's logits (perplexity, `Transformer.prefillAll`).
 *
 * The model's plan runs the final norm, the output projection and the
 * final soft-cap for a batch's last row only. {@link OutputRows} runs the
 * same operations, emitted by the same code ({@link HeadOps}), over every
 * row, as a second small plan on a workspace of its own: the final hidden
 * rows of a batch are copied into it, and it holds one batch of logits
 * (batch x vocab x 4 bytes). It is made the first time it is asked for, so
 * that a model that only generates allocates none of it.
 *
 * @module
 */

import {
  actRowBytes,
  type AlignedBuffer,
  allocAligned,
  type Buf,
  type Plan,
  PlanBuilder,
} from "../ffi/mod.ts";

/**
 * The buffers the output head writes: the normed input, its Q8_0
 * quantization (for quantized output runs) and the logits.
 *
 * @example
 * ```ts
 * import type { HeadBuffers } from "./output_rows.ts";
 * const out: HeadBuffers = {
 *   xb: { offset: 0, stride: 2304 },
 *   xq: { offset: 147456, stride: 640 },
 *   logits: { offset: 188416, stride: 196608 },
 * };
 * ```
 */
export interface HeadBuffers {
  /** The normed input (padded to whole groups of 32). */
  xb: Buf;
  /** Its quantization. */
  xq: Buf;
  /** The logits. */
  logits: Buf;
}

/**
 * Appends the output head's operations to `b`: from the final hidden rows
 * `input`, with the output norm's weights at workspace offset `norm`, into
 * `out`; for the batch's last row only when `lastOnly`. The model's plan
 * and {@link OutputRows} both call the model's one function of this type,
 * so every row gets the arithmetic of a token run alone.
 *
 * @example
 * ```ts ignore
 * import type { HeadOps } from "./output_rows.ts";
 * const head: HeadOps = (b, input, norm, out, lastOnly) => {
 *   b.rmsNorm(input, norm, out.xb, 576, 1e-5, { lastOnly });
 *   b.matmul(outputRun, out.xb, out.logits, { lastOnly });
 * };
 * ```
 */
export type HeadOps = (
  b: PlanBuilder,
  input: Buf,
  norm: number,
  out: HeadBuffers,
  lastOnly: boolean,
) => void;

/**
 * What {@link OutputRows} is built from.
 *
 * @example
 * ```ts ignore
 * import type { OutputRowsOptions } from "./output_rows.ts";
 * const o: OutputRowsOptions = { ops, norm, hidden: 576, vocab: 49152, batch: 64, inputStride: 2304 };
 * ```
 */
export interface OutputRowsOptions {
  /** The model's output head. */
  ops: HeadOps;
  /** The output norm's weights (`hidden` values). */
  norm: Float32Array;
  /** Hidden size. */
  hidden: number;
  /** Vocabulary size (values per row of logits). */
  vocab: number;
  /** Most rows per run: the model's batch. */
  batch: number;
  /** Bytes between the rows of the model's final hidden buffer. */
  inputStride: number;
}

/**
 * The output head over all rows of a batch, on its own workspace.
 *
 * @example
 * ```ts ignore
 * import { OutputRows } from "./output_rows.ts";
 * using head = new OutputRows({ ops, norm, hidden: 576, vocab: 49152, batch: 64, inputStride: 2304 });
 * // After a batch of 10 tokens has run the model's plan up to its output section:
 * head.run(workspace, finalHidden, 0, 10, (logits, row) => console.log(row, logits[0]));
 * ```
 */
export class OutputRows {
  /** Bytes of the workspace (input rows, normed rows, their quantization, logits). */
  readonly workspaceBytes: number;
  readonly #workspace: AlignedBuffer;
  readonly #plan: Plan;
  readonly #input: Buf;
  readonly #logits: Buf;
  readonly #batch: number;
  readonly #rows: Uint8Array;
  readonly #row: Uint8Array;
  readonly #floats: Float32Array;
  readonly #ids: Uint32Array;

  /** Allocates the workspace and builds the plan. */
  constructor(o: OutputRowsOptions) {
    if (o.norm.length !== o.hidden) {
      throw new RangeError(`output rows: ${o.norm.length} norm weights for hidden ${o.hidden}`);
    }
    if (o.inputStride < o.hidden * 4 || o.inputStride % 64 !== 0) {
      throw new RangeError(`output rows: input stride ${o.inputStride} for hidden ${o.hidden}`);
    }
    let size = 0;
    const rows = (rowBytes: number, n: number): Buf => {
      const stride = Math.ceil(rowBytes / 64) * 64;
      const offset = size;
      size += stride * n;
      return { offset, stride };
    };
    const pad = Math.ceil(o.hidden / 32) * 32;
    this.#input = rows(o.inputStride, o.batch);
    const out: HeadBuffers = {
      xb: rows(pad * 4, o.batch),
      xq: rows(actRowBytes(pad), o.batch),
      logits: rows(o.vocab * 4, o.batch),
    };
    const norm = rows(o.hidden * 4, 1).offset;
    this.#logits = out.logits;
    this.#batch = o.batch;
    this.workspaceBytes = size;
    this.#workspace = allocAligned(size, 4096);
    try {
      this.#workspace.write(norm, new Uint8Array(o.norm.buffer, o.norm.byteOffset, o.hidden * 4));
      const b = new PlanBuilder();
      b.section("output");
      o.ops(b, this.#input, norm, out, false);
      // No embedding and no KV cache: the plan's positions are only counted.
      this.#plan = b.build(this.#workspace, o.batch, o.batch);
    } catch (error) {
      this.#workspace.close();
      throw error;
    }
    this.#rows = new Uint8Array(this.#input.stride * o.batch);
    this.#floats = new Float32Array(o.vocab);
    this.#row = new Uint8Array(this.#floats.buffer);
    this.#ids = new Uint32Array(o.batch);
  }

  /**
   * Copies rows [first, n) of the final hidden buffer `input` of workspace
   * `src` (its stride must be the `inputStride` given), runs the head over
   * them, and calls `each` with each row's logits in order, in one buffer
   * that the next row overwrites.
   */
  run(
    src: AlignedBuffer,
    input: Buf,
    first: number,
    n: number,
    each: (logits: Float32Array, row: number) => void,
  ): void {
    if (input.stride !== this.#input.stride) {
      throw new RangeError(`output rows: input stride ${input.stride}, not ${this.#input.stride}`);
    }
    if (!Number.isSafeInteger(first) || !Number.isSafeInteger(n)) {
      throw new RangeError(`output rows: rows [${first}, ${n}) are not integers`);
    }
    if (first < 0 || first >= n || n > this.#batch) {
      throw new RangeError(`output rows: rows [${first}, ${n}) are not within a batch`);
    }
    const m = n - first;
    const bytes = this.#rows.subarray(0, m * input.stride);
    src.read(input.offset + first * input.stride, bytes.length, bytes);
    this.#workspace.write(this.#input.offset, bytes);
    this.#plan.run(this.#ids.subarray(0, m), 0);
    // A row at a time, so that the JS heap holds one row of logits, not a batch.
    for (let r = 0; r < m; r++) {
      this.#workspace.read(
        this.#logits.offset + r * this.#logits.stride,
        this.#row.length,
        this.#row,
      );
      each(this.#floats, first + r);
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
