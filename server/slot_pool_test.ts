import assert from "node:assert/strict";
import { SlotPool } from "./slot_pool.ts";

Deno.test("slot pool: FIFO hand-off, aborted waiters leave the queue, bounded queue", async () => {
  const pool = new SlotPool(["a"], 3);
  const a = await pool.acquire();
  const order: string[] = [];
  const gone = new AbortController();
  const w1 = pool.acquire().then((s) => (order.push("w1"), s));
  const w2 = pool.acquire(gone.signal);
  const w3 = pool.acquire().then((s) => (order.push("w3"), s));
  await assert.rejects(pool.acquire(), /busy/);
  assert.equal(pool.queued, 3);
  gone.abort(new Error("left"));
  await assert.rejects(w2, /left/);
  assert.equal(pool.queued, 2);
  pool.release(a);
  pool.release(await w1);
  pool.release(await w3);
  assert.deepEqual(order, ["w1", "w3"]);
  assert.equal(pool.idle, 1);
  assert.equal(pool.queued, 0);
});

Deno.test("slot pool: prefer picks the best-scoring idle slot, ties go to the one idle longest", async () => {
  const pool = new SlotPool(["a", "b", "c"], 4);
  const score: Record<string, number> = { a: 0, b: 5, c: 5 };
  // b and c tie at 5: b has been idle longer (the pool lists its slots in order).
  assert.equal(await pool.acquire(undefined, (s) => score[s]), "b");
  assert.equal(await pool.acquire(undefined, (s) => score[s]), "c");
  pool.release("b");
  pool.release("c");
  // Idle now: a (longest), b, c. All tie at 0: a.
  assert.equal(await pool.acquire(undefined, () => 0), "a");
  // Without prefer: the slot released last.
  assert.equal(await pool.acquire(), "c");
  assert.equal(pool.idle, 1);
});
