/**
 * Text generation: prompt tokens through the model (prefill), then one token
 * at a time (decode), sampled, streamed as text that never splits a UTF-8
 * sequence, stopped by end-of-generation tokens, stop strings, the token
 * budget or an AbortSignal. Measures what llama.cpp users expect to see.
 *
 * @module
 */

import type { Transformer } from "../model/mod.ts";
import { StopMatcher } from "../sampling/mod.ts";
import { memoryUsage } from "./memory_usage.ts";
import {
  checkSpeculation,
  DraftLength,
  type SpeculationOptions,
  type SpeculationStats,
  StepCosts,
} from "./speculative.ts";
import type {
  GeneratedToken,
  GenerateOptions,
  GenerationModel,
  GenerationSampler,
  GenerationStats,
  GenerationTokenizer,
} from "./generate_options.ts";

export type { GenerationConstraint, GenerationConstraintMatcher } from "./generation_constraint.ts";
export type {
  GeneratedToken,
  GenerateOptions,
  GenerationModel,
  GenerationSampler,
  GenerationStats,
  GenerationTokenizer,
} from "./generate_options.ts";

/** Decodes token bytes to text without ever splitting a UTF-8 sequence. */
class Utf8Stream {
  #decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  push(bytes: Uint8Array): string {
    return this.#decoder.decode(bytes, { stream: true });
  }
  flush(): string {
    return this.#decoder.decode();
  }
}

const MAX_TOP_LOGPROBS = 20;

/** log softmax of `logits` at `id`, and the `top` most likely tokens. */
function logprobsOf(
  logits: Float32Array,
  id: number,
  top: number,
): { logprob: number; top?: { id: number; logprob: number }[] } {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const norm = max + Math.log(sum);
  if (top === 0) return { logprob: logits[id] - norm };
  // Keep the `top` best in a small sorted list (top <= 20).
  const best: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i];
    if (best.length === top && v <= logits[best[top - 1]]) continue;
    // The slot to fill: a new one, or the last (dropping the worst); then
    // shift worse entries down until v is in order (ties keep the lower id first).
    let j = best.length < top ? best.length : top - 1;
    while (j > 0 && logits[best[j - 1]] < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = i;
  }
  return {
    logprob: logits[id] - norm,
    top: best.map((t) => ({ id: t, logprob: logits[t] - norm })),
  };
}

/**
 * Generates from prompt token ids; yields tokens as they are produced and
 * returns the statistics.
 *
 * @example
 * ```ts ignore
 * import { generate } from "./generate.ts";
 * const it = generate(model, tokenizer, sampler, prompt, { maxTokens: 16 });
 * for (let r = await it.next(); !r.done; r = await it.next()) console.log(r.value.text);
 * ```
 */
export async function* generate(
  model: GenerationModel,
  tokenizer: GenerationTokenizer,
  sampler: GenerationSampler,
  prompt: readonly number[],
  options: GenerateOptions,
): AsyncGenerator<GeneratedToken, GenerationStats> {
  if (prompt.length === 0) throw new RangeError("generate: the prompt has no tokens");
  if (!Number.isSafeInteger(options.maxTokens) || options.maxTokens < 0) {
    throw new RangeError(`generate: maxTokens ${options.maxTokens} is not an integer >= 0`);
  }
  const wantLogprobs = options.logprobs;
  if (
    wantLogprobs !== undefined &&
    (!Number.isInteger(wantLogprobs) || wantLogprobs < 0 || wantLogprobs > MAX_TOP_LOGPROBS)
  ) {
    throw new RangeError(`generate: logprobs ${wantLogprobs} is not an integer in [0, 20]`);
  }
  if (prompt.length > model.contextLength) {
    throw new RangeError(
      `generate: the prompt has ${prompt.length} tokens, more than the context of ${model.contextLength}`,
    );
  }
  const spec = options.speculation;
  if (spec !== undefined) checkSpeculation(spec);
  const constraint = options.constraint;
  if (constraint !== undefined) {
    if (sampler.sampleConstrained === undefined) {
      throw new TypeError("generate: a constraint needs a sampler with sampleConstrained");
    }
    if (options.ignoreEos) throw new RangeError("generate: a constraint cannot go with ignoreEos");
    if (constraint.vocabSize !== model.config.vocab) {
      throw new RangeError(
        `generate: the constraint was compiled for ${constraint.vocabSize} tokens, the model has ${model.config.vocab}`,
      );
    }
  }
  const matcher = constraint?.matcher();
  const cache = options.cache;
  if (cache !== undefined && cache.model !== model) {
    throw new RangeError("generate: the prompt cache belongs to another model instance");
  }
  const start = performance.now();
  const afterLoad = memoryUsage();
  // Prefill: the prompt through the model in batches, keeping the last
  // logits; off the event loop, so that the signal can stop a long prompt.
  // A prefix the KV cache already holds is skipped; the positions after it
  // are about to be overwritten, so the record drops them first.
  const cached = cache?.reusable(prompt) ?? 0;
  cache?.truncate(cached);
  let logits: Float32Array;
  try {
    logits = await model.prefillAsync(prompt.slice(cached), cached, options.signal);
  } catch (error) {
    if (!options.signal?.aborted) throw error;
    const ms = performance.now() - start;
    return {
      promptTokens: prompt.length,
      cachedTokens: cached,
      prefillTokS: 0,
      ttftMs: ms,
      generatedTokens: 0,
      decodeTokS: 0,
      stopReason: "aborted",
    };
  }
  cache?.append(prompt.slice(cached));
  for (const t of prompt) sampler.accept(t);
  model.endPrefill();
  const prefillEnd = performance.now();
  const afterPrefill = memoryUsage();
  const next = spec === undefined ? undefined : new Speculation(
    model,
    spec,
    prompt,
    // Drafts after an end-of-generation token would never be reached.
    options.ignoreEos ? () => false : (id) => tokenizer.isEog(id),
  );
  await next?.prepare(options.signal);
  const moe = model.config.moe !== null;
  const prefillExperts = model.expertBytes.perLayer.reduce((a, n) => a + n, 0);
  const decodeExperts = new Array<number>(model.config.layers).fill(0);
  let decodeSteps = 0;
  const passMs = new Array<number>(model.schedule.steps.length).fill(0);
  const tierStart = model.expertTierStats;
  const utf8 = new Utf8Stream();
  const stops = new StopMatcher(options.stop ?? []);
  let pos = prompt.length;
  let generated = 0;
  let firstAt = 0;
  let lastAt = 0;
  let reason: GenerationStats["stopReason"] = "max_tokens";
  while (generated < options.maxTokens) {
    if (options.signal?.aborted) {
      reason = "aborted";
      break;
    }
    const id = matcher === undefined
      ? sampler.sample(logits)
      : sampler.sampleConstrained!(logits, matcher);
    const probs = wantLogprobs === undefined ? undefined : logprobsOf(logits, id, wantLogprobs);
    sampler.accept(id);
    generated++;
    lastAt = performance.now();
    if (generated === 1) firstAt = lastAt;
    if (!options.ignoreEos && tokenizer.isEog(id)) {
      reason = "eog";
      break;
    }
    matcher?.accept(id);
    const { emit, stopped } = stops.push(utf8.push(tokenizer.tokenBytes(id)));
    yield probs === undefined ? { id, text: emit } : { id, text: emit, ...probs };
    if (stopped) {
      reason = "stop_string";
      break;
    }
    if (matcher !== undefined && matcher.isAccepting() && !matcher.canContinue()) {
      reason = "grammar";
      break;
    }
    if (generated >= options.maxTokens) break;
    if (pos >= model.contextLength) {
      reason = "context";
      break;
    }
    logits = next === undefined
      ? await model.forward(id, pos)
      : await next.run(id, pos, options.maxTokens - generated);
    pos++;
    cache?.append([id]);
    model.passTimes().forEach((ms, i) => passMs[i] += ms);
    if (moe) {
      model.expertBytes.perLayer.forEach((n, l) => decodeExperts[l] += n);
      decodeSteps++;
    }
    // Let the event loop run (signals, stdout) between tokens.
    await Promise.resolve();
  }
  if (reason !== "stop_string") {
    const tail = stops.push(utf8.flush()).emit + stops.flush();
    if (tail !== "") yield { id: -1, text: tail };
  }
  const prefillMs = prefillEnd - start;
  return {
    promptTokens: prompt.length,
    cachedTokens: cached,
    prefillTokS: (prompt.length - cached) / Math.max(prefillMs / 1000, 1e-9),
    prefillMs,
    ttftMs: (firstAt || performance.now()) - start,
    generatedTokens: generated,
    decodeTokS: generated > 1 ? (generated - 1) / Math.max((lastAt - firstAt) / 1000, 1e-9) : 0,
    decodeMs: generated > 1 ? lastAt - firstAt : 0,
    stopReason: reason,
    memory: afterLoad && afterPrefill && { afterLoad, afterPrefill, afterDecode: memoryUsage()! },
    expertBytes: moe
      ? {
        prefill: prefillExperts,
        decodePerToken: decodeExperts.reduce((a, n) => a + n, 0) / Math.max(decodeSteps, 1),
        decodePerLayerPerToken: decodeExperts.map((n) => n / Math.max(decodeSteps, 1)),
        bankPerLayer: model.expertBankBytes,
        tier: tierOf(tierStart, model.expertTierStats, decodeSteps),
      }
      : undefined,
    passMsPerToken: generated > 1 ? passMs.map((ms) => ms / (generated - 1)) : undefined,
    speculation: next?.stats(),
  };
}

/**
 * The decode steps of a speculative generation: each generated token either
 * is the drafted token checked last step (its logits are already there) or
 * starts a new check of it and the tokens drafted after it.
 */
class Speculation {
  readonly #model: GenerationModel;
  readonly #options: SpeculationOptions;
  /** Draft length choosers, one per class of proposal (Drafter.lastClass). */
  readonly #lengths = new Map<number, DraftLength>();
  /** The target's step times by rows checked, which every class's chooser reads. */
  readonly #costs: StepCosts;
  /** The prompt and every token generated so far. */
  readonly #history: number[];
  /** Logits of each row of the last check. */
  readonly #rows: Float32Array[];
  /** Drafted tokens of the last check not reached yet; the logits after #pending[i] are #rows[#at + 1 + i]. */
  #pending: number[] = [];
  #at = 0;
  /** The check in progress: drafted, kept, its step and drafting times. */
  #check:
    | { length: DraftLength; drafted: number; kept: number; stepMs: number; draftMs: number }
    | undefined;
  #drafted = 0;
  #accepted = 0;
  #checks = 0;
  #draftMs = 0;

  readonly #ends: (id: number) => boolean;

  constructor(
    model: GenerationModel,
    options: SpeculationOptions,
    prompt: readonly number[],
    ends: (id: number) => boolean,
  ) {
    this.#model = model;
    this.#ends = ends;
    this.#options = options;
    this.#costs = new StepCosts(options.maxDraft + 1);
    this.#history = [...prompt];
    this.#rows = Array.from(
      { length: options.maxDraft + 1 },
      () => new Float32Array(model.config.vocab),
    );
  }

  async prepare(signal?: AbortSignal): Promise<void> {
    const t0 = performance.now();
    await this.#options.drafter.prepare?.(this.#history, signal);
    this.#draftMs += performance.now() - t0;
  }

  /** The logits after `id` at `pos`; `budget`: tokens generation may still produce. */
  async run(id: number, pos: number, budget: number): Promise<Float32Array> {
    this.#history.push(id);
    if (this.#pending.length > 0 && this.#pending[0] === id) {
      this.#pending.shift();
      this.#at++;
      this.#accepted++;
      this.#check!.kept++;
      return this.#rows[this.#at];
    }
    this.#pending = [];
    this.#endCheck();
    const m = this.#model;
    const o = this.#options;
    const drafter = o.drafter;
    const adaptive = o.adaptive ?? true;
    // Drafts beyond the context or the token budget could never be kept.
    const room = Math.min(o.maxDraft, m.contextLength - pos - 1, budget - 1);
    let drafts: number[] = [];
    let length: DraftLength | undefined;
    const t0 = performance.now();
    if (room > 0) {
      // A drafter that costs a model step is told how many to draft; a free one gives all it
      // has, cut to the length chosen for its class.
      let want = room;
      if (!drafter.free && adaptive) {
        length = this.#lengthOf(0);
        want = Math.min(room, length.next());
      }
      if (want > 0) drafts = [...await drafter.propose(this.#history, want)].slice(0, want);
      if (drafter.free && drafts.length > 0) {
        length = this.#lengthOf(drafter.lastClass ?? 0);
        if (adaptive) drafts = drafts.slice(0, length.next());
      }
      length ??= this.#lengthOf(drafter.lastClass ?? 0);
      // A token the target does not have ends the draft, and so does one after the end.
      const bad = drafts.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= m.config.vocab);
      if (bad >= 0) drafts = drafts.slice(0, bad);
      const end = drafts.findIndex(this.#ends);
      if (end >= 0) drafts = drafts.slice(0, end + 1);
    }
    const t1 = performance.now();
    this.#draftMs += t1 - t0;
    if (drafts.length === 0) {
      if (!drafter.free && length !== undefined && adaptive) length.declined(t1 - t0);
      const logits = await m.forward(id, pos);
      this.#costs.record(1, performance.now() - t1);
      return logits;
    }
    await m.forwardAll([id, ...drafts], pos, this.#rows.slice(0, drafts.length + 1));
    this.#check = {
      length: length!,
      drafted: drafts.length,
      kept: 0,
      stepMs: performance.now() - t1,
      draftMs: t1 - t0,
    };
    this.#drafted += drafts.length;
    this.#checks++;
    this.#pending = drafts;
    this.#at = 0;
    return this.#rows[0];
  }

  /** The draft length chooser of a class of proposals. */
  #lengthOf(c: number): DraftLength {
    let l = this.#lengths.get(c);
    if (l === undefined) {
      if (!Number.isInteger(c) || c < 0 || c > 63) {
        throw new RangeError(`speculation: the drafter's class ${c} is not an integer in [0, 63]`);
      }
      l = new DraftLength(this.#options.maxDraft, this.#costs);
      this.#lengths.set(c, l);
    }
    return l;
  }

  #endCheck(): void {
    const c = this.#check;
    if (c === undefined) return;
    c.length.checked(c.drafted, c.kept, c.stepMs, c.draftMs);
    this.#check = undefined;
  }

  stats(): SpeculationStats {
    return {
      kind: this.#options.drafter.kind,
      drafted: this.#drafted,
      accepted: this.#accepted,
      acceptanceRate: this.#drafted > 0 ? this.#accepted / this.#drafted : 0,
      checks: this.#checks,
      draftMs: this.#draftMs,
    };
  }
}

type TierStats = Transformer["expertTierStats"];

/** The disk tier's counters over the decode, per token. */
function tierOf(start: TierStats, end: TierStats, steps: number) {
  if (start === undefined || end === undefined) return undefined;
  const n = Math.max(steps, 1);
  const lookups = end.hits + end.misses - start.hits - start.misses;
  return {
    readBytesPerToken: (end.bytesRead - start.bytesRead) / n,
    stallMsPerToken: (end.stallMs - start.stallMs) / n,
    hitRate: lookups > 0 ? (end.hits - start.hits) / lookups : 0,
    direct: end.direct,
  };
}

/**
 * 64-bit FNV-1a over the little-endian u32 bytes of token ids, as
 * `fnv1a64:<16 hex digits>`: the hash reported for greedy outputs.
 *
 * @example
 * ```ts
 * import { fnv1a64 } from "./generate.ts";
 * console.log(fnv1a64([])); // "fnv1a64:cbf29ce484222325"
 * ```
 */
export function fnv1a64(ids: readonly number[]): string {
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) {
      throw new RangeError(`fnv1a64: ${id} is not a u32`);
    }
    for (let b = 0; b < 4; b++) {
      h ^= BigInt((id >>> (8 * b)) & 0xff);
      h = (h * prime) & 0xffffffffffffffffn;
    }
  }
  return `fnv1a64:${h.toString(16).padStart(16, "0")}`;
}
