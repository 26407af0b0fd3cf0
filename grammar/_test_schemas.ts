/**
 * JSON Schemas for the structured-output tests and bench/grammar.ts: together they use every
 * supported keyword, and their valid outputs are short (bounded strings, arrays and numbers),
 * so that a small model finishes them within a modest token budget.
 *
 * @module
 */

const short = (extra: Record<string, unknown> = {}) => ({
  type: "string",
  maxLength: 12,
  ...extra,
});

/** The schemas, by name. */
export const SCHEMAS: { name: string; schema: Record<string, unknown> }[] = [
  {
    name: "person",
    schema: {
      type: "object",
      properties: {
        name: short({ minLength: 1 }),
        age: { type: "integer", minimum: 0, maximum: 120 },
      },
      required: ["name", "age"],
      additionalProperties: false,
    },
  },
  {
    name: "boolean",
    schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  },
  {
    name: "null",
    schema: { type: "object", properties: { n: { type: "null" } }, required: ["n"] },
  },
  {
    name: "number bounds",
    schema: {
      type: "object",
      properties: { x: { type: "number", minimum: -1.5, maximum: 2.25 } },
      required: ["x"],
    },
  },
  {
    name: "exclusive number",
    schema: {
      type: "object",
      properties: { p: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 } },
      required: ["p"],
    },
  },
  {
    name: "exclusive integer",
    schema: {
      type: "object",
      properties: { n: { type: "integer", exclusiveMinimum: -20, exclusiveMaximum: 17 } },
      required: ["n"],
    },
  },
  {
    name: "integer range",
    schema: {
      type: "object",
      properties: { year: { type: "integer", minimum: 1900, maximum: 2099 } },
      required: ["year"],
    },
  },
  {
    name: "type array",
    schema: {
      type: "object",
      properties: { v: { type: ["integer", "null"], minimum: 1, maximum: 9 } },
      required: ["v"],
    },
  },
  {
    name: "enum and const",
    schema: {
      type: "object",
      properties: {
        color: { enum: ["red", "green", "blue", 7, null] },
        kind: { const: "fruit" },
      },
      required: ["color", "kind"],
    },
  },
  {
    name: "array items",
    schema: {
      type: "object",
      properties: { tags: { type: "array", items: short(), minItems: 1, maxItems: 3 } },
      required: ["tags"],
    },
  },
  {
    name: "top-level array",
    schema: {
      type: "array",
      items: { type: "integer", minimum: 0, maximum: 99 },
      minItems: 2,
      maxItems: 4,
    },
  },
  {
    name: "nested objects",
    schema: {
      type: "object",
      properties: {
        user: {
          type: "object",
          properties: { id: { type: "integer", minimum: 1, maximum: 999 }, nick: short() },
          required: ["id"],
        },
        active: { type: "boolean" },
      },
      required: ["user", "active"],
    },
  },
  {
    name: "optional properties",
    schema: {
      type: "object",
      properties: {
        a: { type: "boolean" },
        b: { type: "integer", minimum: 0, maximum: 5 },
        c: { type: "null" },
      },
      required: ["b"],
    },
  },
  {
    name: "additionalProperties schema",
    schema: {
      type: "object",
      properties: { id: { type: "integer", minimum: 0, maximum: 9 } },
      required: ["id"],
      // Extra properties must be null: the model gets one chance to stop after each.
      additionalProperties: { type: "null" },
    },
  },
  {
    name: "anyOf",
    schema: {
      type: "object",
      properties: {
        v: { anyOf: [{ type: "integer", minimum: 0, maximum: 9 }, short({ maxLength: 5 })] },
      },
      required: ["v"],
    },
  },
  {
    name: "oneOf (disjoint)",
    schema: {
      type: "object",
      properties: { v: { oneOf: [{ type: "boolean" }, { type: "null" }, { enum: ["x", "y"] }] } },
      required: ["v"],
    },
  },
  {
    name: "$defs ref",
    schema: {
      $defs: {
        point: {
          type: "object",
          properties: {
            x: { type: "integer", minimum: -9, maximum: 9 },
            y: { type: "integer", minimum: -9, maximum: 9 },
          },
          required: ["x", "y"],
        },
      },
      type: "object",
      properties: { from: { $ref: "#/$defs/point" }, to: { $ref: "#/$defs/point" } },
      required: ["from", "to"],
    },
  },
  {
    name: "definitions ref (and # root ref in the unit tests)",
    schema: {
      definitions: {
        item: {
          type: "object",
          properties: { q: { type: "integer", minimum: 1, maximum: 3 } },
          required: ["q"],
        },
      },
      type: "array",
      items: { $ref: "#/definitions/item" },
      maxItems: 2,
    },
  },
  {
    name: "recursive $defs ref",
    schema: {
      $defs: {
        t: {
          anyOf: [{ type: "integer", minimum: 0, maximum: 9 }, {
            type: "array",
            items: { $ref: "#/$defs/t" },
            maxItems: 2,
          }],
        },
      },
      type: "object",
      properties: { tree: { $ref: "#/$defs/t" } },
      required: ["tree"],
    },
  },
  {
    name: "string lengths",
    schema: {
      type: "object",
      properties: { code: { type: "string", minLength: 3, maxLength: 5 } },
      required: ["code"],
    },
  },
  {
    name: "formats",
    schema: {
      type: "object",
      properties: {
        day: { type: "string", format: "date" },
        at: { type: "string", format: "time" },
      },
      required: ["day", "at"],
    },
  },
  {
    name: "date-time and uuid",
    schema: {
      type: "object",
      properties: {
        when: { type: "string", format: "date-time" },
        id: { type: "string", format: "uuid" },
      },
      required: ["when", "id"],
    },
  },
  {
    name: "pattern",
    schema: {
      type: "object",
      properties: {
        sku: { type: "string", pattern: "^[A-Z]{2}-\\d{3}(x|y)?$" },
        tag: { type: "string", pattern: "^#[a-z]{1,8}$" },
      },
      required: ["sku"],
    },
  },
  {
    name: "annotations",
    schema: {
      $schema: "http://json-schema.org/draft-07/schema#",
      $id: "https://example.com/t",
      title: "T",
      description: "annotated",
      $comment: "ignored",
      type: "object",
      properties: { ok: { type: "boolean", default: true, examples: [true] } },
      required: ["ok"],
    },
  },
];
