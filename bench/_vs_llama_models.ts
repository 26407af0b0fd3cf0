/**
 * What bench/vs_llama.ts measures: the models it knows how to make, the jobs its workers
 * (bench/_cflow_worker.ts, bench/_llama_worker.mjs) run, and the configurations, samples and
 * per-model state of a run. The job types are re-exported from vs_llama.ts.
 *
 * @module
 */

import type { Agreement } from "./_vs_llama_gate.ts";

/** The checkout's root, without a trailing slash. */

export const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** Peak and current memory of a worker process, in bytes. */
export interface ProcMemory {
  /** Peak resident set (VmHWM). */
  vmHwm: number;
  /** Resident set at exit (VmRSS). */
  vmRss: number;
  /** Proportional set size at exit, and its file-backed and anonymous parts. */
  pss: number;
  pssFile: number;
  pssAnon: number;
}

/** What every model job names. */
export interface ModelJob {
  /** The GGUF file. */
  gguf: string;
  /** cflow's conversion target: the GGUF's own matrix type, so re-tiling is lossless. */
  quant: "q4_0" | "q8_0" | "auto";
  /** The converted-model cache. */
  cache: string;
  /** KV cache positions. */
  ctx: number;
}

/** A job for bench/_cflow_worker.ts. */
export type CflowJob =
  | { mode: "stream"; threads: number; bytes: number; minMs: number }
  | ({ mode: "prepare"; text?: string; agreeText?: string } & ModelJob)
  | ({ mode: "pp"; threads: number; prompt: number[]; warmupPrompt: number } & ModelJob)
  | ({
    mode: "tg";
    threads: number;
    prompt: number[];
    maxTokens: number;
    warmupTokens: number;
  } & ModelJob)
  | ({
    mode: "agree";
    threads: number;
    tokens: number[];
    refTop1: number[];
    refTop2: number[];
  } & ModelJob);

/** A model the harness knows how to make and measure. */
export interface ModelSpec {
  id: string;
  label: string;
  gguf: string;
  /** cflow's conversion: "auto" keeps each tensor's own type (the default for a GGUF). */
  quant: "q4_0" | "q8_0" | "auto";
  /** The script (and its arguments) that makes or checks the file (`.sh`: run by bash). */
  make: string[];
  /** Random weights: the gate's overall criterion is the margin delta, not top-1. */
  randomWeights: boolean;
  /**
   * Its vocabulary is not SmolLM2's: the prompts and the agreement text are the fixture's text
   * tokenized by the model's own tokenizer (cflow's, identical to llama.cpp's on these models:
   * tokenizer/real_models_test.ts), not the fixture's SmolLM2 ids, with the special tokens the
   * tokenizer adds, as a user's prompt has them: Gemma 3 without its BOS is a model nobody runs
   * (on the gate's 978 positions llama.cpp then agreed with itself at 94.8%, with BOS 95.8%).
   */
  ownTokens?: boolean;
  /** Goals of issue 7: tg128 vs llama.cpp's best, share of the read bandwidth. */
  goals: { tg: number; bandwidth?: number };
}

/** The models the harness knows, in the order `--models` names them by default. */
export const MODELS: ModelSpec[] = [
  {
    id: "qwen15b-q4_k_m",
    label: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (real weights; Q4_K and Q6_K)",
    gguf: `${ROOT}/cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`,
    quant: "auto",
    make: ["scripts/fetch-models.sh", "qwen15b"],
    randomWeights: false,
    ownTokens: true,
    goals: { tg: 1.5, bandwidth: 0.85 },
  },
  {
    id: "gemma3-q4_k_m",
    label: "Gemma-3-270M Q4_K_M (real weights; Q8_0, Q5_0, Q4_K, Q6_K)",
    gguf: `${ROOT}/cache/models/gemma-3-270m-q4_k_m.gguf`,
    quant: "auto",
    make: ["scripts/fetch-models.sh", "gemma3"],
    randomWeights: false,
    ownTokens: true,
    goals: { tg: 2.0 },
  },
  {
    id: "smollm2-q4_1",
    label: "SmolLM2-135M-Instruct Q4_1 (the fetched file; Q4_1 panels)",
    gguf: `${ROOT}/cache/models/smollm2-135m-instruct.Q4_1.gguf`,
    quant: "auto",
    make: ["scripts/fetch-models.sh", "smollm2"],
    randomWeights: false,
    goals: { tg: 2.0 },
  },
  {
    id: "smollm2-q4_0",
    label: "SmolLM2-135M-Instruct Q4_0",
    gguf: `${ROOT}/cache/models/smollm2-135m-instruct.Q4_0.gguf`,
    quant: "q4_0",
    make: ["scripts/derive-models.ts", "smollm2-q4_0"],
    randomWeights: false,
    goals: { tg: 2.0 },
  },
  {
    id: "smollm2-q8_0",
    label: "SmolLM2-135M-Instruct Q8_0",
    gguf: `${ROOT}/cache/models/smollm2-135m-instruct.Q8_0.gguf`,
    quant: "q8_0",
    make: ["scripts/derive-models.ts", "smollm2-q8_0"],
    randomWeights: false,
    goals: { tg: 2.0 },
  },
  {
    id: "random-1b-q4_0",
    label: "Llama-3.2-1B geometry, random weights, SmolLM2 vocabulary, Q4_0",
    gguf: `${ROOT}/cache/models/random-llama-3.2-1b-geometry-s1.Q4_0.gguf`,
    quant: "q4_0",
    make: ["scripts/gen-random-gguf.ts", "--preset", "llama-3.2-1b", "--type", "q4_0"],
    randomWeights: true,
    goals: { tg: 1.5, bandwidth: 0.7 },
  },
];

/** The engine a worker runs. */
export type Engine = "cflow" | "llama.cpp";
/** Prefill (`pp`) or decode (`tg`). */
export type Test = "pp" | "tg";

/** One configuration of the speed runs: a model test on one engine, or the streaming read. */
export interface Config {
  kind: "model" | "stream";
  engine?: Engine;
  model?: string;
  test?: Test;
  threads: number;
}

/** One measured run of a configuration. */
export interface Sample {
  rep: number;
  order: number;
  config: Config;
  tokS?: number;
  gbps?: number;
  /** The stream job's bytes in 2 MiB pages while it read (null: not reported). */
  hugePageBytes?: number | null;
  hash?: string;
  ids?: number[];
  memory?: ProcMemory;
  loadMs?: number;
  /** llama.cpp's system info line: the CPU features its loaded backend uses. */
  systemInfo?: string;
  wallMs: number;
}

/** What the run learns about one model. */
export interface ModelState {
  spec: ModelSpec;
  sha256: string;
  fileBytes: number;
  weights: { total: number; perToken: number; tied: boolean };
  kvBytes: number;
  tensors: number;
  cflowPath?: string;
  convertMs?: number;
  converted?: boolean;
  agreement?: Agreement;
  agreementMs?: { cflow: number; llama: number };
  /** llama.cpp's top-1 agreement with itself, batches of 32 against one token at a time. */
  llamaSelf?: number;
  /** The same runs' mean margin delta (`meanMarginDelta`), llama.cpp's against itself. */
  llamaSelfMarginDelta?: number;
  refused?: string;
  /** The token ids its prompts read. */
  ids?: number[];
  /** The token ids the agreement run reads: `ids`, or those of `--agree-text`. */
  agreeIds?: number[];
}
