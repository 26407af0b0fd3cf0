/**
 * Perplexity the way llama.cpp's `llama-perplexity` computes it: the tokens
 * are cut into chunks of `ctx`; each chunk is evaluated from an empty cache
 * (its first token replaced by BOS when the model adds one), and the
 * negative log-likelihood of each next token is summed over the second half
 * of the chunk only (positions ctx/2 .. ctx-2 predicting ctx/2+1 .. ctx-1).
 *
 * Each chunk runs as prompt batches that keep the logits of every row they
 * score ({@link Transformer.prefillAll}), each bit for bit what running
 * the tokens one at a time through `forward` gives, so the result is that
 * of scoring token by token, at prefill speed.
 *
 * @module
 */

import type { Transformer } from "../model/mod.ts";

/**
 * The result of {@link perplexity}.
 *
 * @example
 * ```ts
 * import type { PerplexityResult } from "./perplexity.ts";
 * function show(r: PerplexityResult): string {
 *   return `${r.ppl.toFixed(4)} +/- ${r.stderr.toFixed(4)}`;
 * }
 * ```
 */
export interface PerplexityResult {
  /** exp(mean negative log-likelihood). */
  ppl: number;
  /** Standard error of the perplexity (llama.cpp's estimate). */
  stderr: number;
  /** Chunks evaluated. */
  chunks: number;
  /** Tokens scored. */
  scored: number;
  /** Running perplexity after each chunk. */
  perChunk: number[];
}

function logSoftmaxAt(logits: Float32Array, target: number): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return logits[target] - max - Math.log(sum);
}

/**
 * Computes perplexity over `tokens` in chunks of `ctx`.
 *
 * @example
 * ```ts ignore
 * import { perplexity } from "./perplexity.ts";
 * const r = perplexity(model, tokens, 512, 1);
 * ```
 */
export function perplexity(
  model: Transformer,
  tokens: readonly number[],
  ctx: number,
  bos: number | undefined,
  onChunk?: (done: number, total: number, ppl: number) => void,
): PerplexityResult {
  if (!Number.isSafeInteger(ctx) || ctx < 4 || ctx > model.contextLength) {
    throw new RangeError(
      `perplexity: ctx ${ctx} must be from 4 to the model context ${model.contextLength}`,
    );
  }
  const chunks = Math.floor(tokens.length / ctx);
  if (chunks < 1) {
    throw new RangeError(
      `perplexity: ${tokens.length} tokens is less than one chunk of ${ctx}; use a longer text or a smaller --ctx`,
    );
  }
  const first = Math.floor(ctx / 2);
  let nll = 0;
  let nll2 = 0;
  let count = 0;
  const perChunk: number[] = [];
  for (let c = 0; c < chunks; c++) {
    const start = c * ctx;
    const chunk = tokens.slice(start, start + ctx - 1);
    if (bos !== undefined) chunk[0] = bos;
    // Positions 0 .. ctx-2; the logits of ctx/2 .. ctx-2, in order.
    model.prefillAll(chunk, 0, (logits, j) => {
      const v = -logSoftmaxAt(logits, tokens[start + j + 1]);
      nll += v;
      nll2 += v * v;
      count++;
    }, first);
    const mean = nll / count;
    perChunk.push(Math.exp(mean));
    onChunk?.(c + 1, chunks, Math.exp(mean));
  }
  const mean = nll / count;
  const variance = count > 1 ? (nll2 / count - mean * mean) / (count - 1) : 0;
  const ppl = Math.exp(mean);
  return { ppl, stderr: ppl * Math.sqrt(Math.max(variance, 0)), chunks, scored: count, perChunk };
}
