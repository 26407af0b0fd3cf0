/**
 * The tables of the JSON Schema compiler (_schema_compiler.ts): the keywords it knows and the
 * annotations it ignores, its limits, the GBNF rules of the primitive types and of the `date`
 * and `time` formats, and two helpers for object keys. Internal to grammar/.
 *
 * @module
 */

import { PLAIN } from "./_gbnf_text.ts";
import { MAX_FRACTION_DIGITS, MAX_INT_DIGITS } from "./_number_range.ts";

export const ANNOTATIONS = new Set([
  "title",
  "description",
  "$schema",
  "$id",
  "default",
  "examples",
  "$comment",
]);
export const KNOWN = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "enum",
  "const",
  "items",
  "minItems",
  "maxItems",
  "anyOf",
  "oneOf",
  "$ref",
  "$defs",
  "definitions",
  "minLength",
  "maxLength",
  "format",
  "pattern",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
]);
export const TYPES = ["string", "number", "integer", "boolean", "null", "object", "array"];

/** Deepest nesting of schemas. */
export const MAX_SCHEMA_DEPTH = 64;
/** Most rules a schema may produce. */
export const MAX_RULES = 2000;
/** Largest minLength/maxLength/minItems/maxItems. */
export const MAX_COUNT = 1000;
/** Most `enum` values, properties per object, `anyOf` branches. */
export const MAX_LIST = 1000;
/** Longest property name. */
export const MAX_NAME = 1024;
/** Depth of free-form JSON values (`json_object`, `{}`). */
export const ANY_JSON_DEPTH = 16;

export type Obj = Record<string, unknown>;

export const PRIMITIVES: Record<string, string> = {
  ws: '| " " | "\\n" [ \\t]{0,20}',
  char: '[^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | ' +
    "[dD] [0-7] [0-9a-fA-F]{2}))",
  string: '"\\"" char* "\\""',
  number: `"-"? ("0" | [1-9] [0-9]{0,${
    MAX_INT_DIGITS - 1
  }}) ("." [0-9]{1,${MAX_FRACTION_DIGITS}})? ([eE] [-+]? [0-9]{1,3})?`,
  integer: `"-"? ("0" | [1-9] [0-9]{0,${MAX_INT_DIGITS - 1}})`,
  boolean: '"true" | "false"',
  null: '"null"',
};

export function intersectPlain(r: number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.length; i += 2) {
    for (let j = 0; j < PLAIN.length; j += 2) {
      const lo = Math.max(r[i], PLAIN[j]), hi = Math.min(r[i + 1], PLAIN[j + 1]);
      if (lo <= hi) out.push(lo, hi);
    }
  }
  return out;
}

export function escPointer(s: string): string {
  return s.replace(/~/g, "~0").replace(/\//g, "~1");
}

const D31 = '("0" [1-9] | [12] [0-9] | "3" [01])';
const D30 = '("0" [1-9] | [12] [0-9] | "30")';
const D28 = '("0" [1-9] | "1" [0-9] | "2" [0-8])';
const LEAP =
  '([0-9] [0-9] ("0" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) "00")';
export const DATE =
  `[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ${D31} | ("0" [469] | "11") "-" ${D30} | ` +
  `"02-" ${D28}) | ${LEAP} "-02-29"`;
export const TIME = '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ' +
  '("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])';
