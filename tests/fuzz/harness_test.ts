// The fuzz harness itself: a target whose inputs the reader always refuses
// fails on its accepted floor, one that reaches its floor passes, and a
// floor outside [0, 1] is a programming error.

import assert from "node:assert/strict";
import fc from "fast-check";
import { acceptedFloor, assertTarget, runTarget, type Target } from "./harness.ts";

/** A reader that accepts the even numbers only (about half of the inputs). */
function evenTarget(minAccepted: number, refuseAll = false): Target<number> {
  return {
    name: "even",
    minAccepted,
    arbitrary: () => fc.nat({ max: 1000 }),
    check: (n) => (!refuseAll && n % 2 === 0 ? "accepted" : "rejected"),
  };
}

Deno.test("runTarget: a target that reaches its accepted floor passes with its counts", async () => {
  const c = await runTarget(evenTarget(0.3), { numRuns: 400, seed: 7 });
  assert.deepEqual(c.failures, 0);
  assert.deepEqual(c.inputs, 400);
  assert.deepEqual(c.accepted + c.rejected, 400);
});

Deno.test("runTarget: a reader that refuses every input fails the accepted floor", async () => {
  const c = await runTarget(evenTarget(0.3, true), { numRuns: 400, seed: 7 });
  assert.deepEqual(c.failures, 1);
  assert.deepEqual(c.accepted, 0);
  assert.match(c.report ?? "", /only 0 of 400 inputs were accepted, under the floor of 120/);
  await assert.rejects(() => assertTarget(evenTarget(0.3, true), 400), /floor of 120/);
});

Deno.test("runTarget: a floor above the accepted share fails, one below it passes", async () => {
  const half = await runTarget(evenTarget(0), { numRuns: 1000, seed: 11 });
  const share = half.accepted / half.inputs;
  const above = await runTarget(evenTarget(Math.min(1, share + 0.01)), { numRuns: 1000, seed: 11 });
  const below = await runTarget(evenTarget(share - 0.01), { numRuns: 1000, seed: 11 });
  assert.deepEqual([above.failures, below.failures], [1, 0]);
});

Deno.test("acceptedFloor: a share in [0, 1], rounded up", () => {
  assert.deepEqual(acceptedFloor({ minAccepted: 0.05 }, 1000), 50);
  assert.deepEqual(acceptedFloor({ minAccepted: 0.05 }, 10), 1);
  assert.deepEqual(acceptedFloor({ minAccepted: 1 }, 7), 7);
  assert.throws(() => acceptedFloor({ minAccepted: 1.5 }, 10), RangeError);
  assert.throws(() => acceptedFloor({ minAccepted: Number.NaN }, 10), RangeError);
});
