/**
 * The plan builder of one attention block: RMSNorm, fused Q/K/V, QK-norm,
 * RoPE, K and V appended to the pass's KV cache, attention over the visible
 * positions of each row's own sequence, and the output projection added to
 * the stream.
 *
 * @module
 */

import type { Buf } from "../ffi/mod.ts";
import { type BlockContext, project } from "./_plan_state.ts";

/**
 * stream += Attn(N_attn(input)) of layer `l`, with the KV cache of pass
 * `step`.
 *
 * @example
 * ```ts ignore
 * attentionBlock(ctx, 0, 0, ctx.s.x, ctx.s.x);
 * ```
 */
export function attentionBlock(
  x: BlockContext,
  l: number,
  step: number,
  input: Buf,
  stream: Buf,
): void {
  const { b, c, s, v } = x;
  const w = x.layers[l];
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  const q = s.qkv;
  const kNew = { offset: s.qkv.offset + qDim * 4, stride: s.qkv.stride };
  const vNew = { offset: s.qkv.offset + (qDim + kvDim) * 4, stride: s.qkv.stride };
  const window = c.windows[l];
  const cache = x.caches[step];
  // RMSNorm, one quantization of the normed input, fused Q/K/V (+ biases).
  b.rmsNorm(input, w.attnNorm, s.xb, c.hidden, c.eps);
  project(b, w.qkv, s.xb, c.hidden, s.xq, s.qkv);
  if (w.qBias !== undefined) b.addVec(q, w.qBias, qDim);
  if (w.kBias !== undefined) b.addVec(kNew, w.kBias, kvDim);
  if (w.vBias !== undefined) b.addVec(vNew, w.vBias, kvDim);
  // QK-norm (per head, or over the whole q and k for OLMoE), V-norm, then RoPE.
  if (w.qNorm !== undefined) {
    if (c.qkNormFull) b.headNorm(q, 1, qDim, w.qNorm, c.eps);
    else b.headNorm(q, c.heads, c.headDim, w.qNorm, c.eps);
  }
  if (w.kNorm !== undefined) {
    if (c.qkNormFull) b.headNorm(kNew, 1, kvDim, w.kNorm, c.eps);
    else b.headNorm(kNew, c.kvHeads, c.headDim, w.kNorm, c.eps);
  }
  if (v.ones !== undefined) b.headNorm(vNew, c.kvHeads, c.headDim, v.ones, c.eps);
  const freqs = window > 0 ? v.freqLocal : v.freqGlobal;
  const rope = c.ropeStyle === "normal" ? 0 : 1;
  // q's heads and then k's lie side by side in the fused output: one RoPE over
  // both computes each angle's cosine and sine once (each head rotates alone,
  // so the values are those of two calls).
  b.rope(q, c.heads + c.kvHeads, c.headDim, c.ropeDims, freqs, rope);
  // Append k and v to the pass's cache; attend over the visible positions.
  b.kvStore(kNew, cache.k, kvDim, v.kvType, c.headDim);
  b.kvStore(vNew, cache.v, kvDim, v.kvType, c.headDim);
  b.attention({
    q,
    k: cache.k,
    v: cache.v,
    kvType: v.kvType,
    heads: c.heads,
    kvHeads: c.kvHeads,
    headDim: c.headDim,
    window,
    scale: c.attnScale,
    softcap: c.attnSoftcap,
    out: s.att,
  });
  // Output projection, optional post-attention norm, into the stream.
  project(b, w.o, s.att, qDim, s.attq, s.proj);
  if (w.postAttnNorm !== undefined) b.rmsNorm(s.proj, w.postAttnNorm, s.proj, c.hidden, c.eps);
  b.add(stream, s.proj, c.hidden);
}
