/**
 * The JSON Schema compiler behind {@link jsonSchemaToGbnf}: one GBNF rule per schema, visited
 * keyword by keyword, with `$ref`s named before they are visited so that recursion resolves.
 * Internal to grammar/.
 *
 * @module
 */

import { cls, jsonChars, lit, PLAIN } from "./_gbnf_text.ts";
import { intRange, numberRange } from "./_number_range.ts";
import { PatternError, patternToGbnf } from "./_regex.ts";
import {
  ANNOTATIONS,
  ANY_JSON_DEPTH,
  DATE,
  escPointer,
  intersectPlain,
  KNOWN,
  MAX_COUNT,
  MAX_LIST,
  MAX_NAME,
  MAX_RULES,
  MAX_SCHEMA_DEPTH,
  type Obj,
  PRIMITIVES,
  TIME,
  TYPES,
} from "./_schema_tables.ts";
import { SchemaError } from "./grammar_error.ts";
import { GrammarMatcher } from "./grammar_matcher.ts";

export class Compiler {
  readonly root: unknown;
  readonly rules = new Map<string, string>();
  readonly #refs = new Map<string, string>();
  #n = 0;

  constructor(root: unknown) {
    this.root = root;
  }

  #name(hint: string): string {
    if (this.rules.size >= MAX_RULES) {
      throw new SchemaError("more than 2000 rules from", "schema", "");
    }
    return `${hint.replace(/[^a-zA-Z0-9-]/g, "-").slice(0, 40)}-${this.#n++}`;
  }

  define(hint: string, body: string): string {
    const name = this.#name(hint);
    this.rules.set(name, body);
    return name;
  }

  prim(name: string): string {
    if (!this.rules.has(name)) {
      this.rules.set(name, PRIMITIVES[name]);
      if (name === "string") this.prim("char");
    }
    return name;
  }

  /** Any JSON value, nested at most `depth` more levels. */
  any(depth: number): string {
    const name = `any-${depth}`;
    if (this.rules.has(name)) return name;
    this.rules.set(name, "");
    const alts = ["string", "number", "boolean", "null"].map((p) => this.prim(p));
    if (depth > 0) {
      const v = this.any(depth - 1);
      const ws = this.prim("ws");
      const kv = `string ${ws} ":" ${ws} ${v}`;
      alts.push(`"{" ${ws} (${kv} ${ws} ("," ${ws} ${kv} ${ws})*)? "}"`);
      alts.push(`"[" ${ws} (${v} ${ws} ("," ${ws} ${v} ${ws})*)? "]"`);
    }
    this.rules.set(name, alts.join(" | "));
    return name;
  }

  /** Rule name for the schema at `path`. */
  visit(schema: unknown, path: string, depth: number): string {
    if (depth > MAX_SCHEMA_DEPTH) {
      throw new SchemaError(`schemas nested deeper than ${MAX_SCHEMA_DEPTH} at`, "schema", path);
    }
    if (schema === true) return this.any(ANY_JSON_DEPTH);
    if (schema === false) throw new SchemaError("a schema that matches nothing:", "false", path);
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
      throw new SchemaError("a schema must be an object or a boolean:", "schema", path);
    }
    const s = schema as Obj;
    for (const k of Object.keys(s)) {
      if (!KNOWN.has(k) && !ANNOTATIONS.has(k)) {
        throw new SchemaError("unsupported keyword", k, path);
      }
    }
    if (s.$ref !== undefined) {
      for (const k of Object.keys(s)) {
        if (k !== "$ref" && k !== "$defs" && k !== "definitions" && !ANNOTATIONS.has(k)) {
          throw new SchemaError("unsupported keyword beside $ref:", k, path);
        }
      }
      return this.ref(s.$ref, path, depth);
    }
    if ("const" in s || s.enum !== undefined) {
      const key = "const" in s ? "const" : "enum";
      let values: unknown[];
      if (key === "const") values = [s.const];
      else {
        if (!Array.isArray(s.enum) || s.enum.length === 0 || s.enum.length > MAX_LIST) {
          throw new SchemaError("needs a non-empty array of at most 1000 values:", "enum", path);
        }
        values = s.enum;
      }
      const texts = values.map((v, i) =>
        this.literal(v, key, key === "enum" ? `${path}/enum/${i}` : path)
      );
      const kept = this.#satisfying(s, texts, path, depth);
      if (kept.length === 0) {
        throw new SchemaError("no value satisfies the other keywords beside", key, path);
      }
      return this.define(key, kept.map((t) => lit(t)).join(" | "));
    }
    for (const key of ["anyOf", "oneOf"]) {
      const list = s[key];
      if (list === undefined) continue;
      if (!Array.isArray(list) || list.length === 0 || list.length > MAX_LIST) {
        throw new SchemaError("needs a non-empty array of schemas:", key, path);
      }
      for (const k of Object.keys(s)) {
        if (k !== key && k !== "$defs" && k !== "definitions" && !ANNOTATIONS.has(k)) {
          throw new SchemaError(`unsupported keyword beside ${key}:`, k, path);
        }
      }
      const names = list.map((b, i) => this.visit(b, `${path}/${key}/${i}`, depth + 1));
      return this.define(key, names.join(" | "));
    }
    let types: string[];
    if (s.type === undefined) {
      if (
        s.properties !== undefined || s.additionalProperties !== undefined ||
        s.required !== undefined
      ) {
        types = ["object"];
      } else if (s.items !== undefined || s.minItems !== undefined || s.maxItems !== undefined) {
        types = ["array"];
      } else if (
        s.minLength !== undefined || s.maxLength !== undefined || s.pattern !== undefined ||
        s.format !== undefined
      ) types = ["string"];
      else if (
        s.minimum !== undefined || s.maximum !== undefined || s.exclusiveMinimum !== undefined ||
        s.exclusiveMaximum !== undefined
      ) types = ["number"];
      else return this.any(ANY_JSON_DEPTH);
    } else if (typeof s.type === "string") types = [s.type];
    else if (Array.isArray(s.type) && s.type.length > 0) types = s.type as string[];
    else throw new SchemaError("must be a type name or a non-empty array of them:", "type", path);
    for (const t of types) {
      if (typeof t !== "string" || !TYPES.includes(t)) {
        throw new SchemaError(`unknown type ${JSON.stringify(t)} in`, "type", path);
      }
    }
    // "integer" is part of "number": listing both is "number".
    const uniq = [...new Set(types)].filter((t) => !(t === "integer" && types.includes("number")));
    const alts = uniq.map((t) => this.typed(t, s, path, depth));
    return alts.length === 1 ? alts[0] : this.define("type", alts.join(" | "));
  }

  typed(t: string, s: Obj, path: string, depth: number): string {
    switch (t) {
      case "string":
        return this.string(s, path);
      case "number":
      case "integer":
        return this.number(t, s, path);
      case "boolean":
      case "null":
        return this.prim(t);
      case "object":
        return this.object(s, path, depth);
      default:
        return this.array(s, path, depth);
    }
  }

  count(s: Obj, key: string, path: string): number | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > MAX_COUNT) {
      throw new SchemaError(`must be an integer in [0, ${MAX_COUNT}]:`, key, path);
    }
    return v;
  }

  string(s: Obj, path: string): string {
    const min = this.count(s, "minLength", path) ?? 0;
    const max = this.count(s, "maxLength", path);
    if (max !== undefined && max < min) {
      throw new SchemaError("is below minLength:", "maxLength", path);
    }
    if (s.format !== undefined) {
      for (const k of ["pattern", "minLength", "maxLength"]) {
        if (s[k] !== undefined) throw new SchemaError("unsupported together with format:", k, path);
      }
      return this.define("format", `"\\"" ${this.format(s.format, path)} "\\""`);
    }
    if (s.pattern !== undefined) {
      if (typeof s.pattern !== "string") {
        throw new SchemaError("must be a string:", "pattern", path);
      }
      for (const k of ["minLength", "maxLength"]) {
        if (s[k] !== undefined) {
          throw new SchemaError("unsupported together with pattern:", k, path);
        }
      }
      let body: string;
      try {
        body = patternToGbnf(s.pattern);
      } catch (e) {
        if (e instanceof PatternError) {
          throw new SchemaError(`${e.message} in`, "pattern", path);
        }
        throw e;
      }
      return this.define("pattern", `"\\"" ${body} "\\""`);
    }
    if (min === 0 && max === undefined) return this.prim("string");
    this.prim("char");
    return this.define("string", `"\\"" char{${min},${max ?? ""}} "\\""`);
  }

  format(f: unknown, path: string): string {
    const d2 = "[0-9]{2}";
    switch (f) {
      case "date": {
        this.rules.set("date", DATE);
        return "date";
      }
      case "time":
        this.rules.set("time", TIME);
        return "time";
      case "date-time":
        this.rules.set("date", DATE);
        this.rules.set("time", TIME);
        return '(date "T" time)';
      case "uuid":
        return `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`;
      default:
        void d2;
        throw new SchemaError(`unsupported format ${JSON.stringify(f)}:`, "format", path);
    }
  }

  number(t: string, s: Obj, path: string): string {
    const bound = (k: string) => {
      const v = s[k];
      if (v === undefined) return undefined;
      if (typeof v !== "number" || !Number.isFinite(v)) {
        throw new SchemaError("must be a finite number:", k, path);
      }
      return v;
    };
    const mn = bound("minimum"), mx = bound("maximum");
    const emn = bound("exclusiveMinimum"), emx = bound("exclusiveMaximum");
    if (mn === undefined && mx === undefined && emn === undefined && emx === undefined) {
      return this.prim(t);
    }
    // The tighter of the inclusive and exclusive bound on each side.
    const low = emn !== undefined && (mn === undefined || emn >= mn)
      ? { value: emn, excl: true }
      : mn !== undefined
      ? { value: mn, excl: false }
      : null;
    const high = emx !== undefined && (mx === undefined || emx <= mx)
      ? { value: emx, excl: true }
      : mx !== undefined
      ? { value: mx, excl: false }
      : null;
    const key = low !== null
      ? (emn === low.value && low.excl ? "exclusiveMinimum" : "minimum")
      : "maximum";
    let g: string | null;
    try {
      if (t === "integer") {
        const lo = low === null
          ? null
          : low.excl
          ? Math.floor(low.value) + 1
          : Math.ceil(low.value);
        const hi = high === null
          ? null
          : high.excl
          ? Math.ceil(high.value) - 1
          : Math.floor(high.value);
        const big = (x: number | null, sign: number) =>
          x === null || Math.abs(x) >= 1e16 && Math.sign(x) === sign ? null : BigInt(x);
        if ((lo !== null && lo >= 1e16) || (hi !== null && hi <= -1e16)) {
          throw new RangeError("a bound beyond 16 digits");
        }
        g = intRange(big(lo, -1), big(hi, 1));
      } else g = numberRange(low, high);
    } catch (e) {
      if (e instanceof RangeError) throw new SchemaError(`${e.message}:`, key, path);
      throw e;
    }
    if (g === null) throw new SchemaError("bounds that no value satisfies:", key, path);
    return this.define(t, g);
  }

  object(s: Obj, path: string, depth: number): string {
    const props = s.properties ?? {};
    if (typeof props !== "object" || props === null || Array.isArray(props)) {
      throw new SchemaError("must be an object:", "properties", path);
    }
    const names = Object.keys(props);
    if (names.length > MAX_LIST) {
      throw new SchemaError("more than 1000 entries in", "properties", path);
    }
    for (const n of names) {
      if (n.length > MAX_NAME) {
        throw new SchemaError(`a name longer than ${MAX_NAME} characters in`, "properties", path);
      }
    }
    const required = s.required ?? [];
    if (!Array.isArray(required) || required.some((r) => typeof r !== "string")) {
      throw new SchemaError("must be an array of strings:", "required", path);
    }
    for (const r of required) {
      if (!names.includes(r)) {
        throw new SchemaError(
          `names ${JSON.stringify(r)}, which is not in properties:`,
          "required",
          path,
        );
      }
    }
    const ws = this.prim("ws");
    const ap = s.additionalProperties;
    let extra: string | null = null;
    if (ap === true || (ap === undefined && s.properties === undefined)) {
      extra = this.any(ANY_JSON_DEPTH);
    } else if (ap !== undefined && ap !== false) {
      extra = this.visit(ap, `${path}/additionalProperties`, depth + 1);
    }
    const kvs = names.map((n) => {
      const v = this.visit((props as Obj)[n], `${path}/properties/${escPointer(n)}`, depth + 1);
      return `${lit(JSON.stringify(n))} ${ws} ":" ${ws} ${v} ${ws}`;
    });
    let tailA = '""', tailB = '""';
    if (extra !== null) {
      const key = this.notStrings(names);
      const kv = this.define("kv", `${key} ${ws} ":" ${ws} ${extra} ${ws}`);
      tailA = `("," ${ws} ${kv})*`;
      tailB = `(${kv} ("," ${ws} ${kv})*)?`;
    }
    // A[i]: properties i.. after one was written; B[i]: none written yet.
    let a = this.define("obj-a", tailA), b = this.define("obj-b", tailB);
    for (let i = names.length - 1; i >= 0; i--) {
      const req = required.includes(names[i]);
      const na = this.define("obj-a", `"," ${ws} ${kvs[i]} ${a}${req ? "" : ` | ${a}`}`);
      const nb = this.define("obj-b", `${kvs[i]} ${a}${req ? "" : ` | ${b}`}`);
      a = na;
      b = nb;
    }
    return this.define("object", `"{" ${ws} ${b} "}"`);
  }

  /** A JSON string (plain characters only) that is none of `words`. */
  notStrings(words: string[]): string {
    type Node = Map<number, Node> & { end?: boolean };
    const root: Node = new Map();
    for (const w of words) {
      let n = root;
      for (const ch of w) {
        const cp = ch.codePointAt(0)!;
        let c = n.get(cp);
        if (c === undefined) n.set(cp, c = new Map());
        n = c;
      }
      n.end = true;
    }
    const plain = cls(PLAIN);
    const gen = (n: Node): string => {
      const alts: string[] = [];
      if (!n.end) alts.push('"\\""');
      const kids = [...n.keys()].sort((x, y) => x - y);
      const others: number[] = [];
      let next = 0;
      for (const k of kids) {
        if (k > next) others.push(next, k - 1);
        next = k + 1;
      }
      others.push(next, 0x10ffff);
      const other = jsonChars(intersectPlain(others));
      if (other !== null) alts.push(`${other} ${plain}* "\\""`);
      for (const k of kids) {
        const g = jsonChars([k, k]);
        if (g !== null && intersectPlain([k, k]).length > 0) alts.push(`${g} ${gen(n.get(k)!)}`);
      }
      return "(" + alts.join(" | ") + ")";
    };
    return this.define("key", `"\\"" ${gen(root)}`);
  }

  array(s: Obj, path: string, depth: number): string {
    const min = this.count(s, "minItems", path) ?? 0;
    const max = this.count(s, "maxItems", path);
    if (max !== undefined && max < min) {
      throw new SchemaError("is below minItems:", "maxItems", path);
    }
    const item = s.items === undefined
      ? this.any(ANY_JSON_DEPTH)
      : this.visit(s.items, `${path}/items`, depth + 1);
    const ws = this.prim("ws");
    const more = `("," ${ws} ${item} ${ws})`;
    let body: string;
    if (max === 0) body = '""';
    else {
      const first = `${item} ${ws} ${more}{${Math.max(min - 1, 0)},${
        max === undefined ? "" : max - 1
      }}`;
      body = min === 0 ? `(${first})?` : first;
    }
    return this.define("array", `"[" ${ws} ${body} "]"`);
  }

  /**
   * The value texts that also satisfy the schema's other keywords (`type`, bounds, ...): each
   * is checked against the grammar of the schema without `enum`/`const`.
   */
  #satisfying(s: Obj, texts: string[], path: string, depth: number): string[] {
    const rest: Obj = {};
    for (const [k, v] of Object.entries(s)) {
      if (
        k !== "enum" && k !== "const" && !ANNOTATIONS.has(k) && k !== "$defs" && k !== "definitions"
      ) {
        rest[k] = v;
      }
    }
    if (Object.keys(rest).length === 0) return texts;
    const sub = new Compiler(this.root);
    const root = sub.visit(rest, path, depth);
    let text = `root ::= ${root}\n`;
    for (const [name, body] of sub.rules) text += `${name} ::= ${body}\n`;
    const m0 = GrammarMatcher.fromGbnf(text);
    const enc = new TextEncoder();
    return texts.filter((t) => {
      const m = m0.clone();
      return m.advance(enc.encode(t)) && m.isAccepting();
    });
  }

  /** The canonical JSON text of a value. */
  literal(v: unknown, key: string, path: string): string {
    let text: string | undefined;
    try {
      text = JSON.stringify(v);
    } catch {
      text = undefined;
    }
    if (text === undefined || text.length > 65536) {
      throw new SchemaError("holds a value that is not JSON:", key, path);
    }
    return text;
  }

  ref(ref: unknown, path: string, depth: number): string {
    if (typeof ref !== "string") throw new SchemaError("must be a string:", "$ref", path);
    const known = this.#refs.get(ref);
    if (known !== undefined) return known;
    let target: unknown;
    if (ref === "#") target = this.root;
    else {
      const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
      if (m === null) {
        throw new SchemaError(
          `${JSON.stringify(ref)}: only #, #/$defs/NAME and #/definitions/NAME are supported:`,
          "$ref",
          path,
        );
      }
      const defs = (this.root as Obj)?.[m[1]];
      const name = m[2].replace(/~1/g, "/").replace(/~0/g, "~");
      if (typeof defs !== "object" || defs === null || !Object.hasOwn(defs, name)) {
        throw new SchemaError(`${JSON.stringify(ref)} does not resolve:`, "$ref", path);
      }
      target = (defs as Obj)[name];
    }
    // Name the rule first so that recursive references find it.
    const rule = this.#name("ref");
    this.#refs.set(ref, rule);
    this.rules.set(rule, "");
    const body = this.visit(target, ref.slice(1), depth + 1);
    this.rules.set(rule, body);
    return rule;
  }
}
