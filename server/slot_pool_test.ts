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
