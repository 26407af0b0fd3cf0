/**
 * `cflow inspect`: reports on `.cflow`, `.vflow`, GGUF, safetensors files
 * and Hugging Face checkpoint directories.
 *
 * ```ts ignore
 * import { inspectPath } from "./mod.ts";
 * console.log(JSON.stringify(inspectPath("model.cflow")));
 * ```
 *
 * @module
 */

export { formatInspect, inspectPath } from "./inspect_file.ts";
export type { InspectReport, TensorReport } from "./inspect_file.ts";
export { inspectHf, inspectSafetensors } from "./inspect_hf.ts";
export type { ByteSource } from "../formats/byte_source.ts";
