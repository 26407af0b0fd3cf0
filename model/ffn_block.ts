/**
 * The plan builder of one dense FFN block: RMSNorm, fused gate/up, the
 * gated activation, down, and the optional post-FFN norm.
 *
 * @module
 */

import type { Buf } from "../ffi/mod.ts";
import { type BlockContext, project } from "./_plan_state.ts";

/**
 * out = FFN(N_ffn(input)) of layer `l`.
 *
 * @example
 * ```ts ignore
 * denseBlock(ctx, 0, ctx.s.x, ctx.s.d);
 * ```
 */
export function denseBlock(x: BlockContext, l: number, input: Buf, out: Buf): void {
  const { b, c, s } = x;
  const w = x.layers[l];
  b.rmsNorm(input, w.ffnNorm!, s.xb, c.hidden, c.eps);
  project(b, w.gateUp!, s.xb, c.hidden, s.xq, s.gateUp);
  b.gated(c.activation === "silu" ? "silu" : "gelu", s.gateUp, s.hb, c.ffnHidden);
  project(b, w.down!, s.hb, c.ffnHidden, s.hq, out);
  if (w.postFfnNorm !== undefined) b.rmsNorm(out, w.postFfnNorm, out, c.hidden, c.eps);
}
