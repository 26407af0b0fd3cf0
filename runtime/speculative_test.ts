import assert from "node:assert/strict";
import { checkSpeculation, DraftLength, ROW_COST_PRIOR, StepCosts } from "./speculative.ts";

Deno.test("DraftLength: long drafts for a drafter that is right, plain steps for one that is not", () => {
  const good = new DraftLength(8);
  assert.equal(good.next(), 0); // a plain step first, to time the target
  good.plainStep(50);
  for (let i = 0; i < 20; i++) good.checked(good.next() || 1, good.next() || 1, 50 + 5 * 8, 0.1);
  assert.ok(good.acceptance > 0.9, `${good.acceptance}`);
  assert.equal(good.next(), 8);

  const bad = new DraftLength(8);
  bad.plainStep(50);
  for (let i = 0; i < 30; i++) bad.checked(2, 0, 65, 10);
  assert.ok(bad.acceptance < 0.1, `${bad.acceptance}`);
  const lengths = Array.from({ length: 32 }, () => bad.next());
  // Plain steps, but a one-token probe every 16th, so that a drafter that improves is seen.
  assert.equal(lengths.filter((k) => k === 0).length, 30);
  assert.deepEqual(lengths.filter((k) => k > 0), [1, 1]);

  // A costly draft (half a target step per token) is worth fewer tokens than a free one.
  const costly = new DraftLength(16);
  const free = new DraftLength(16);
  for (const d of [costly, free]) d.plainStep(50);
  for (let i = 0; i < 30; i++) {
    costly.checked(4, i % 3 === 0 ? 4 : 3, 70, 4 * 25);
    free.checked(4, i % 3 === 0 ? 4 : 3, 70, 0.01);
  }
  assert.ok(costly.next() < free.next(), `${costly.next()} vs ${free.next()}`);
  assert.throws(() => costly.checked(2, 3, 1, 1), /3 of 2 kept/);

  // A draft that declines every ask is asked less; one that declines some asks but is right
  // when it drafts keeps drafting.
  const declining = new DraftLength(8);
  const sometimes = new DraftLength(8);
  for (const d of [declining, sometimes]) d.plainStep(50);
  for (let i = 0; i < 40; i++) {
    declining.declined(15);
    if (i % 3 === 0) sometimes.declined(15);
    else sometimes.checked(6, 6, 80, 6 * 12);
  }
  assert.equal(declining.next(), 0);
  assert.ok(sometimes.next() >= 4, `${sometimes.next()}`);
  assert.ok(sometimes.acceptance > 0.9, `${sometimes.acceptance}`);
  assert.throws(() => new DraftLength(0), /max 0/);
});

Deno.test("checkSpeculation: maxDraft in [1, 32]", () => {
  const drafter = { kind: "lookup" as const, propose: () => [] };
  checkSpeculation({ drafter, maxDraft: 32 });
  assert.throws(() => checkSpeculation({ drafter, maxDraft: 0 }), /maxDraft 0/);
  assert.throws(() => checkSpeculation({ drafter, maxDraft: 2.5 }), /maxDraft 2.5/);
});

Deno.test("StepCosts: timed row counts as measured, the others between them or past the last", () => {
  const c = new StepCosts(9);
  assert.equal(c.estimates(9), undefined); // nothing before a one-row step
  c.record(1, 40);
  c.record(5, 44);
  c.record(3, 30); // faster than one row (noise): estimates never fall as rows are added
  const est = c.estimates(9)!;
  assert.deepEqual([...est.subarray(1, 6)], [40, 40, 40, 42, 44]);
  // Past the largest timed count: the prior share of a one-row step per row.
  assert.equal(est[9], 44 + 4 * ROW_COST_PRIOR * 40);
  // A recent average: a new time moves an entry a fifth of the way.
  c.record(5, 54);
  assert.equal(c.estimates(5)![5], 46);
  assert.throws(() => c.record(10, 1), /10 rows/);
  assert.throws(() => c.record(2, -1), /-1 ms/);
  assert.throws(() => c.estimates(0), /0 rows/);
  assert.throws(() => new StepCosts(0), /maxRows 0/);
  assert.throws(() => new DraftLength(8, new StepCosts(8)), /needs 9/);
});

Deno.test("DraftLength: a convex step cost stops drafts where rows stop being free", () => {
  // Rows 1-5 cost what one does (the weight read hides them), each row after that a fifth of a
  // step; a drafter whose checks of 4 keep all 4 in 7 of 10 (acceptance ~0.92). A linear fit
  // through the cheap rows (the old chooser) would call every length free and draft 16; the
  // measured costs stop near the knee.
  const costs = new StepCosts(17);
  const cost = (rows: number) => 40 + Math.max(0, rows - 5) * 8;
  for (let rows = 1; rows <= 17; rows++) costs.record(rows, cost(rows));
  const d = new DraftLength(16, costs);
  for (let i = 0; i < 40; i++) d.checked(4, i % 10 < 7 ? 4 : 2, cost(5), 0);
  const k = d.next();
  assert.ok(k >= 4 && k <= 8, `${k} (acceptance ${d.acceptance})`);
  // Choosers sharing the costs see each other's timings.
  const other = new DraftLength(16, costs);
  assert.ok(other.next() > 0);
});
