import assert from "node:assert/strict";
import { checkSpeculation, DraftLength } from "./speculative.ts";

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
