/**
 * Speculative decoding: a drafter proposes the tokens likely to come next,
 * the target model checks all of them in one step (one read of its weights),
 * and generation keeps those its own sampler would have produced.
 *
 * The rule (see {@link generate}): at each position the target's sampler
 * draws from the target's own logits, exactly as without speculation; a
 * drafted token is kept while it equals that draw. The logits of every
 * checked row are bit for bit the ones a plain decode computes, and the
 * sampler draws once per generated token either way, so the output is the
 * same token for token, greedy or seeded. For a drafter that proposes one
 * token per position (its most likely one, or a copied span), this is the
 * standard rejection rule of Leviathan et al. with a point-mass draft
 * distribution: a token x is kept with probability p(x), and otherwise the
 * token comes from p with x removed, renormalised.
 *
 * @module
 */

/**
 * Proposes the tokens likely to follow a history: a smaller model of the
 * same vocabulary ({@link DraftModel}) or the history's own repeats
 * ({@link NgramLookup}).
 *
 * @example
 * ```ts
 * import type { Drafter } from "./speculative.ts";
 * const repeatLast: Drafter = {
 *   kind: "lookup",
 *   propose: (history, max) => new Array(max).fill(history[history.length - 1]),
 * };
 * ```
 */
export interface Drafter {
  /** What proposes: a draft model, or prompt lookup. */
  readonly kind: "draft-model" | "lookup";
  /**
   * Called once per generation with the prompt, after the target's prefill
   * (a draft model reads it here, so that its first proposal is quick).
   */
  prepare?(prompt: readonly number[], signal?: AbortSignal): Promise<void> | void;
  /** Up to `max` tokens likely to follow `history` (the prompt and the tokens generated). */
  propose(history: readonly number[], max: number): Promise<number[]> | number[];
  /**
   * Whether proposing costs next to nothing (prompt lookup): then it is asked
   * for all it has, and the number checked is chosen afterwards, for the
   * class of the proposal.
   */
  readonly free?: boolean;
  /**
   * After {@link propose}: the class of the proposal (lookup: the length of
   * the matched n-gram), 0-63. Acceptance is measured per class, since a
   * long match is kept far more often than a one-token match. Default 0.
   */
  readonly lastClass?: number;
}

/**
 * Speculation settings of {@link generate}.
 *
 * @example
 * ```ts
 * import { NgramLookup, type SpeculationOptions } from "./mod.ts";
 * const o: SpeculationOptions = { drafter: new NgramLookup(3), maxDraft: 8 };
 * ```
 */
export interface SpeculationOptions {
  /** Who proposes. */
  drafter: Drafter;
  /** Most drafted tokens checked in one step (llama.cpp's `--draft-max`), 1-32. */
  maxDraft: number;
  /**
   * Whether the number drafted follows the measured acceptance rate and
   * step times (default true); false always asks for `maxDraft`.
   */
  adaptive?: boolean;
}

/** The most tokens one check holds: `maxDraft`'s bound. */
export const MAX_DRAFT = 32;

/**
 * What speculation did over one generation.
 *
 * @example
 * ```ts
 * import type { SpeculationStats } from "./speculative.ts";
 * const s: SpeculationStats = { kind: "lookup", drafted: 10, accepted: 7, acceptanceRate: 0.7, checks: 3, draftMs: 0.1 };
 * ```
 */
export interface SpeculationStats {
  /** Who proposed. */
  kind: Drafter["kind"];
  /** Tokens proposed and checked by the target. */
  drafted: number;
  /** Of those, the tokens kept (each one decode step saved). */
  accepted: number;
  /** accepted / drafted (0 when nothing was drafted). */
  acceptanceRate: number;
  /** Target steps that checked drafted tokens. */
  checks: number;
  /** Milliseconds spent drafting. */
  draftMs: number;
}

/** Validates {@link SpeculationOptions}; throws a RangeError naming the field. */
export function checkSpeculation(o: SpeculationOptions): void {
  if (!Number.isInteger(o.maxDraft) || o.maxDraft < 1 || o.maxDraft > MAX_DRAFT) {
    throw new RangeError(
      `speculation: maxDraft ${o.maxDraft} is not an integer in [1, ${MAX_DRAFT}]`,
    );
  }
  if (o.adaptive !== undefined && typeof o.adaptive !== "boolean") {
    throw new RangeError("speculation: adaptive is not a boolean");
  }
}

/**
 * The share of a one-row step that {@link StepCosts} assumes each row costs
 * beyond the largest row count it has timed: a row's arithmetic once the
 * weight stream no longer hides it (Qwen2.5-Coder-1.5B on a 2-core Zen 4:
 * rows 2-5 cost next to nothing, each row after that about 0.15 of a step).
 *
 * @example
 * ```ts
 * import { ROW_COST_PRIOR, StepCosts } from "./speculative.ts";
 * const c = new StepCosts(3);
 * c.record(1, 40);
 * console.log(c.estimates(3)![3] === 40 * (1 + 2 * ROW_COST_PRIOR)); // true
 * ```
 */
export const ROW_COST_PRIOR = 0.15;

/**
 * The target's step time by the number of rows a step checks, measured
 * over one generation and shared by every draft length chooser of it (the
 * cost of a step is the model's and the machine's, whoever drafted).
 *
 * A step's cost is not linear in its rows: while the weights stream from
 * memory, the arithmetic of a few rows hides under the read, and past that
 * each row adds its own compute. So each row count keeps its own recent
 * average, and a row count not timed yet is estimated from those that were:
 * between two timed counts, on the line joining them; beyond the largest,
 * {@link ROW_COST_PRIOR} of a one-row step per row more. The estimates never
 * fall as rows are added.
 *
 * @example
 * ```ts
 * import { StepCosts } from "./speculative.ts";
 * const c = new StepCosts(9);
 * c.record(1, 40);
 * c.record(5, 42);
 * const est = c.estimates(9)!;
 * console.log(est[3], est[7]); // 41 54
 * ```
 */
export class StepCosts {
  /** Recent average milliseconds of a step of i rows (index i), undefined: not timed. */
  readonly #ms: (number | undefined)[];

  /** Costs of steps of 1 to `maxRows` rows. */
  constructor(maxRows: number = MAX_DRAFT + 1) {
    if (!Number.isInteger(maxRows) || maxRows < 1 || maxRows > MAX_DRAFT + 1) {
      throw new RangeError(
        `step costs: maxRows ${maxRows} is not an integer in [1, ${MAX_DRAFT + 1}]`,
      );
    }
    this.#ms = new Array(maxRows + 1).fill(undefined);
  }

  /** The most rows a step may have here. */
  get maxRows(): number {
    return this.#ms.length - 1;
  }

  /** A step of `rows` rows took `ms` milliseconds. */
  record(rows: number, ms: number): void {
    if (!Number.isInteger(rows) || rows < 1 || rows > this.maxRows) {
      throw new RangeError(`step costs: ${rows} rows is not an integer in [1, ${this.maxRows}]`);
    }
    if (!Number.isFinite(ms) || ms < 0) {
      throw new RangeError(`step costs: ${ms} ms is not a finite time >= 0`);
    }
    const old = this.#ms[rows];
    this.#ms[rows] = old === undefined ? ms : 0.8 * old + 0.2 * ms;
  }

  /**
   * Estimated milliseconds of a step of each row count 1..`rows` (index =
   * rows; index 0 unused), or undefined before a one-row step was timed.
   */
  estimates(rows: number): Float64Array | undefined {
    if (!Number.isInteger(rows) || rows < 1 || rows > this.maxRows) {
      throw new RangeError(`step costs: ${rows} rows is not an integer in [1, ${this.maxRows}]`);
    }
    const ms = this.#ms;
    const one = ms[1];
    if (one === undefined) return undefined;
    const est = new Float64Array(rows + 1);
    est[1] = one;
    for (let k = 2; k <= rows; k++) {
      const timed = ms[k];
      if (timed !== undefined) {
        est[k] = Math.max(timed, est[k - 1]);
        continue;
      }
      // The next timed row count above k, if any: on the line from k - 1 to it.
      let j = k + 1;
      while (j <= this.maxRows && ms[j] === undefined) j++;
      est[k] = j <= this.maxRows
        ? est[k - 1] + Math.max(0, ms[j]! - est[k - 1]) / (j - k + 1)
        : est[k - 1] + ROW_COST_PRIOR * one;
    }
    return est;
  }
}

/**
 * Chooses how many tokens to draft from what was measured: the acceptance
 * rate `a` (the chance that a drafted token is kept once the ones before it
 * were, estimated over recent checks), the target's step time by rows
 * checked ({@link StepCosts}, which several choosers may share), and the
 * drafter's time per token. Drafting k tokens yields (1 - a^(k+1)) / (1 - a)
 * tokens per check on average (the kept ones and the target's own next
 * token) and costs one step of k + 1 rows plus k + 1 draft steps (a draft
 * model first catches up on the token the target chose); a draft
 * model that declines a share d of asks (unsure of its first token) costs
 * its decline and yields one token there; the length with the most tokens
 * per millisecond wins, and 0 (a plain step) when no length beats it. While
 * 0 wins, every 16th step still drafts one token, so that a drafter that
 * improves (a repeat starts) is noticed.
 *
 * @example
 * ```ts
 * import { DraftLength } from "./speculative.ts";
 * const d = new DraftLength(8);
 * d.plainStep(20);
 * d.checked(4, 4, 24, 2); // 4 drafted, 4 kept; a 5-row step took 24 ms, drafting 2 ms
 * console.log(d.next() > 0); // true
 * ```
 */
export class DraftLength {
  readonly #max: number;
  // Decayed counts: tokens kept, and checks that ended in a rejection (prior: a = 0.5).
  #kept = 1;
  #rejected = 1;
  /** The target's step times; milliseconds of a drafted token. */
  readonly #costs: StepCosts;
  #draftMs = 0;
  #plainRun = 0;
  // Decayed counts of asks and of declines (a draft model too unsure of its first token), and
  // what a decline costs.
  #asks = 1;
  #declines = 0;
  #declineMs = 0;

  /**
   * A chooser of at most `max` drafted tokens, timing the target in `costs`
   * (its own by default; one generation's classes of proposal share one).
   */
  constructor(max: number, costs?: StepCosts) {
    if (!Number.isInteger(max) || max < 1 || max > MAX_DRAFT) {
      throw new RangeError(`draft length: max ${max} is not an integer in [1, ${MAX_DRAFT}]`);
    }
    if (costs !== undefined && costs.maxRows < max + 1) {
      throw new RangeError(
        `draft length: step costs of ${costs.maxRows} rows, max ${max} needs ${max + 1}`,
      );
    }
    this.#max = max;
    this.#costs = costs ?? new StepCosts(max + 1);
  }

  /** The estimated acceptance rate. */
  get acceptance(): number {
    return this.#kept / (this.#kept + this.#rejected);
  }

  /** How many tokens to draft for the next step (0: a plain step). */
  next(): number {
    // One plain step first, to know what drafting must beat.
    const est = this.#costs.estimates(this.#max + 1);
    if (est === undefined) return 0;
    const step = est[1];
    const a = Math.min(this.acceptance, 0.999);
    // Asked, the drafter declines with probability d: a plain step after the decline's cost.
    const d = this.#declines / this.#asks;
    let best = 0;
    let bestRate = 1 / step;
    let gain = 1; // a^k
    let tokens = 1; // 1 + a + ... + a^k
    for (let k = 1; k <= this.#max; k++) {
      gain *= a;
      tokens += gain;
      const rate = (d + (1 - d) * tokens) /
        (d * (this.#declineMs + step) + (1 - d) * (est[k + 1] + this.#draftMs * (k + 1)));
      if (rate > bestRate) {
        best = k;
        bestRate = rate;
      }
    }
    if (best > 0) {
      this.#plainRun = 0;
      return best;
    }
    return ++this.#plainRun % 16 === 0 ? 1 : 0;
  }

  /**
   * A drafter that costs model steps was asked for tokens and proposed none
   * (a draft model not sure enough of its first token), after `draftMs`:
   * the share of asks declined and their cost weigh against asking, so that
   * a draft that keeps declining is asked less often, while the acceptance
   * of the drafts it does make stays its own.
   */
  declined(draftMs: number): void {
    this.#asks = 0.9 * this.#asks + 1;
    this.#declines = 0.9 * this.#declines + 1;
    this.#declineMs = 0.8 * this.#declineMs + 0.2 * draftMs;
  }

  /** A plain one-row step took `ms` (recorded in the step costs). */
  plainStep(ms: number): void {
    this.#costs.record(1, ms);
  }

  /**
   * A check of `drafted` tokens kept `kept` of them; its step of
   * drafted + 1 rows took `stepMs` (recorded in the step costs), drafting
   * them `draftMs`.
   */
  checked(drafted: number, kept: number, stepMs: number, draftMs: number): void {
    if (
      !Number.isInteger(drafted) || drafted < 1 || drafted > this.#max || kept < 0 || kept > drafted
    ) {
      throw new RangeError(`draft length: ${kept} of ${drafted} kept`);
    }
    // Recent checks count most: the counts decay by a tenth per check.
    this.#asks = 0.9 * this.#asks + 1;
    this.#declines = 0.9 * this.#declines;
    this.#kept = 0.9 * this.#kept + kept;
    this.#rejected = 0.9 * this.#rejected + (kept < drafted ? 1 : 0);
    // Drafting k tokens runs about k + 1 draft steps (the catch-up over the last check's tokens).
    this.#draftMs = 0.8 * this.#draftMs + 0.2 * (draftMs / (drafted + 1));
    this.#costs.record(drafted + 1, stepMs);
  }
}
