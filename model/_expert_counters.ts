/**
 * The expert-byte counters a plan keeps in its workspace (one u64 per
 * layer, added to by every expert read), read back as per-call deltas and
 * a total since load.
 *
 * @module
 */

import type { AlignedBuffer } from "../ffi/mod.ts";

/**
 * Reads the layers' expert-byte counters and keeps what the last call read
 * per layer and the total since load.
 *
 * @example
 * ```ts ignore
 * const counters = new ExpertCounters(ws, setup.countersAt, setup.counters, true);
 * plan.run(ids, 0);
 * counters.read();
 * console.log(counters.last, counters.total);
 * ```
 */
export class ExpertCounters {
  readonly #memory: AlignedBuffer;
  /** Workspace offset of the layers' counters (one u64 each). */
  readonly #at: number;
  /** Per layer, its counter's workspace offset (-1: no experts). */
  readonly #layers: readonly number[];
  readonly #moe: boolean;
  readonly #bytes: Uint8Array;
  readonly #seen: number[] = [];
  /** Expert bytes each layer read in the last call. */
  last: number[];
  /** Expert bytes read since the counters were last {@link reset}. */
  total = 0;

  /** `layers[l]` is layer l's counter offset or -1; `moe` false: every count is 0. */
  constructor(memory: AlignedBuffer, at: number, layers: readonly number[], moe: boolean) {
    this.#memory = memory;
    this.#at = at;
    this.#layers = layers;
    this.#moe = moe;
    this.#bytes = new Uint8Array(8 * layers.length);
    this.last = layers.map(() => 0);
  }

  /** Sets {@link last} to the bytes each layer read since the previous read, and adds them up. */
  read(): void {
    if (!this.#moe) return; // `last` stays the zeros it was made with: no allocation per token
    this.#memory.read(this.#at, this.#bytes.length, this.#bytes);
    const view = new DataView(this.#bytes.buffer);
    this.last = this.#layers.map((off, l) => {
      if (off < 0) return 0;
      const now = Number(view.getBigUint64(8 * l, true));
      const delta = now - (this.#seen[l] ?? 0);
      this.#seen[l] = now;
      return delta;
    });
    for (const n of this.last) this.total += n;
  }

  /** Takes what has been counted so far as seen, and sets the total to 0. */
  reset(): void {
    this.read();
    this.total = 0;
  }
}
