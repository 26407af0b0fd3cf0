/**
 * {@link ConstraintSpec}: what a generation's output must match, as a request states it, before
 * it is compiled against a tokenizer's vocabulary.
 *
 * @module
 */

/**
 * The constraint a caller asks for, not yet compiled:
 *
 * - `json_schema`: a JSON value that validates against `schema` (the supported keywords are
 *   listed in the grammar module; any other keyword is refused when the constraint is
 *   compiled, naming it);
 * - `json_object`: any JSON object (OpenAI's `response_format: { type: "json_object" }`,
 *   Ollama's `format: "json"`);
 * - `gbnf`: a grammar in llama.cpp's GBNF format, whose `root` rule the output must match.
 *
 * The server's request validators (OpenAI's `response_format`, llama-server's `grammar` and
 * `json_schema`, Ollama's `format`) produce one of these; the CLI's `--json-schema` and
 * `--grammar` and the library's options do too.
 *
 * @example
 * ```ts
 * import type { ConstraintSpec } from "./constraint_spec.ts";
 *
 * const spec: ConstraintSpec = {
 *   kind: "json_schema",
 *   schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
 * };
 * console.log(spec.kind); // "json_schema"
 * ```
 */
export type ConstraintSpec =
  | { readonly kind: "json_schema"; readonly schema: unknown }
  | { readonly kind: "json_object" }
  | { readonly kind: "gbnf"; readonly grammar: string };
