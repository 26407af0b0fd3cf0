/**
 * What `GenerateOptions.constraint` (generate.ts) needs of an output constraint: the shape of
 * grammar/mod.ts's `TokenConstraint` and `TokenMatcher`, without depending on the grammar
 * module.
 *
 * @module
 */

/**
 * One generation's position in an output constraint (grammar/mod.ts's `TokenMatcher`).
 *
 * @example
 * ```ts
 * import type { GenerationConstraintMatcher } from "./generation_constraint.ts";
 * function done(m: GenerationConstraintMatcher): boolean {
 *   return m.isAccepting() && !m.canContinue();
 * }
 * ```
 */
export interface GenerationConstraintMatcher {
  /** Token `id` may come next (end-of-generation tokens only where the output is complete). */
  allows(id: number): boolean;
  /** 1 for every token that may come next (length: the vocabulary's; not to be modified). */
  mask(): Uint8Array;
  /** Takes token `id` (throws if it is not allowed). */
  accept(id: number): void;
  /** The output so far is complete. */
  isAccepting(): boolean;
  /** More output can follow. */
  canContinue(): boolean;
}

/**
 * An output constraint compiled for the model's tokenizer (grammar/mod.ts's
 * `TokenConstraint`, from `compileConstraint`): a fresh matcher per generation.
 *
 * @example
 * ```ts ignore
 * import { compileConstraint } from "../grammar/mod.ts";
 * const constraint: GenerationConstraint = compileConstraint({ kind: "json_object" }, tokenizer);
 * ```
 */
export interface GenerationConstraint {
  /** Number of token ids it was compiled for. */
  readonly vocabSize: number;
  /** A matcher at the start of the output. */
  matcher(): GenerationConstraintMatcher;
}
