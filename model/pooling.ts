/**
 * Sentence embeddings from a sequence's final hidden states
 * (`Transformer.hiddenStatesAsync`): one vector per sequence, pooled the way
 * the model declares (GGUF `<arch>.pooling_type`) and L2-normalised.
 *
 * @module
 */

import type { ModelConfig } from "./config.ts";

/**
 * How the rows of a sequence become one vector: the mean of every row, the
 * first row (`cls`: the first token, BOS for most decoders) or the last row.
 *
 * @example
 * ```ts
 * import type { Pooling } from "./pooling.ts";
 * const p: Pooling = "mean";
 * ```
 */
export type Pooling = "mean" | "cls" | "last";

/** llama.cpp's pooling types (`enum llama_pooling_type`), by their GGUF number. */
const GGUF_POOLING = ["none", "mean", "cls", "last", "rank"] as const;

/**
 * The pooling of `config`'s model: what its GGUF metadata declares (mean,
 * cls or last), else mean (no declaration, or `none`: the file does not say
 * how to pool its per-token vectors). A reranker (`rank`, whose output is a
 * score from a classification head cflow does not load) and unknown types
 * throw a RangeError naming them.
 *
 * @example
 * ```ts
 * import { poolingOf } from "./pooling.ts";
 * console.log(poolingOf({ poolingType: 3 })); // "last"
 * console.log(poolingOf({ poolingType: null })); // "mean"
 * ```
 */
export function poolingOf(config: Pick<ModelConfig, "poolingType">): Pooling {
  const t = config.poolingType;
  if (t === null || t === 0) return "mean";
  const name = Number.isSafeInteger(t) ? GGUF_POOLING[t] : undefined;
  if (name === "rank") {
    throw new RangeError(
      "embeddings: the model declares rank pooling (a reranker); its classification head is not " +
        "supported",
    );
  }
  if (name === undefined) {
    throw new RangeError(`embeddings: the model declares an unknown pooling type ${t}`);
  }
  return name as Pooling;
}

/**
 * Pools the rows of one sequence as they come (row 0 first), keeping one
 * vector of `hidden` f64 sums, and returns the L2-normalised result.
 *
 * @example
 * ```ts
 * import { Pooler } from "./pooling.ts";
 * const p = new Pooler(2, "mean", 2);
 * p.add(new Float32Array([1, 0]), 0);
 * p.add(new Float32Array([1, 2]), 1);
 * console.log(p.finish()); // Float32Array [ 0.7071..., 0.7071... ]
 * ```
 */
export class Pooler {
  readonly #sum: Float64Array;
  readonly #pooling: Pooling;
  readonly #rows: number;
  #seen = 0;

  /** A pooler of `rows` rows of `hidden` values. */
  constructor(hidden: number, pooling: Pooling, rows: number) {
    if (!Number.isSafeInteger(hidden) || hidden < 1) {
      throw new RangeError(`pooler: hidden ${hidden} is not a positive integer`);
    }
    if (!Number.isSafeInteger(rows) || rows < 1) {
      throw new RangeError(`pooler: ${rows} rows; at least one is needed`);
    }
    if (pooling !== "mean" && pooling !== "cls" && pooling !== "last") {
      throw new RangeError(`pooler: pooling ${String(pooling)} is not mean, cls or last`);
    }
    this.#sum = new Float64Array(hidden);
    this.#pooling = pooling;
    this.#rows = rows;
  }

  /** Takes row `index` (rows come in order, each once). */
  add(row: Float32Array, index: number): void {
    if (index !== this.#seen || index >= this.#rows) {
      throw new RangeError(`pooler: row ${index}, expected ${this.#seen} of ${this.#rows}`);
    }
    if (row.length !== this.#sum.length) {
      throw new RangeError(`pooler: a row of ${row.length} values, not ${this.#sum.length}`);
    }
    this.#seen++;
    const s = this.#sum;
    if (this.#pooling === "mean") {
      for (let i = 0; i < s.length; i++) s[i] += row[i];
    } else if (
      (this.#pooling === "cls" && index === 0) ||
      (this.#pooling === "last" && index === this.#rows - 1)
    ) {
      for (let i = 0; i < s.length; i++) s[i] = row[i];
    }
  }

  /** The pooled vector, L2-normalised (every row must have been added). */
  finish(): Float32Array {
    if (this.#seen !== this.#rows) {
      throw new RangeError(`pooler: ${this.#seen} of ${this.#rows} rows were added`);
    }
    // The mean's division is a scale, which the normalisation removes.
    let norm = 0;
    for (const x of this.#sum) norm += x * x;
    norm = Math.sqrt(norm);
    const out = new Float32Array(this.#sum.length);
    if (!(norm > 0) || !Number.isFinite(norm)) {
      throw new RangeError(
        `embeddings: the pooled vector has norm ${norm}; it cannot be normalised`,
      );
    }
    for (let i = 0; i < out.length; i++) out[i] = this.#sum[i] / norm;
    return out;
  }
}

/**
 * What {@link embedTokens} runs: a `Transformer`, or one sequence of a batch
 * engine (runtime/batch_engine.ts) whose hidden-state runs wait for the
 * engine's step in flight.
 *
 * @example
 * ```ts ignore
 * import type { HiddenStateSource } from "./pooling.ts";
 * const source: HiddenStateSource = model; // a Transformer (its sequence 0)
 * ```
 */
export interface HiddenStateSource {
  /** The model's configuration (its width and declared pooling). */
  readonly config: ModelConfig;
  /** Positions one sequence holds. */
  readonly contextLength: number;
  /** `Transformer.hiddenStatesAsync` over the source's own sequence, from position 0. */
  hiddenStatesAsync(
    tokens: readonly number[],
    onRow: (hidden: Float32Array, index: number) => void,
    options?: { signal?: AbortSignal },
  ): Promise<void>;
}

/**
 * The embedding of one token sequence: its final hidden states, pooled
 * (`pooling`, default the model's: {@link poolingOf}) and L2-normalised.
 * The tokens overwrite positions [0, n) of the source's KV cache.
 *
 * @example
 * ```ts ignore
 * import { embedTokens } from "./pooling.ts";
 * const v = await embedTokens(model, tokenizer.encode("The cat sat on the mat."));
 * console.log(v.length === model.config.hidden);
 * ```
 */
export async function embedTokens(
  source: HiddenStateSource,
  tokens: readonly number[],
  options: { pooling?: Pooling; signal?: AbortSignal } = {},
): Promise<Float32Array> {
  const pooler = new Pooler(
    source.config.hidden,
    options.pooling ?? poolingOf(source.config),
    Math.max(1, tokens.length),
  );
  await source.hiddenStatesAsync(tokens, (h, i) => pooler.add(h, i), { signal: options.signal });
  return pooler.finish();
}
