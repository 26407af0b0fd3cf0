/**
 * `config.json` of a pipeline-native checkpoint (docs/ARCHITECTURES.md,
 * "Checkpoints (safetensors)"): every field validated, and the
 * `architecture` name checked against the combine style, the delays and
 * `style_param` it stands for.
 *
 * @module
 */

import { Fields } from "./_fields.ts";

/**
 * The pipeline-native names (report Table 4.1) and the header fields each
 * one fixes: `[combine_style, dense_delay, expert_delay, style_param]`.
 *
 * @example
 * ```ts
 * import { PIPELINE_NATIVE_NAMES } from "./parse_pipeline_native.ts";
 * console.log(PIPELINE_NATIVE_NAMES.arch2_4_combined); // [1, 1, 2, 0]
 * ```
 */
export const PIPELINE_NATIVE_NAMES: Readonly<
  Record<string, readonly [number, number, number, number]>
> = Object.freeze({
  gemma4_parallel: [0, 0, 0, 0],
  arch1_decoupled_streams: [3, 0, 0, 3],
  arch2_4_combined: [1, 1, 2, 0],
  arch2_4_sync: [1, 1, 0, 0],
  arch3_pipeline_registers: [4, 0, 0, 0],
  arch4_async_experts: [2, 0, 2, 0],
  arch5_fixed_point: [5, 0, 0, 3],
});

/**
 * The pipeline-native part of a config.
 *
 * @example
 * ```ts
 * import type { PipelineNativeConfig } from "./parse_pipeline_native.ts";
 * const p: PipelineNativeConfig = {
 *   name: "arch2_4_sync", combineStyle: 1, denseDelay: 1, expertDelay: 0, styleParam: 0,
 *   featureFlags: 0, finalLogitSoftcap: 0,
 * };
 * ```
 */
export interface PipelineNativeConfig {
  /** `architecture` (a key of {@link PIPELINE_NATIVE_NAMES}). */
  readonly name: string;
  /** `combine_style`, 0..5. */
  readonly combineStyle: number;
  /** `dense_delay`. */
  readonly denseDelay: number;
  /** `expert_delay`. */
  readonly expertDelay: number;
  /** `style_param`, 0..255. */
  readonly styleParam: number;
  /** `feature_flags`, 0..15 (bit 2 equals `tie_word_embeddings`). */
  readonly featureFlags: number;
  /** `final_logit_softcap`, finite and >= 0. */
  readonly finalLogitSoftcap: number;
}

/**
 * Reads and checks the pipeline-native fields of `config.json` (the shared
 * geometry fields are read by parseHfConfig). Errors name the field.
 *
 * @example
 * ```ts ignore
 * const p = readPipelineNative(new Fields("config.json", root), 6, 4, false);
 * ```
 */
export function readPipelineNative(
  f: Fields,
  numLayers: number,
  numExperts: number,
  tie: boolean,
): PipelineNativeConfig {
  const name = f.str("architecture") ?? f.fail("architecture", "is required but missing");
  const want = PIPELINE_NATIVE_NAMES[name] ??
    f.fail(
      "architecture",
      `unknown pipeline-native architecture ${JSON.stringify(name)} (known: ${
        Object.keys(PIPELINE_NATIVE_NAMES).join(", ")
      })`,
      f.get("architecture"),
    );
  const byte = { min: 0, max: 255 };
  const combineStyle = f.int("combine_style", { min: 0, max: 5 }, want[0]);
  const denseDelay = f.int("dense_delay", { min: 0, max: Math.min(255, numLayers) }, want[1]);
  const expertDelay = f.int("expert_delay", { min: 0, max: Math.min(255, numLayers) }, want[2]);
  const styleParam = f.int("style_param", byte, want[3]);
  const got = [combineStyle, denseDelay, expertDelay, styleParam];
  const keys = ["combine_style", "dense_delay", "expert_delay", "style_param"];
  got.forEach((v, i) => {
    if (v !== want[i]) {
      f.fail(
        keys[i],
        `${v} disagrees with architecture ${JSON.stringify(name)}, which has ${keys[i]} ${want[i]}`,
        f.get(keys[i]),
      );
    }
  });
  if (combineStyle === 0 && numExperts === 0) {
    f.fail("num_experts", `${name} (ParallelSqrt2) needs num_experts > 0`, f.get("num_experts"));
  }
  const featureFlags = f.int("feature_flags", { min: 0, max: 15 }, tie ? 4 : 0);
  if (((featureFlags & 4) !== 0) !== tie) {
    f.fail(
      "feature_flags",
      `bit 2 (tied embeddings) is ${(featureFlags >> 2) & 1} but tie_word_embeddings is ${tie}`,
      f.get("feature_flags"),
    );
  }
  const softcap = f.get("final_logit_softcap") === undefined
    ? 0
    : f.num("final_logit_softcap", -1, Infinity);
  if (softcap < 0) {
    f.fail("final_logit_softcap", `${softcap} is negative`, f.get("final_logit_softcap"));
  }
  return Object.freeze({
    name,
    combineStyle,
    denseDelay,
    expertDelay,
    styleParam,
    featureFlags,
    finalLogitSoftcap: softcap,
  });
}
