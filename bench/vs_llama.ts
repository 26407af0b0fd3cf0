/**
 * cflow against llama.cpp, side by side, on the same GGUF files, in one run:
 *
 *   deno task bench:vs-llama [--models qwen15b-q4_k_m,gemma3-q4_k_m,smollm2-q4_1,smollm2-q4_0,...]
 *     [--threads 1,2] [--reps 5] [--seed N] [--quick] [--pp 512] [--tg 128]
 *     [--agree-tokens 512] [--agree-text FILE] [--ctx 1024]
 *     [--llama-flash-attention auto|on|off]
 *     [--llama-cpu NAME]
 *     [--stream-mib 256] [--gate-only] [--out FILE]
 *
 * Models (fetched or made locally, never committed, into the git-ignored cache/models/):
 *
 * - `qwen15b-q4_k_m`, `gemma3-q4_k_m`, `smollm2-q4_1`: the real GGUFs as users download them
 *   (scripts/fetch-models.sh qwen15b, gemma3, smollm2; Q4_K_M files mix Q4_K, Q6_K, Q5_0 and
 *   Q8_0), converted by cflow with `--quant auto`, every tensor kept in its own type. Qwen and
 *   Gemma read the fixture text in their own vocabularies (`ownTokens`), with the special
 *   tokens their tokenizers add (Gemma's BOS; Qwen adds none).
 * - `smollm2-q4_0`, `smollm2-q8_0`: SmolLM2-135M-Instruct requantized from the fetched Q4_1
 *   GGUF by scripts/derive-models.ts (sha256 pinned there). Every matrix is Q4_0 (Q8_0), so
 *   cflow's conversion re-tiles the bytes losslessly and both engines run identical weights.
 * - `random-1b-q4_0`: Llama-3.2-1B's layer geometry (hidden 2048, 16 layers, 32/8 heads of 64,
 *   FFN 8192, tied embeddings, RoPE theta 500000) with random weights (normal, std 0.02; norms
 *   1.0), made by scripts/gen-random-gguf.ts. It carries SmolLM2's tokenizer, so its vocabulary
 *   is 49,152 tokens, not Llama 3's 128,256: the embedding/output matrix is 2.6x smaller than
 *   the real model's (see that script).
 *
 * Protocol (llama-bench's conventions, and issue 7's):
 *
 * - The same GGUF file for both engines, its sha256 recorded. cflow loads it the way its users
 *   do: `resolveModel` converts it once into cache/converted/ (the conversion runs before any
 *   measurement, in its own process), `Transformer.load`, `generate()`; llama.cpp is
 *   node-llama-cpp 3.21.1's prebuilt CPU build (scripts/install-llamacpp.sh), `gpu: false`,
 *   `build: "never"`, all layers on the CPU (llama.cpp loads the best of its per-CPU backends
 *   this CPU runs; `--llama-cpu haswell` leaves it only its AVX2 one, through
 *   `scripts/install-llamacpp.sh --cpu`, to compare like with like beside
 *   `CFLOW_KERNEL_VARIANT=avx2` on a CPU that has AVX-512), an f16 KV cache like cflow's, both with a context
 *   of `--ctx` positions. Flash attention is llama.cpp's own default ("auto") for speed, off
 *   for the agreement check.
 * - Tests: pp512 (a 512-token prompt, prefill tok/s: cflow's `generate()` with one output
 *   token, llama.cpp's evaluation up to its first sampled token) and tg128 (128 greedy tokens
 *   after an 8-token prompt, end-of-generation ignored, timed from the first to the last
 *   token). The prompt ids are fixed: the first tokens of tests/fixtures/llamacpp/
 *   teacher_forced.json (llama.cpp's tokenization of teacher_forced.txt; SmolLM2 vocabulary,
 *   which every model here uses), the same ids to both engines.
 * - Each configuration (engine, model, test, threads) runs in a fresh process pinned with
 *   `taskset` to as many cores as threads (when taskset exists): load, one warmup run (a 64-token
 *   prefill, or 16 generated tokens: enough to fault the mapped weights in and start the
 *   pools), then the measured run. `--reps` rounds (default 5), each over every configuration
 *   in an order shuffled by a seeded PRNG; the seed is printed (`--seed` repeats an order).
 *   Per cell: median and min-max.
 * - Bandwidth: the kernels' streaming read (`cf_stream_read`) over a `--stream-mib` buffer of
 *   native memory in 2 MiB pages (as the weights are held), as its own configuration at each
 *   thread count in the same shuffled rounds. Achieved decode GB/s = weight bytes read per
 *   token (every tensor of the GGUF; the tied embedding counted once as the output projection
 *   plus one row for the lookup; an untied one as one row) x tok/s, shown as a share of that
 *   read at the same thread count.
 * - Memory: each worker's peak RSS (VmHWM) and its Pss, Pss_File and Pss_Anon at exit; cflow's
 *   peak against 1.1 x (weights + KV cache) + 60 MB (MB = 10^6 bytes; issue 18's bound).
 *
 * Correctness gate (speed is not reported for a model that fails it; exit status 1):
 *
 * - cflow's greedy tg128 token hash (fnv1a64) is identical across all its repetitions and
 *   thread counts, and so is the token it generates after the pp512 prompt.
 * - Teacher-forced top-1 agreement with llama.cpp on the same weights, one token per step on
 *   both sides, over the first `--agree-tokens` ids of the fixture text (default 512), 1
 *   thread, flash attention off: >= 99% at the positions where llama.cpp's top-1 margin is
 *   >= 0.6 logits, and >= 95% over all positions. Both numbers are printed. A flat 99% over all
 *   positions is not attainable by any engine that is not bit-identical to one llama.cpp
 *   configuration: llama.cpp agrees with itself at only 96.6-96.8% of the 1,067 positions of
 *   this text when only its summation order changes (batches of 32 instead of 1, or flash
 *   attention; measured by tests/reference/gen_llamacpp_smollm2.mjs), because every matrix
 *   product quantizes its input to Q8_0, so a one-ulp difference upstream can flip a rounding
 *   and move a logit by a whole quantum. Its margins move by up to 0.60 logits between its own
 *   configurations, so at positions with a larger margin a flip means a defect
 *   (tests/llamacpp_agreement_test.ts checks the same model with the same thresholds). The
 *   harness measures llama.cpp against itself again in every run (batches of 32 against one
 *   token at a time) and prints it beside cflow's number; where that self-agreement is below
 *   95% (the real models here read the fixture's SmolLM2 ids, which are not text in their own
 *   vocabularies: Qwen2.5-Coder-1.5B agrees with itself at ~93%), the overall criterion is
 *   cflow's agreement with llama.cpp >= llama.cpp's with itself, in the same run.
 * - Random weights (`random-1b-q4_0`) get a different overall criterion: the mean |cflow
 *   margin - llama.cpp margin| between llama.cpp's top two tokens is <= 0.15 logits (the
 *   agreement test's bound; llama.cpp against itself: 0.10-0.11 on SmolLM2) instead of 95%
 *   top-1. Random logits over 49,152 tokens are close to Gaussian (std ~0.9 here), so the gap
 *   between the top two is ~0.2 logits and only ~5% of the positions reach the 0.6 margin;
 *   top-1 then flips on rounding noise at about one position in ten: llama.cpp agrees with
 *   itself at ~92% on this model, cflow with llama.cpp at ~88% (when this was written) while its
 *   margins stay closer to llama.cpp's (mean delta ~0.05) than on SmolLM2. A real defect (a wrong RoPE position, mask
 *   or scale) moves these logits by whole units, which the margin criterion catches; the
 *   decided-positions criterion stays, and the overall top-1 number is still printed.
 *
 * - `--agree-text FILE` runs the agreement check on another text (UTF-8, at most 1 MiB, inside
 *   the checkout: the bench may read nothing else; cache/ is git-ignored): every model reads it
 *   in its own vocabulary, with the special tokens its tokenizer adds, and the file's sha256 is
 *   recorded. The prompts of pp and tg stay the fixture's. Over ~1,000 positions the overall
 *   top-1 count moves by several positions with last-bit changes on either side (docs/
 *   CORRECTNESS.md), so one text is one sample: a second text tells a real defect, which
 *   shows on every text, from near-ties that happen to fall on one side.
 *
 * Results: a table on stdout (with issue 7's goals, as measured), and every sample in a JSON
 * file under the git-ignored cache/bench/ (`--out` to choose). Progress goes to stderr.
 * `--gate-only` runs the agreement check alone. `--quick` is a smoke run: 2 repetitions instead
 * of 5, everything else as ever (fewer agreement positions would make the 95% criterion a coin
 * toss: on SmolLM2 Q8_0 the first 128 positions agreed at 93%, the first 512 at 96.5%, all
 * 1,067 at 96.8% when this was written, 97.0% now). On a machine shared with other work every number is noisy; only ratios
 * measured in one run mean anything.
 *
 * @module
 */

import { main } from "./_vs_llama_run.ts";

export { agreement, GATE, meanMarginDelta } from "./_vs_llama_gate.ts";
export type { Agreement, GateRule } from "./_vs_llama_gate.ts";
export { AGREE_TEXT_MAX_BYTES, readAgreeText } from "./_vs_llama_inputs.ts";
export type { CflowJob, ModelJob, ProcMemory } from "./_vs_llama_models.ts";
export { seededShuffler, spread, weightBytes } from "./_vs_llama_stats.ts";
export type { Spread } from "./_vs_llama_stats.ts";

if (import.meta.main) {
  try {
    Deno.exit(await main());
  } catch (error) {
    console.error(`bench:vs-llama: ${error instanceof Error ? error.message : String(error)}`);
    Deno.exit(2);
  }
}
