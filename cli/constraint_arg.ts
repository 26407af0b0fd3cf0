/**
 * The command line's `--json-schema FILE` and `--grammar FILE`.
 *
 * @module
 */

import {
  compileGrammar,
  type ConstraintSpec,
  GrammarError,
  SchemaError,
  specToGbnf,
} from "../grammar/mod.ts";
import { UsageError } from "./generate.ts";

/**
 * `--json-schema FILE` / `--grammar FILE` as a constraint spec, checked now (a refused schema
 * keyword or a bad grammar is a usage error naming it).
 *
 * @example
 * ```ts ignore
 * const spec = await constraintArg("person.schema.json", undefined);
 * ```
 */
export async function constraintArg(
  schemaFile: string | undefined,
  grammarFile: string | undefined,
): Promise<ConstraintSpec | undefined> {
  if (schemaFile !== undefined && grammarFile !== undefined) {
    throw new UsageError("give --json-schema or --grammar, not both");
  }
  let spec: ConstraintSpec;
  if (schemaFile !== undefined) {
    const text = await Deno.readTextFile(schemaFile);
    let schema: unknown;
    try {
      schema = JSON.parse(text);
    } catch (e) {
      throw new UsageError(`--json-schema ${schemaFile}: not JSON: ${(e as Error).message}`);
    }
    spec = { kind: "json_schema", schema };
  } else if (grammarFile !== undefined) {
    spec = { kind: "gbnf", grammar: await Deno.readTextFile(grammarFile) };
  } else return undefined;
  try {
    compileGrammar(specToGbnf(spec));
  } catch (e) {
    if (e instanceof SchemaError || e instanceof GrammarError) {
      throw new UsageError(
        `${schemaFile !== undefined ? "--json-schema" : "--grammar"} ${
          schemaFile ?? grammarFile
        }: ${e.message}`,
      );
    }
    throw e;
  }
  return spec;
}
