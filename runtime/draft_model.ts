/**
 * Draft-model speculation (llama.cpp's `--model-draft`): a smaller model of
 * the same vocabulary proposes its most likely tokens, one decode step each
 * on its own KV cache, which follows the accepted history (rejected
 * positions are simply run again).
 *
 * @module
 */

import type { GenerationModel } from "./generate.ts";
import type { Drafter } from "./speculative.ts";

/** What a draft needs of its model: a {@link Transformer} or a sequence of a batch engine. */
export type DraftRunner =
  & Pick<GenerationModel, "config" | "contextLength" | "forward" | "prefillAsync">
  & {
    /** A batch engine's sequence: says it asks for nothing more for now (after each proposal). */
    idle?(): void;
  };

/**
 * Options of {@link DraftModel}.
 *
 * @example
 * ```ts
 * import type { DraftModelOptions } from "./draft_model.ts";
 * const o: DraftModelOptions = { minP: 0.75 };
 * ```
 */
export interface DraftModelOptions {
  /**
   * Stop drafting at a token the draft gives less than this probability
   * (llama.cpp's `--draft-p-min`), in [0, 1]; default 0.75. 0 never stops early.
   */
  minP?: number;
}

/**
 * A drafter over a smaller model: greedy tokens from its own logits.
 *
 * @example
 * ```ts ignore
 * import { DraftModel } from "./draft_model.ts";
 * const drafter = new DraftModel(draftTransformer, { minP: 0.75 });
 * const it = generate(target, tokenizer, sampler, prompt, {
 *   maxTokens: 64,
 *   speculation: { drafter, maxDraft: 8 },
 * });
 * ```
 */
export class DraftModel implements Drafter {
  /** A draft model. */
  readonly kind = "draft-model";
  readonly #model: DraftRunner;
  readonly #minP: number;
  /** The tokens whose keys and values the draft's cache holds at positions 0, 1, ... */
  #held: number[] = [];

  /** A drafter over `model`, whose KV cache (sequence) it uses alone. */
  constructor(model: DraftRunner, options: DraftModelOptions = {}) {
    const minP = options.minP ?? 0.75;
    if (!(minP >= 0 && minP <= 1)) throw new RangeError(`draft: minP ${minP} is not in [0, 1]`);
    this.#model = model;
    this.#minP = minP;
  }

  /**
   * Reads the prompt into the draft's cache: the part after what it holds
   * already (a chat's earlier turns, a prompt that starts like the last).
   */
  async prepare(prompt: readonly number[], signal?: AbortSignal): Promise<void> {
    if (prompt.length === 0 || prompt.length > this.#model.contextLength) return;
    const same = this.#shared(prompt);
    this.#held = this.#held.slice(0, same);
    try {
      await this.#model.prefillAsync(prompt.slice(same), same, signal);
    } finally {
      this.#model.idle?.();
    }
    this.#held = [...prompt];
  }

  /** How many leading tokens of `history` the cache holds, leaving the last one to run. */
  #shared(history: readonly number[]): number {
    const held = this.#held;
    const limit = Math.min(held.length, history.length - 1);
    let same = 0;
    while (same < limit && held[same] === history[same]) same++;
    return same;
  }

  /** Up to `max` greedy tokens of the draft after `history`, while it is sure enough of them. */
  async propose(history: readonly number[], max: number): Promise<number[]> {
    try {
      return await this.#propose(history, max);
    } finally {
      this.#model.idle?.();
    }
  }

  async #propose(history: readonly number[], max: number): Promise<number[]> {
    const m = this.#model;
    if (history.length === 0 || max < 1) return [];
    const room = m.contextLength - history.length;
    if (room < 1) return [];
    max = Math.min(max, room);
    // Run what the cache lacks: the history after the part it shares with what is held (at
    // least the last token, whose logits the first draft needs).
    const same = this.#shared(history);
    this.#held = this.#held.slice(0, same); // what stays valid if the run below fails
    // One token (after a rejection: the target's own) as a decode step; more as one batch,
    // which reads the weights once: after a check that kept every draft, the catch-up is the
    // last draft and the target's token (Qwen2.5-Coder-0.5B, 2 threads, Zen 4: two decode steps
    // 26.4 ms, one batch of two 14.1 ms).
    let logits = history.length - same === 1
      ? await m.forward(history[same], same)
      : await m.prefillAsync(history.slice(same), same);
    this.#held = history.slice();
    const drafts: number[] = [];
    for (;;) {
      const { id, p } = best(logits);
      if (p < this.#minP) break;
      drafts.push(id);
      if (drafts.length >= max) break;
      logits = await m.forward(id, history.length + drafts.length - 1);
      this.#held.push(id);
    }
    return drafts;
  }
}

/** The most likely token (the lowest id among ties) and its softmax probability. */
function best(logits: Float32Array): { id: number; p: number } {
  let id = 0;
  let max = logits[0];
  for (let i = 1; i < logits.length; i++) {
    if (logits[i] > max) {
      max = logits[i];
      id = i;
    }
  }
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  return { id, p: 1 / sum };
}

/** The tokenizer view the vocabulary check reads. */
export interface VocabularyView {
  /** Token ids (one more than the largest). */
  readonly vocabSize: number;
  /** The bytes of a token. */
  tokenBytes(id: number): Uint8Array;
  /** End-of-generation ids. */
  readonly eogIds: readonly number[];
}

/** Most tokens a draft's vocabulary may have more or fewer than its target's (llama.cpp: 100). */
const MAX_VOCAB_DIFFERENCE = 128;

/**
 * Refuses a draft whose vocabulary is not the target's: every token id
 * both have must stand for the same bytes, the sizes may differ by at most
 * 128 padding ids, and the end-of-generation tokens must be the same.
 * Throws a RangeError naming the first difference.
 *
 * @example
 * ```ts ignore
 * checkDraftVocabulary(target.tokenizer, draft.tokenizer, "qwen-0.5b.cflow");
 * ```
 */
export function checkDraftVocabulary(
  target: VocabularyView,
  draft: VocabularyView,
  name: string,
): void {
  const what = `draft model ${name}: its vocabulary is not the target's`;
  if (Math.abs(target.vocabSize - draft.vocabSize) > MAX_VOCAB_DIFFERENCE) {
    throw new RangeError(`${what} (${draft.vocabSize} tokens, the target has ${target.vocabSize})`);
  }
  const n = Math.min(target.vocabSize, draft.vocabSize);
  for (let id = 0; id < n; id++) {
    const a = target.tokenBytes(id);
    const b = draft.tokenBytes(id);
    let same = a.length === b.length;
    for (let i = 0; same && i < a.length; i++) same = a[i] === b[i];
    if (!same) {
      const show = (x: Uint8Array) => JSON.stringify(new TextDecoder().decode(x));
      throw new RangeError(`${what}: token ${id} is ${show(b)} there and ${show(a)} in the target`);
    }
  }
  const eog = (v: VocabularyView) => [...v.eogIds].sort((x, y) => x - y).join(",");
  if (eog(target) !== eog(draft)) {
    throw new RangeError(
      `${what}: end-of-generation tokens [${eog(draft)}], the target's [${eog(target)}]`,
    );
  }
}
