/**
 * Plans: the forward pass as a list of operations that TypeScript decides
 * and the kernel library runs in one call per token (or per batch of
 * prompt tokens), with its worker pool spinning between operations.
 *
 * Operations name bytes of one workspace allocation (activations, norms,
 * the KV cache) and weight runs (a region, a byte range and a layout),
 * never pointers. The library checks every buffer of every operation for
 * the largest batch once, when the plan is built, and pins the regions the
 * plan reads so that they cannot be released under it.
 *
 * @module
 */

import { KernelError } from "./errors.ts";
import { openKernels } from "./open_kernels.ts";
import type { AlignedBuffer } from "./memory.ts";
import { STATUS } from "./symbols.ts";
import { f32Bits, u32 } from "./_plan_words.ts";
import { RUN_WORDS, runWords, type WeightRun } from "./weight_run.ts";

const OP_WORDS = 16;
/** Largest batch a plan accepts (plan.zig `max_batch`). */
export const MAX_PLAN_BATCH = 1024;

/**
 * A buffer of the workspace: a byte offset and the byte stride between the
 * rows of a batch (0: one row shared by the whole batch).
 *
 * @example
 * ```ts
 * import type { Buf } from "./plan.ts";
 * const x: Buf = { offset: 0, stride: 2304 };
 * ```
 */
export interface Buf {
  /** Byte offset in the workspace. */
  offset: number;
  /** Bytes between rows (0: a single row). */
  stride: number;
}

/** Options of one operation. */
export interface OpOptions {
  /** Only the batch's last row (the logits of a prompt). */
  lastOnly?: boolean;
}

/**
 * A named range of a plan's operations, [first, last).
 *
 * @example
 * ```ts
 * import type { PlanSection } from "./plan.ts";
 * const s: PlanSection = { name: "layer 0", first: 1, last: 20 };
 * ```
 */
export interface PlanSection {
  /** What the operations compute. */
  name: string;
  /** Index of the first operation. */
  first: number;
  /** Index after the last operation. */
  last: number;
}

/**
 * Builds a plan operation by operation. Each method names its buffers;
 * see kernels-zig/src/plan.zig for what each operation computes.
 *
 * @example
 * ```ts ignore
 * import { PlanBuilder } from "./plan.ts";
 * const b = new PlanBuilder();
 * b.rmsNorm(x, normWeights, xb, 576, 1e-5);
 * const plan = b.build(workspace, 64, 2048);
 * plan.run(new Uint32Array([1]), 0);
 * ```
 */
export class PlanBuilder {
  #ops: number[] = [];
  #runs: WeightRun[] = [];
  #sections: PlanSection[] = [];

  /**
   * Starts a named section: the operations added from here to the next
   * section (or the end) belong to it. Sections are what
   * {@link Plan.runOps} profiles.
   */
  section(name: string): void {
    const first = this.#ops.length / OP_WORDS;
    const last = this.#sections.at(-1);
    if (last !== undefined) last.last = first;
    this.#sections.push({ name, first, last: first });
  }

  #op(code: number, args: number[], options?: OpOptions): void {
    if (args.length > OP_WORDS - 2) throw new RangeError("plan: too many arguments");
    const words = new Array<number>(OP_WORDS).fill(0);
    words[0] = code;
    words[1] = options?.lastOnly ? 1 : 0;
    args.forEach((a, i) => words[2 + i] = u32(a, `argument ${i} of operation ${code}`));
    this.#ops.push(...words);
  }

  #run(r: WeightRun): number {
    const i = this.#runs.indexOf(r);
    if (i >= 0) return i;
    this.#runs.push(r);
    return this.#runs.length - 1;
  }

  /** out = row `token` of the run's matrix, times `scale`. */
  embed(run: WeightRun, out: Buf, scale: number): void {
    this.#op(1, [this.#run(run), out.offset, out.stride, f32Bits(scale, "embedding scale")]);
  }

  /** out = RMSNorm(x) * w over n values. */
  rmsNorm(x: Buf, w: number, out: Buf, n: number, eps: number, options?: OpOptions): void {
    this.#op(2, [x.offset, x.stride, w, out.offset, out.stride, n, f32Bits(eps, "eps")], options);
  }

  /** q = Q8_0 quantization of x (n a multiple of 32) with scales and sums. */
  quantize(x: Buf, n: number, q: Buf, options?: OpOptions): void {
    this.#op(3, [x.offset, x.stride, n, q.offset, q.stride], options);
  }

  /**
   * q = Q8_K quantization of x (n a multiple of 256): ggml's rule for the
   * activations of K-quant weights, one scale per 256 values, written as
   * ActRows (act_q8_k.zig); see {@link kQuantRun}.
   */
  quantizeK(x: Buf, n: number, q: Buf, options?: OpOptions): void {
    this.#op(20, [x.offset, x.stride, n, q.offset, q.stride], options);
  }

  /** y = W x: x quantized (Q4_0/Q8_0 runs) or f32 (F32 tiles). */
  matmul(run: WeightRun, x: Buf, y: Buf, options?: OpOptions): void {
    this.#op(4, [this.#run(run), x.offset, x.stride, y.offset, y.stride], options);
  }

  /** a += b over n values. */
  add(a: Buf, b: Buf, n: number): void {
    this.#op(5, [a.offset, a.stride, b.offset, b.stride, n]);
  }

  /** a += v (one vector at byte offset v) over n values. */
  addVec(a: Buf, v: number, n: number): void {
    this.#op(6, [a.offset, a.stride, v, n]);
  }

  /** RMSNorm of each of n heads of headDim values, weights at w. */
  headNorm(v: Buf, heads: number, headDim: number, w: number, eps: number): void {
    this.#op(7, [v.offset, v.stride, heads, headDim, w, f32Bits(eps, "eps")]);
  }

  /** RoPE at each row's position; freqs holds nRot/2 inverse frequencies. */
  rope(x: Buf, heads: number, headDim: number, nRot: number, freqs: number, mode: number): void {
    this.#op(8, [x.offset, x.stride, heads, headDim, nRot, freqs, mode]);
  }

  /**
   * Copies each row (kvDim values, heads of headDim) to its position in a
   * head-major cache (kvType 1: f32, 2: f16, 3: Q8_0 blocks, head_dim a multiple of 32) of
   * `context` positions per head.
   */
  kvStore(src: Buf, cache: number, kvDim: number, kvType: number, headDim: number): void {
    this.#op(9, [src.offset, src.stride, cache, kvDim, kvType, headDim]);
  }

  /** Grouped-query attention of each row over cache positions up to its own. */
  attention(a: {
    q: Buf;
    k: number;
    v: number;
    kvType: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    window: number;
    scale: number;
    softcap: number;
    out: Buf;
  }): void {
    this.#op(10, [
      a.q.offset,
      a.q.stride,
      a.k,
      a.v,
      a.kvType,
      a.heads,
      a.kvHeads,
      a.headDim,
      a.window,
      f32Bits(a.scale, "attention scale"),
      f32Bits(a.softcap, "attention soft-cap"),
      a.out.offset,
      a.out.stride,
    ]);
  }

  /** out = act(gu[0, n)) * gu[n, 2n), act SiLU or GELU (tanh). */
  gated(kind: "silu" | "gelu", gu: Buf, out: Buf, n: number): void {
    this.#op(11, [kind === "silu" ? 0 : 1, gu.offset, gu.stride, out.offset, out.stride, n]);
  }

  /** x = cap * tanh(x / cap) over n values. */
  softcap(x: Buf, n: number, cap: number, options?: OpOptions): void {
    this.#op(12, [x.offset, x.stride, n, f32Bits(cap, "soft-cap")], options);
  }

  /**
   * Routes each row: the f32 router (nExperts rows of n floats at byte
   * offset `router`) gives logits, their softmax p, and the topK largest p
   * (ties: the lower index) are written to `sel` as topK u32 expert ids then
   * topK f32 weights, renormalized to sum 1 when `renormalize`.
   */
  route(
    x: Buf,
    router: number,
    n: number,
    nExperts: number,
    topK: number,
    renormalize: boolean,
    sel: Buf,
  ): void {
    this.#op(13, [
      x.offset,
      x.stride,
      router,
      n,
      nExperts,
      topK,
      renormalize ? 1 : 0,
      sel.offset,
      sel.stride,
    ]);
  }

  /**
   * out += the weighted sum of each row's selected experts (from `sel`,
   * written by {@link route}) applied to `x` (quantized for quantized runs):
   * expert e is `gateUp[e]` (2 members), the activation, then `down[e]`.
   * Only the selected experts' runs are read, once per batch each; their
   * bytes are added to the u64 at byte offset `counter`. `scratch` needs
   * {@link moeScratchBytes} per row, 64-byte aligned.
   */
  moe(m: {
    gateUp: readonly WeightRun[];
    down: readonly WeightRun[];
    topK: number;
    sel: Buf;
    x: Buf;
    act: "silu" | "gelu";
    scratch: Buf;
    out: Buf;
    counter: number;
  }): void {
    if (m.gateUp.length !== m.down.length || m.gateUp.length < 1) {
      throw new RangeError("plan: moe needs one gate/up and one down run per expert");
    }
    const g0 = this.#runs.length;
    this.#runs.push(...m.gateUp);
    const d0 = this.#runs.length;
    this.#runs.push(...m.down);
    this.#op(14, [
      g0,
      d0,
      m.gateUp.length,
      m.topK,
      m.sel.offset,
      m.sel.stride,
      m.x.offset,
      m.x.stride,
      m.act === "silu" ? 0 : 1,
      m.scratch.offset,
      m.scratch.stride,
      m.out.offset,
      m.out.stride,
      m.counter,
    ]);
  }

  /** y *= sigmoid(v . x): v nX floats at byte offset v. */
  gateScale(y: Buf, nY: number, v: number, x: Buf, nX: number): void {
    this.#op(15, [y.offset, y.stride, nY, v, x.offset, x.stride, nX]);
  }

  /** out = alpha a + beta b over n values (a is not read when alpha is 0). */
  lincomb(out: Buf, a: Buf, b: Buf, n: number, alpha: number, beta: number): void {
    this.#op(16, [
      out.offset,
      out.stride,
      a.offset,
      a.stride,
      b.offset,
      b.stride,
      n,
      f32Bits(alpha, "alpha"),
      f32Bits(beta, "beta"),
    ]);
  }

  /**
   * Pins each row's selected experts (a {@link route} selection row, which
   * needs room for topK more u32 words: the slots this fills) of `layer` in
   * slots of the staging area `stage`, starting the direct reads of those
   * not cached from the file ranges at `spans` (nExperts pairs of u64
   * offset, length in the workspace). Returns at once; {@link moeStaged}
   * waits for the reads.
   */
  fetch(
    stage: { handle: number },
    layer: number,
    nExperts: number,
    topK: number,
    sel: Buf,
    spans: number,
  ): void {
    this.#op(18, [stage.handle, layer, nExperts, topK, sel.offset, sel.stride, spans]);
  }

  /**
   * {@link moe} over the experts a {@link fetch} pinned: each expert's tiles
   * come from its staging slot, laid out as `gateUp` and `down` (the
   * template runs, whose own bytes are not read); the pins are released.
   */
  moeStaged(m: {
    stage: { handle: number };
    gateUp: WeightRun;
    down: WeightRun;
    nExperts: number;
    topK: number;
    sel: Buf;
    x: Buf;
    act: "silu" | "gelu";
    scratch: Buf;
    out: Buf;
    counter: number;
  }): void {
    const t = this.#runs.length;
    this.#runs.push(m.gateUp, m.down);
    this.#op(19, [
      m.stage.handle,
      t,
      m.nExperts,
      m.topK,
      m.sel.offset,
      m.sel.stride,
      m.x.offset,
      m.x.stride,
      m.act === "silu" ? 0 : 1,
      m.scratch.offset,
      m.scratch.stride,
      m.out.offset,
      m.out.stride,
      m.counter,
    ]);
  }

  /** The monotonic clock in ns as a u64 at byte offset `slot` (8-byte aligned). */
  timestamp(slot: number): void {
    this.#op(17, [slot]);
  }

  /**
   * Hands the operations to the library, which checks them against the
   * workspace for batches of up to `maxTokens` and a KV cache of `context`
   * positions.
   */
  build(workspace: AlignedBuffer, maxTokens: number, context: number): Plan {
    if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_PLAN_BATCH) {
      throw new RangeError(`plan: batch ${maxTokens} is not in [1, ${MAX_PLAN_BATCH}]`);
    }
    const ops = Uint32Array.from(this.#ops);
    const runs = new Uint32Array(this.#runs.length * RUN_WORDS);
    this.#runs.forEach((r, i) => runs.set(runWords(r), i * RUN_WORDS));
    const s = openKernels().symbols;
    const where = new Uint32Array(2);
    const handle = s.cf_plan_create(
      workspace.handle,
      ops,
      BigInt(ops.length),
      runs,
      BigInt(runs.length),
      maxTokens,
      u32(context, "context"),
      where,
    );
    if (handle <= 0) {
      const names = ["", "embed", "rms_norm", "quantize", "matmul", "add", "add_vec", "head_norm"]
        .concat(["rope", "kv_store", "attention", "gated", "softcap", "route", "moe"])
        .concat(["gate_scale", "lincomb", "timestamp", "fetch", "moe_staged", "quantize_k"]);
      const detail = where[0] === 1
        ? `run ${where[1]} (${JSON.stringify({ ...this.#runs[where[1]], region: undefined })})`
        : where[0] === 2
        ? `operation ${where[1]} (${names[ops[where[1] * OP_WORDS]] ?? "unknown"})`
        : undefined;
      throw new KernelError("cf_plan_create", handle, detail);
    }
    const count = ops.length / OP_WORDS;
    const sections = this.#sections.map((x, i, all) => ({
      ...x,
      last: i === all.length - 1 ? count : x.last,
    }));
    return new Plan(handle, maxTokens, sections);
  }
}

/**
 * A checked plan held by the library.
 *
 * @example
 * ```ts ignore
 * using plan = builder.build(workspace, 64, 2048);
 * plan.run(new Uint32Array([42]), 0);
 * ```
 */
export class Plan {
  #handle: number;
  /** Largest batch. */
  readonly maxTokens: number;
  /** The named operation ranges of the plan, in order ({@link PlanBuilder.section}). */
  readonly sections: readonly PlanSection[];

  /** @internal Use {@link PlanBuilder.build}. */
  constructor(handle: number, maxTokens: number, sections: readonly PlanSection[] = []) {
    this.#handle = handle;
    this.maxTokens = maxTokens;
    this.sections = sections;
  }

  /**
   * Runs operations [first, last) only, on the pool; running every section
   * in order is exactly one {@link run}. For profiling.
   */
  runOps(tokens: Uint32Array, pos: number, first: number, last: number): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run_ops", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    const rc = openKernels().symbols.cf_plan_run_ops(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      u32(pos, "position"),
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_ops", rc);
  }

  /**
   * Runs operations [first, last) (default: all) for rows that each carry a
   * KV base and a position: row t is the token at position `positions[t]`
   * of a sequence whose keys and values sit at cache indices from
   * `bases[t]` on (with the plan's context shared by several sequences, for
   * example sequence s at s x n). Each row gets exactly the arithmetic it
   * gets in a run of its own sequence. Two rows may not share a cache index.
   *
   * @example
   * ```ts ignore
   * // Two sequences of a plan built for 2 x 512 positions, one token each.
   * plan.runRows(new Uint32Array([7, 9]), new Uint32Array([0, 512]), new Uint32Array([3, 10]));
   * ```
   */
  runRows(
    tokens: Uint32Array,
    bases: Uint32Array,
    positions: Uint32Array,
    first = 0,
    last = 0xffffffff,
  ): void {
    this.#checkRows(tokens, bases, positions);
    const rc = openKernels().symbols.cf_plan_run_rows(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      bases,
      positions,
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_rows", rc);
  }

  /** What {@link runRows} and {@link runRowsAsync} check before the call. */
  #checkRows(tokens: Uint32Array, bases: Uint32Array, positions: Uint32Array): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run_rows", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    if (bases.length !== tokens.length || positions.length !== tokens.length) {
      throw new RangeError(
        `plan: ${tokens.length} tokens with ${bases.length} bases and ${positions.length} positions`,
      );
    }
  }

  /**
   * {@link runRows} on one of Deno's blocking threads, so the event loop
   * runs meanwhile. The plan must not be closed until the promise settles.
   *
   * @example
   * ```ts ignore
   * await plan.runRowsAsync(new Uint32Array([7]), new Uint32Array([0]), new Uint32Array([3]));
   * ```
   */
  async runRowsAsync(
    tokens: Uint32Array,
    bases: Uint32Array,
    positions: Uint32Array,
    first = 0,
    last = 0xffffffff,
  ): Promise<void> {
    this.#checkRows(tokens, bases, positions);
    // The call owns its buffers until it settles: private copies.
    const rc = await openKernels().symbols.cf_plan_run_rows_async(
      this.#handle,
      tokens.slice(),
      BigInt(tokens.length),
      bases.slice(),
      positions.slice(),
      u32(first, "first operation"),
      u32(last, "last operation"),
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run_rows", rc);
  }

  /**
   * Runs the tokens at positions [pos, pos + tokens.length), on the pool or
   * (`singleThread`) on the calling thread alone; the results are the same.
   */
  run(tokens: Uint32Array, pos: number, singleThread = false): void {
    if (this.#handle === 0) throw new KernelError("cf_plan_run", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    const rc = openKernels().symbols.cf_plan_run(
      this.#handle,
      tokens,
      BigInt(tokens.length),
      u32(pos, "position"),
      singleThread ? 1 : 0,
    );
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run", rc);
  }

  /**
   * Like {@link run}, on one of Deno's blocking threads, so the event loop
   * runs meanwhile; aborting `signal` stops the run before its next
   * operation and rejects with the signal's reason. A stopped run leaves the
   * KV cache rows of its positions partly written: run them again before
   * reading them. The plan must not be closed until the promise settles.
   */
  async runAsync(tokens: Uint32Array, pos: number, signal?: AbortSignal): Promise<void> {
    if (this.#handle === 0) throw new KernelError("cf_plan_run", STATUS.HANDLE);
    if (tokens.length < 1 || tokens.length > this.maxTokens) {
      throw new RangeError(`plan: ${tokens.length} tokens, not 1..${this.maxTokens}`);
    }
    signal?.throwIfAborted();
    const s = openKernels().symbols;
    const handle = this.#handle;
    let rc = s.cf_plan_cancel(handle, 0);
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_cancel", rc);
    const cancel = () => s.cf_plan_cancel(handle, 1);
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      // The call owns `tokens` until it settles: keep a private copy.
      rc = await s.cf_plan_run_async(
        handle,
        tokens.slice(),
        BigInt(tokens.length),
        u32(pos, "position"),
        0,
      );
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
    if (rc === STATUS.CANCELLED) {
      signal?.throwIfAborted();
      throw new KernelError("cf_plan_run", rc);
    }
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_run", rc);
  }

  /** Frees the plan and unpins its regions. */
  close(): void {
    if (this.#handle === 0) return;
    const rc = openKernels().symbols.cf_plan_destroy(this.#handle);
    this.#handle = 0;
    if (rc !== STATUS.OK) throw new KernelError("cf_plan_destroy", rc);
  }

  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
