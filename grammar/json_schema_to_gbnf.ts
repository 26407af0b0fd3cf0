/**
 * {@link jsonSchemaToGbnf}: a JSON Schema to a GBNF grammar whose every match is JSON that
 * validates against the schema. Unsupported keywords are refused, never ignored.
 *
 * Supported keywords: `type` (string, number, integer, boolean, null, object, array, or an
 * array of them), `properties`, `required`, `additionalProperties` (false, true or a schema;
 * absent: no other properties where `properties` is given, any otherwise), `enum`, `const`,
 * `items`, `minItems`, `maxItems`, `anyOf`, `oneOf` (only where its branches cannot both match
 * a value: the grammar treats it as `anyOf`), `$ref` to `#`, `#/$defs/...` or
 * `#/definitions/...` (recursion allowed), `$defs`, `definitions`, `minLength`, `maxLength`,
 * `format` (date, time, date-time, uuid), `pattern` (the subset in _regex.ts), `minimum`,
 * `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers with bounds are written without
 * an exponent). Ignored annotations: `title`, `description`, `$schema`, `$id`, `default`,
 * `examples`, `$comment`.
 *
 * @module
 */

import { Compiler } from "./_schema_compiler.ts";

export { ANY_JSON_DEPTH } from "./_schema_tables.ts";

/**
 * GBNF text whose `root` matches exactly JSON values (with limited whitespace between tokens)
 * that validate against `schema`.
 *
 * @example
 * ```ts
 * import { jsonSchemaToGbnf } from "./json_schema_to_gbnf.ts";
 *
 * const g = jsonSchemaToGbnf({ type: "object", properties: { n: { type: "integer" } } });
 * console.log(g.startsWith("root ::=")); // true
 * ```
 *
 * @throws {SchemaError} For an unsupported keyword (named, with its JSON-pointer path), a bad
 *   keyword value, an unresolved `$ref` or an exceeded bound.
 */
export function jsonSchemaToGbnf(schema: unknown): string {
  const c = new Compiler(schema);
  const root = c.visit(schema, "", 0);
  let out = `root ::= ${root}\n`;
  for (const [name, body] of c.rules) out += `${name} ::= ${body}\n`;
  return out;
}

/**
 * GBNF text for any JSON object (values nested at most {@link ANY_JSON_DEPTH} levels).
 *
 * @example
 * ```ts
 * import { jsonObjectGbnf } from "./json_schema_to_gbnf.ts";
 * console.log(jsonObjectGbnf().includes("root ::=")); // true
 * ```
 */
export function jsonObjectGbnf(): string {
  const c = new Compiler({});
  const root = c.object({ additionalProperties: true }, "", 0);
  let out = `root ::= ${root}\n`;
  for (const [name, body] of c.rules) out += `${name} ::= ${body}\n`;
  return out;
}
