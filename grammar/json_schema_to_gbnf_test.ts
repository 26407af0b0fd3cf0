/**
 * JSON Schema to GBNF: every supported keyword, checked against ajv (a validator nobody here
 * wrote): what the grammar accepts validates, and the valid examples are accepted; refusals
 * name the keyword and its JSON pointer; property tests for exact number and integer bounds,
 * formats and patterns.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { Ajv } from "ajv";
import addFormatsImport from "ajv-formats";
import {
  GrammarError,
  GrammarMatcher,
  jsonObjectGbnf,
  jsonSchemaToGbnf,
  SchemaError,
} from "./mod.ts";

// deno-lint-ignore no-explicit-any
const addFormats = addFormatsImport as unknown as (ajv: any) => void;
const ajv = new Ajv({ strict: false });
addFormats(ajv);
const enc = new TextEncoder();

function matcherOf(schema: unknown): GrammarMatcher {
  return GrammarMatcher.fromGbnf(jsonSchemaToGbnf(schema));
}

function accepts(m0: GrammarMatcher, text: string): boolean {
  const m = m0.clone();
  return m.advance(enc.encode(text)) && m.isAccepting();
}

/** `yes` texts are accepted and valid; `no` texts are refused (valid or not). */
function check(schema: Record<string, unknown>, yes: string[], no: string[]): void {
  const m = matcherOf(schema);
  const validate = ajv.compile(schema);
  for (const t of yes) {
    assert.ok(validate(JSON.parse(t)), `ajv: ${t} should be valid under ${JSON.stringify(schema)}`);
    assert.ok(accepts(m, t), `${JSON.stringify(schema)} should accept ${t}`);
  }
  for (const t of no) assert.ok(!accepts(m, t), `${JSON.stringify(schema)} should refuse ${t}`);
}

Deno.test("json schema: primitive types and type arrays", () => {
  check({ type: "string" }, ['""', '"a b"', '"\\u00e9\\n\\"\\\\"', '"中文"'], [
    '"a',
    "1",
    '"\\uD800"',
  ]);
  check({ type: "number" }, ["0", "-1.5", "2e10", "3.25E-2"], ["01", "1.", ".5", "+1", '"1"']);
  check({ type: "integer" }, ["0", "-12", "99"], ["1.5", "-0.0", "1e2"]);
  check({ type: "boolean" }, ["true", "false"], ["1", "null"]);
  check({ type: "null" }, ["null"], ["false"]);
  check({ type: ["string", "null"] }, ['"x"', "null"], ["1"]);
  check({ type: ["integer", "number"] }, ["1", "1.5"], ["true"]);
  check({}, ['{"a": [1, {"b": null}]}', "3", '"s"'], ["{"]);
});

Deno.test("json schema: objects (properties, required, additionalProperties), nesting, order", () => {
  const props = { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } };
  check({ type: "object", properties: props, required: ["b"] }, [
    '{"b": "x"}',
    '{"a": 1, "b": "x"}',
    '{"a": 1, "b": "x", "c": true}',
    '{ "b" : "x" ,\n  "c": false }',
  ], ["{}", '{"a": 1}', '{"b": "x", "a": 1}', '{"b": "x", "d": 1}', '{"b": "x",}']);
  // Absent additionalProperties with properties: none written (still valid under the schema).
  check({ type: "object", properties: props, additionalProperties: false }, ["{}", '{"c": true}'], [
    '{"z": 1}',
  ]);
  check({ type: "object", properties: { a: { type: "integer" } }, additionalProperties: true }, [
    '{"a": 1, "z": [1, 2]}',
    '{"zz": {"q": null}}',
  ], ['{"a": "no"}', '{"z": 1, "a": 1}']);
  check(
    {
      type: "object",
      properties: { id: { type: "integer" } },
      additionalProperties: { type: "string" },
    },
    ['{"id": 1, "x": "s", "y": "t"}', '{"k": "v"}'],
    ['{"x": 1}', '{"id": "s"}', '{"i": 2, "id": 1}'],
  );
  check({ type: "object" }, ['{"any": {"thing": [true]}}', "{}"], ["[]"]);
  check(
    {
      type: "object",
      properties: {
        user: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
      },
      required: ["user"],
    },
    ['{"user": {"n": 3}}'],
    ['{"user": {}}'],
  );
  // Whitespace is bounded: at most a line break and 20 spaces or tabs between tokens.
  const m = matcherOf({ type: "object" });
  assert.ok(accepts(m, "{\n" + " ".repeat(20) + "}"));
  assert.ok(!accepts(m, "{\n" + " ".repeat(21) + "}"));
  assert.ok(!accepts(m, "{  }"));
});

Deno.test("json schema: json_object accepts any object, nesting bounded", () => {
  const m = GrammarMatcher.fromGbnf(jsonObjectGbnf());
  assert.ok(accepts(m, '{"a": {"b": [1, 2.5, "x", null, true]}}'));
  assert.ok(!accepts(m, "[1]") && !accepts(m, '"s"'));
  assert.ok(!accepts(m, '{"a": ' + "[".repeat(20) + "]".repeat(20) + "}"));
});

Deno.test("json schema: enum, const, arrays with items/minItems/maxItems", () => {
  check({ enum: ["red", 7, null, { a: [1] }] }, ['"red"', "7", "null", '{"a":[1]}'], [
    '"blue"',
    "8",
  ]);
  check({ const: "fixed" }, ['"fixed"'], ['"other"']);
  // Values that break the schema's other keywords are left out.
  check({ type: "string", maxLength: 2, enum: ["a", 1, "abc", null] }, ['"a"'], [
    "1",
    '"abc"',
    "null",
  ]);
  check(
    { type: ["integer", "null"], minimum: 0, enum: [-1, 0, 5, null, "x"] },
    ["0", "5", "null"],
    [
      "-1",
      '"x"',
    ],
  );
  check({ type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 }, [
    "[1]",
    "[1, 2, 3]",
  ], ["[]", "[1, 2, 3, 4]", '["a"]']);
  check({ type: "array", maxItems: 0 }, ["[]"], ["[1]"]);
  check({ type: "array" }, ['[1, "a", [null]]', "[]"], ["[1,]"]);
});

Deno.test("json schema: anyOf, oneOf, $ref to $defs/definitions/#, recursion", () => {
  check({ anyOf: [{ type: "integer" }, { type: "string", maxLength: 2 }] }, ["1", '"ab"'], [
    '"abc"',
    "true",
  ]);
  check({ oneOf: [{ type: "boolean" }, { type: "null" }] }, ["true", "null"], ["1"]);
  const tree = {
    $defs: {
      node: {
        type: "object",
        properties: {
          v: { type: "integer" },
          kids: { type: "array", items: { $ref: "#/$defs/node" } },
        },
        required: ["v"],
      },
    },
    $ref: "#/$defs/node",
  };
  check(tree, ['{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]}'], ['{"kids": []}']);
  const list = {
    type: "object",
    properties: { v: { type: "integer" }, next: { anyOf: [{ type: "null" }, { $ref: "#" }] } },
    required: ["v", "next"],
  };
  check(list, ['{"v": 1, "next": {"v": 2, "next": null}}'], ['{"v": 1, "next": 2}']);
  check(
    {
      definitions: { s: { type: "string", maxLength: 1 } },
      type: "array",
      items: { $ref: "#/definitions/s" },
    },
    ['["a", "b"]'],
    ['["ab"]'],
  );
});

Deno.test("json schema: string minLength/maxLength (characters, escapes count as one)", () => {
  check(
    { type: "string", minLength: 2, maxLength: 3 },
    ['"ab"', '"abc"', '"\\n\\u00e9"', '"中文"'],
    [
      '"a"',
      '"abcd"',
    ],
  );
});

Deno.test("json schema: formats date, time, date-time, uuid agree with ajv-formats", () => {
  check({ type: "string", format: "date" }, ['"2024-02-29"', '"2023-12-31"', '"2000-02-29"'], [
    '"2023-02-29"',
    '"1900-02-29"',
    '"2023-04-31"',
    '"2023-13-01"',
  ]);
  check({ type: "string", format: "time" }, ['"23:59:59Z"', '"00:00:00.123+05:30"'], [
    '"24:00:00Z"',
    '"12:00:00"',
  ]);
  check({ type: "string", format: "date-time" }, ['"2024-01-02T03:04:05Z"'], [
    '"2024-01-02 03:04:05Z"',
  ]);
  check({ type: "string", format: "uuid" }, ['"123e4567-e89b-12d3-a456-426614174000"'], [
    '"123e4567e89b12d3a456426614174000"',
  ]);
  // Every date the grammar accepts is a real one, and the other way around.
  const m = matcherOf({ type: "string", format: "date" });
  const validate = ajv.compile({ type: "string", format: "date" });
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      (y, mo, d) => {
        const s = `${String(y).padStart(4, "0")}-${String(mo).padStart(2, "0")}-${
          String(d).padStart(2, "0")
        }`;
        return accepts(m, JSON.stringify(s)) === validate(s);
      },
    ),
    { seed: 7, numRuns: 3000 },
  );
});

Deno.test("json schema: pattern subset agrees with RegExp (u flag), escapes in JSON strings", () => {
  const patterns = [
    "^[A-Z]{2}-\\d{3}$",
    "^(ab|c)+x?$",
    "^a.b$",
    "c[^a]d",
    "^\\w+@\\w+\\.com$",
    '^"\\\\?$',
  ];
  for (const p of patterns) {
    const m = matcherOf({ type: "string", pattern: p });
    const re = new RegExp(p, "u");
    fc.assert(
      fc.property(fc.stringMatching(/^[abcdxAZ0-9@.\-"\\ ]{0,9}$/), (s) => {
        const got = accepts(m, JSON.stringify(s));
        // Accepted means valid; valid JSON.stringify'd forms are accepted.
        return got === re.test(s);
      }),
      { seed: 11, numRuns: 500 },
    );
  }
  check({ type: "string", pattern: "^[A-Z]{2}-\\d{3}$" }, ['"AB-123"'], ['"AB-12"', '"ab-123"']);
});

Deno.test("property: integer bounds are exact (minimum/maximum/exclusive)", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: -5000, max: 5000 }),
      fc.integer({ min: -5000, max: 5000 }),
      fc.boolean(),
      fc.boolean(),
      (a, b, ea, eb) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        const schema = {
          type: "integer",
          [ea ? "exclusiveMinimum" : "minimum"]: lo,
          [eb ? "exclusiveMaximum" : "maximum"]: hi,
        };
        let m: GrammarMatcher;
        try {
          m = matcherOf(schema);
        } catch (e) {
          // Only an empty range is refused.
          return e instanceof SchemaError && (ea || eb) && hi - lo <= 1;
        }
        const validate = ajv.compile(schema);
        for (let k = 0; k < 12; k++) {
          const x = lo - 3 + Math.floor(((hi - lo + 6) * k) / 11);
          for (const v of [x, lo, hi, lo + 1, hi - 1]) {
            if (accepts(m, String(v)) !== validate(v)) return false;
          }
        }
        return true;
      },
    ),
    { seed: 3, numRuns: 300 },
  );
  check({ type: "integer", minimum: 10 }, ["10", "99999"], ["9", "-10"]);
  check({ type: "integer", maximum: -10 }, ["-10", "-9999"], ["-9", "0"]);
});

Deno.test("property: number bounds are exact, fractions included", () => {
  const bound = fc.oneof(
    fc.integer({ min: -300, max: 300 }).map((n) => n / 4),
    fc.integer({ min: -3000, max: 3000 }).map((n) => n / 100),
    fc.constantFrom(0, 1, -1, 0.5, 10),
  );
  fc.assert(
    fc.property(bound, bound, fc.boolean(), fc.boolean(), (a, b, ea, eb) => {
      const [lo, hi] = a <= b ? [a, b] : [b, a];
      const schema = {
        type: "number",
        [ea ? "exclusiveMinimum" : "minimum"]: lo,
        [eb ? "exclusiveMaximum" : "maximum"]: hi,
      };
      let m: GrammarMatcher;
      try {
        m = matcherOf(schema);
      } catch (e) {
        return e instanceof SchemaError && lo === hi && (ea || eb);
      }
      const validate = ajv.compile(schema);
      const probes = [lo, hi, lo - 0.01, hi + 0.01, (lo + hi) / 2, lo + 0.001, hi - 0.001, 0];
      for (const v of probes) {
        for (const text of [String(v), v.toFixed(3), v.toFixed(1)]) {
          // (Outputs have at most 16 fraction digits.)
          if (!/^-?(0|[1-9][0-9]*)(\.[0-9]{1,16})?$/.test(text)) continue;
          const value = Number(text);
          const got = accepts(m, text);
          // "-0.0" is refused even where 0 is valid (negative zeros are never written).
          if (Object.is(value, -0) ? got && !validate(value) : got !== validate(value)) {
            return false;
          }
        }
      }
      return true;
    }),
    { seed: 5, numRuns: 400 },
  );
});

/** An array schema nested `n` deep. */
function nest(n: number): unknown {
  let s: unknown = { type: "integer" };
  for (let i = 0; i < n; i++) s = { type: "array", items: s };
  return s;
}

Deno.test("json schema: refusals name the keyword and its JSON pointer", () => {
  const cases: [unknown, string, string][] = [
    [{ type: "object", patternProperties: {} }, "patternProperties", ""],
    [
      { properties: { a: { type: "string", contentEncoding: "base64" } } },
      "contentEncoding",
      "/properties/a",
    ],
    [{ type: "array", items: { uniqueItems: true } }, "uniqueItems", "/items"],
    [{ allOf: [] }, "allOf", ""],
    [{ not: {} }, "not", ""],
    [{ type: "number", multipleOf: 2 }, "multipleOf", ""],
    [{ type: "object", minProperties: 1 }, "minProperties", ""],
    [{ type: "string", format: "email" }, "format", ""],
    [{ type: "string", pattern: "(?=a)" }, "pattern", ""],
    [{ type: "string", pattern: "(a)\\1" }, "pattern", ""],
    [{ type: "string", pattern: "\\bword" }, "pattern", ""],
    [{ $ref: "https://example.com/s" }, "$ref", ""],
    [{ $ref: "#/$defs/missing" }, "$ref", ""],
    [{ type: "strange" }, "type", ""],
    [{ type: "integer", minimum: 5, maximum: 4 }, "minimum", ""],
    [{ type: "integer", const: "x" }, "const", ""],
    [{ type: "string", enum: [1, 2] }, "enum", ""],
    [{ type: "string", maxLength: 100000 }, "maxLength", ""],
    [{ anyOf: [{ type: "string" }], type: "string" }, "type", ""],
    [{ properties: { "a/b": { if: {} } } }, "if", "/properties/a~1b"],
    [{ properties: { ["k".repeat(2000)]: {} } }, "properties", ""],
    [{ enum: Array.from({ length: 1001 }, (_, i) => i) }, "enum", ""],
    [nest(80), "schema", "/items".repeat(65)],
  ];
  for (const [schema, keyword, path] of cases) {
    assert.throws(() => jsonSchemaToGbnf(schema), (e: unknown) => {
      assert.ok(e instanceof SchemaError, `${JSON.stringify(schema)}: ${e}`);
      assert.equal(e.keyword, keyword, `${JSON.stringify(schema)}: ${e.message}`);
      assert.equal(e.path, path);
      assert.ok(e.message.includes(`'${keyword}'`));
      return true;
    });
  }
  // Annotations are ignored.
  const annotated = {
    title: "t",
    description: "d",
    $schema: "x",
    $id: "y",
    default: 1,
    examples: [1],
    $comment: "c",
    type: "integer",
  };
  assert.ok(accepts(matcherOf(annotated), "1"));
});

Deno.test("property: any JSON value as a schema is a grammar or a SchemaError, never a crash", () => {
  const keyword = fc.constantFrom(
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "anyOf",
    "minimum",
    "maxLength",
    "pattern",
    "format",
    "$ref",
    "$defs",
    "additionalProperties",
    "minItems",
    "exclusiveMaximum",
  );
  const schema = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: "small" },
      fc.jsonValue({ maxDepth: 2 }),
      fc.dictionary(keyword, fc.oneof(tie("node"), fc.jsonValue({ maxDepth: 1 })), { maxKeys: 4 }),
    ),
  })).node;
  fc.assert(
    fc.property(schema, (s) => {
      try {
        const g = jsonSchemaToGbnf(s);
        GrammarMatcher.fromGbnf(g); // compiles, or the refusal below
        return true;
      } catch (e) {
        return e instanceof SchemaError || e instanceof GrammarError;
      }
    }),
    { seed: 17, numRuns: 2000 },
  );
});
