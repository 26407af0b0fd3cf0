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
 * Chooses how many tokens to draft from what was measured: the acceptance
 * rate `a` (the chance that a drafted token is kept once the ones before it
 * were, estimated over recent checks), the target's step time for one row
 * and each extra row, and the drafter's time per token. Drafting k tokens
 * yields (1 - a^(k+1)) / (1 - a) tokens per check on average (the kept
 * ones and the target's own next token) and costs one step of k + 1 rows
 * plus k drafted tokens; a draft model that declines a share d of asks
 * (unsure of its first token) costs its decline and yields one token
 * there; the length with the most tokens per millisecond wins, and 0 (a plain step) when no length beats it. While 0 wins, every
 * 16th step still drafts one token, so that a drafter that improves (a
 * repeat starts) is noticed.
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
  /** Milliseconds of a one-row step, a row more, a drafted token (undefined: not measured yet). */
  #stepMs: number | undefined;
  #rowMs: number | undefined;
  #draftMs = 0;
  #plainRun = 0;
  // Decayed counts of asks and of declines (a draft model too unsure of its first token), and
  // what a decline costs.
  #asks = 1;
  #declines = 0;
  #declineMs = 0;

  /** A chooser of at most `max` drafted tokens. */
  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1 || max > MAX_DRAFT) {
      throw new RangeError(`draft length: max ${max} is not an integer in [1, ${MAX_DRAFT}]`);
    }
    this.#max = max;
  }

  /** The estimated acceptance rate. */
  get acceptance(): number {
    return this.#kept / (this.#kept + this.#rejected);
  }

  /** How many tokens to draft for the next step (0: a plain step). */
  next(): number {
    // One plain step first, to know what drafting must beat.
    if (this.#stepMs === undefined) return 0;
    const step = this.#stepMs;
    const row = this.#rowMs ?? step * 0.1;
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
        (step + d * this.#declineMs + (1 - d) * (row * k + this.#draftMs * k));
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

  /** A plain one-row step took `ms`. */
  plainStep(ms: number): void {
    this.#stepMs = this.#stepMs === undefined ? ms : 0.8 * this.#stepMs + 0.2 * ms;
  }

  /**
   * A check of `drafted` tokens kept `kept` of them; its step of
   * drafted + 1 rows took `stepMs`, drafting them `draftMs`.
   */
  checked(drafted: number, kept: number, stepMs: number, draftMs: number): void {
    if (drafted < 1 || kept < 0 || kept > drafted) {
      throw new RangeError(`draft length: ${kept} of ${drafted} kept`);
    }
    // Recent checks count most: the counts decay by a tenth per check.
    this.#asks = 0.9 * this.#asks + 1;
    this.#declines = 0.9 * this.#declines;
    this.#kept = 0.9 * this.#kept + kept;
    this.#rejected = 0.9 * this.#rejected + (kept < drafted ? 1 : 0);
    // Drafting k tokens runs about k + 1 draft steps (the catch-up over the last check's tokens).
    this.#draftMs = 0.8 * this.#draftMs + 0.2 * (draftMs / (drafted + 1));
    if (this.#stepMs !== undefined) {
      const row = Math.max(0, (stepMs - this.#stepMs) / drafted);
      this.#rowMs = this.#rowMs === undefined ? row : 0.8 * this.#rowMs + 0.2 * row;
    }
  }
}
