/**
 * {@link compileRequestConstraint}: a request's output constraint (OpenAI's `response_format`,
 * llama-server's `grammar` or `json_schema`) compiled for the server's tokenizer.
 *
 * @module
 */

import {
  compileConstraint,
  GrammarError,
  SchemaError,
  type TokenConstraint,
} from "../grammar/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { ApiError } from "./api_error.ts";
import type { SamplingRequest } from "./validate_request.ts";

/**
 * The request's output constraint compiled against the server's tokenizer (compiled
 * constraints are cached per grammar text); a refused schema keyword or a bad grammar is a 400
 * naming it.
 *
 * @example
 * ```ts ignore
 * const constraint = compileRequestConstraint(tokenizer, request); // undefined: free text
 * // `field` names the request field in errors (Ollama's "format"); by default the OpenAI one.
 * ```
 */
export function compileRequestConstraint(
  tokenizer: Tokenizer,
  r: SamplingRequest,
  field?: string,
): TokenConstraint | undefined {
  const spec = r.constraint;
  if (spec === undefined) return undefined;
  const param = field ?? (spec.kind === "gbnf" ? "grammar" : "response_format");
  try {
    return compileConstraint(spec, tokenizer);
  } catch (e) {
    if (e instanceof SchemaError || e instanceof GrammarError) {
      throw new ApiError(400, e.message, {
        param,
        code: e instanceof SchemaError ? "unsupported_schema" : "invalid_grammar",
      });
    }
    throw e;
  }
}
