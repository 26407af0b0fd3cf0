/**
 * bench/vs_llama.ts's correctness gate: its thresholds, and the teacher-forced agreement of cflow
 * with llama.cpp they judge (see that module's doc). Re-exported from vs_llama.ts.
 *
 * @module
 */

/** The gate's thresholds (see the module doc). */
export const GATE = {
  /** Positions where llama.cpp's top-1 margin is at least this many logits are "decided". */
  decidedLogits: 0.6,
  /** Top-1 agreement required at decided positions. */
  minDecided: 0.99,
  /** Top-1 agreement required over all positions (trained weights). */
  minAll: 0.95,
  /**
   * Largest mean |cflow margin - llama.cpp margin| between llama.cpp's top two tokens
   * (random weights; tests/llamacpp_agreement_test.ts uses the same bound).
   */
  maxMeanMarginDelta: 0.15,
} as const;

/**
 * Which overall criterion applies: `trained` weights, top-1 agreement over all positions;
 * `random` weights, the mean margin delta (see the module doc).
 */
export type GateRule = "trained" | "random";

/** Teacher-forced agreement of cflow with llama.cpp. */
export interface Agreement {
  positions: number;
  agree: number;
  decided: number;
  decidedAgree: number;
  /** agree / positions. */
  all: number;
  /** decidedAgree / decided (1 when nothing is decided). */
  decidedShare: number;
  /** Mean and max |cflow margin - llama.cpp margin| between llama.cpp's top two tokens. */
  meanMarginDelta: number;
  maxMarginDelta: number;
  /** Largest margin by which cflow preferred its own token where the two split. */
  maxSplitMargin: number;
  pass: boolean;
}

/**
 * Compares cflow's teacher-forced top-1 (and its margins between llama.cpp's top two tokens)
 * with llama.cpp's.
 *
 * @example
 * ```ts
 * import { agreement } from "./vs_llama.ts";
 * const a = agreement(
 *   { top1: [5, 6], margin: [2, 0.1] },
 *   { top1: [5, 7], refMargin: [1.9, -0.05], splitMargin: [0, 0.05] },
 * );
 * console.log(a.all, a.decidedShare, a.pass); // 0.5 1 false
 * console.log(agreement({ top1: [5, 6], margin: [2, 0.1] }, {
 *   top1: [5, 7],
 *   refMargin: [1.9, -0.05],
 *   splitMargin: [0, 0.05],
 * }, "random").pass); // true
 * ```
 */
export function agreement(
  ref: { top1: readonly number[]; margin: readonly number[] },
  cflow: {
    top1: readonly number[];
    refMargin: readonly number[];
    splitMargin: readonly number[];
  },
  rule: GateRule = "trained",
  gate: typeof GATE = GATE,
  llamaSelf = 1,
): Agreement {
  const n = ref.top1.length;
  if (n === 0 || cflow.top1.length !== n || cflow.refMargin.length !== n) {
    throw new RangeError(`agreement: ${n} reference positions, ${cflow.top1.length} from cflow`);
  }
  let agree = 0;
  let decided = 0;
  let decidedAgree = 0;
  let sum = 0;
  let max = 0;
  let maxSplit = 0;
  for (let i = 0; i < n; i++) {
    const d = Math.abs(cflow.refMargin[i] - ref.margin[i]);
    sum += d;
    max = Math.max(max, d);
    const isDecided = ref.margin[i] >= gate.decidedLogits;
    if (isDecided) decided++;
    if (cflow.top1[i] === ref.top1[i]) {
      agree++;
      if (isDecided) decidedAgree++;
    } else {
      maxSplit = Math.max(maxSplit, cflow.splitMargin[i]);
    }
  }
  const all = agree / n;
  const decidedShare = decided === 0 ? 1 : decidedAgree / decided;
  return {
    positions: n,
    agree,
    decided,
    decidedAgree,
    all,
    decidedShare,
    meanMarginDelta: sum / n,
    maxMarginDelta: max,
    maxSplitMargin: maxSplit,
    pass: decidedShare >= gate.minDecided &&
      (rule === "trained"
        ? all >= Math.min(gate.minAll, llamaSelf)
        : sum / n <= gate.maxMeanMarginDelta),
  };
}

/**
 * Mean |margin - other| over the positions where `other` is known: how far another run moves
 * the margins between the reference's top two tokens (llama.cpp's batched run against its
 * one-token run, the yardstick for cflow's `meanMarginDelta`).
 *
 * @example
 * ```ts
 * import { meanMarginDelta } from "./vs_llama.ts";
 * console.log(meanMarginDelta([2, 0.5, 1], [1.5, null, 1.25])); // 0.375
 * ```
 */
export function meanMarginDelta(
  margin: readonly number[],
  other: readonly (number | null)[],
): number {
  if (other.length !== margin.length) {
    throw new RangeError(`meanMarginDelta: ${margin.length} margins, ${other.length} to compare`);
  }
  let sum = 0;
  let n = 0;
  for (let i = 0; i < margin.length; i++) {
    const o = other[i];
    if (o === null || !Number.isFinite(o)) continue;
    sum += Math.abs(o - margin[i]);
    n++;
  }
  return n === 0 ? NaN : sum / n;
}
