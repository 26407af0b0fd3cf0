/**
 * A random-init fixture of tests/fixtures (a Hugging Face folder: `hf_logits/qwen2`,
 * `pipeline_native/arch4_async_experts`, ...) converted to a Q8_0 `.cflow` in `dir`, for the
 * tests that run several models the same way.
 *
 * @example
 * ```ts ignore
 * import { convertFixture } from "./fixture_model.ts";
 * const path = await convertFixture("hf_logits/qwen2", dir);
 * ```
 *
 * @module
 */
import { convertFile } from "../../convert/mod.ts";

const FIXTURES = new URL("../fixtures/", import.meta.url).pathname;

/** Converts fixture `name` into `dir` (once per call) and returns the `.cflow` path. */
export async function convertFixture(name: string, dir: string): Promise<string> {
  const path = `${dir}/${name.replaceAll("/", "_")}.cflow`;
  await convertFile(`${FIXTURES}${name}`, path, {
    format: "cflow",
    quant: "q8_0",
    rule: "ggml",
    measureError: false,
  });
  return path;
}
