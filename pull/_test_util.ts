/**
 * Small assertion helpers for the pull tests (Deno's std is not reachable
 * here; node:assert covers the rest).
 *
 * @module
 */
import { deepStrictEqual } from "node:assert/strict";

/** Deep equality. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  deepStrictEqual(actual, expected, message);
}

/** Awaits `fn`, which must reject with an instance of `type` whose message includes `includes`. */
export async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  type: new (...args: any[]) => E,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (error) {
    if (!(error instanceof type)) {
      throw new Error(
        `expected ${type.name}, got ${(error as Error)?.name}: ${(error as Error)?.message}`,
        {
          cause: error,
        },
      );
    }
    if (includes !== undefined && !error.message.includes(includes)) {
      throw new Error(`expected a message with "${includes}", got "${error.message}"`);
    }
    return error;
  }
  throw new Error(`expected ${type.name}, but it resolved`);
}
