/**
 * The typed errors of the grammar module: a bad GBNF grammar ({@link GrammarError}, with its
 * line and column) and a JSON Schema that cannot be compiled ({@link SchemaError}, with the
 * keyword and its JSON-pointer path).
 *
 * @module
 */

/**
 * A GBNF grammar that cannot be parsed or run: a syntax error, an undefined rule, no `root`,
 * left recursion, or a bound exceeded. `line` and `column` are 1-based; 0 where the error has
 * no single place (e.g. a missing `root`).
 *
 * @example
 * ```ts
 * import { GrammarError } from "./grammar_error.ts";
 *
 * const e = new GrammarError("undefined rule 'value'", 3, 9);
 * console.log(e.message); // "grammar: line 3, column 9: undefined rule 'value'"
 * ```
 */
export class GrammarError extends Error {
  /** 1-based line of the error (0: none). */
  readonly line: number;
  /** 1-based column of the error (0: none). */
  readonly column: number;
  /** The message without the position prefix. */
  readonly reason: string;

  /**
   * An error at a place in the grammar text.
   *
   * @param reason What is wrong.
   * @param line 1-based line (0: none).
   * @param column 1-based column (0: none).
   *
   * @example
   * ```ts
   * import { GrammarError } from "./grammar_error.ts";
   * console.log(new GrammarError("no root rule", 0, 0).message); // "grammar: no root rule"
   * ```
   */
  constructor(reason: string, line: number, column: number) {
    super(line > 0 ? `grammar: line ${line}, column ${column}: ${reason}` : `grammar: ${reason}`);
    this.name = "GrammarError";
    this.reason = reason;
    this.line = line;
    this.column = column;
  }
}

/**
 * A JSON Schema the compiler refuses: an unsupported keyword, a keyword with a bad value, a
 * `$ref` that does not resolve, or a bound exceeded. `keyword` names it and `path` is the
 * JSON pointer of the schema object holding it (e.g. `/properties/age`).
 *
 * @example
 * ```ts
 * import { SchemaError } from "./grammar_error.ts";
 *
 * const e = new SchemaError("unsupported keyword", "patternProperties", "/properties/a");
 * console.log(e.message);
 * // "json_schema: unsupported keyword 'patternProperties' at /properties/a"
 * ```
 */
export class SchemaError extends Error {
  /** The keyword at fault. */
  readonly keyword: string;
  /** JSON pointer of the schema object holding the keyword ("" for the root). */
  readonly path: string;

  /**
   * An error about one keyword of the schema.
   *
   * @param reason What is wrong.
   * @param keyword The keyword at fault.
   * @param path JSON pointer of the schema object holding it.
   *
   * @example
   * ```ts
   * import { SchemaError } from "./grammar_error.ts";
   * console.log(new SchemaError("bad value", "minimum", "").path); // ""
   * ```
   */
  constructor(reason: string, keyword: string, path: string) {
    super(`json_schema: ${reason} '${keyword}' at ${path === "" ? "/" : path}`);
    this.name = "SchemaError";
    this.keyword = keyword;
    this.path = path;
  }
}
