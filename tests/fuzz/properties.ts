/**
 * Every fuzz target, for the property tests (`*_property_test.ts`) and the
 * campaign (`deno task fuzz`): one definition of each generator and each
 * property.
 *
 * @module
 */

import type { Target } from "./harness.ts";
import { FORMAT_TARGETS } from "./targets_formats.ts";
import { ollamaRequestTarget } from "./targets_ollama.ts";
import { requestTarget } from "./targets_server.ts";
import { TOKENIZER_TARGETS } from "./targets_tokenizer.ts";

export { assertTarget, type Counts, runTarget, type Target } from "./harness.ts";
export { ggufTarget, hfConfigTarget, safetensorsTarget, tiledTarget } from "./targets_formats.ts";
export { requestTarget } from "./targets_server.ts";
export { ollamaRequestTarget } from "./targets_ollama.ts";
export {
  decodeTarget,
  ggufTokenizerTarget,
  hfTokenizerTarget,
  roundTripTarget,
} from "./targets_tokenizer.ts";

/** Every target, in campaign order. */
export const ALL_TARGETS: readonly Target<never>[] = [
  ...FORMAT_TARGETS,
  ...TOKENIZER_TARGETS,
  requestTarget as unknown as Target<never>,
  ollamaRequestTarget as unknown as Target<never>,
];
