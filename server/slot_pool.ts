/**
 * {@link SlotPool}: a fixed set of resources (model instances) handed out one
 * request at a time, with a bounded first-in first-out queue for the rest.
 *
 * @module
 */

import { ApiError } from "./api_error.ts";

interface Waiter<T> {
  resolve(slot: T): void;
  reject(error: unknown): void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/**
 * Hands out `slots` one at a time; requests beyond them wait in a fair (FIFO)
 * queue of at most `maxQueue`. A waiter whose signal aborts leaves the queue.
 *
 * @example
 * ```ts
 * import { SlotPool } from "./slot_pool.ts";
 * const pool = new SlotPool(["a"], 4);
 * const slot = await pool.acquire();
 * const next = pool.acquire(); // waits
 * pool.release(slot);
 * console.log(await next); // "a"
 * ```
 */
export class SlotPool<T> {
  #idle: T[];
  #queue: Waiter<T>[] = [];
  readonly #maxQueue: number;
  /** Number of slots. */
  readonly size: number;

  /** A pool of `slots` with a queue of at most `maxQueue` waiters. */
  constructor(slots: readonly T[], maxQueue: number) {
    if (slots.length === 0) throw new RangeError("SlotPool: no slots");
    this.#idle = [...slots];
    this.size = slots.length;
    this.#maxQueue = maxQueue;
  }

  /** Idle slots now. */
  get idle(): number {
    return this.#idle.length;
  }

  /** Whether `slot` is idle now (not handed out). */
  isIdle(slot: T): boolean {
    return this.#idle.includes(slot);
  }

  /** Requests waiting now. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * A slot, now or when one frees up (in arrival order). With `prefer`, the
   * idle slot it scores highest is taken, and of equal scores the one idle
   * the longest (so a slot that scores well for someone else is kept for
   * them); without it, the slot released last. A request that has to wait
   * gets the next slot released, whatever its score: arrival order first.
   *
   * @example
   * ```ts
   * import { SlotPool } from "./slot_pool.ts";
   * const pool = new SlotPool(["a", "b"], 4);
   * console.log(await pool.acquire(undefined, (s) => (s === "b" ? 1 : 0))); // "b"
   * ```
   *
   * @throws {ApiError} 503 when the queue is full; the signal's reason when it aborts first.
   */
  acquire(signal?: AbortSignal, prefer?: (slot: T) => number): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#idle.length > 0) {
      let pick = this.#idle.length - 1;
      if (prefer !== undefined) {
        let best = -Infinity;
        this.#idle.forEach((s, i) => {
          const score = prefer(s);
          if (score > best) [best, pick] = [score, i];
        });
      }
      return Promise.resolve(this.#idle.splice(pick, 1)[0]);
    }
    if (this.#queue.length >= this.#maxQueue) {
      return Promise.reject(
        new ApiError(503, "the server is busy: too many queued requests", {
          type: "server_error",
          code: "queue_full",
        }),
      );
    }
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = { resolve, reject, signal };
      if (signal !== undefined) {
        waiter.onAbort = () => {
          const i = this.#queue.indexOf(waiter);
          if (i >= 0) this.#queue.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.#queue.push(waiter);
    });
  }

  /** Returns a slot: the longest-waiting live request gets it, else it goes idle. */
  release(slot: T): void {
    while (true) {
      const next = this.#queue.shift();
      if (next === undefined) break;
      if (next.onAbort) next.signal!.removeEventListener("abort", next.onAbort);
      if (next.signal?.aborted) {
        next.reject(next.signal.reason);
        continue;
      }
      next.resolve(slot);
      return;
    }
    this.#idle.push(slot);
  }
}
