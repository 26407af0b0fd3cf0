/**
 * Constrained decoding (structured outputs): the output of a generation is held to a grammar.
 *
 * - {@link ConstraintSpec}: what a request asks for (a JSON Schema, any JSON object, or GBNF);
 * - {@link compileConstraint}: a spec compiled against a tokenizer into a
 *   {@link TokenConstraint}, whose {@link TokenMatcher} (one per generation) says which tokens
 *   may come next: one token cheaply ({@link TokenMatcher.allows}), all of them as a mask
 *   ({@link TokenMatcher.mask});
 * - {@link parseGbnf}, {@link compileGrammar}, {@link GrammarMatcher}: llama.cpp's GBNF format
 *   and a byte-level pushdown matcher over it;
 * - {@link jsonSchemaToGbnf}: JSON Schema to GBNF, refusing unsupported keywords with a
 *   {@link SchemaError} naming the keyword and its JSON pointer.
 *
 * @example
 * ```ts
 * import { GrammarMatcher, jsonSchemaToGbnf } from "./mod.ts";
 *
 * const g = jsonSchemaToGbnf({ type: "array", items: { type: "integer" }, maxItems: 2 });
 * const m = GrammarMatcher.fromGbnf(g);
 * console.log(m.advance(new TextEncoder().encode("[1, 2]")), m.isAccepting()); // true true
 * ```
 *
 * @module
 */

export type { ConstraintSpec } from "./constraint_spec.ts";
export { GrammarError, SchemaError } from "./grammar_error.ts";
export {
  complementRanges,
  GBNF_LIMITS,
  type GbnfExpr,
  type GbnfGrammar,
  type GbnfLimits,
  normalizeRanges,
  parseGbnf,
} from "./parse_gbnf.ts";
export { compileGrammar, END, type GrammarProgram } from "./compile_grammar.ts";
export {
  GrammarMatcher,
  GrammarRuntime,
  MatchState,
  MAX_STACK_DEPTH,
  MAX_STACKS,
  StackNode,
} from "./grammar_matcher.ts";
export { ANY_JSON_DEPTH, jsonObjectGbnf, jsonSchemaToGbnf } from "./json_schema_to_gbnf.ts";
export {
  type ConstraintTokenizer,
  TokenConstraint,
  TokenMatcher,
  TokenTrie,
  tokenTrie,
} from "./token_constraint.ts";
export { compileConstraint, specToGbnf } from "./compile_constraint.ts";
