/**
 * The shape of a fuzz target and how one is run, shared by the
 * `*_property_test.ts` files (a few hundred inputs, fixed seed) and the
 * long campaign (`deno task fuzz`, tests/fuzz/fuzz.ts).
 *
 * A target turns one generated input into an outcome: `accepted` (the
 * reader returned a value and it satisfied every stated invariant) or
 * `rejected` (the reader threw the project's typed error for that input,
 * with its fields in bounds). Anything else (another exception, a broken
 * invariant, an input that takes longer than {@link SLOW_MS}) throws, and
 * fast-check reports it as a failure with the seed and a shrunk
 * counterexample.
 *
 * @module
 */

import fc from "fast-check";
import { FormatError } from "../../formats/errors.ts";

/** What a target did with one input. */
export type Outcome = "accepted" | "rejected";

/** One thing to fuzz. */
export interface Target<T = unknown> {
  /** Short unique name, e.g. `gguf.mutate`. */
  readonly name: string;
  /** Why the target cannot run here (a model file is missing), or undefined. */
  skip?(): string | undefined;
  /** One-time setup (building seed files, loading a tokenizer). */
  init?(): void | Promise<void>;
  /** The input generator. */
  arbitrary(): fc.Arbitrary<T>;
  /** Runs one input; throws when a property does not hold. */
  check(input: T): Outcome;
  /**
   * The least share of inputs (0-1) that must come out `accepted`. A
   * generator that only ever reaches the reader's refusals tests none of
   * the invariants of what it accepts, and an edit to the reader that
   * starts refusing everything would otherwise pass unseen; the floors sit
   * at about half the share each target measured.
   */
  readonly minAccepted: number;
}

/** An input that takes longer than this (ms) counts as a hang. */
export const SLOW_MS = 2000;

/** Counts of one run of a target. */
export interface Counts {
  /** Target name. */
  target: string;
  /** Inputs checked (shrinking included, when a failure was found). */
  inputs: number;
  /** Inputs the reader accepted, with every invariant holding. */
  accepted: number;
  /** Inputs refused with the typed error. */
  rejected: number;
  /** 1 when fast-check found a counterexample (it stops at the first). */
  failures: number;
  /** Wall time in ms. */
  ms: number;
  /** Slowest single input, in ms. */
  slowestMs: number;
  /** fast-check's report of the failure (seed, path, counterexample, error). */
  report?: string;
  /** Why the target was skipped. */
  skipped?: string;
}

/** Runs `numRuns` inputs of `target` from `seed`; never throws for a failing property. */
export async function runTarget<T>(
  target: Target<T>,
  options: { numRuns: number; seed: number },
): Promise<Counts> {
  const counts: Counts = {
    target: target.name,
    inputs: 0,
    accepted: 0,
    rejected: 0,
    failures: 0,
    ms: 0,
    slowestMs: 0,
  };
  const skip = target.skip?.();
  if (skip !== undefined) return { ...counts, skipped: skip };
  await target.init?.();
  const t0 = performance.now();
  const details = fc.check(
    fc.property(target.arbitrary(), (input) => {
      counts.inputs++;
      const s = performance.now();
      const outcome = target.check(input);
      const ms = performance.now() - s;
      if (ms > counts.slowestMs) counts.slowestMs = ms;
      if (ms > SLOW_MS) throw new Error(`one input took ${ms.toFixed(0)} ms (a hang?)`);
      counts[outcome]++;
    }),
    { numRuns: options.numRuns, seed: options.seed },
  );
  counts.ms = performance.now() - t0;
  const floor = acceptedFloor(target, counts.inputs);
  if (!details.failed && counts.accepted < floor) {
    counts.failures = 1;
    counts.report = `only ${counts.accepted} of ${counts.inputs} inputs were accepted, under the ` +
      `floor of ${floor} (${(target.minAccepted * 100).toFixed(0)}%): the generator no longer ` +
      `reaches what the reader accepts`;
    return counts;
  }
  if (details.failed) {
    counts.failures = 1;
    const err = details.errorInstance;
    const why = err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
    const cause = err instanceof Error && err.cause instanceof Error
      ? `\nCaused by: ${err.cause.stack ?? err.cause.message}`
      : "";
    counts.report = `${fc.defaultReportMessage(details) ?? "failed"}\nError: ${why}${cause}`;
  }
  return counts;
}

/** How many of `inputs` must be accepted under `target.minAccepted`. */
export function acceptedFloor(target: Pick<Target, "minAccepted">, inputs: number): number {
  if (!(target.minAccepted >= 0 && target.minAccepted <= 1)) {
    throw new RangeError(`minAccepted ${target.minAccepted} is not a share in [0, 1]`);
  }
  return Math.ceil(target.minAccepted * inputs);
}

/**
 * Runs `target` as a Deno test body: `numRuns` inputs from a fixed seed,
 * failing with fast-check's report (seed, shrunk counterexample).
 */
export async function assertTarget<T>(
  target: Target<T>,
  numRuns: number,
  seed = 0x5eed,
): Promise<Counts> {
  const c = await runTarget(target, { numRuns, seed });
  if (c.failures > 0) throw new Error(`${target.name}: ${c.report}`);
  return c;
}

/**
 * Checks that `e` is a {@link FormatError} for `file` with a field and an
 * offset in [0, size]; rethrows anything else (wrapped) as a failure.
 */
export function formatErrorOnly(e: unknown, file: string, size: number): "rejected" {
  if (!(e instanceof FormatError)) {
    throw new Error(`threw ${describeError(e)} instead of a FormatError`, { cause: e });
  }
  if (e.file !== file) throw new Error(`FormatError names file ${e.file}, not ${file}`);
  if (typeof e.field !== "string" || e.field.length === 0) {
    throw new Error(`FormatError without a field: ${e.message}`);
  }
  if (!Number.isSafeInteger(e.offset) || e.offset < 0 || e.offset > size) {
    throw new Error(`FormatError offset ${e.offset} outside [0, ${size}]: ${e.message}`);
  }
  return "rejected";
}

/** `Name: message` of a thrown value. */
export function describeError(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : `a non-Error ${String(e)}`;
}

/** Throws `message` unless `ok`. */
export function ensure(ok: boolean, message: string | (() => string)): asserts ok {
  if (!ok) throw new Error(typeof message === "string" ? message : message());
}
