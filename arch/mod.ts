/**
 * Architecture tables: tensor names per architecture and source format.
 *
 * ```ts
 * import { GGUF_NAMES, tensorName } from "./mod.ts";
 * console.log(tensorName(GGUF_NAMES.down, 2)); // "blk.2.ffn_down.weight"
 * ```
 *
 * @module
 */

export {
  canonicalArchitecture,
  GGUF_NAMES,
  HF_NAMES,
  LAYER_ROLES,
  tensorName,
} from "./tensor_names.ts";
export type { Role } from "./tensor_names.ts";
