/**
 * {@link compileConstraint}: a {@link ConstraintSpec} (JSON Schema, any JSON object, or GBNF)
 * compiled against a tokenizer's vocabulary into a {@link TokenConstraint}, with a bounded LRU
 * of compiled constraints per tokenizer so that repeated requests reuse their memoized
 * transitions and masks.
 *
 * @module
 */

import { compileGrammar } from "./compile_grammar.ts";
import type { ConstraintSpec } from "./constraint_spec.ts";
import { GrammarError, SchemaError } from "./grammar_error.ts";
import { jsonObjectGbnf, jsonSchemaToGbnf } from "./json_schema_to_gbnf.ts";
import { type ConstraintTokenizer, TokenConstraint } from "./token_constraint.ts";

/**
 * The GBNF text a spec stands for.
 *
 * @example
 * ```ts
 * import { specToGbnf } from "./compile_constraint.ts";
 * console.log(specToGbnf({ kind: "gbnf", grammar: 'root ::= "x"' })); // root ::= "x"
 * ```
 *
 * @throws {SchemaError} For a schema the compiler refuses.
 * @throws {TypeError} For a spec of the wrong shape.
 */
export function specToGbnf(spec: ConstraintSpec): string {
  switch (spec?.kind) {
    case "json_schema":
      return jsonSchemaToGbnf(spec.schema);
    case "json_object":
      return jsonObjectGbnf();
    case "gbnf":
      if (typeof spec.grammar !== "string") throw new TypeError("gbnf: grammar must be a string");
      return spec.grammar;
    default:
      throw new TypeError(
        `constraint: unknown kind ${JSON.stringify((spec as { kind?: unknown })?.kind)}`,
      );
  }
}

/** Compiled constraints kept per tokenizer. */
const CACHE_SIZE = 16;
const caches = new WeakMap<ConstraintTokenizer, Map<string, TokenConstraint>>();

/**
 * Compiles a spec against a tokenizer (cached: the same spec text and tokenizer give the same
 * {@link TokenConstraint}; the 16 most recently used are kept per tokenizer).
 *
 * @example
 * ```ts
 * import { compileConstraint } from "./compile_constraint.ts";
 * const enc = new TextEncoder();
 * const words = ['{"a":', "1", "}", "x"];
 * const t = { vocabSize: 4, tokenBytes: (id: number) => enc.encode(words[id]), isEog: () => false, isSpecial: () => false };
 * const c = compileConstraint({ kind: "json_schema", schema: { type: "object", properties: { a: { type: "integer" } }, required: ["a"] } }, t);
 * const m = c.matcher();
 * console.log(m.allows(0), m.allows(3)); // true false
 * ```
 *
 * @throws {SchemaError} For a schema the compiler refuses.
 * @throws {GrammarError} For a bad grammar.
 */
export function compileConstraint(
  spec: ConstraintSpec,
  tokenizer: ConstraintTokenizer,
): TokenConstraint {
  const text = specToGbnf(spec);
  let cache = caches.get(tokenizer);
  if (cache === undefined) caches.set(tokenizer, cache = new Map());
  const hit = cache.get(text);
  if (hit !== undefined) {
    cache.delete(text);
    cache.set(text, hit);
    return hit;
  }
  let c: TokenConstraint;
  try {
    c = new TokenConstraint(compileGrammar(text), tokenizer);
  } catch (e) {
    // A grammar built from a schema that the matcher refuses (e.g. a $ref cycle with no
    // input in between) is the schema's fault.
    if (e instanceof GrammarError && spec.kind !== "gbnf") {
      throw new SchemaError(`a grammar the matcher refuses (${e.reason}):`, "schema", "");
    }
    throw e;
  }
  cache.set(text, c);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return c;
}
